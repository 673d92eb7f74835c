// The clear-tool-uses baseline on hand-computed histories: which results it clears, what they
// render as, and that tool calls stay paired.
#include <catch2/catch.hpp>
#include <deque>

#include "strata/builtin_policies.h"
#include "testing/context_testing.h"

namespace strata {
namespace {

using testing::MustBuild;
using testing::PairingError;

// A history of one 10-token user message and `turns` turns of a 10-token assistant call and its
// 100-token result (ids a<t>, r<t>; call_<t>), no per-message overhead, no tokenizer (placeholders
// count 4 bytes per token: "[cleared]" is 2 tokens).
struct History {
  std::deque<Segment> segments;
  CompactionInput input;

  explicit History(int turns, size_t limit) {
    Add("u", SegmentKind::kUser, 10);
    for (int t = 1; t <= turns; ++t) {
      Segment& call = Add("a" + std::to_string(t), SegmentKind::kToolCall, 10);
      call.tool_calls.push_back({"call_" + std::to_string(t), "bash", "{}"});
      Segment& result = Add("r" + std::to_string(t), SegmentKind::kToolResult, 100);
      result.tool_call_id = "call_" + std::to_string(t);
      result.name = "bash";
    }
    for (const Segment& s : segments) {
      input.history.push_back(&s);
      input.total_tokens += s.tokens;
    }
    input.history_tokens = input.total_tokens;
    input.limit_tokens = input.trigger_tokens = input.target_tokens = limit;
  }

  Segment& Add(const std::string& id, SegmentKind kind, size_t tokens) {
    Segment s;
    s.id = id;
    s.kind = kind;
    s.tokens = tokens;
    s.content = std::string(tokens * 4, 'x');
    segments.push_back(std::move(s));
    return segments.back();
  }
};

std::vector<std::string> Masked(const HistoryEdit& edit, const std::string& placeholder = "[cleared]") {
  std::vector<std::string> ids;
  for (const SegmentEdit& e : edit.edits) {
    CHECK(e.action == SegmentEdit::Action::kMask);
    CHECK(e.placeholder == placeholder);
    ids.push_back(e.segment_id);
  }
  return ids;
}

TEST_CASE("clear-tool-uses clears the oldest results until 0.7 of the trigger, keeping the last 3",
          "[compact]") {
  // 10 + 7 x (10 + 100) = 780 tokens against a budget of 700: the goal is floor(0.7 x 700) = 490,
  // so 290 tokens must go; each clear frees 100 - 2 = 98: r1 (98), r2 (196), r3 (294 >= 290).
  // r4 is old enough but not needed; r5, r6, r7 are the last three.
  History h(7, 700);
  auto policy = MakeClearToolUsesPolicy();
  CHECK(policy->Name() == "clear-tool-uses@1");
  REQUIRE(policy->ShouldCompact(h.input));
  StatusOr<HistoryEdit> edit = policy->Plan(h.input);
  REQUIRE(edit.ok());
  CHECK(Masked(*edit) == std::vector<std::string>{"r1", "r2", "r3"});

  // At the trigger exactly, nothing happens.
  h.input.total_tokens = 700;
  CHECK_FALSE(policy->ShouldCompact(h.input));
}

TEST_CASE("clear-tool-uses honours its trigger, keep, excluded tools and placeholder", "[compact]") {
  History h(7, 2000);  // 780 tokens, far below the budget
  ClearToolUsesOptions options;
  options.trigger_tokens = 500;  // goal floor(0.7 x 500) = 350: 430 tokens must go
  options.keep = 1;
  options.exclude_tools = {"read"};
  options.placeholder = "[old result removed]";  // 20 bytes: 5 tokens, each clear frees 95
  h.segments[2].name = "read";                   // r1: never cleared
  auto policy = MakeClearToolUsesPolicy(options);
  REQUIRE(policy->ShouldCompact(h.input));
  StatusOr<HistoryEdit> edit = policy->Plan(h.input);
  REQUIRE(edit.ok());
  // r2 95, r3 190, r4 285, r5 380, r6 475 >= 430; r7 is the last one.
  CHECK(Masked(*edit, "[old result removed]") ==
        std::vector<std::string>{"r2", "r3", "r4", "r5", "r6"});
}

TEST_CASE("clear-tool-uses slides when clearing cannot fit the limit", "[compact]") {
  // keep 7: nothing may be cleared, so the oldest turns are evicted until 780 - 700 = 80 tokens
  // are freed: the user message (10), then turn 1 (110): 120 >= 80.
  History h(7, 700);
  ClearToolUsesOptions options;
  options.keep = 7;
  auto policy = MakeClearToolUsesPolicy(options);
  StatusOr<HistoryEdit> edit = policy->Plan(h.input);
  REQUIRE(edit.ok());
  std::vector<std::string> evicted;
  for (const SegmentEdit& e : edit->edits) {
    CHECK(e.action == SegmentEdit::Action::kEvict);
    evicted.push_back(e.segment_id);
  }
  CHECK(evicted == std::vector<std::string>{"u", "a1", "r1"});
}

TEST_CASE("clear-tool-uses keeps a context within its budget and its tool calls paired",
          "[compact]") {
  auto policy = MakeClearToolUsesPolicy();
  ContextOptions options;
  Budget budget;
  budget.window = 3000;
  budget.reserve_output = budget.reserve_reasoning = budget.reserve_headroom = 0;
  options.budget = budget;
  options.compaction = policy.get();
  options.hygiene.deduplicate = false;
  auto context = testing::NewContext(options);
  REQUIRE(context->AppendUser("Fix the bug.").ok());
  size_t compactions = 0;
  for (int t = 1; t <= 40; ++t) {
    const std::string id = "call_" + std::to_string(t);
    REQUIRE(context->AppendAssistant({"step " + std::to_string(t), "", {{id, "bash", "{}"}}}).ok());
    REQUIRE(context->AppendToolResult({id, std::string(800, 'a' + t % 26), false}).ok());
    BuiltRequest request = MustBuild(*context);
    CHECK(request.input_tokens <= 3000);
    CHECK(PairingError(request.body).empty());
    if (request.compaction) {
      ++compactions;
      CHECK(request.compaction->policy == "clear-tool-uses@1");
      CHECK(request.compaction->tokens_after <= 2100 + 10);  // 0.7 x 3000, up to one result's rounding
    }
  }
  CHECK(compactions >= 2);
  // The last three results are intact, every cleared one reads "[cleared]".
  std::vector<Segment> results;
  for (const Segment& s : context->Segments()) {
    if (s.kind == SegmentKind::kToolResult) results.push_back(s);
  }
  REQUIRE(results.size() == 40);
  for (size_t i = 37; i < 40; ++i) CHECK(results[i].state == SegmentState::kLive);
  size_t cleared = 0;
  for (const Segment& s : results) {
    if (s.state != SegmentState::kMasked) continue;
    ++cleared;
    CHECK(s.content == "[cleared]");
  }
  CHECK(cleared > 0);
}

}  // namespace
}  // namespace strata
