#include "tokenize/line_memo.h"

#include <catch2/catch.hpp>
#include <cstdint>
#include <string>
#include <vector>

namespace strata::tokenize_internal {
namespace {

// Every line hashes to one of three values: lines share slots' tags and probe past each other.
uint64_t ThreeHashes(std::string_view line) {
  return 0x9e3779b97f4a7c15ULL * (1 + line.size() % 3);
}

std::vector<int32_t> IdsOf(int i) { return {i, i + 1, -i, 7 * i}; }

std::string LineOf(int i) { return "def f_" + std::to_string(i) + "(x): return x\n"; }

void KeepLine(LineMemo& memo, const std::string& line, const std::vector<int32_t>& ids) {
  memo.Keep(line, ids.data(), ids.size());
}

TEST_CASE("the line memo appends the ids kept for a line and nothing for a line it lacks") {
  LineMemo memo(1 << 20);
  std::vector<int32_t> out = {42};
  CHECK_FALSE(memo.AppendKept("x = 1\n", &out));
  CHECK(out == std::vector<int32_t>{42});
  KeepLine(memo, "x = 1\n", {3, 4, 5});
  REQUIRE(memo.AppendKept("x = 1\n", &out));
  CHECK(out == std::vector<int32_t>{42, 3, 4, 5});
  // A line kept again keeps the ids it had; a line one byte longer or shorter is another line.
  KeepLine(memo, "x = 1\n", {9});
  out.clear();
  REQUIRE(memo.AppendKept("x = 1\n", &out));
  CHECK(out == std::vector<int32_t>{3, 4, 5});
  CHECK_FALSE(memo.AppendKept("x = 1", &out));
  CHECK_FALSE(memo.AppendKept("x = 1\n\n", &out));
  // An empty line with no ids is a line like any other.
  KeepLine(memo, "", {});
  out.clear();
  CHECK(memo.AppendKept("", &out));
  CHECK(out.empty());
  CHECK(memo.stats().entries == 2);
}

TEST_CASE("lines whose hashes collide are told apart by their text as the table grows") {
  LineMemo memo(64 << 20, &ThreeHashes);
  constexpr int kLines = 3000;  // the table starts at 256 slots and doubles past half full
  for (int i = 0; i < kLines; ++i) {
    KeepLine(memo, LineOf(i), IdsOf(i));
    if (i % 500 == 0) {  // every line kept so far is still found, with its own ids
      for (int j = 0; j <= i; j += 37) {
        std::vector<int32_t> out;
        REQUIRE(memo.AppendKept(LineOf(j), &out));
        REQUIRE(out == IdsOf(j));
      }
    }
  }
  for (int i = 0; i < kLines; ++i) {
    std::vector<int32_t> out;
    REQUIRE(memo.AppendKept(LineOf(i), &out));
    REQUIRE(out == IdsOf(i));
  }
  std::vector<int32_t> out;
  CHECK_FALSE(memo.AppendKept(LineOf(kLines), &out));
  CHECK(out.empty());
  const LineMemo::Stats stats = memo.stats();
  CHECK(stats.entries == kLines);
  CHECK(stats.restarts == 0);
}

TEST_CASE("the line memo starts over past its bound and keeps no line charged over a quarter") {
  const size_t line_charge = LineMemo::Charge(LineOf(10).size(), 4);
  const size_t max_bytes = 20 * line_charge;
  LineMemo memo(max_bytes);
  for (int i = 10; i < 30; ++i) KeepLine(memo, LineOf(i), IdsOf(i));
  CHECK(memo.stats().charged_bytes == max_bytes);
  CHECK(memo.stats().restarts == 0);
  // The 21st line does not fit: the memo starts over and keeps only it.
  KeepLine(memo, LineOf(30), IdsOf(30));
  const LineMemo::Stats stats = memo.stats();
  CHECK(stats.restarts == 1);
  CHECK(stats.entries == 1);
  CHECK(stats.charged_bytes == line_charge);
  CHECK(stats.text_bytes == LineOf(30).size());
  std::vector<int32_t> out;
  CHECK_FALSE(memo.AppendKept(LineOf(10), &out));
  REQUIRE(memo.AppendKept(LineOf(30), &out));
  CHECK(out == IdsOf(30));
  // A line charged more than a quarter of the bound is encoded each time, never kept.
  const std::string long_line(max_bytes / 4, 'y');
  KeepLine(memo, long_line, {1});
  CHECK_FALSE(memo.AppendKept(long_line, &out));
  CHECK(memo.stats().entries == 1);
}

}  // namespace
}  // namespace strata::tokenize_internal
