// The interfaces of strata/tokenizer.h: the defaults of ChatTemplate::RenderWithOffsets and
// ChatTemplate::RenderShared.
#include "strata/tokenizer.h"

#include <catch2/catch.hpp>
#include <memory>
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

TEST_CASE("RenderShared by default is Render's text, or its error", "[core][tokenizer]") {
  MarkerTemplate t;
  StatusOr<std::shared_ptr<const std::string>> shared = t.RenderShared(R"({"messages":[]})");
  REQUIRE(shared.ok());
  REQUIRE(*shared != nullptr);
  CHECK(**shared == R"(<{"messages":[]}>)");
  StatusOr<std::shared_ptr<const std::string>> failed = t.RenderShared("");
  REQUIRE_FALSE(failed.ok());
  CHECK(failed.status().message() == "empty request body");
}

}  // namespace
}  // namespace strata
