#include "core/json_scan.h"

#include <catch2/catch.hpp>
#include <string>
#include <utility>
#include <vector>

namespace strata::internal {
namespace {

constexpr size_t npos = std::string_view::npos;

std::vector<std::string> Texts(std::string_view t, const JsonElements& at) {
  std::vector<std::string> out;
  for (size_t i = 0; i < at.size(); ++i)
    out.emplace_back(t.substr(at[i].first, at[i].second - at[i].first));
  return out;
}

TEST_CASE(
    "the JSON scan finds values and strings and array elements by their brackets and quotes") {
  const std::string t = R"([ "a,\"]", {"k": [1, "}"]}, 12.5e3 , true ])";
  JsonElements elements;
  CHECK(SplitJsonArray(t, 1, false, &elements) == t.size());
  CHECK(Texts(t, elements) ==
        std::vector<std::string>{R"("a,\"]")", R"({"k": [1, "}"]})", "12.5e3", "true"});
  // Resumed after an element: the rest.
  JsonElements rest;
  CHECK(SplitJsonArray(t, elements[1].second, true, &rest) == t.size());
  CHECK(Texts(t, rest) == std::vector<std::string>{"12.5e3", "true"});
  CHECK(SkipJsonString(R"("never closed)", 0) == npos);
  CHECK(SkipJsonValue(R"({"a": [1, 2})", 0) == npos);
  JsonElements none;
  CHECK(SplitJsonArray("[1 2]", 1, false, &none) == npos);  // no comma
}

// The string's end found one character at a time, an escape taking the character after it.
size_t StringEndByCharacters(std::string_view t, size_t pos) {
  for (size_t i = pos + 1; i < t.size(); ++i) {
    if (t[i] == '\\') {
      ++i;
    } else if (t[i] == '"') {
      return i + 1;
    }
  }
  return std::string_view::npos;
}

TEST_CASE("a JSON string ends at the first quote that no backslash escapes") {
  CHECK(SkipJsonString(R"("a\\"b")", 0) == 5);   // an escaped backslash, then the end
  CHECK(SkipJsonString(R"("a\\\"b")", 0) == 8);  // three backslashes escape the quote
  CHECK(SkipJsonString(R"(x"\"")", 1) == 5);
  CHECK(SkipJsonString(R"("\)", 0) == npos);
  // Every text of quotes, backslashes and letters up to 9 characters after the opening quote.
  const char alphabet[] = {'"', '\\', 'a'};
  for (size_t length = 0; length <= 9; ++length) {
    size_t count = 1;
    for (size_t i = 0; i < length; ++i) count *= 3;
    for (size_t n = 0; n < count; ++n) {
      std::string t = "\"";
      for (size_t i = 0, k = n; i < length; ++i, k /= 3) t.push_back(alphabet[k % 3]);
      INFO(t);
      REQUIRE(SkipJsonString(t, 0) == StringEndByCharacters(t, 0));
    }
  }
}

TEST_CASE("the JSON scan walks an object's members and stops where told") {
  const std::string t = R"({"a": 1, "m\u0065": [2], "b": {"c": "}"}} )";
  std::vector<std::string> keys, values;
  const auto all = [&](std::string_view key, size_t at) {
    const size_t end = SkipJsonValue(t, at);
    keys.emplace_back(key);
    values.emplace_back(t.substr(at, end - at));
    return end;
  };
  CHECK(WalkJsonObject(t, 1, false, all) == t.size() - 1);
  CHECK(keys == std::vector<std::string>{"a", R"(m\u0065)", "b"});  // escapes left as they are
  CHECK(values == std::vector<std::string>{"1", "[2]", R"({"c": "}"})"});
  // Stopped by the member: npos.
  CHECK(WalkJsonObject(t, 1, false, [&](std::string_view key, size_t at) {
          return key == "m\\u0065" ? npos : SkipJsonValue(t, at);
        }) == npos);
  // Resumed after a member's value.
  keys.clear();
  values.clear();
  CHECK(WalkJsonObject(t, t.find(", \"m"), true, all) == t.size() - 1);
  CHECK(keys == std::vector<std::string>{R"(m\u0065)", "b"});
  // Not an object there, a trailing comma, a missing colon.
  CHECK(WalkJsonObject(R"({"a" 1})", 1, false, all) == npos);
  CHECK(WalkJsonObject(R"({"a": 1,})", 1, false, all) == npos);
  CHECK(WalkJsonObject("{}", 1, false, all) == 2);
}

TEST_CASE("an element list continuing another shares its whole chunks and owns what it appends") {
  constexpr size_t kChunk = JsonElements::kChunk;
  JsonElements base;
  for (size_t i = 0; i < 3 * kChunk + 10; ++i) base.emplace_back(2 * i, 2 * i + 1);
  const JsonElements before = base;
  for (size_t n : {size_t{0}, size_t{1}, kChunk - 1, kChunk, kChunk + 1, 2 * kChunk, 3 * kChunk + 5,
                   3 * kChunk + 10}) {
    INFO("prefix " << n);
    JsonElements next;
    next.emplace_back(99, 100);  // replaced by the prefix
    next.AssignPrefix(base, n);
    REQUIRE(next.size() == n);
    for (size_t i = 0; i < n; ++i) REQUIRE(next[i] == base[i]);
    // Appending to the continued list changes neither the base nor the lists sharing its chunks.
    for (size_t i = 0; i < kChunk + 3; ++i) next.emplace_back(7, 8 + i);
    REQUIRE(next.size() == n + kChunk + 3);
    CHECK(next[n] == JsonElements::Element{7, 8});
    CHECK(next.back() == JsonElements::Element{7, 8 + kChunk + 2});
    for (size_t i = 0; i < n; ++i) REQUIRE(next[i] == base[i]);
    REQUIRE(base.size() == before.size());
    for (size_t i = 0; i < base.size(); ++i) REQUIRE(base[i] == before[i]);
  }
  // A copy appending to the last chunk it shares leaves the original's elements as they were, and
  // the original appending after it sees its own.
  JsonElements copy = base;
  copy.emplace_back(1, 2);
  base.emplace_back(3, 4);
  CHECK(copy.back() == JsonElements::Element{1, 2});
  CHECK(base.back() == JsonElements::Element{3, 4});
  CHECK(copy[copy.size() - 2] == base[base.size() - 2]);
  // A list continuing a prefix of one that is gone appends after its own elements.
  JsonElements tail;
  {
    JsonElements gone;
    for (size_t i = 0; i < 2 * kChunk; ++i) gone.emplace_back(2 * i, 2 * i + 1);
    tail.AssignPrefix(gone, kChunk + 3);
  }
  tail.emplace_back(5, 6);
  CHECK(tail.size() == kChunk + 4);
  CHECK(tail[kChunk + 2] == before[kChunk + 2]);
  CHECK(tail.back() == JsonElements::Element{5, 6});
  base.clear();
  CHECK(base.empty());
  CHECK(before.size() == 3 * kChunk + 10);
}

TEST_CASE("the JSON scan cuts an object's array member and continues an earlier split") {
  const std::string first = R"({"model":"m","messages":[{"a":1},{"b":2}],"n":1})";
  JsonArraySplit split;
  REQUIRE(SplitMemberArray(first, "messages", nullptr, 0, &split));
  CHECK(first.substr(split.array_begin, split.array_end - split.array_begin) ==
        R"([{"a":1},{"b":2}])");
  REQUIRE(split.elements.size() == 2);
  CHECK(first.substr(split.elements[1].first, 7) == R"({"b":2})");
  CHECK(split.reused == 0);
  // A text sharing the first one up to its second element: the first element is the base's.
  const std::string next = R"({"model":"m","messages":[{"a":1},{"b":3},{"c":4}],"n":1})";
  JsonArraySplit continued;
  REQUIRE(SplitMemberArray(next, "messages", &split, first.find(R"("b":2)") + 5, &continued));
  CHECK(continued.reused == 1);
  CHECK(continued.elements.size() == 3);
  CHECK(next.substr(continued.elements[2].first, 7) == R"({"c":4})");
  // Not taken apart: the key twice, escaped, missing or not an array, junk after the object.
  JsonArraySplit refused;
  CHECK_FALSE(
      SplitMemberArray(R"({"messages":[],"messages":[]})", "messages", nullptr, 0, &refused));
  CHECK_FALSE(
      SplitMemberArray(R"({"messages":[],"messages":[]})", "messages", nullptr, 0, &refused));
  CHECK_FALSE(SplitMemberArray(R"({"model":"m"})", "messages", nullptr, 0, &refused));
  CHECK_FALSE(SplitMemberArray(R"({"messages":{}})", "messages", nullptr, 0, &refused));
  CHECK_FALSE(SplitMemberArray(R"({"messages":[]} x)", "messages", nullptr, 0, &refused));
  CHECK(SplitMemberArray(R"( {"messages":[]} )", "messages", nullptr, 0, &refused));
}

}  // namespace
}  // namespace strata::internal
