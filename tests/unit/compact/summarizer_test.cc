#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "strata/builtin_policies.h"
#include "strata/record.h"
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
  Status Send(std::string_view body, const CallOptions& options, Response* response) override {
    bodies.emplace_back(body);
    request_ids.push_back(options.request_id);
    if (calls_ >= answers_.size()) return UnavailableError("scripted transport has no more answers");
    const std::string& answer = answers_[calls_++];
    if (answer == "<fail>") return UnavailableError("connection refused");
    response->content = answer;
    response->finish_reason = "stop";
    response->usage.reported = true;
    response->usage.prompt_tokens = 1000;
    response->usage.completion_tokens = 50;
    return Status::Ok();
  }
  Status HealthCheck(std::chrono::milliseconds) override { return Status::Ok(); }
  Status Abort(const std::string&) override { return Status::Ok(); }
  std::vector<std::string> bodies;
  std::vector<std::string> request_ids;  // CallOptions::request_id of each call

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

// The agent's previous request holding `span` after a system message, as strata renders one:
// model, tools, messages, then its fields.
std::string PreviousBody(const std::vector<Segment>& span) {
  nlohmann::ordered_json messages = nlohmann::ordered_json::array();
  messages.push_back({{"role", "system"}, {"content", "You fix bugs."}});
  for (const Segment& s : span) {
    messages.push_back({{"role", s.kind == SegmentKind::kErrorLog ? "tool" : "assistant"},
                        {"content", s.content}});
  }
  messages.push_back({{"role", "user"}, {"content", "Go on."}});
  nlohmann::ordered_json body = {{"model", "glm-5.3"},
                                 {"tools", nlohmann::ordered_json::array()},
                                 {"messages", messages},
                                 {"max_tokens", 4096},
                                 {"stream", true},
                                 {"stream_options", {{"include_usage", true}}},
                                 {"cache_salt", "tenant-7"},
                                 {"request_id", "a-1"}};
  return body.dump();
}

struct RecordsKept : RecordSink {
  Status Write(const RequestRecord& record) override {
    records.push_back(record);
    return Status::Ok();
  }
  std::vector<RequestRecord> records;
};

SummaryRequestContext PreviousRequest(const std::string& body, RecordSink* records) {
  SummaryRequestContext previous;
  previous.body = body;
  previous.endpoint = "scripted://";
  previous.agent_id = "a";
  previous.request_id = "a-2-compaction";
  previous.cached_tokens_predicted = 480;
  previous.records = records;
  return previous;
}

TEST_CASE("the cache-keeping summary request is the previous request plus one instruction",
          "[compact][summary]") {
  auto tokenizer = MakeEstimateTokenizer(4.0);
  const std::vector<Segment> span = Span(3);
  const std::string body = PreviousBody(span);
  RecordsKept kept;
  const SummaryRequestContext previous = PreviousRequest(body, &kept);
  ScriptedTransport transport({"Looked at files 1 to 3 (r-1, r-2); ValueError persists."});
  auto llm = MakeLlmSummarizer(&transport, {});
  auto result = llm->SummarizeFor(Pointers(span), 500, *tokenizer, &previous);
  REQUIRE(result.ok());
  CHECK(result->request == "cache-keeping");
  CHECK_THAT(result->text, Catch::Contains("ValueError persists."));
  // The recall ids the answer does not mention stay in the summary (r-3, and those of the
  // assistant messages), those it mentions are not repeated.
  const std::string left_out = result->text.substr(result->text.rfind('\n') + 1);
  CHECK_THAT(left_out, Catch::StartsWith("[strata: recall ids of what it leaves out: "));
  CHECK_THAT(left_out, Catch::Contains(" r-3 ") || Catch::EndsWith(" r-3]"));
  CHECK_THAT(left_out, !Catch::Contains(" r-1 ") && !Catch::Contains(" r-2 "));
  REQUIRE(transport.bodies.size() == 1);
  const std::string& sent = transport.bodies[0];
  const size_t messages_end = body.find("}],\"max_tokens\"") + 1;
  CHECK(sent.compare(0, messages_end, body, 0, messages_end) == 0);  // same bytes, same cache
  nlohmann::json request = nlohmann::json::parse(sent);
  CHECK(request["messages"].size() == span.size() + 3);
  const std::string instruction = request["messages"].back()["content"];
  CHECK(request["messages"].back()["role"] == "user");
  CHECK_THAT(instruction, Catch::Contains("Summarize messages 2 to 7 of this conversation"));
  CHECK_THAT(instruction, Catch::Contains("in at most 500 tokens"));
  CHECK_THAT(instruction, Catch::Contains(" r-1 ") && Catch::Contains(" r-3."));
  CHECK(request["max_tokens"] == 500);
  CHECK(request["stream"] == false);
  CHECK_FALSE(request.contains("stream_options"));
  CHECK(request["cache_salt"] == "tenant-7");
  CHECK(request["request_id"] == "a-2-compaction");
  CHECK(request["model"] == "glm-5.3");  // the agent's model: its cache
  REQUIRE(kept.records.size() == 1);
  CHECK(kept.records[0].purpose == "compaction");
  CHECK(kept.records[0].agent_id == "a");
  CHECK(kept.records[0].request_id == "a-2-compaction");
  CHECK(kept.records[0].cached_tokens_predicted == 480);
}

