#include "core/json_text.h"

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>
#include <random>

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
