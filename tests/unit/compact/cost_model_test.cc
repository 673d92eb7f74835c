// The strata policy's cost model (policies.cc) against hand-computed cases: an edit worth applying,
// one not worth it, one worth it only as part of a batch; below the trigger it acts only when the
// expected saving pays for the re-prefill.
#include <catch2/catch.hpp>

#include "strata/compact.h"
#include "testing/context_testing.h"

namespace strata {
namespace {

// A hand-made history: every segment's `tokens` is set explicitly, the policy counts placeholders
// as bytes / 4 (no tokenizer), and no per-message overhead, so the figures below can be computed
// by hand.
struct History {
  std::vector<Segment> segments;
  int64_t turn = 0;

  void User(size_t tokens) {
    Segment s;
    s.id = "u" + std::to_string(segments.size());
    s.kind = SegmentKind::kUser;
    s.content = std::string(tokens * 4, 'u');
    s.tokens = tokens;
    segments.push_back(s);
  }
  // One turn: an assistant message of 20 tokens calling bash(command), and its result.
  void Turn(const std::string& command, size_t result_tokens) {
    ++turn;
    Segment a;
    a.id = "a" + std::to_string(turn);
    a.kind = SegmentKind::kToolCall;
    a.turn = turn;
    a.content = std::string(60, 'a');
    a.tool_calls = {{"c" + std::to_string(turn), "bash", "{\"command\":\"" + command + "\"}"}};
    a.tokens = 20;
    segments.push_back(a);
    Segment r;
    r.id = "r" + std::to_string(turn);
    r.kind = SegmentKind::kToolResult;
    r.turn = turn;
    r.name = "bash";
    r.tool_call_id = a.tool_calls[0].id;
    // Plain filler (no identifiers), so placeholders stay short: about 20 tokens.
    r.content = std::string(result_tokens * 4, '.');
    r.tokens = result_tokens;
    segments.push_back(r);
  }
  size_t Tokens() const {
    size_t total = 0;
    for (const Segment& s : segments) total += s.tokens;
    return total;
  }
  // Tokens of the history from segment `id` on: what a boundary there invalidates.
  size_t TokensFrom(const std::string& id) const {
    size_t total = 0;
    bool on = false;
    for (const Segment& s : segments) {
      on |= s.id == id;
      if (on) total += s.tokens;
    }
    return total;
  }
  CompactionInput Input() const {
    CompactionInput in;
    for (const Segment& s : segments) in.history.push_back(&s);
    in.history_tokens = in.total_tokens = Tokens();
    in.limit_tokens = 1000000;  // far away: the horizon is the remaining-turn estimate
    in.trigger_tokens = 950000;
    in.target_tokens = 700000;
    in.turn = turn;
    return in;
  }
};

StrataPolicyOptions HandOptions() {
  StrataPolicyOptions options;
  options.keep_turns = 1;
  options.keep_tool_results = 1;
  options.prior_remaining_turns = 10;
  options.prior_weight = 1;
  options.below_trigger_margin = 1;
  return options;
}

std::vector<std::string> Masked(const HistoryEdit& edit) {
  std::vector<std::string> ids;
  for (const SegmentEdit& e : edit.edits) {
    if (e.action == SegmentEdit::Action::kMask) ids.push_back(e.segment_id);
  }
  return ids;
}

TEST_CASE("cost model: a superseded 6K-token log early in a session is worth masking below the trigger",
          "[compact][cost]") {
  History h;
  h.User(100);
  h.Turn("pytest", 6000);  // r1: superseded by r10
  for (int t = 2; t <= 9; ++t) h.Turn("cat file" + std::to_string(t), 200);
  h.Turn("pytest", 300);  // r10, the latest result: protected
  auto policy = MakeStrataPolicy(HandOptions());
  const CompactionInput in = h.Input();
  REQUIRE(policy->ShouldCompact(in));  // below the trigger the cost model is asked
  auto edit = policy->Plan(in);
  REQUIRE(edit.ok());
  CHECK(Masked(*edit) == std::vector<std::string>{"r1"});
  // By hand: 10 turns so far, all calling tools, prior 10 with weight 1 -> (10 + 10) / 2 = 10
  // remaining turns; the trigger is far, so the horizon is 10 turns.
  const CompactionExplanation& x = edit->explanation;
  CHECK(x.mode == "below-trigger");
  CHECK(x.remaining_turns == Approx(10));
  CHECK(x.horizon_turns == Approx(10));
  // Removes 6,000 minus a placeholder of at most 40 tokens.
  CHECK(x.tokens_removed >= 5960);
  CHECK(x.tokens_removed < 6000);
  // Invalidates everything from r1 on: 6,000 + 8 x (20 + 200) + 20 + 300 = 8,080 tokens.
  CHECK(x.invalidated_tokens == 8080);
  CHECK(x.invalidated_tokens == h.TokensFrom("r1"));
  // Saving 0.1 x removed x 10 turns (about 6,000) against (1 - 0.1) x (8,080 - removed) (about 1,850).
  CHECK(x.expected_saving == Approx(0.1 * x.tokens_removed * 10));
  CHECK(x.invalidation_cost == Approx(0.9 * (8080.0 - x.tokens_removed)));
  CHECK(x.expected_saving > 5900);
  CHECK(x.invalidation_cost < 1900);
  CHECK_THAT(edit->reason, Catch::Contains("expected saving"));
}

TEST_CASE("cost model: a small superseded output before a long tail is not worth an invalidation",
          "[compact][cost]") {
  History h;
  h.User(100);
  h.Turn("pytest", 300);  // r1: superseded, but small
  for (int t = 2; t <= 9; ++t) h.Turn("cat file" + std::to_string(t), 2000);
  h.Turn("pytest", 300);
  auto policy = MakeStrataPolicy(HandOptions());
  const CompactionInput in = h.Input();
  // By hand: saving 0.1 x (300 - ~20) x 10 = ~280; cost 0.9 x (300 + 8 x 2,020 + 320 - ~280) =
  // ~14,800. Not applied.
  auto edit = policy->Plan(in);
  REQUIRE(edit.ok());
  CHECK(edit->empty());

  // Hysteresis only (cost_model = false): below the trigger nothing is even considered.
  StrataPolicyOptions legacy = HandOptions();
  legacy.cost_model = false;
  auto old_policy = MakeStrataPolicy(legacy);
  CHECK_FALSE(old_policy->ShouldCompact(in));
}

TEST_CASE("cost model: superseded outputs worth masking only together, as one batch", "[compact][cost]") {
  // Turns 1-3 produce 1,000-token outputs of commands A, B, C; turns 4-6 re-run them (600 tokens
  // each). 6 turns so far: (10 + 6) / 2 = 8 remaining turns.
  auto build = [](bool rerun_all) {
    History h;
    h.User(100);
    h.Turn("A", 1000);
    h.Turn("B", 1000);
    h.Turn("C", 1000);
    h.Turn(rerun_all ? "A" : "A2", 600);
    h.Turn(rerun_all ? "B" : "B2", 600);
    h.Turn("C", 600);  // the latest result: protected; supersedes C
    return h;
  };
  auto policy = MakeStrataPolicy(HandOptions());

  // Alone, masking r3 (C's first output) would save 0.1 x ~980 x 8 = ~784 and cost
  // 0.9 x (1,000 + 3 x 620 - ~980) = ~1,690: not applied.
  History alone = build(false);
  auto single = policy->Plan(alone.Input());
  REQUIRE(single.ok());
  CHECK(single->empty());

  // With A and B superseded too, the batch r1..r3 saves 0.1 x ~2,940 x 8 = ~2,350 and costs
  // 0.9 x (3,000 + 2 x 20 + 3 x 620 - ~2,940) = ~1,770: the one invalidation pays for all three.
  History batch = build(true);
  auto edit = policy->Plan(batch.Input());
  REQUIRE(edit.ok());
  CHECK(Masked(*edit) == std::vector<std::string>{"r1", "r2", "r3"});
  const CompactionExplanation& x = edit->explanation;
  CHECK(x.remaining_turns == Approx(8));
  CHECK(x.invalidated_tokens == batch.TokensFrom("r1"));
  CHECK(x.invalidated_tokens == 3000 + 2 * 20 + 3 * 620);
  CHECK(x.expected_saving == Approx(0.1 * x.tokens_removed * 8));
  CHECK(x.invalidation_cost == Approx(0.9 * (4900.0 - x.tokens_removed)));
  CHECK(x.expected_saving > x.invalidation_cost);
  // Each member alone would not pay: its own saving is below the cost of a boundary at it.
  size_t listed = 0;
  for (const CompactionCandidate& c : x.candidates) {
    if (!c.chosen) continue;
    ++listed;
    CHECK(c.value == "superseded");
    CHECK(c.expected_saving < c.invalidation_cost);
  }
  CHECK(listed == 3);
}

TEST_CASE("cost model: prices and the prior are knobs", "[compact][cost]") {
  History h;
  h.User(100);
  h.Turn("pytest", 6000);
  for (int t = 2; t <= 9; ++t) h.Turn("cat file" + std::to_string(t), 200);
  h.Turn("pytest", 300);
  // A cached token as dear as an uncached one: re-prefilling costs nothing extra, any saving pays.
  StrataPolicyOptions flat = HandOptions();
  flat.cached_price = 1.0;
  auto edit = MakeStrataPolicy(flat)->Plan(h.Input());
  REQUIRE(edit.ok());
  CHECK(edit->explanation.invalidation_cost == Approx(0));
  // A session expected to end now (prior 0 with a heavy weight): the saving no longer pays.
  StrataPolicyOptions ending = HandOptions();
  ending.prior_remaining_turns = 0;
  ending.prior_weight = 1000;
  auto none = MakeStrataPolicy(ending)->Plan(h.Input());
  REQUIRE(none.ok());
  CHECK(none->empty());
}

TEST_CASE("below the trigger, Build compacts only when it pays, and says why", "[compact][cost]") {
  auto policy = MakeStrataPolicy(HandOptions());
  ContextOptions options;
  options.agent.id = "cost";
  options.message_overhead_tokens = 0;
  Budget budget;
  budget.window = 100000;
  budget.reserve_output = budget.reserve_reasoning = budget.reserve_headroom = 0;
  budget.trigger = BudgetLimit::Fraction(0.95);
  budget.target = BudgetLimit::Fraction(0.7);
  options.budget = budget;
  options.compaction = policy.get();
  options.hygiene.deduplicate = false;
  options.hygiene.fold_error_logs = false;
  auto context = testing::NewContext(options);
  REQUIRE(context->AppendUser("Fix the failing test.").ok());
  auto turn = [&](int t, const std::string& command, size_t bytes) {
    const std::string id = "c" + std::to_string(t);
    REQUIRE(context->AppendAssistant({"run " + command, "", {{id, "bash", "{\"command\":\"" + command + "\"}"}}}).ok());
    REQUIRE(context->AppendToolResult({id, std::string(bytes, '.'), false}).ok());
  };
  turn(1, "pytest", 24000);  // ~6,000 tokens, superseded at turn 10
  size_t compactions = 0;
  for (int t = 2; t <= 9; ++t) {
    turn(t, "cat f" + std::to_string(t), 800);
    auto request = context->Build();
    REQUIRE(request.ok());
    compactions += request->compaction.has_value();
  }
  CHECK(compactions == 0);  // nothing superseded yet: nothing pays
  turn(10, "pytest", 1200);
  auto request = context->Build();
  REQUIRE(request.ok());
  REQUIRE(request->compaction);
  CHECK(request->input_tokens < static_cast<size_t>(0.95 * 100000));  // below the trigger
  CHECK(request->compaction->masked == 1);
  CHECK(request->compaction->tokens_after < request->compaction->tokens_before);
  CHECK(request->compaction->explanation.expected_saving > request->compaction->explanation.invalidation_cost);
  CHECK_THAT(request->compaction->reason, Catch::Contains("below the trigger"));
  // Once done, the next build has nothing left that pays.
  turn(11, "cat f11", 800);
  auto next = context->Build();
  REQUIRE(next.ok());
  CHECK_FALSE(next->compaction);
}

}  // namespace
}  // namespace strata
