// core/utf8.h: cutting text on a character boundary, repairing invalid UTF-8 and the JSON dump
// that never throws on text from outside.
#include "core/utf8.h"

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>
#include <string>

namespace strata::internal {
namespace {

std::string Repeat(std::string_view s, size_t n) {
  std::string out;
  for (size_t i = 0; i < n; ++i) out += s;
  return out;
}

TEST_CASE("Utf8Floor never ends inside a character", "[core][utf8]") {
  const std::string text = "x" + Repeat("\xC3\xA9", 3);  // x é é é: 7 bytes
  CHECK(Utf8Floor(text, 0) == 0);
  CHECK(Utf8Floor(text, 1) == 1);
  CHECK(Utf8Floor(text, 2) == 1);  // inside the first é
  CHECK(Utf8Floor(text, 3) == 3);
  CHECK(Utf8Floor(text, 6) == 5);
  CHECK(Utf8Floor(text, 7) == 7);
  CHECK(Utf8Floor(text, 100) == 7);
  const std::string four =
      "a\xF0\x9F\x98\x80"
      "b";  // a 😀 b
  for (size_t cut = 2; cut <= 4; ++cut) CHECK(Utf8Floor(four, cut) == 1);
  CHECK(Utf8Floor(four, 5) == 5);
  // Invalid text: a run of continuation bytes is not walked over further than a character.
  const std::string garbage(10, '\x80');
  CHECK(Utf8Floor(garbage, 8) == 8);
  // A stray continuation byte after a whole character is cut where asked.
  CHECK(Utf8Floor("\xC3\xA9\x80z", 2) == 2);
}

TEST_CASE("Utf8Prefix cuts at a boundary and marks the cut, every cut of a valid text is valid",
          "[core][utf8]") {
  const std::string text = "x" + Repeat("\xC3\xA9", 100);  // 201 bytes, the probe's input
  CHECK(Utf8Prefix(text, 300) == text);
  const std::string cut = Utf8Prefix(text, 80);
  CHECK(cut == "x" + Repeat("\xC3\xA9", 39) + "...");
  CHECK(Utf8Prefix(text, 80, "") == "x" + Repeat("\xC3\xA9", 39));
  const std::string mixed =
      "a\xE2\x82\xAC"
      "b\xF0\x9F\x98\x80"
      "c\xC3\xA9";
  for (size_t n = 0; n <= mixed.size(); ++n) {
    INFO(n);
    CHECK(IsValidUtf8(Utf8Prefix(mixed, n)));
  }
}

TEST_CASE("IsValidUtf8 and ToValidUtf8: each invalid byte becomes U+FFFD", "[core][utf8]") {
  CHECK(IsValidUtf8(""));
  CHECK(IsValidUtf8("plain \xC3\xA9 \xE2\x82\xAC \xF0\x9F\x98\x80"));
  CHECK(IsValidUtf8(std::string("nul \0 inside", 12)));
  for (const char* bad :
       {"\xC3", "\x80", "\xC0\xAF", "\xED\xA0\x80", "\xF4\x90\x80\x80", "\xFF", "\xE2\x82"}) {
    INFO(bad);
    CHECK_FALSE(IsValidUtf8(bad));
  }
  const std::string valid = "caf\xC3\xA9";
  CHECK(ToValidUtf8(valid) == valid);
  CHECK(ToValidUtf8("a\xFF"
                    "b") ==
        "a\xEF\xBF\xBD"
        "b");
  // A character cut at the end: its lead byte is replaced, nothing else is lost.
  CHECK(ToValidUtf8("x\xC3") == "x\xEF\xBF\xBD");
  CHECK(ToValidUtf8("\xED\xA0\x80") == "\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD");
  CHECK(IsValidUtf8(ToValidUtf8(std::string("\xC3\x28\xA0\xA1\xE2\x28\xA1\xF0\x28\x8C\xBC"))));
}

TEST_CASE("DumpOutsideJson does not throw on invalid UTF-8 where dump() does", "[core][utf8]") {
  const nlohmann::json value = {{"message", "x" + Repeat("\xC3\xA9", 39) + "\xC3"}};
  CHECK_THROWS(value.dump());
  const std::string text = DumpOutsideJson(value);
  CHECK(text == "{\"message\":\"x" + Repeat("\xC3\xA9", 39) + "\xEF\xBF\xBD\"}");
  CHECK(nlohmann::json::parse(text)["message"].get<std::string>().size() == 82);
  const nlohmann::ordered_json ordered = {{"b", "\xFF"}, {"a", 1}};
  CHECK(DumpOutsideJson(ordered) == "{\"b\":\"\xEF\xBF\xBD\",\"a\":1}");
  CHECK(DumpOutsideJson(ordered, 1) == "{\n \"b\": \"\xEF\xBF\xBD\",\n \"a\": 1\n}");
}

}  // namespace
}  // namespace strata::internal
