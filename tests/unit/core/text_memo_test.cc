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

}  // namespace
}  // namespace strata::internal
