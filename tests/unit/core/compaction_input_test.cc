// The context keeps what a compaction input lists of the rendered history (each segment, its
// fingerprint, its original's bytes) and the history's usage as the history is rendered, and
// restores the usage before an edit's boundary instead of summing the segments again. After every
// kind of change, both must equal what a context restored from the same snapshot gathers anew, and
// the entries an input says are unchanged since the input before it must be.
#include <algorithm>
#include <catch2/catch.hpp>
#include <memory>
#include <string>
#include <vector>

#include "core/text_util.h"
#include "strata/compaction_policy.h"
#include "strata/context.h"
#include "testing/history_changes.h"

namespace strata {
namespace {

// What one plan was given; plans nothing.
struct SeenInput {
  std::vector<Segment> segments;  // copies, as they were
  uint64_t serial = 0, previous = 0;
  size_t unchanged = 0;
  std::vector<std::string> ids;
  std::vector<uint64_t> fingerprints;
  std::vector<size_t> original_bytes;
  size_t history_tokens = 0;
  size_t total_tokens = 0;
};

class RecordingPolicy final : public CompactionPolicy {
 public:
  std::string Name() const override { return "recording@1"; }
  bool ShouldCompact(const CompactionInput&) const override { return true; }
  StatusOr<HistoryEdit> Plan(const CompactionInput& in) override {
    SeenInput seen;
    for (const Segment* s : in.history) {
      seen.ids.push_back(s->id);
      seen.segments.push_back(*s);
    }
    seen.serial = in.history_serial;
    seen.previous = in.previous_history_serial;
    seen.unchanged = in.history_unchanged;
    seen.fingerprints = in.history_fingerprints;
    seen.original_bytes = in.original_bytes;
    seen.history_tokens = in.history_tokens;
    seen.total_tokens = in.total_tokens;
    last = std::move(seen);
    return HistoryEdit{};
  }
  SeenInput last;
};

// Every field of two segments but their token counts' source (the same tokenizer counts both).
bool SameSegment(const Segment& a, const Segment& b) {
  return a.id == b.id && a.kind == b.kind && a.state == b.state && a.content == b.content &&
         a.reasoning == b.reasoning && a.pinned == b.pinned && a.tokens == b.tokens &&
         a.recall_id == b.recall_id && a.tool_call_id == b.tool_call_id &&
         a.tool_calls.size() == b.tool_calls.size() && a.version == b.version;
}

ContextOptions Options(CompactionPolicy* policy) {
  ContextOptions options;
  options.agent.id = "input-agent";
  options.hygiene.max_segment_tokens = 64;  // long outputs are truncated: originals are kept
  options.compaction = policy;
  return options;
}

SeenInput PlanOf(Context& context, RecordingPolicy& policy) {
  REQUIRE(context.Compact(/*force=*/true).ok());
  return policy.last;
}

TEST_CASE(
    "the compaction input and the history's usage kept as the history is rendered equal a "
    "restored context's after every kind of change",
    "[core][context]") {
  RecordingPolicy policy;
  auto context = Context::Create(Options(&policy)).value();
  REQUIRE(context->SetSystemPrompt("You are a test.").ok());
  REQUIRE(context->AppendUser("Start.").ok());
  testing::HistoryChanges changes(2026);
  size_t originals = 0, copies = 0, pins = 0;
  std::vector<std::string> summary_errors;
  SeenInput before;    // the input planned before
  size_t vouched = 0;  // entries an input said were unchanged
  for (int step = 0; step < 250; ++step) {
    const std::string call = "call" + std::to_string(step);
    switch (changes.Next(10)) {
      case 0:
      case 1:
      case 2:  // a tool call and its result, now and then long enough to be truncated
        REQUIRE(changes.CallAndResult(
            *context, call, changes.Next(3) == 0 ? std::string(2000, 'x') + call : "out " + call));
        break;
      case 3:  // a mask of a result
        changes.MaskAResult(*context);
        break;
      case 4:  // a summary of a call and its result, anywhere in the history (not a pinned one)
        summary_errors.push_back(changes.SummarizeACall(*context, "summary " + call).message());
        break;
      case 5:  // a mark, a change and a rewind to it
        REQUIRE(changes.RewindAChange(*context, "undone " + call));
        break;
      case 6:  // a prediction: the copy it may make lists its own segments
        REQUIRE(context->PreviewBuild().ok());
        ++copies;
        break;
      case 7: {  // a pin or an unpin
        if (changes.results.empty()) break;
        const std::string& id =
            changes.results[changes.Next(static_cast<uint32_t>(changes.results.size()))];
        const Segment* s = context->Find(id);
        if (s != nullptr && s->layer == Layer::kHistory) {
          REQUIRE(context->SetPinned(id, !s->pinned).ok());
          ++pins;
        }
        break;
      }
      default:
        REQUIRE(context->AppendUser("next " + call).ok());
        break;
    }
    if (changes.Next(2) == 0) continue;  // changes pile up between plans too
    INFO("step " << step);
    const SeenInput kept = PlanOf(*context, policy);
    CHECK(kept.serial != 0);
    if (kept.previous != 0) {
      // Named after the input before it (no other input of this context came between), whose
      // first `unchanged` entries it has, unchanged.
      CHECK(kept.previous == before.serial);
      REQUIRE(kept.unchanged <= std::min(kept.segments.size(), before.segments.size()));
      for (size_t i = 0; i < kept.unchanged; ++i)
        CHECK(SameSegment(kept.segments[i], before.segments[i]));
      vouched += kept.unchanged;
    }
    before = kept;
    RecordingPolicy fresh_policy;
    auto restored = Context::Restore(Options(&fresh_policy), context->Snapshot()).value();
    const SeenInput fresh = PlanOf(*restored, fresh_policy);
    REQUIRE(kept.ids == fresh.ids);
    CHECK(kept.fingerprints == fresh.fingerprints);
    CHECK(kept.original_bytes == fresh.original_bytes);
    CHECK(kept.history_tokens == fresh.history_tokens);
    CHECK(kept.total_tokens == fresh.total_tokens);
    const LayerUsage mine = context->Stats().layers[static_cast<int>(Layer::kHistory)];
    const LayerUsage theirs = restored->Stats().layers[static_cast<int>(Layer::kHistory)];
    CHECK(mine.segments == theirs.segments);
    CHECK(mine.bytes == theirs.bytes);
    CHECK(mine.tokens == theirs.tokens);
    for (size_t o : kept.original_bytes) originals += o > 0;
  }
  CHECK(changes.masks > 5);
  CHECK(changes.summaries > 10);
  // A summary is refused only where this test pinned a segment.
  for (const std::string& e : summary_errors) {
    if (!e.empty()) CHECK_THAT(e, Catch::Contains("summary names pinned segment"));
  }
  CHECK(changes.rewinds > 10);
  CHECK(copies > 10);
  CHECK(originals > 0);
  CHECK(pins > 5);
  CHECK(vouched > 1000);
}

// Plans once more, inside its own plan, on the context it is given: the inner input is made while
// the outer one holds the context's lists.
class ReentrantPolicy final : public CompactionPolicy {
 public:
  std::string Name() const override { return "reentrant@1"; }
  bool ShouldCompact(const CompactionInput&) const override { return true; }
  StatusOr<HistoryEdit> Plan(const CompactionInput& in) override {
    if (inner_) {
      for (const Segment* s : in.history) inner_ids.push_back(s->id);
      inner_fingerprints = in.history_fingerprints;
      return HistoryEdit{};
    }
    for (const Segment* s : in.history) outer_ids.push_back(s->id);
    outer_fingerprints = in.history_fingerprints;
    inner_ = true;
    const Status inner = context->Compact(/*force=*/true).status();
    inner_ = false;
    if (!inner.ok()) return inner;
    // The outer input still lists what it listed before the inner plan.
    std::vector<std::string> after;
    for (const Segment* s : in.history) after.push_back(s->id);
    if (after != outer_ids) return InternalError("the outer input changed during the inner plan");
    return HistoryEdit{};
  }
  Context* context = nullptr;
  std::vector<std::string> outer_ids, inner_ids;
  std::vector<uint64_t> outer_fingerprints, inner_fingerprints;

