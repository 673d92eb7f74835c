// The strata policy's kept rows (compact/strata_rows.h) against sums over every row: where the
// rows split by a turn, which summaries sit before that split although they are of the turn or
// later, and the cached tail a boundary would make the server prefill again. Random histories put
// summaries (each of the turn it was made in) among older segments, as a compaction does.
#include "compact/strata_rows.h"

#include <catch2/catch.hpp>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "compact/segment_facts.h"
#include "strata/builtin_policies.h"

namespace strata {
namespace {

TEST_CASE(
    "the rows split by turn with summaries among older rows and the cached tail equals a sum over "
    "every row",
    "[compact][rows]") {
  std::mt19937 random(20261207);
  auto pick = [&](int n) { return static_cast<int>(random() % static_cast<unsigned>(n)); };
  size_t late_summaries = 0, splits = 0;
  for (int round = 0; round < 400; ++round) {
    std::vector<Segment> segments(static_cast<size_t>(1 + pick(40)));
    int64_t turn = 0;
    const int64_t last_turn = 3 + pick(12);
    for (size_t i = 0; i < segments.size(); ++i) {
      Segment& s = segments[i];
      s.id = "seg-" + std::to_string(i);
      turn = std::min<int64_t>(last_turn, turn + (pick(3) == 0 ? 1 : 0));
      s.turn = turn;
      s.tokens = static_cast<size_t>(1 + pick(500));
      s.content = "def handler(): return " + std::to_string(i);
      switch (pick(4)) {
        case 0:
          s.kind = SegmentKind::kUser;
          break;
        case 1:
          s.kind = SegmentKind::kToolCall;
          s.tool_calls.push_back({"call_" + std::to_string(i), "read_file", "{}"});
          break;
        case 2:
          s.kind = SegmentKind::kToolResult;
          s.tool_call_id = "call_" + std::to_string(i - 1);
          break;
        default:  // made at a later turn than the segments around it, up to the last one
          s.kind = SegmentKind::kSummary;
          s.turn = turn + pick(static_cast<int>(last_turn - turn) + 1);
          break;
      }
    }
    CompactionInput in;
    in.message_overhead_tokens = 3;
    for (const Segment& s : segments) in.history.push_back(&s);
    compact_internal::SegmentFactsCache cache;
    compact_internal::SegmentFacts facts = cache.Begin(in);
    const compact_internal::KeptRows& rows = compact_internal::StrataRows(in, {}, facts);
    const size_t n = segments.size();
    REQUIRE(rows.rows.size() == n);
    for (int64_t t = 0; t <= last_turn + 1; ++t) {
      INFO("round " << round << ", turn " << t);
      // Only summaries are out of turn order here, so the rows always split.
      const size_t split = compact_internal::TurnSplit(rows, t);
      REQUIRE(split != SIZE_MAX);
      ++splits;
      for (size_t i = split; i < n; ++i) CHECK(segments[i].turn >= t);
      if (split > 0) CHECK(segments[split - 1].turn < t);
      std::vector<size_t> late, expected;
      compact_internal::ForEachLateSummary(rows, split, t, [&](size_t i) { late.push_back(i); });
      for (size_t i = 0; i < split; ++i) {
        if (segments[i].turn < t) continue;
        CHECK(segments[i].kind == SegmentKind::kSummary);
        expected.push_back(i);
      }
      CHECK(late == expected);
      late_summaries += late.size();
      // The tail from each boundary: the tokens of the rows after it of a turn before t.
      const compact_internal::CachedTail kept(rows, t, /*whole=*/false);
      const compact_internal::CachedTail whole(rows, t, /*whole=*/true);
      for (size_t i = 0; i <= n; ++i) {
        size_t sum = 0;
        for (size_t j = i; j < n; ++j)
          sum += segments[j].turn < t ? segments[j].tokens + in.message_overhead_tokens : 0;
        INFO("boundary " << i);
        CHECK(kept[i] == sum);
        CHECK(whole[i] == sum);
      }
    }
  }
  // The histories put summaries of a turn before the split of that turn.
  CHECK(splits > 2000);
  CHECK(late_summaries > 500);
}

}  // namespace
}  // namespace strata
