// The interfaces of strata/tokenizer.h: ChatTemplate::RenderWithOffsets' default.
#include "strata/tokenizer.h"

#include <catch2/catch.hpp>
#include <string>
#include <string_view>

namespace strata {
namespace {

// A template that renders the body between markers and relies on the default RenderWithOffsets.
class MarkerTemplate final : public ChatTemplate {
 public:
  std::string Name() const override { return "marker:1"; }
  StatusOr<std::string> Render(std::string_view request_json) const override {
    if (request_json.empty()) return InvalidArgumentError("empty request body");
    return "<" + std::string(request_json) + ">";
  }
  StatusOr<size_t> OverheadTokens(std::string_view) const override { return size_t{0}; }
};

TEST_CASE("RenderWithOffsets by default is Render's text without offsets", "[core][tokenizer]") {
  MarkerTemplate t;
  StatusOr<RenderedPrompt> p = t.RenderWithOffsets(R"({"messages":[]})");
  REQUIRE(p.ok());
  CHECK(p->text == R"(<{"messages":[]}>)");
  CHECK(p->message_offsets.empty());
  CHECK(p->preamble_bytes == 0);
}

TEST_CASE("RenderWithOffsets by default returns Render's error", "[core][tokenizer]") {
  MarkerTemplate t;
  StatusOr<RenderedPrompt> p = t.RenderWithOffsets("");
  REQUIRE_FALSE(p.ok());
  CHECK(p.status().code() == StatusCode::kInvalidArgument);
  CHECK(p.status().message() == "empty request body");
}

}  // namespace
}  // namespace strata
