// The observation-masking baseline on hand-computed histories: the last N results stay, older ones
// render as SWE-agent's placeholder, and tool calls stay paired.
#include <catch2/catch.hpp>

#include "strata/builtin_policies.h"
#include "testing/context_testing.h"

namespace strata {
namespace {

using testing::MustBuild;
using testing::PairingError;

// A context with a budget far above what the test appends: only the policy's own rule masks.
std::unique_ptr<Context> MaskingContext(CompactionPolicy* policy, int64_t window = 1000000) {
  ContextOptions options;
  Budget budget;
  budget.window = window;
  budget.reserve_output = budget.reserve_reasoning = budget.reserve_headroom = 0;
  options.budget = budget;
  options.compaction = policy;
  options.hygiene.deduplicate = false;
  return testing::NewContext(options);
}

// Turn t: a call and a result of `lines` (default t + 1) lines of about 60 bytes
// ("line 1 of output t: ....").
void Turn(Context& context, int t, int lines = 0) {
  const std::string id = "call_" + std::to_string(t);
  REQUIRE(context.AppendAssistant({"step " + std::to_string(t), "", {{id, "bash", "{}"}}}).ok());
  std::string output;
  for (int line = 1; line <= (lines > 0 ? lines : t + 1); ++line) {
    output += (line > 1 ? "\n" : "") + std::string("line ") + std::to_string(line) + " of output " +
              std::to_string(t) + ": " + std::string(40, '.');
  }
  REQUIRE(context.AppendToolResult({id, output, false}).ok());
}

std::vector<Segment> Results(const Context& context) {
  std::vector<Segment> results;
  for (const Segment& s : context.Segments()) {
    if (s.kind == SegmentKind::kToolResult) results.push_back(s);
  }
  return results;
}

TEST_CASE("observation-masking keeps the last 10 results and masks older ones with SWE-agent's placeholder",
          "[compact]") {
  auto policy = MakeObservationMaskingPolicy();
  CHECK(policy->Name() == "observation-masking@1(10)");
  auto context = MaskingContext(policy.get());
  REQUIRE(context->AppendUser("Fix the bug.").ok());
  for (int t = 1; t <= 10; ++t) {
    Turn(*context, t);
    CHECK_FALSE(MustBuild(*context).compaction);  // at most 10 results: nothing to mask
  }
  Turn(*context, 11);
  BuiltRequest eleventh = MustBuild(*context);
  REQUIRE(eleventh.compaction);
  CHECK(eleventh.compaction->masked == 1);
  Turn(*context, 12);
  BuiltRequest twelfth = MustBuild(*context);
  REQUIRE(twelfth.compaction);
  CHECK(twelfth.compaction->masked == 1);
  CHECK(PairingError(twelfth.body).empty());

  const std::vector<Segment> results = Results(*context);
  REQUIRE(results.size() == 12);
  // Results 1 and 2 had 2 and 3 lines.
  CHECK(results[0].state == SegmentState::kMasked);
  CHECK(results[0].content == "Old environment output: (2 lines omitted)");
  CHECK(results[1].state == SegmentState::kMasked);
  CHECK(results[1].content == "Old environment output: (3 lines omitted)");
  for (size_t i = 2; i < 12; ++i) CHECK(results[i].state == SegmentState::kLive);
  CHECK(results[0].policy == "observation-masking@1(10)");
  // The original is recallable.
  StatusOr<std::string> original = context->Recall(results[0].recall_id);
  REQUIRE(original.ok());
  CHECK(*original == "line 1 of output 1: " + std::string(40, '.') + "\nline 2 of output 1: " +
                         std::string(40, '.'));
}

TEST_CASE("observation-masking with a smaller window, then sliding above the limit", "[compact]") {
  auto policy = MakeObservationMaskingPolicy(2);
  auto context = MaskingContext(policy.get(), 400);
  REQUIRE(context->AppendUser("Fix the bug.").ok());
  for (int t = 1; t <= 30; ++t) {
    Turn(*context, t, 3);
    BuiltRequest request = MustBuild(*context);
    CHECK(request.input_tokens <= 400);
    CHECK(PairingError(request.body).empty());
  }
  const std::vector<Segment> results = Results(*context);
  REQUIRE(results.size() == 30);
  CHECK(results[29].state == SegmentState::kLive);
  CHECK(results[28].state == SegmentState::kLive);
  size_t evicted = 0;
  for (size_t i = 0; i < 28; ++i) {
    CHECK(results[i].state != SegmentState::kLive);
    evicted += results[i].state == SegmentState::kEvicted;
  }
  CHECK(evicted > 0);  // 30 turns of masked results still outgrow 400 tokens
}

TEST_CASE("the policy factory knows every baseline by name", "[compact]") {
  for (const char* name :
       {"strata", "none", "sliding", "last-n", "clear-tool-uses", "observation-masking"}) {
    CHECK(MakePolicyByName(name).ok());
  }
  StatusOr<std::unique_ptr<CompactionPolicy>> unknown = MakePolicyByName("clear");
  REQUIRE_FALSE(unknown.ok());
  CHECK_THAT(unknown.status().message(),
             Catch::Contains("clear-tool-uses") && Catch::Contains("observation-masking"));
}

}  // namespace
}  // namespace strata
