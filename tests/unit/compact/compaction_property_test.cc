// Randomized (seeded) long operation sequences with compactions, checking the invariants I1-I7 of
// docs/compaction.md after every step, for the strata policy and the baselines.
#include <catch2/catch.hpp>
#include <random>

#include "strata/builtin_policies.h"
#include "testing/context_testing.h"

namespace strata {
namespace {

using testing::PairingError;

struct Harness {
  std::unique_ptr<CompactionPolicy> policy;
  std::unique_ptr<Context> context;
  std::unique_ptr<Context> twin;  // same operations: must render the same bytes (I6)
};

Harness Make(const std::string& policy_name, int64_t limit, uint32_t seed) {
  Harness h;
  if (policy_name == "strata-eager") {
    // The cost model tuned to act below the trigger often (long sessions, dear cached tokens), so
    // that its below-trigger edits meet the invariants too.
    StrataPolicyOptions eager;
    eager.prior_remaining_turns = 200;
    eager.cached_price = 0.5;
    h.policy = MakeStrataPolicy(eager);
  } else {
    h.policy = std::move(MakePolicyByName(policy_name)).value();
  }
  ContextOptions options;
  options.agent.id = "property";
  Budget budget;
  budget.window = limit;
  budget.reserve_output = budget.reserve_reasoning = budget.reserve_headroom = 0;
  const bool strata = policy_name.rfind("strata", 0) == 0;
  budget.trigger = BudgetLimit::Fraction(strata ? 0.85 : 1.0);
  budget.target = BudgetLimit::Fraction(strata ? 0.5 : 1.0);
  options.budget = budget;
  options.compaction = h.policy.get();
  options.hygiene.max_segment_tokens = 64 + seed % 300;
  h.context = testing::NewContext(options);
  h.twin = testing::NewContext(options);
  return h;
}

std::string Text(std::mt19937& rng, uint64_t marker) {
  static const char* words[] = {"alpha", "beta_gamma", "src/pkg/mod.py", "ValueError:", "é", "日本", "\"q\"",
                                "\\", "\n", "line\n", "CamelCase", "x"};
  std::string out = "#m" + std::to_string(marker) + "# ";
  const int n = 5 + static_cast<int>(rng() % 300);
  for (int i = 0; i < n; ++i) out += std::string(words[rng() % 12]) + " ";
  return out;
}

TEST_CASE("random sequences with compactions keep invariants I1-I7", "[compact][property]") {
  size_t total_below_trigger = 0;
  for (const std::string policy : {"strata", "strata-eager", "sliding", "last-n"}) {
    for (uint32_t seed = 1; seed <= 12; ++seed) {
      CAPTURE(policy, seed);
      std::mt19937 rng(seed);
      const int64_t limit = 1500 + static_cast<int64_t>(rng() % 4000);
      Harness h = Make(policy, limit, seed);
      uint64_t marker = 0;
      auto both = [&](auto&& op) {
        Status a = op(*h.context);
        Status b = op(*h.twin);
        REQUIRE(a == b);
        return a;
      };
      REQUIRE(both([&](Context& c) { return c.SetSystemPrompt("You are an agent. Pinned."); }).ok());
      const std::string task = Text(rng, ++marker);
      std::string task_id;
      REQUIRE(both([&](Context& c) {
                auto id = c.AppendUser(task);
                if (id.ok()) task_id = *id;
                return id.status();
              }).ok());
      // Pin the task: I2 says it is never altered.
      REQUIRE(both([&](Context& c) { return c.SetPinned(task_id, true); }).ok());

      std::string previous;
      size_t previous_end = 0;
      size_t compactions = 0;
      size_t below_trigger = 0;  // the strata policy's cost model acting below the trigger
      for (int step = 0; step < 80; ++step) {
        CAPTURE(step);
        const int roll = static_cast<int>(rng() % 10);
        if (roll < 7) {
          const int calls = 1 + static_cast<int>(rng() % 2);
          AssistantMessage message{Text(rng, ++marker), "", {}};
          for (int k = 0; k < calls; ++k) {
            message.tool_calls.push_back({"c" + std::to_string(step) + "_" + std::to_string(k), "bash",
                                          "{\"command\": \"cmd " + std::to_string(rng() % 7) + "\"}"});
          }
          REQUIRE(both([&](Context& c) { return c.AppendAssistant(message).status(); }).ok());
          for (const ToolCall& call : message.tool_calls) {
            const std::string output = Text(rng, ++marker);
            REQUIRE(both([&](Context& c) { return c.AppendToolResult({call.id, output, false}).status(); }).ok());
          }
        } else {
          const std::string text = Text(rng, ++marker);
          REQUIRE(both([&](Context& c) { return c.AppendUser(text).status(); }).ok());
        }

        const std::vector<Segment> before_segments = h.context->Segments();
        auto request = h.context->Build();
        auto twin_request = h.twin->Build();
        REQUIRE(request.ok() == twin_request.ok());
        if (!request.ok()) {
          // Only when what cannot be compacted does not fit (I1's error path).
          CHECK(request.status().code() == StatusCode::kResourceExhausted);
          continue;
        }
        CHECK(request->body == twin_request->body);                        // I6
        CHECK(request->input_tokens <= static_cast<size_t>(limit));          // I1
        CHECK(PairingError(request->body).empty());                        // I4
        for (const Segment& s : h.context->Segments()) {
          if (s.pinned) CHECK(s.state == SegmentState::kLive);             // I2
          if (s.id == task_id) CHECK(s.content == task);
          if (s.state != SegmentState::kLive || s.hygiene != HygieneAction::kNone) {
            CHECK(h.context->Recall(s.recall_id).ok());                    // I5
          }
        }
        if (!previous.empty()) {
          if (!request->compaction) {
            CHECK(request->body.compare(0, previous_end, previous, 0, previous_end) == 0);  // I7
          } else {
            ++compactions;
            // Tokens never go up; below the trigger only when the saving pays for the re-prefill.
            CHECK(request->compaction->tokens_after < request->compaction->tokens_before);
            if (request->compaction->explanation.mode == "below-trigger") {
              ++below_trigger;
              CHECK(request->compaction->explanation.expected_saving >
                    request->compaction->explanation.invalidation_cost);
            }
            // I3: the previous request's bytes up to the boundary message are unchanged.
            const auto boundary = std::find_if(before_segments.begin(), before_segments.end(), [&](const Segment& s) {
              return s.id == request->compaction->boundary_segment_id;
            });
            REQUIRE(boundary != before_segments.end());
            const std::string tag = boundary->content.substr(0, boundary->content.find(' '));
            size_t at = previous.find(tag);
            if (at != std::string::npos) {
              const size_t message_start = previous.rfind("{\"role\":", at);
              CHECK(request->body.compare(0, message_start, previous, 0, message_start) == 0);
            }
          }
        }
        previous = request->body;
        previous_end = request->history_end_bytes;
      }
      CHECK(compactions > 0);
      total_below_trigger += below_trigger;
    }
  }
  // The sequences repeat commands (superseded outputs), so the cost model acts below the trigger.
  CHECK(total_below_trigger > 0);
}

}  // namespace
}  // namespace strata