TEST_CASE("a cache-keeping answer that fails validation falls back and the report says why",
          "[compact][summary]") {
  auto tokenizer = MakeEstimateTokenizer(4.0);
  const std::vector<Segment> span = Span(3);
  const std::string body = PreviousBody(span);
  RecordsKept kept;
  const SummaryRequestContext previous = PreviousRequest(body, &kept);
  // Two answers over the bound (the default two attempts), then the transcript request's.
  ScriptedTransport transport(
      {std::string(4000, 'w'), "", "Looked at three files; ValueError persists."});
  auto llm = MakeLlmSummarizer(&transport, {});
  auto result = llm->SummarizeFor(Pointers(span), 500, *tokenizer, &previous);
  REQUIRE(result.ok());
  CHECK_THAT(result->request,
             Catch::StartsWith("transcript (cache-keeping not used: the answer failed validation"));
  CHECK_THAT(result->text, Catch::EndsWith("Looked at three files; ValueError persists."));
  REQUIRE(transport.bodies.size() == 3);
  CHECK_THAT(transport.bodies[2], Catch::StartsWith("{\"max_tokens\""));  // the transcript request
  // Both cache-keeping attempts are recorded, and the transcript request: with the agent's request
  // id, to the summarizer's model, nothing of it predicted cached.
  REQUIRE(kept.records.size() == 3);
  for (const RequestRecord& r : kept.records) {
    CHECK(r.purpose == "compaction");
    CHECK(r.request_id == "a-2-compaction");
    CHECK(r.input_tokens == 1000);
    CHECK(r.output_tokens == 50);
  }
  CHECK(kept.records[0].cached_tokens_predicted == 480);
  CHECK(kept.records[2].cached_tokens_predicted == 0);
  CHECK(kept.records[2].model == "glm-5.3-flash");
  CHECK(transport.request_ids[2] == "a-2-compaction");
  // What the three requests cost, for the policy's price: 480 of each cache-keeping prompt cached.
  CHECK(result->request_input_tokens == 3000);
  CHECK(result->request_cached_tokens == 960);
  CHECK(result->request_output_tokens == 150);

  SECTION("another endpoint, or no previous request: the transcript request, saying so") {
    ScriptedTransport other({"Looked at three files."});
    SummaryRequestContext elsewhere = previous;
    elsewhere.endpoint = "http://127.0.0.1:9/v1";
    auto summary = MakeLlmSummarizer(&other, {})->SummarizeFor(Pointers(span), 500, *tokenizer,
                                                               &elsewhere);
    REQUIRE(summary.ok());
    CHECK(summary->request ==
          "transcript (cache-keeping not used: the summarizer's endpoint is not the agent's)");
    auto first = MakeLlmSummarizer(&other, {})->SummarizeFor(Pointers(span), 500, *tokenizer,
                                                             nullptr);
    REQUIRE(first.ok());
    CHECK(first->request == "extractive (cache-keeping not used: no previous request; the "
                            "transcript request failed too)");  // `other` has no more answers
  }
}

}  // namespace
}  // namespace strata
