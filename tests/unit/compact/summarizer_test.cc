#include <catch2/catch.hpp>

#include "strata/builtin_policies.h"
#include "strata/transport.h"
#include "testing/context_testing.h"

namespace strata {
namespace {

std::vector<Segment> Span(int turns) {
  std::vector<Segment> span;
  for (int t = 1; t <= turns; ++t) {
    Segment a;
    a.id = "a" + std::to_string(t);
    a.kind = SegmentKind::kToolCall;
    a.turn = t;
    a.content = "THOUGHT: inspect src/pkg/file_" + std::to_string(t) + ".py for the bug\n\n```bash\ncat x\n```";
    a.tool_calls = {{"c" + std::to_string(t), "bash", R"({"command": "cat src/pkg/file_)" + std::to_string(t) + R"(.py"})"}};
    a.tokens = a.content.size() / 4;
    span.push_back(a);
    Segment r;
    r.id = "r" + std::to_string(t);
    r.kind = SegmentKind::kErrorLog;
    r.turn = t;
    r.tool_call_id = "c" + std::to_string(t);
    r.content = "Traceback (most recent call last):\n  File \"src/pkg/file_" + std::to_string(t) +
                ".py\", line 3\nValueError: bad input " + std::to_string(t);
    r.recall_id = "r-" + std::to_string(t);
    r.tokens = r.content.size() / 4;
    span.push_back(r);
  }
  return span;
}

std::vector<const Segment*> Pointers(const std::vector<Segment>& span) {
  std::vector<const Segment*> out;
  for (const Segment& s : span) out.push_back(&s);
  return out;
}

TEST_CASE("the extractive summary keeps decisions, calls, files and errors within its bound", "[compact][summary]") {
  auto tokenizer = MakeEstimateTokenizer(4.0);
  auto summarizer = MakeExtractiveSummarizer();
  const std::vector<Segment> span = Span(5);
  auto summary = summarizer->Summarize(Pointers(span), 1000, *tokenizer);
  REQUIRE(summary.ok());
  CHECK_THAT(*summary, Catch::StartsWith("[strata: summary of turns 1-5 (10 messages"));
  CHECK_THAT(*summary, Catch::Contains("inspect src/pkg/file_3.py for the bug"));
  CHECK_THAT(*summary, Catch::Contains("bash: cat src/pkg/file_3.py"));
  CHECK_THAT(*summary, Catch::Contains("recall r-3"));
  CHECK_THAT(*summary, Catch::Contains("ValueError: bad input 4"));

  const std::vector<Segment> long_span = Span(200);
  auto bounded = summarizer->Summarize(Pointers(long_span), 300, *tokenizer);
  REQUIRE(bounded.ok());
  CHECK(tokenizer->Count(*bounded) <= 300);
  CHECK_THAT(*bounded, Catch::Contains("items omitted; recall r-"));
  CHECK_THAT(*bounded, Catch::Contains("older recall ids left out"));  // 400 ids do not fit 300 tokens
  CHECK_THAT(*bounded, Catch::Contains("turn 1:"));  // the oldest decision survives
}

// A transport that fails, or answers with a fixed text.
class ScriptedTransport : public Transport {
 public:
  explicit ScriptedTransport(std::vector<std::string> answers) : answers_(std::move(answers)) {}
  std::string Name() const override { return "scripted"; }
  std::string Endpoint() const override { return "scripted://"; }
  Status Send(std::string_view body, const CallOptions&, Response* response) override {
    bodies.emplace_back(body);
    if (calls_ >= answers_.size()) return UnavailableError("scripted transport has no more answers");
    const std::string& answer = answers_[calls_++];
    if (answer == "<fail>") return UnavailableError("connection refused");
    response->content = answer;
    response->finish_reason = "stop";
    return Status::Ok();
  }
  Status HealthCheck(std::chrono::milliseconds) override { return Status::Ok(); }
  Status Abort(const std::string&) override { return Status::Ok(); }
  std::vector<std::string> bodies;

 private:
  std::vector<std::string> answers_;
  size_t calls_ = 0;
};

TEST_CASE("the LLM summarizer validates answers and falls back to the extractive summary", "[compact][summary]") {
  auto tokenizer = MakeEstimateTokenizer(4.0);
  const std::vector<Segment> span = Span(3);

  ScriptedTransport good({"<fail>", "Looked at three files; ValueError persists."});
  auto llm = MakeLlmSummarizer(&good, {});
  auto summary = llm->Summarize(Pointers(span), 500, *tokenizer);
  REQUIRE(summary.ok());
  CHECK_THAT(*summary, Catch::EndsWith("Looked at three files; ValueError persists."));
  REQUIRE(good.bodies.size() == 2);  // one failure, one retry
  CHECK_THAT(good.bodies[0], Catch::Contains("src/pkg/file_2.py"));

  ScriptedTransport bad({"", std::string(4000, 'w')});  // empty, then over the bound
  auto fallback = MakeLlmSummarizer(&bad, {});
  auto extractive = fallback->Summarize(Pointers(span), 500, *tokenizer);
  REQUIRE(extractive.ok());
  CHECK_THAT(*extractive, Catch::StartsWith("[strata: summary of turns 1-3"));
}

}  // namespace
}  // namespace strata
