// An Agent whose LLM summarizer keeps the server's cache, against strata-sim (in-process, 127.0.0.1,
// port 0): the summary request is the agent's previous request plus one instruction, served from
// the simulator's prefix cache; its record is stored with purpose "compaction" and counted with
// the turn; an answer that fails validation falls back to the transcript request, and the
// compaction report says so. Join's summary of a child continues the child's request too.
#include <unistd.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "sim_server.h"
#include "strata/agent.h"
#include "strata/builtin_policies.h"
#include "strata/store.h"
#include "strata/http_transport.h"
#include "strata/transport.h"
#include "testing/sim_testing.h"
#include "testing/status_testing.h"
#include "testing/temp_dir.h"

namespace strata {
namespace {

using testing::Must;
using testing::MustOk;

constexpr char kInstructionMark[] = "[strata: compaction]";  // the cache-keeping instruction's

bool IsCacheKeeping(const std::string& body) { return body.find(kInstructionMark) != std::string::npos; }

// A simulator that answers turns with a short reply and summary requests with `summary` (the
// cache-keeping one) or a short text (the transcript one).
sim::SimOptions Options(std::string summary) {
  sim::SimOptions options;
  options.answer = [summary](const std::string& request, int64_t) -> std::string {
    if (IsCacheKeeping(request)) return summary;
    if (request.find("Summarize this part of an agent") != std::string::npos) {
      return "Transcript summary: the user described topics one to eight.";
    }
    return "Noted.";
  };
  return options;
}

// A long user message (about 400 tokens) for turn `n`.
std::string UserMessage(int n) {
  std::string text = "Turn " + std::to_string(n) + ": here is what I observed today.";
  for (int i = 0; i < 60; ++i) text += " item_" + std::to_string(n * 100 + i) + " looks fine";
  return text;
}

struct Run {
  std::vector<Turn> turns;
  std::vector<sim::SimRequestLog> log;
  std::vector<RequestRecord> stored;
  std::vector<GrowthPoint> growth;  // the store's growth curve, one point per turn
};

// Runs turns until one compacts (at most 30) with an LLM summarizer over the agent's own
// transport, then reads the store's records.
Run RunUntilCompaction(testing::TestSim& sim, const std::string& id) {
  const std::string db = "/tmp/strata-cache-keeping-" + id + "-" + std::to_string(::getpid()) + ".db";
  std::remove(db.c_str());
  HttpTransportOptions http;
  http.base_url = sim.server->base_url();
  std::unique_ptr<Transport> transport = Must(MakeHttpTransport(http));
  std::unique_ptr<Summarizer> summarizer = MakeLlmSummarizer(transport.get());
  AgentConfig c;
  c.identity.id = id;
  c.tokenizer = testing::TestSpmSpec();
  c.endpoint.base_url = sim.server->base_url();
  c.budget.window = 8000;
  c.store_path = db;
  AgentServices services;
  services.transport = transport.get();
  services.summarizer = summarizer.get();
  Run run;
  {
    auto agent = Must(Agent::Create(c, services));
    MustOk(agent->SetSystemPrompt("You are an agent that keeps notes."));
    for (int n = 1; n <= 30; ++n) {
      MustOk(agent->AppendUser(UserMessage(n)).status());
      run.turns.push_back(Must(agent->Complete()));
      if (!run.turns.back().compactions.empty()) break;
    }
  }
  run.log = sim.server->requests();
  auto store = Must(OpenStore(db));
  run.stored = Must(store->RecentRequests(id, 1000));
  run.growth = Must(store->Growth(id));
  store.reset();
  std::remove(db.c_str());
  return run;
}

TEST_CASE("a cache-keeping summary continues the agent's last request and is served from cache",
          "[agent][sim][compaction]") {
  testing::TestSim sim(Options("Summary: the user reported turns two to eight, all fine."));
  Run run = RunUntilCompaction(sim, "keeper");
  REQUIRE(!run.turns.back().compactions.empty());
  const Turn& turn = run.turns.back();
  CHECK(turn.compactions[0].summary_request == "cache-keeping");
  CHECK(turn.compactions[0].summarized > 0);

  size_t k = 0;  // the summary request in the simulator's log
  while (k < run.log.size() && !IsCacheKeeping(run.log[k].body)) ++k;
  REQUIRE(k > 0);
  REQUIRE(k + 1 < run.log.size());  // the turn's own request follows it
  const sim::SimRequestLog& previous = run.log[k - 1];
  const sim::SimRequestLog& summary = run.log[k];
  // The previous request's bytes up to the end of its messages (its last "}]": the fields after
  // them hold no array), then the instruction.
  const size_t messages_end = previous.body.rfind("}]") + 1;
  CHECK(summary.body.compare(0, messages_end, previous.body, 0, messages_end) == 0);
  CHECK(summary.cache_salt == previous.cache_salt);
  // Served from the cache: at least the previous prompt minus the block the server computes again
  // (the last one, with the generation prompt the continuation replaces).
  const int64_t block = 16;
  CHECK(summary.cached_tokens >= previous.prompt_tokens - block);
  // Uncached: the instruction (its recall ids included), a tenth of the previous prompt at most.
  INFO("previous prompt " << previous.prompt_tokens << ", summary prompt " << summary.prompt_tokens
                          << ", cached " << summary.cached_tokens);
  CHECK(summary.prompt_tokens - summary.cached_tokens < previous.prompt_tokens / 10);

  REQUIRE(turn.compaction_requests.size() == 1);
  const RequestRecord& record = turn.compaction_requests[0];
  CHECK(record.purpose == "compaction");
  CHECK(record.request_id == turn.record.request_id + "-compaction");
  CHECK(record.input_tokens == summary.prompt_tokens);
  REQUIRE(record.cached_tokens_reported.has_value());
  CHECK(*record.cached_tokens_reported == summary.cached_tokens);
  CHECK(record.cached_tokens_predicted > 0);
  int stored = 0;
  for (const RequestRecord& r : run.stored) {
    if (r.request_id != record.request_id) continue;
    ++stored;
    CHECK(r.purpose == "compaction");
    CHECK(r.input_tokens == record.input_tokens);
  }
  CHECK(stored == 1);
  for (const RequestRecord& r : run.stored) {
    if (r.request_id != record.request_id) CHECK(r.purpose == "turn");
  }
}

// The growth point's summary fields as the turn's compaction requests add up: prompt tokens,
// cached ones (reported, else predicted; at most the prompt), completion tokens.
GrowthPoint SummaryTokensOf(const Turn& turn) {
  GrowthPoint sum;
  for (const RequestRecord& r : turn.compaction_requests) {
    sum.summary_input_tokens += r.input_tokens;
    sum.summary_cached_tokens +=
        std::min(r.cached_tokens_reported.value_or(r.cached_tokens_predicted), r.input_tokens);
    sum.summary_output_tokens += r.output_tokens;
  }
  return sum;
}

// Each turn's growth point (returned and stored) holds its summary requests' tokens.
void CheckSummaryGrowth(const Run& run) {
  REQUIRE(run.growth.size() == run.turns.size());
  for (size_t i = 0; i < run.turns.size(); ++i) {
    const Turn& turn = run.turns[i];
    const GrowthPoint expected = SummaryTokensOf(turn);
    INFO("turn " << turn.growth.turn << ", " << turn.compaction_requests.size()
                 << " compaction requests");
    CHECK(turn.growth.summary_input_tokens == expected.summary_input_tokens);
    CHECK(turn.growth.summary_cached_tokens == expected.summary_cached_tokens);
    CHECK(turn.growth.summary_output_tokens == expected.summary_output_tokens);
    if (turn.compaction_requests.empty()) {
      CHECK(turn.growth.summary_input_tokens == 0);
      CHECK(turn.growth.summary_cached_tokens == 0);
      CHECK(turn.growth.summary_output_tokens == 0);
    } else {
      CHECK(turn.growth.summary_input_tokens > 0);
      CHECK(turn.growth.summary_cached_tokens > 0);
      CHECK(turn.growth.summary_cached_tokens <= turn.growth.summary_input_tokens);
      CHECK(turn.growth.summary_output_tokens > 0);
    }
    const GrowthPoint& stored = run.growth[i];
    CHECK(stored.turn == turn.growth.turn);
    CHECK(stored.summary_input_tokens == turn.growth.summary_input_tokens);
    CHECK(stored.summary_cached_tokens == turn.growth.summary_cached_tokens);
    CHECK(stored.summary_output_tokens == turn.growth.summary_output_tokens);
  }
}

TEST_CASE("a turn's growth point counts its summary requests' tokens, and the store keeps them",
          "[agent][sim][compaction]") {
  testing::TestSim sim(Options("Summary: the user reported turns two to eight, all fine."));
  Run run = RunUntilCompaction(sim, "grower");
  REQUIRE(run.turns.size() >= 2);  // turns without a compaction before the one with it
  const Turn& turn = run.turns.back();
  REQUIRE(!turn.compactions.empty());
  REQUIRE(turn.compaction_requests.size() == 1);
  const RequestRecord& record = turn.compaction_requests[0];
  REQUIRE(record.cached_tokens_reported.has_value());
  CHECK(turn.growth.summary_input_tokens == record.input_tokens);
  CHECK(turn.growth.summary_cached_tokens == *record.cached_tokens_reported);
  CHECK(turn.growth.summary_output_tokens == record.output_tokens);
  CheckSummaryGrowth(run);
}

TEST_CASE("a cache-keeping answer failing validation falls back to the transcript, saying so",
          "[agent][sim][compaction]") {
  std::string too_long;  // far above the summary's bound: cut off at max_tokens ("length")
  for (int i = 0; i < 3000; ++i) too_long += "word" + std::to_string(i) + " ";
  testing::TestSim sim(Options(too_long));
  Run run = RunUntilCompaction(sim, "fallback");
  REQUIRE(!run.turns.back().compactions.empty());
  const Turn& turn = run.turns.back();
  CHECK_THAT(turn.compactions[0].summary_request,
             Catch::StartsWith("transcript (cache-keeping not used: the answer failed validation"));
  // Both cache-keeping attempts and the transcript request that wrote the summary, recorded.
  REQUIRE(turn.compaction_requests.size() == 3);
  CHECK(turn.compaction_requests[0].cached_tokens_predicted > 0);
  CHECK(turn.compaction_requests[2].cached_tokens_predicted == 0);  // a new request: nothing cached
  CHECK(turn.compaction_requests[2].code == StatusCode::kOk);
  CHECK(turn.compaction_requests[2].input_tokens > 0);
  int stored = 0;
  for (const RequestRecord& r : run.stored) stored += r.purpose == "compaction";
  CHECK(stored == 3);
  CheckSummaryGrowth(run);  // the turn's growth point sums all three
}

TEST_CASE("Join summarizes a child without a final answer by continuing the child's request",
          "[agent][sim][compaction]") {
  testing::TestSim sim(Options("Summary: the child read the notes and found nothing wrong."));
  testing::TempDir dir;
  const std::string db = dir.File("agents.db");
  HttpTransportOptions http;
  http.base_url = sim.server->base_url();
  std::unique_ptr<Transport> transport = Must(MakeHttpTransport(http));
  std::unique_ptr<Summarizer> summarizer = MakeLlmSummarizer(transport.get());
  AgentConfig c;
  c.identity.id = "joiner";
  c.tokenizer = testing::TestSpmSpec();
  c.endpoint.base_url = sim.server->base_url();
  c.store_path = db;
  AgentServices services;
  services.transport = transport.get();
  services.summarizer = summarizer.get();
  auto parent = Must(Agent::Create(c, services));
  MustOk(parent->SetSystemPrompt("You are an agent that keeps notes."));
  auto child = Must(parent->Fork(UserMessage(1)));
  Turn answered = Must(child->Complete());
  Must(child->AppendUser(UserMessage(2)));  // the child ends on a question, not an answer
  sim.server->ClearRequests();
  const std::string folded = Must(parent->Join(*child));

  const std::vector<sim::SimRequestLog> log = sim.server->requests();
  REQUIRE(log.size() == 1);
  const sim::SimRequestLog& summary = log[0];
  REQUIRE(IsCacheKeeping(summary.body));
  // The child's last request's messages, byte for byte, then the messages since.
  const size_t messages_end = answered.body.rfind("}]") + 1;
  CHECK(summary.body.compare(0, messages_end, answered.body, 0, messages_end) == 0);
  CHECK(summary.body.find(UserMessage(2)) != std::string::npos);
  // Served from the cache: the child's last prompt, less the block the server computes again.
  CHECK(summary.cached_tokens >= answered.record.input_tokens - 16);
  const Segment* message = parent->context().Find(folded);
  REQUIRE(message != nullptr);
  CHECK_THAT(message->content, Catch::Contains("the child read the notes and found nothing wrong"));

  // Its record: purpose "compaction", stored under the child's id.
  auto store = Must(OpenStore(db));
  int compaction = 0;
  for (const RequestRecord& r : Must(store->RecentRequests(child->id(), 100))) {
    if (r.purpose != "compaction") continue;
    ++compaction;
    CHECK(r.input_tokens == summary.prompt_tokens);
    REQUIRE(r.cached_tokens_reported.has_value());
    CHECK(*r.cached_tokens_reported == summary.cached_tokens);
    CHECK(r.cached_tokens_predicted > 0);
  }
  CHECK(compaction == 1);
}

}  // namespace
}  // namespace strata