 private:
  bool inner_ = false;
};

TEST_CASE("an input made while another input of the context is alive lists the same history",
          "[core][context]") {
  ReentrantPolicy policy;
  auto context = Context::Create(Options(&policy)).value();
  policy.context = context.get();
  REQUIRE(context->SetSystemPrompt("You are a test.").ok());
  REQUIRE(context->AppendUser("Start.").ok());
  testing::HistoryChanges changes(7);
  for (int step = 0; step < 20; ++step) {
    REQUIRE(changes.CallAndResult(*context, "call" + std::to_string(step),
                                  step % 3 == 0 ? std::string(2000, 'x') : "out"));
  }
  REQUIRE(context->Compact(/*force=*/true).ok());
  CHECK(policy.outer_ids.size() > 40);
  CHECK(policy.inner_ids == policy.outer_ids);
  CHECK(policy.inner_fingerprints == policy.outer_fingerprints);
  // Both were given back: the next plan lists the history again.
  policy.outer_ids.clear();
  policy.inner_ids.clear();
  REQUIRE(context->AppendUser("More.").ok());
  REQUIRE(context->Compact(/*force=*/true).ok());
  CHECK(policy.outer_ids.size() > 40);
  CHECK(policy.inner_ids == policy.outer_ids);
}

// Masks the first `masks` live tool results, each placeholder naming the recall id the input
// gives; asks for the id of a changed copy of each too.
class RecallIdPolicy final : public CompactionPolicy {
 public:
  std::string Name() const override { return "recall-ids@1"; }
  bool ShouldCompact(const CompactionInput&) const override { return true; }
  StatusOr<HistoryEdit> Plan(const CompactionInput& in) override {
    HistoryEdit edit;
    for (const Segment* s : in.history) {
      if (edit.edits.size() == masks) break;
      if (s->kind != SegmentKind::kToolResult || s->state != SegmentState::kLive) continue;
      const std::string id = in.RecallId(*s);
      ids.push_back(id);
      // A copy with the same seq and other content is not the context's segment: its id is its
      // own content's, not the one the context keeps for the seq.
      Segment copy = *s;
      copy.content += " (changed)";
      copy_ids.push_back(in.RecallId(copy));
      copy_contents.push_back(copy.content);
      edit.edits.push_back({s->id, SegmentEdit::Action::kMask, "[masked; recall " + id + "]"});
    }
    return edit;
  }
  size_t masks = 3;
  std::vector<std::string> ids, copy_ids, copy_contents;
};

TEST_CASE(
    "a masked segment's content is hashed for its recall id once by the policy and the context",
    "[core][context]") {
  RecallIdPolicy policy;
  auto context = Context::Create(Options(&policy)).value();
  REQUIRE(context->SetSystemPrompt("You are a test.").ok());
  REQUIRE(context->AppendUser("Start.").ok());
  testing::HistoryChanges changes(11);
  std::vector<std::string> outputs;
  for (int step = 0; step < 6; ++step) {
    // Longer than a placeholder, shorter than what hygiene truncates.
    outputs.push_back("output of call " + std::to_string(step) + ": " + std::string(150, 'o'));
    REQUIRE(changes.CallAndResult(*context, "call" + std::to_string(step), outputs.back()));
  }
  for (const std::string& id : changes.results) CHECK(context->Find(id)->recall_id.empty());
  const uint64_t before = internal::RecallIdsComputed();
  REQUIRE(context->Compact(/*force=*/true).ok());
  // Three of the segments and three copies: the edit took the segments' ids from the context.
  CHECK(internal::RecallIdsComputed() - before == 6);
  REQUIRE(policy.ids.size() == 3);
  for (size_t k = 0; k < 3; ++k) {
    INFO("result " << k);
    CHECK(policy.ids[k] == RecallIdFor(outputs[k]));
    CHECK(policy.copy_ids[k] == RecallIdFor(policy.copy_contents[k]));
    const Segment* masked = context->Find(changes.results[k]);
    REQUIRE(masked != nullptr);
    CHECK(masked->state == SegmentState::kMasked);
    CHECK(masked->recall_id == policy.ids[k]);
    CHECK(context->Recall(policy.ids[k]).value() == outputs[k]);
  }
  // A policy asked for once more: the next live results' ids, each computed once.
  const uint64_t again = internal::RecallIdsComputed();
  REQUIRE(context->Compact(/*force=*/true).ok());
  CHECK(internal::RecallIdsComputed() - again == 6);
  REQUIRE(policy.ids.size() == 6);
  for (size_t k = 3; k < 6; ++k) CHECK(context->Recall(policy.ids[k]).value() == outputs[k]);
}

}  // namespace
}  // namespace strata
