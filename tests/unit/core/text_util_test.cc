#include "core/text_util.h"

#include <catch2/catch.hpp>

namespace strata::internal {
namespace {

TEST_CASE("UTF-8 validation accepts valid text and names the first bad byte", "[core][utf8]") {
  CHECK(ValidateUtf8("plain ascii", "x").ok());
  CHECK(ValidateUtf8("é 日本 😀 \xF4\x8F\xBF\xBF", "x").ok());
  struct Case {
    std::string text;
    size_t offset;
  };
  for (const Case& c : {Case{"ab\xC3", 2}, Case{"\xC0\xAF", 0}, Case{"ok \xED\xA0\x80", 3},
                        Case{"\xF4\x90\x80\x80", 0}, Case{"x\x80", 1}, Case{"12345678\xFF", 8}}) {
    Status s = ValidateUtf8(c.text, "user message");
    REQUIRE_FALSE(s.ok());
    CHECK(s.code() == StatusCode::kInvalidArgument);
    CHECK_THAT(s.message(), Catch::StartsWith("user message is not valid UTF-8") &&
                                Catch::Contains("at byte " + std::to_string(c.offset)));
  }
}

TEST_CASE("SHA-256 matches the standard test vector", "[core][hash]") {
  CHECK(Sha256Hex("abc") == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
}

TEST_CASE("lint finds timestamps, UUIDs and date phrases and nothing in plain text", "[core][lint]") {
  auto hits = ScanVolatileLooking(
      "Built 2026-11-29T18:30:05Z. Session 123e4567-e89b-12d3-a456-426614174000. Today is Sunday.");
  REQUIRE(hits.size() == 3);
  CHECK(hits[0].what == "timestamp");
  CHECK(hits[0].excerpt == "2026-11-29T18:30:05");
  CHECK(hits[0].offset == 6);
  CHECK(hits[1].what == "uuid");
  CHECK(hits[2].what == "date phrase");
  CHECK(ScanVolatileLooking("Version 2026-11 of the API; see section 12-34; call_0001.").empty());
}

}  // namespace
}  // namespace strata::internal
