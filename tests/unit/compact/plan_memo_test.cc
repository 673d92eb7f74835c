// The strata policy's memo of its last plan (compact/plan_memo.h): an input equal in everything a
// plan reads gets the kept edit; any difference, in the counts or in one field of one segment,
// gets none; the key is built only when the counts match, and an input not made by a Context (no
// fingerprints) is never kept.
#include "compact/plan_memo.h"

#include <catch2/catch.hpp>
#include <deque>
#include <string>

namespace strata {
namespace {

using compact_internal::PlanMemo;

struct Input {
  std::deque<Segment> segments;
  CompactionInput in;

  explicit Input(int n) {
    for (int i = 0; i < n; ++i) {
      Segment s;
      s.id = "s-" + std::to_string(i);
      s.kind = i % 2 == 0 ? SegmentKind::kToolCall : SegmentKind::kToolResult;
      s.tool_call_id = "call_" + std::to_string(i / 2);
      s.content = std::string(40, static_cast<char>('a' + i));
      s.tokens = 10;
      s.turn = i / 2;
      segments.push_back(s);
    }
    for (size_t i = 0; i < segments.size(); ++i) {
      in.history.push_back(&segments[i]);
      in.history_fingerprints.push_back(1000 + i);
    }
    in.total_tokens = 10 * static_cast<size_t>(n);
    in.history_tokens = in.total_tokens;
    in.limit_tokens = 500;
    in.turn = n / 2;
  }
};

HistoryEdit MaskOf(const std::string& id) {
  HistoryEdit edit;
  edit.edits.push_back({id, SegmentEdit::Action::kMask, "[masked]"});
  edit.reason = "test";
  return edit;
}

TEST_CASE("the plan memo gives the kept edit to an equal input and none to a different one",
          "[compact][incremental]") {
  PlanMemo memo;
  Input a(6);
  std::string key;
  CHECK_FALSE(memo.Find(a.in, &key).has_value());  // nothing kept yet
  CHECK(key.empty());
  memo.Keep(a.in, MaskOf("s-1"), key);

  Input same(6);  // other segment objects, the same fields
  std::optional<HistoryEdit> found = memo.Find(same.in, &key);
  REQUIRE(found.has_value());
  REQUIRE(found->edits.size() == 1);
  CHECK(found->edits[0].segment_id == "s-1");
  CHECK(key == PlanMemo::Key(same.in));

  // Other counts: no key is built.
  Input grown(8);
  CHECK_FALSE(memo.Find(grown.in, &key).has_value());
  CHECK(key.empty());
  Input later(6);
  later.in.turn += 1;
  CHECK_FALSE(memo.Find(later.in, &key).has_value());
  CHECK(key.empty());
  Input prediction(6);  // whether it is a prediction is not part of the input compared
  prediction.in.prediction = true;
  CHECK(memo.Find(prediction.in, &key).has_value());

  // The same counts, one field of one segment different: the key is built and differs.
  auto differs = [&](auto change) {
    Input other(6);
    change(other);
    std::string other_key;
    const bool found_other = memo.Find(other.in, &other_key).has_value();
    CHECK_FALSE(other_key.empty());
    return !found_other;
  };
  CHECK(differs([](Input& x) { x.in.history_fingerprints[3] += 1; }));
  CHECK(differs([](Input& x) { x.segments[2].id = "s-x"; }));
  CHECK(differs([](Input& x) { x.segments[2].state = SegmentState::kMasked; }));
  CHECK(differs([](Input& x) { x.segments[4].pinned = true; }));
  CHECK(differs([](Input& x) { x.segments[5].recall_id = "r-5"; }));
  CHECK(differs([](Input& x) { x.in.original_bytes = {0, 0, 0, 900, 0, 0}; }));

  // A key Find() built is the one Keep() keeps: the changed input is found next.
  Input changed(6);
  changed.segments[0].name = "read_file";
  CHECK_FALSE(memo.Find(changed.in, &key).has_value());
  memo.Keep(changed.in, MaskOf("s-3"), key);
  found = memo.Find(changed.in, &key);
  REQUIRE(found.has_value());
  CHECK(found->edits[0].segment_id == "s-3");
  CHECK_FALSE(memo.Find(same.in, &key).has_value());  // one edit is kept, the last
}

TEST_CASE("the plan memo keeps nothing for an input without fingerprints", "[compact]") {
  PlanMemo memo;
  Input a(4);
  a.in.history_fingerprints.clear();
  memo.Keep(a.in, MaskOf("s-1"), "");
  std::string key;
  CHECK_FALSE(memo.Find(a.in, &key).has_value());
  CHECK(PlanMemo::Key(a.in).empty());
}

}  // namespace
}  // namespace strata
