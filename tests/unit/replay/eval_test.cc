#include "strata/replay/eval.h"

#include <catch2/catch.hpp>
#include <memory>
#include <string>
#include <vector>

#include "strata/replay/trace.h"
#include "strata/tokenizer.h"
#include "testing/traces.h"

namespace strata {
namespace {

std::vector<TraceMessage> ReadTestTrace(const std::string& relative) {
  StatusOr<std::vector<TraceMessage>> messages = ReadTrace(testing::TestTracePath(relative));
  REQUIRE(messages.ok());
  return std::move(messages).value();
}

constexpr char kTrace[] = "mini-swe-agent/astropy__astropy-14182.jsonl";

TEST_CASE("EvaluateTrace refuses options it cannot run with, saying what is wrong", "[tools][eval]") {
  const std::vector<TraceMessage> messages = ReadTestTrace(kTrace);
  std::unique_ptr<Tokenizer> tokenizer = MakeEstimateTokenizer();
  EvalOptions options;
  StatusOr<EvalResult> no_tokenizer = EvaluateTrace(messages, options);
  REQUIRE_FALSE(no_tokenizer.ok());
  CHECK(no_tokenizer.status().code() == StatusCode::kInvalidArgument);
  CHECK_THAT(no_tokenizer.status().message(), Catch::Contains("tokenizer is required"));

  options.tokenizer = tokenizer.get();
  options.policy = "lru";
  StatusOr<EvalResult> unknown = EvaluateTrace(messages, options);
  REQUIRE_FALSE(unknown.ok());
  CHECK(unknown.status().code() == StatusCode::kInvalidArgument);
  CHECK_THAT(unknown.status().message(), Catch::Contains("lru"));

  // A system message after the conversation started names its line.
  options.policy = "none";
  std::vector<TraceMessage> late = messages;
  TraceMessage system;
  system.role = TraceRole::kSystem;
  system.content = "late instructions";
  system.line = 999;
  late.push_back(system);
  StatusOr<EvalResult> refused = EvaluateTrace(late, options);
  REQUIRE_FALSE(refused.ok());
  CHECK_THAT(refused.status().message(), Catch::Contains("line 999"));
}

TEST_CASE("EvaluateTrace keeps the strata policy within the budget where none exceeds it", "[tools][eval]") {
  const std::vector<TraceMessage> messages = ReadTestTrace(kTrace);
  size_t assistants = 0;
  for (const TraceMessage& m : messages) assistants += m.role == TraceRole::kAssistant;
  std::unique_ptr<Tokenizer> tokenizer = MakeEstimateTokenizer();

  EvalOptions options;
  options.tokenizer = tokenizer.get();
  options.budget_tokens = 6000;
  size_t bodies = 0;
  options.on_turn = [&](const EvalTurn&, const std::string& body) {
    ++bodies;
    CHECK(body.find("\"messages\"") != std::string::npos);
  };
  options.policy = "strata";
  StatusOr<EvalResult> strata = EvaluateTrace(messages, options);
  REQUIRE(strata.ok());
  options.policy = "none";
  StatusOr<EvalResult> none = EvaluateTrace(messages, options);
  REQUIRE(none.ok());

  // One measured request per assistant message, each handed to on_turn.
  CHECK(strata->summary.requests == assistants);
  CHECK(strata->turns.size() == assistants);
  CHECK(bodies == 2 * assistants);
  CHECK(strata->summary.violations == 0);
  CHECK(strata->summary.pairing_errors == 0);
  CHECK(strata->summary.peak_tokens <= 6000);
  CHECK(strata->summary.compactions > 0);
  CHECK(none->summary.violations > 0);
  CHECK(none->summary.compactions == 0);
  CHECK(none->summary.peak_tokens > 6000);

  // The summary is the sum of its turns.
  uint64_t input = 0, reused = 0;
  size_t compactions = 0;
  for (const EvalTurn& turn : strata->turns) {
    input += turn.input_tokens;
    reused += turn.reused_tokens;
    compactions += turn.compaction.has_value();
    CHECK(turn.reused_tokens <= turn.input_tokens);
  }
  CHECK(strata->summary.input_tokens == input);
  CHECK(strata->summary.reused_tokens == reused);
  CHECK(strata->summary.compactions == compactions);
  CHECK(strata->summary.cost ==
        Approx(static_cast<double>(input - reused) + options.cached_price * static_cast<double>(reused)));
  CHECK(strata->summary.retention >= 0);
  CHECK(strata->summary.retention <= 1);
}

TEST_CASE("EvalSummary::Add sums two traces and Finish recomputes the ratios", "[tools][eval]") {
  EvalSummary a, b;
  a.requests = 2;
  a.input_tokens = 100;
  a.reused_tokens = 60;
  a.uncached_tokens = 40;
  a.peak_tokens = 70;
  a.old_identifiers = 4;
  a.old_identifiers_kept = 3;
  b.requests = 2;
  b.input_tokens = 300;
  b.reused_tokens = 140;
  b.uncached_tokens = 160;
  b.peak_tokens = 200;
  b.old_identifiers = 0;
  a.Add(b);
  a.Finish(0.1);
  CHECK(a.requests == 4);
  CHECK(a.peak_tokens == 200);
  CHECK(a.mean_tokens == Approx(100));
  CHECK(a.reuse_share == Approx(0.5));
  CHECK(a.cost == Approx(200 + 0.1 * 200));
  CHECK(a.retention == Approx(0.75));
  EvalSummary empty;
  empty.Finish(0.1);
  CHECK(empty.retention == 1);
  CHECK(empty.mean_tokens == 0);
}

}  // namespace
}  // namespace strata
