#include "core/json_text.h"

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <vector>

namespace strata::internal {
namespace {

TEST_CASE("JSON strings escape only what JSON requires and pass UTF-8 through", "[core][json]") {
  std::string out;
  AppendJsonString(out, "a\"b\\c\n\t\x01\x7f é 日本 😀");
  CHECK(out == "\"a\\\"b\\\\c\\n\\t\\u0001\x7f é 日本 😀\"");
  CHECK(JsonStringSize("a\"b\\c\n\t\x01\x7f é 日本 😀") == out.size());
}

TEST_CASE("our escaping matches nlohmann's for every byte pattern", "[core][json]") {
  std::mt19937 rng(7);
  for (int i = 0; i < 2000; ++i) {
    std::string text;
    const int length = rng() % 40;
    for (int k = 0; k < length; ++k) text.push_back(static_cast<char>(rng() % 128));
    text += "ü";
    std::string ours;
    AppendJsonString(ours, text);
    CHECK(ours == nlohmann::json(text).dump(-1, ' ', false));
  }
}

TEST_CASE("canonical JSON sorts keys and normalizes whitespace and numbers", "[core][json]") {
  auto a = CanonicalizeJson(R"({"b": 1.50, "a": {"y": [1, 2], "x": "é"}})", "test");
  auto b = CanonicalizeJson("{\"a\":{\"x\":\"\\u00e9\",\"y\":[1,2]},\"b\":1.5}", "test");
  REQUIRE(a.ok());
  REQUIRE(b.ok());
  CHECK(*a == R"({"a":{"x":"é","y":[1,2]},"b":1.5})");
  CHECK(*a == *b);
}

TEST_CASE("short strings and literals are canonical as nlohmann prints them", "[core][json]") {
  // Each is what a request's field may carry; some take the path that does not parse (plain
  // strings, true, false, null), the others are parsed: both give nlohmann's dump.
  std::vector<std::string> values = {
      "true",       "false",       "null",         "\"\"",     "\"req-7f3a_01:x y~\"",
      "\"a\\\"b\"", "\"\\u0041\"", "\"\xc3\xa9\"", "\"\x7f\"", " \"padded\" ",
      "\"\\n\"",    "1.50",        "[true]"};
  std::mt19937 rng(11);
  for (int i = 0; i < 500; ++i) {
    std::string text = "\"";
    for (int k = static_cast<int>(rng() % 24); k > 0; --k)
      text.push_back(static_cast<char>(0x20 + rng() % 0x5f));
    if (text.find('\\') != std::string::npos) continue;  // a lone backslash is not JSON
    values.push_back(text + "\"");
  }
  for (const std::string& value : values) {
    INFO(value);
    const nlohmann::json parsed = nlohmann::json::parse(value, nullptr, false);
    if (parsed.is_discarded()) {
      CHECK_FALSE(CanonicalizeJson(value, "test").ok());
      continue;
    }
    auto canonical = CanonicalizeJson(value, "test");
    REQUIRE(canonical.ok());
    CHECK(*canonical == parsed.dump(-1, ' ', false, nlohmann::json::error_handler_t::strict));
  }
  CHECK_FALSE(CanonicalizeJson("\"unterminated", "test").ok());
  CHECK_FALSE(CanonicalizeJson("\"", "test").ok());
}

TEST_CASE("malformed JSON is refused with its position", "[core][json]") {
  auto bad = CanonicalizeJson(R"({"a": [1, 2})", "tools JSON");
  REQUIRE_FALSE(bad.ok());
  CHECK(bad.status().code() == StatusCode::kInvalidArgument);
  CHECK_THAT(bad.status().message(), Catch::Contains("tools JSON") && Catch::Contains("byte"));
}

TEST_CASE("JSON nested deeper than the limit is refused, not printed recursively", "[core][json]") {
  auto nested = [](size_t depth, const char* open, const char* close) {
    std::string text;
    for (size_t i = 0; i < depth; ++i) text += open;
    text += "1";
    for (size_t i = 0; i < depth; ++i) text += close;
    return text;
  };
  // 20,000 levels overflowed the stack when printed; the limit refuses it before parsing.
  for (const auto& [open, close] : {std::pair{"[", "]"}, std::pair{"{\"a\":", "}"}}) {
    auto deep = CanonicalizeJson(nested(20000, open, close), "tool arguments");
    REQUIRE_FALSE(deep.ok());
    CHECK(deep.status().code() == StatusCode::kInvalidArgument);
    CHECK_THAT(deep.status().message(), Catch::Contains("tool arguments") &&
                                            Catch::Contains("nested deeper than 512 levels"));
  }
  CHECK(CanonicalizeJson(nested(kMaxJsonDepth, "[", "]"), "x").ok());
  CHECK_FALSE(CanonicalizeJson(nested(kMaxJsonDepth + 1, "[", "]"), "x").ok());
  // Brackets inside strings (escaped quotes included) do not count.
  CHECK(CheckJsonDepth("[\"" + std::string(1000, '[') + "\\\"\"]", "x").ok());
}

TEST_CASE("a number beyond a double is refused, not thrown", "[core][json]") {
  // Found by tests/fuzz (json_canonical): the parser's range error escaped as an exception.
  auto huge = CanonicalizeJson(R"({"b": [1, 1234567890123451e+300]})", "arguments");
  REQUIRE_FALSE(huge.ok());
  CHECK(huge.status().code() == StatusCode::kInvalidArgument);
  CHECK_THAT(huge.status().message(),
             Catch::Contains("arguments") && Catch::Contains("number too large"));
}

}  // namespace
}  // namespace strata::internal
