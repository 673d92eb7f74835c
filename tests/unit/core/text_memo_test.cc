#include "core/text_memo.h"

#include <catch2/catch.hpp>
#include <memory>
#include <string>

namespace strata::internal {
namespace {

size_t Charge(size_t text_bytes) { return text_bytes + 16; }

TEST_CASE("the text memo finds a long text by the whole text and not by its sampled ends") {
  TextMemo<std::string> memo(64u << 20, &Charge);
  // Two texts of one length whose first and last 2 KB agree: the bucket hash cannot tell them
  // apart, the comparison must.
  const std::string ends(SampledTextHash::kEnd, 'e');
  const std::string a = ends + std::string(100000, 'a') + ends;
  const std::string b = ends + std::string(100000, 'b') + ends;
  REQUIRE(SampledTextHash()(a) == SampledTextHash()(b));
  memo.Insert(a, std::make_shared<const std::string>("value of a"));
  CHECK(memo.Find(b) == nullptr);
  memo.Insert(b, std::make_shared<const std::string>("value of b"));
  REQUIRE(memo.Find(a) != nullptr);
  CHECK(*memo.Find(a) == "value of a");
  REQUIRE(memo.Find(b) != nullptr);
  CHECK(*memo.Find(b) == "value of b");
  // A text one byte longer or shorter is another text.
  CHECK(memo.Find(a + "x") == nullptr);
  CHECK(memo.Find(a.substr(1)) == nullptr);
  // Short texts are hashed whole.
  memo.Insert("short", std::make_shared<const std::string>("value of short"));
  REQUIRE(memo.Find("short") != nullptr);
  CHECK(memo.Find("shorT") == nullptr);
  CHECK(memo.stats().entries == 3);
}

TEST_CASE("the text memo keeps every text it was given until it starts over past its bound") {
  auto text_of = [](int i) {
    return "{\"role\":\"tool\",\"content\":\"" + std::to_string(i) + "\"}";
  };
  const size_t each = Charge(text_of(1000).size());
  constexpr int kTexts = 2000;  // past the first table's size: it grows while keeping its texts
  TextMemo<std::string> memo(each * kTexts, &Charge);
  for (int i = 1000; i < 1000 + kTexts; ++i)
    memo.Insert(text_of(i), std::make_shared<const std::string>("v" + std::to_string(i)));
  for (int i = 1000; i < 1000 + kTexts; ++i) {
    const std::shared_ptr<const std::string> found = memo.Find(text_of(i));
    REQUIRE(found != nullptr);
    REQUIRE(*found == "v" + std::to_string(i));
  }
  CHECK(memo.Find(text_of(1000 + kTexts)) == nullptr);
  // A text kept again keeps its value.
  memo.Insert(text_of(1000), std::make_shared<const std::string>("other"));
  CHECK(*memo.Find(text_of(1000)) == "v1000");
  CHECK(memo.stats().entries == kTexts);
  CHECK(memo.stats().charged_bytes == each * kTexts);
  // One more does not fit: the memo starts over and keeps only it.
  memo.Insert(text_of(1000 + kTexts), std::make_shared<const std::string>("last"));
  CHECK(memo.stats().entries == 1);
  CHECK(memo.stats().charged_bytes == each);
  CHECK(memo.Find(text_of(1000)) == nullptr);
  REQUIRE(memo.Find(text_of(1000 + kTexts)) != nullptr);
  memo.Clear();
  CHECK(memo.Find(text_of(1000 + kTexts)) == nullptr);
  CHECK(memo.stats().entries == 0);
}

}  // namespace
}  // namespace strata::internal
