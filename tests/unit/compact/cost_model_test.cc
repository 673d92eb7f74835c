// The strata policy's cost model (policies.cc) against hand-computed cases: an edit worth applying,
// one not worth it, one worth it only as part of a batch; below the trigger it acts only when the
// expected saving pays for the re-prefill.
#include <algorithm>

#include <catch2/catch.hpp>

#include "strata/builtin_policies.h"
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
  // One turn: an assistant message of 20 tokens calling bash(command), and its result. `said` and
  // `output`, when given, replace the assistant's text and the result's filler.
  void Turn(const std::string& command, size_t result_tokens, const std::string& said = "",
            const std::string& output = "") {
    ++turn;
    Segment a;
    a.id = "a" + std::to_string(turn);
    a.kind = SegmentKind::kToolCall;
    a.turn = turn;
    a.content = said.empty() ? std::string(60, 'a') : said;
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
    r.content = output.empty() ? std::string(result_tokens * 4, '.') : output;
    r.tokens = result_tokens;
    segments.push_back(r);
  }
  size_t Tokens() const {
    size_t total = 0;
    for (const Segment& s : segments) total += s.tokens;
    return total;
  }
  // Tokens of the history from segment `id` on that the server has cached (every turn before the
  // current one): what a boundary there makes it prefill again.
  size_t TokensFrom(const std::string& id) const {
    size_t total = 0;
    bool on = false;
    for (const Segment& s : segments) {
      on |= s.id == id;
      if (on && s.turn < turn) total += s.tokens;
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
  options.mask_after_use = false;  // the cases below are about superseded outputs
  return options;
}

std::vector<std::string> Masked(const HistoryEdit& edit) {
  std::vector<std::string> ids;
  for (const SegmentEdit& e : edit.edits) {
    if (e.action == SegmentEdit::Action::kMask) ids.push_back(e.segment_id);
  }
  return ids;
}

// The history index of each listed candidate's segment, which must be in history order, and the
// number listed.
size_t CheckListedInHistoryOrder(const CompactionInput& in, const CompactionExplanation& x) {
  std::vector<size_t> at;
  for (const CompactionCandidate& c : x.candidates) {
    size_t i = 0;
    while (i < in.history.size() && in.history[i]->id != c.segment_id) ++i;
    INFO("candidate " << c.segment_id << " (" << c.action << ")");
    CHECK(i < in.history.size());
    at.push_back(i);
  }
  CHECK(std::is_sorted(at.begin(), at.end()));
  return at.size();
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
  // Invalidates what the server cached from r1 on: 6,000 + 8 x (20 + 200) = 7,760 tokens (turn 10,
  // a10 and r10, was never sent: it is prefilled anyway).
  CHECK(x.invalidated_tokens == 7760);
  CHECK(x.invalidated_tokens == h.TokensFrom("r1"));
  // Saving 0.1 x removed x 10 turns (about 6,000) against (1 - 0.1) x (7,760 - removed) (about 1,600).
  CHECK(x.expected_saving == Approx(0.1 * x.tokens_removed * 10));
  CHECK(x.invalidation_cost == Approx(0.9 * (7760.0 - x.tokens_removed)));
  CHECK(x.expected_saving > 5900);
  CHECK(x.invalidation_cost < 1650);
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
  // By hand: saving 0.1 x (300 - ~20) x 10 = ~280; cost 0.9 x (300 + 8 x 2,020 - ~280) = ~14,560
  // (turn 10 was never sent). Not applied.
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
  // 0.9 x (1,000 + 2 x 620 - ~980) = ~1,130 (turns 4 and 5; turn 6 was never sent): not applied.
  History alone = build(false);
  auto single = policy->Plan(alone.Input());
  REQUIRE(single.ok());
  CHECK(single->empty());

  // With A and B superseded too, the batch r1..r3 saves 0.1 x ~2,940 x 8 = ~2,350 and costs
  // 0.9 x (3,000 + 2 x 20 + 2 x 620 - ~2,940) = ~1,210: the one invalidation pays for all three.
  History batch = build(true);
  const CompactionInput batch_input = batch.Input();
  auto edit = policy->Plan(batch_input);
  REQUIRE(edit.ok());
  CHECK(Masked(*edit) == std::vector<std::string>{"r1", "r2", "r3"});
  const CompactionExplanation& x = edit->explanation;
  // The candidates are listed in history order.
  CHECK(CheckListedInHistoryOrder(batch_input, x) == 3);
  CHECK(x.remaining_turns == Approx(8));
  CHECK(x.invalidated_tokens == batch.TokensFrom("r1"));
  CHECK(x.invalidated_tokens == 3000 + 2 * 20 + 2 * 620);
  CHECK(x.expected_saving == Approx(0.1 * x.tokens_removed * 8));
  CHECK(x.invalidation_cost == Approx(0.9 * (4280.0 - x.tokens_removed)));
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

// An error log is stale once a later result of the same command succeeded: masking it loses
// nothing. Repeated by a later failure it is only superseded (the later one says as much).
TEST_CASE(
    "an error log a later success of its command supersedes is stale and one a later failure "
    "repeats is not",
    "[compact][cost]") {
  for (bool later_fails : {false, true}) {
    INFO("later fails " << later_fails);
    History h;
    h.User(50);
    h.Turn("pytest", 3000);
    h.segments.back().kind = SegmentKind::kErrorLog;
    const std::string log = h.segments.back().id;
    h.Turn("ls", 3000);
    h.Turn("pytest", 100);
    if (later_fails) h.segments.back().kind = SegmentKind::kErrorLog;
    h.Turn("cat notes.txt", 100);
    h.Turn("echo done", 100);
    CompactionInput in = h.Input();
    in.limit_tokens = in.total_tokens + 1000;  // above the trigger, below the limit
    in.trigger_tokens = in.total_tokens - 1000;
    in.target_tokens = in.total_tokens - 2000;
    auto edit = MakeStrataPolicy(HandOptions())->Plan(in);
    REQUIRE(edit.ok());
    const std::vector<CompactionCandidate>& listed = edit->explanation.candidates;
    auto it = std::find_if(listed.begin(), listed.end(),
                           [&](const CompactionCandidate& c) { return c.segment_id == log; });
    REQUIRE(it != listed.end());
    CHECK(it->value == (later_fails ? "superseded" : "stale"));
  }
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

StrataPolicyOptions AfterUseOptions() {
  StrataPolicyOptions options = HandOptions();
  options.keep_turns = 2;         // the defaults: mask_after_use narrows them below the trigger
  options.keep_tool_results = 3;
  options.mask_after_use = true;
  return options;
}

TEST_CASE("mask after use: a result seen once and not used is worth masking at the next request",
          "[compact][cost]") {
  History h;
  h.User(100);
  // r1 answers `cat src/app/models.py`; the agent's next message (a2) mentions nothing of it.
  h.Turn("cat src/app/models.py", 800, "",
         "class UserModel:\n    pass\n" + std::string(3140, '.'));
  h.Turn("ls", 200);  // turn 2, the current one: a2 and r2 were never sent
  const CompactionInput in = h.Input();
  auto edit = MakeStrataPolicy(AfterUseOptions())->Plan(in);
  REQUIRE(edit.ok());
  CHECK(Masked(*edit) == std::vector<std::string>{"r1"});
  // By hand: 2 turns so far, prior 10 with weight 1 -> (10 + 2) / 2 = 6 remaining turns. r1 is the
  // last thing the server cached: a boundary there re-prefills only r1 itself (800 tokens), and
  // masking removes all but its placeholder: cost 0.9 x (800 - removed) = 0.9 x placeholder.
  const CompactionExplanation& x = edit->explanation;
  CHECK(x.mode == "below-trigger");
  CHECK(x.remaining_turns == Approx(6));
  CHECK(x.invalidated_tokens == 800);
  CHECK(x.invalidated_tokens == h.TokensFrom("r1"));
  CHECK(x.tokens_removed > 700);
  CHECK(x.expected_saving == Approx(0.1 * x.tokens_removed * 6));
  CHECK(x.invalidation_cost == Approx(0.9 * (800.0 - x.tokens_removed)));
  CHECK(x.invalidation_cost < 90);
  CHECK(x.expected_saving > 420);
  for (const CompactionCandidate& c : x.candidates) {
    if (c.segment_id == "r1") CHECK(c.value == "unused");
  }
  // The placeholder keeps the names the output defined.
  CHECK_THAT(edit->edits[0].placeholder, Catch::Contains("UserModel"));

  // Off: the same history is left alone below the trigger (r1 is neither stale nor superseded).
  StrataPolicyOptions off = AfterUseOptions();
  off.mask_after_use = false;
  auto none = MakeStrataPolicy(off)->Plan(in);
  REQUIRE(none.ok());
  CHECK(none->empty());
}

TEST_CASE("mask after use: a result the agent mentions after seeing it stays", "[compact][cost]") {
  History h;
  h.User(100);
  h.Turn("cat src/app/models.py", 800, "",
         "class UserModel:\n    pass\n" + std::string(3140, '.'));
  h.Turn("sed -i s/pass/id=1/ src/app/models.py", 200, "UserModel lacks an id; edit src/app/models.py");
  auto edit = MakeStrataPolicy(AfterUseOptions())->Plan(h.Input());
  REQUIRE(edit.ok());
  CHECK(edit->empty());
}

TEST_CASE("mask after use: a small unused result before a long cached tail is not worth it",
          "[compact][cost]") {
  History h;
  h.User(100);
  h.Turn("ls", 100);  // r1: unused, small
  h.Turn("cat src/app/models.py", 6000, "", "class UserModel:\n" + std::string(23940, '.'));
  h.Turn("grep id src/app/models.py", 200, "UserModel in src/app/models.py needs an id");  // uses r2
  // By hand: 3 turns, (10 + 3) / 2 = 6.5 remaining. Masking r1 saves 0.1 x (100 - ~20) x 6.5 = ~52;
  // a boundary at r1 re-prefills r1, a2 and r2: 0.9 x (100 + 20 + 6,000 - ~80) = ~5,440. r2 is in
  // use, so it is not a candidate. Nothing pays.
  auto edit = MakeStrataPolicy(AfterUseOptions())->Plan(h.Input());
  REQUIRE(edit.ok());
  CHECK(edit->empty());
}

TEST_CASE("mask after use in Build: each unused result is masked at the next request, the cached prefix kept",
          "[compact][cost]") {
  StrataPolicyOptions policy_options;  // the defaults
  REQUIRE(policy_options.mask_after_use);
  auto policy = MakeStrataPolicy(policy_options);
  ContextOptions options;
  options.agent.id = "after-use";
  options.message_overhead_tokens = 0;
  Budget budget;
  budget.window = 100000;
  budget.reserve_output = budget.reserve_reasoning = budget.reserve_headroom = 0;
  options.budget = budget;
  options.compaction = policy.get();
  options.hygiene.deduplicate = false;
  options.hygiene.fold_error_logs = false;
  auto context = testing::NewContext(options);
  REQUIRE(context->AppendUser("Fix the failing test.").ok());
  auto turn = [&](int t, const std::string& said, const std::string& command, const std::string& output) {
    const std::string id = "c" + std::to_string(t);
    REQUIRE(context->AppendAssistant({said, "", {{id, "bash", "{\"command\":\"" + command + "\"}"}}}).ok());
    REQUIRE(context->AppendToolResult({id, output, false}).ok());
  };
  turn(1, "look around", "ls -R", std::string(4000, '.'));
  auto first = context->Build();
  REQUIRE(first.ok());
  CHECK_FALSE(first->compaction);  // nothing seen yet
  turn(2, "read the model", "cat src/app/models.py", "class UserModel:\n" + std::string(4000, '.'));
  auto second = context->Build();
  REQUIRE(second.ok());
  REQUIRE(second->compaction);  // the listing was seen and not used: masked
  CHECK(second->compaction->masked == 1);
  CHECK(second->compaction->explanation.invalidated_tokens <= 1000);  // the listing only
  CHECK_THAT(second->compaction->reason, Catch::Contains("below the trigger"));
  // The agent works on the model it read: that result stays.
  turn(3, "UserModel lacks an id; edit src/app/models.py", "sed -i s/x/y/ src/app/models.py", "done");
  auto third = context->Build();
  REQUIRE(third.ok());
  CHECK_FALSE(third->compaction);
  bool model_live = false;
  for (const Segment& s : context->Segments()) {
    if (s.kind == SegmentKind::kToolResult && s.content.rfind("class UserModel", 0) == 0) {
      model_live = s.state == SegmentState::kLive;
    }
  }
  CHECK(model_live);
}

// A result of `count` distinct names (name_0 ... name_{count-1}), padded with filler to `tokens`.
std::string ManyNames(size_t count, size_t tokens) {
  std::string text;
  for (size_t k = 0; k < count; ++k) text += "name_" + std::to_string(k) + "\n";
  return text + std::string(tokens * 4 - text.size(), '.');
}

TEST_CASE("mask after use beyond the placeholder: an unused result with more names than it lists",
          "[compact][cost]") {
  History h;
  h.User(100);
  h.Turn("cat src/big.py", 2000, "", ManyNames(100, 2000));  // 100 names; the placeholder lists 64
  h.Turn("ls", 200);  // turn 2, the current one
  const CompactionInput in = h.Input();
  // Off (the default): masking r1 would drop 36 of its names, so it stays below the trigger.
  StrataPolicyOptions off = AfterUseOptions();
  REQUIRE_FALSE(off.mask_unused_beyond_placeholder);
  auto kept = MakeStrataPolicy(off)->Plan(in);
  REQUIRE(kept.ok());
  CHECK(kept->empty());
  // On: masked at the next request, its placeholder listing the first 64 names by rank (all appear
  // once, so in order of appearance).
  StrataPolicyOptions on = AfterUseOptions();
  on.mask_unused_beyond_placeholder = true;
  auto edit = MakeStrataPolicy(on)->Plan(in);
  REQUIRE(edit.ok());
  REQUIRE(Masked(*edit) == std::vector<std::string>{"r1"});
  const std::string& placeholder = edit->edits[0].placeholder;
  CHECK_THAT(placeholder, Catch::Contains("name_0") && Catch::Contains("name_63"));
  CHECK_THAT(placeholder, !Catch::Contains("name_64") && !Catch::Contains("name_99"));
  // By hand: (10 + 2) / 2 = 6 remaining turns; a boundary at r1 re-prefills r1 only (2,000
  // tokens): saving 0.1 x removed x 6 against 0.9 x (2,000 - removed), the placeholder's tokens.
  const CompactionExplanation& x = edit->explanation;
  CHECK(x.remaining_turns == Approx(6));
  CHECK(x.invalidated_tokens == 2000);
  CHECK(x.expected_saving == Approx(0.1 * x.tokens_removed * 6));
  CHECK(x.invalidation_cost == Approx(0.9 * (2000.0 - x.tokens_removed)));
  CHECK(x.expected_saving > x.invalidation_cost);
}

TEST_CASE("mask at break: a compaction above the trigger also masks the unused results it re-prefills",
          "[compact][cost]") {
  History h;
  h.User(100);
  h.Turn("make", 3000);  // r1: filler, unused
  h.Turn("ls a", 500);   // r2: unused
  // r3 defines Gamma in src/g.py, and the agent's next message uses both: in use.
  h.Turn("cat src/g.py", 500, "", "class Gamma:\n    pass\n# src/g.py\n" + std::string(1964, '.'));
  h.Turn("ls b", 500, "Gamma in src/g.py needs a field");  // r4: unused
  h.Turn("ls c", 200);  // r5: the latest result, turn 5 the current one: protected
  CompactionInput in = h.Input();
  // 100 + 5 x 20 + 3,000 + 3 x 500 + 200 = 4,900 tokens; above the trigger (4,000), down to the
  // target (2,400): need 2,500, which only a boundary at r1 reaches (r2 to r4 free under 1,500).
  REQUIRE(in.total_tokens == 4900);
  in.limit_tokens = 5000;
  in.trigger_tokens = 4000;
  in.target_tokens = 2400;
  auto off = MakeStrataPolicy(HandOptions())->Plan(in);
  REQUIRE(off.ok());
  CHECK(Masked(*off) == std::vector<std::string>{"r1"});
  StrataPolicyOptions on_options = HandOptions();
  on_options.mask_unused_at_break = true;
  auto on = MakeStrataPolicy(on_options)->Plan(in);
  REQUIRE(on.ok());
  // The same boundary, so the same re-prefill (r1 to r4 and a2 to a4: 3,000 + 3 x 500 + 3 x 20 =
  // 4,560 tokens), and r2 and r4 (unused, no names to lose) masked with it; r3, in use, stays.
  CHECK(Masked(*on) == std::vector<std::string>{"r1", "r2", "r4"});
  CHECK(off->explanation.invalidated_tokens == 4560);
  CHECK(on->explanation.invalidated_tokens == 4560);
  CHECK(on->explanation.boundary_segment_id == "r1");
  // Each of r2 and r4 removes 500 tokens minus its placeholder (at most 40).
  CHECK(on->explanation.tokens_removed >= off->explanation.tokens_removed + 2 * 460);
}

// Eight turns of 500-token assistant messages with 10-token results (too short to mask): masking
// cannot free anything, so the oldest turns are summarized.
History LongAssistantTurns() {
  History h;
  h.User(100);
  for (int t = 1; t <= 8; ++t) h.Turn("step" + std::to_string(t), 10, std::string(2000, 'a'));
  for (Segment& s : h.segments) {
    if (s.kind == SegmentKind::kToolCall) s.tokens = 500;
  }
  return h;
}

TEST_CASE("summary depth: the summarized span reaches below the target, the summary keeps its size",
          "[compact][cost]") {
  const History h = LongAssistantTurns();
  CompactionInput in = h.Input();
  // 100 + 8 x 510 = 4,180 tokens; above the trigger (4,000), down to the target (3,000): need 1,180.
  // A summary is estimated at its limit, a quarter of the target: 750 tokens.
  REQUIRE(in.total_tokens == 4180);
  in.limit_tokens = 5000;
  in.trigger_tokens = 4000;
  in.target_tokens = 3000;
  auto span_of = [&](double depth) {
    StrataPolicyOptions options = HandOptions();
    options.summary_depth = depth;
    auto edit = MakeStrataPolicy(options)->Plan(in);
    REQUIRE(edit.ok());
    REQUIRE(edit->summaries.size() == 1);
    CHECK(edit->edits.empty());
    CHECK(in.Count(edit->summaries[0].content) <= 750);
    return edit->summaries[0].replaces;
  };
  // Depth 1 (the default): k turns free 510 x k - 750 >= 1,180, so k = 4: a1 to r4.
  const std::vector<std::string> shallow = span_of(1);
  CHECK(shallow.size() == 8);
  CHECK(shallow.front() == "a1");
  CHECK(shallow.back() == "r4");
  // Depth 0.5: the span must also free half the target, 510 x k - 750 >= 1,180 + 1,500, so k = 7:
  // a1 to r7 (turn 8, the current one, is protected).
  const std::vector<std::string> deep = span_of(0.5);
  CHECK(deep.size() == 14);
  CHECK(deep.front() == "a1");
  CHECK(deep.back() == "r7");
}

// A summarizer that says what its (imagined) requests cost, as MakeLlmSummarizer does.
class PricedSummarizer final : public Summarizer {
 public:
  std::string Name() const override { return "priced@1"; }
  StatusOr<std::string> Summarize(const std::vector<const Segment*>&, size_t, const Tokenizer&) override {
    return std::string("[summary] steps 1 to 4");
  }
  StatusOr<SummaryResult> SummarizeFor(const std::vector<const Segment*>& span, size_t max_tokens,
                                       const Tokenizer& tokenizer, const SummaryRequestContext*) override {
    SummaryResult result;
    STRATA_ASSIGN_OR_RETURN(result.text, Summarize(span, max_tokens, tokenizer));
    result.request = "cache-keeping";
    result.request_input_tokens = 5000;
    result.request_cached_tokens = 4000;
    result.request_output_tokens = 200;
    return result;
  }
};

TEST_CASE("cost model: a summary's own requests are priced, their cached share at the cached price",
          "[compact][cost]") {
  const History h = LongAssistantTurns();
  CompactionInput in = h.Input();
  in.limit_tokens = 5000;
  in.trigger_tokens = 4000;
  in.target_tokens = 3000;
  PricedSummarizer summarizer;
  StrataPolicyOptions options = HandOptions();
  options.summarizer = &summarizer;
  options.uncached_price = 1.0;
  options.cached_price = 0.1;
  auto edit = MakeStrataPolicy(options)->Plan(in);
  REQUIRE(edit.ok());
  REQUIRE(edit->summaries.size() == 1);
  // 1,000 prompt tokens not predicted cached at 1, 4,000 cached at 0.1: 1,400.
  const CompactionExplanation& x = edit->explanation;
  CHECK(x.request_cost == Approx(1400));
  size_t summarize = 0;
  for (const CompactionCandidate& c : x.candidates) {
    if (c.action != "summarize") {
      CHECK(c.request_cost == 0);
      continue;
    }
    ++summarize;
    CHECK(c.request_cost == Approx(1400));
  }
  CHECK(summarize == 1);
  CHECK(CheckListedInHistoryOrder(in, x) == 1);
  CompactionReport report;
  report.explanation = x;
  const std::string text = ExplainCompaction(report);
  CHECK_THAT(text, Catch::Contains("summary requests 1,400)"));
  CHECK_THAT(text, Catch::Contains("its summary requests cost 1,400"));

  SECTION("a summarizer that sends no request costs nothing more") {
    options.summarizer = nullptr;  // the extractive one
    auto extractive = MakeStrataPolicy(options)->Plan(in);
    REQUIRE(extractive.ok());
    REQUIRE(extractive->summaries.size() == 1);
    CHECK(extractive->explanation.request_cost == 0);
    report.explanation = extractive->explanation;
    CHECK_THAT(ExplainCompaction(report), !Catch::Contains("summary requests"));
  }
}

}  // namespace
}  // namespace strata
