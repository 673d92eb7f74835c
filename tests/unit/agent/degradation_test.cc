// The Agent as a PoolSet's DegradationHandler (sdk/src/agent/degradation.cc), over strata-sim
// (in-process, 127.0.0.1, port 0): when the pool that fits is full, the agent's history is
// compacted to fit a smaller pool, or its task is forked into a request that fits, or it waits,
// or it is refused naming the pool, its cap and queue depth; every decision is in the record and
// in the store. The stable-prefix hash header routes agents that share stable layers to one
// replica.
#include <algorithm>
#include <catch2/catch.hpp>
#include <condition_variable>
#include <cstdio>
#include <mutex>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <thread>

#include "sim_server.h"
#include "strata/agent.h"
#include "strata/builtin_policies.h"
#include "strata/compaction_policy.h"
#include "strata/chat_template.h"
#include "strata/http_transport.h"
#include "strata/pools.h"
#include "strata/store.h"
#include "strata/tokenizer_spec.h"
#include "testing/context_testing.h"
#include "testing/fake_clock.h"
#include "testing/sim_testing.h"
#include "testing/temp_dir.h"
#include "testing/wait_for.h"

namespace strata {
namespace {

using testing::Must;
using testing::MustOk;
using testing::TestSpmSpec;

// A simulator counting as the agent counts (same tokenizer, same chat template), and an HTTP
// transport to it.
struct Sim : testing::TestSim {
  std::unique_ptr<Transport> http;
  Sim() {
    HttpTransportOptions h;
    h.base_url = server->base_url();
    http = Must(MakeHttpTransport(h));
  }
};

// Forwards to `inner` once opened; until then Send() blocks (a replica busy with a long prefill).
class Gate : public Transport {
 public:
  explicit Gate(Transport* inner) : inner_(inner) {}
  std::string Name() const override { return "gate"; }
  std::string Endpoint() const override { return "gate:" + inner_->Endpoint(); }
  Status Send(std::string_view body, const CallOptions& options, Response* response) override {
    {
      std::unique_lock<std::mutex> lock(mu_);
      ++entered_;
      cv_.notify_all();
      cv_.wait(lock, [&] { return open_; });
    }
    return inner_->Send(body, options, response);
  }
  Status HealthCheck(std::chrono::milliseconds timeout) override {
    return inner_->HealthCheck(timeout);
  }
  Status Abort(const std::string& id) override { return inner_->Abort(id); }
  void WaitEntered(int n) {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [&] { return entered_ >= n; });
  }
  void Open() {
    std::lock_guard<std::mutex> lock(mu_);
    open_ = true;
    cv_.notify_all();
  }

 private:
  Transport* inner_;
  std::mutex mu_;
  std::condition_variable cv_;
  int entered_ = 0;
  bool open_ = false;
};

// Holds the long pool's only slot: one request admitted there, blocked in its Gate.
class Blocker {
 public:
  Blocker(PoolSet* pools, Gate* gate, int64_t tokens) : gate_(gate) {
    thread_ = std::thread([pools, tokens, this] {
      CallOptions call;
      call.prompt_tokens = tokens;
      call.request_id = "blocker";
      Response response;
      status_ = pools->Send(R"({"model":"m","messages":[{"role":"user","content":"hold"}]})", call,
                            &response);
    });
    gate_->WaitEntered(1);
  }
  Status Release() {
    gate_->Open();
    if (thread_.joinable()) thread_.join();
    return status_;
  }
  ~Blocker() { Release().IgnoreError(); }

 private:
  Gate* gate_;
  std::thread thread_;
  Status status_;
};

// A distinct ~`words`-word tool output (file listings with numbers, so nothing deduplicates).
std::string ToolOutput(int n, int words) {
  std::string out;
  for (int i = 0; i < words; ++i) {
    out += "src/module" + std::to_string(n) + "/file" + std::to_string(i) +
           ".cc:" + std::to_string(i * 7 + n) + (i % 8 == 7 ? "\n" : " ");
  }
  return out;
}

AgentConfig Config(const std::string& id, const std::string& store_path,
                   const std::string& tokenizer = TestSpmSpec()) {
  AgentConfig c;
  c.identity.id = id;
  c.tokenizer = tokenizer;
  c.budget.window = 64000;
  c.endpoint.max_output_tokens = 64;
  c.store_path = store_path;
  return c;
}

// Tool calls `first`..`first + calls - 1` of a listing tool, each with a long result.
void Listings(Agent& agent, int first, int calls, int words) {
  for (int i = first; i < first + calls; ++i) {
    AssistantMessage m;
    m.content = "Listing part " + std::to_string(i) + ".";
    m.tool_calls.push_back(ToolCall{"call-" + std::to_string(i), "list_files",
                                    "{\"part\":" + std::to_string(i) + "}"});
    Must(agent.context().AppendAssistant(m));
    Must(agent.AppendToolResult({"call-" + std::to_string(i), ToolOutput(i, words), false}));
  }
}

// A coding session: a task and `calls` tool calls with long results.
void Session(Agent& agent, int calls, int words) {
  MustOk(agent.SetSystemPrompt("You are a coding agent working in a large repository."));
  Must(agent.AppendUser("Find where the retry budget is computed and fix the off-by-one."));
  Listings(agent, 0, calls, words);
}

PoolConfig Pool(const std::string& name, int64_t max_tokens, Transport* replica, int cap) {
  PoolConfig p;
  p.name = name;
  p.max_input_tokens = max_tokens;
  p.transports = {replica};
  p.max_concurrency = cap;
  return p;
}

// strata-sim behind a pool `name` of `max_tokens` and a "long" pool of 60,000 tokens whose one
// replica is gated and has no queue (a Blocker fills it).
struct GatedPools {
  Sim sim;
  Gate long_gate{sim.http.get()};
  std::unique_ptr<PoolSet> pools;
  GatedPools(const std::string& name, int64_t max_tokens,
             std::vector<DegradationStep> ladder = {}) {
    PoolSetConfig config;
    config.pools = {Pool(name, max_tokens, sim.http.get(), 0), Pool("long", 60000, &long_gate, 1)};
    config.pools[1].max_queue = 0;
    if (!ladder.empty()) config.ladder = std::move(ladder);
    pools = Must(PoolSet::Create(config));
  }
};

// A session whose first request fits the medium pool (12,000 tokens), then four more long tool
// results that take it over; returns that first turn.
Turn OverTheMediumPool(Agent& agent) {
  Session(agent, 3, 180);
  Turn first = Must(agent.Complete());
  REQUIRE(first.record.pool == "medium");
  Listings(agent, 3, 4, 180);
  REQUIRE(Must(agent.InputTokens()) > 12000);
  return first;
}

TEST_CASE("a request over the medium pool is compacted to fit it while the long pool is full",
          "[agent][pools]") {
  Sim sim;
  Gate long_gate(sim.http.get());
  PoolSetConfig config;
  config.pools = {Pool("short", 4000, sim.http.get(), 0), Pool("medium", 12000, sim.http.get(), 0),
                  Pool("long", 60000, &long_gate, 1)};
  config.pools[2].max_queue = 0;
  auto pools = Must(PoolSet::Create(config));
  testing::TempDir dir;
  const std::string db = dir.File("agents.db");
  auto agent = Must(Agent::Create(Config("compacting", db), {pools.get(), nullptr, nullptr}));
  Session(*agent, 10, 180);
  const int64_t before = Must(agent->InputTokens());
  REQUIRE(before > 12000);  // fits only the long pool

  Blocker blocker(pools.get(), &long_gate, 30000);
  sim.server->ClearRequests();
  Turn turn = Must(agent->Complete());
  CHECK(turn.record.pool == "medium");
  CHECK(turn.record.degradation == "compact");
  CHECK_THAT(turn.record.degradation_notes,
             Catch::Contains("history compacted from " + std::to_string(before)) &&
                 Catch::Contains("pool \"medium\""));
  REQUIRE_FALSE(turn.compactions.empty());
  CHECK_THAT(turn.compactions[0].reason, Catch::StartsWith("to fit pool \"medium\""));
  // What the server got fits the medium pool, and is the agent's compacted history.
  auto requests = sim.server->requests();
  REQUIRE(requests.size() == 1);
  CHECK(requests[0].prompt_tokens <= 12000);
  CHECK(turn.record.input_tokens <= 12000);
  CHECK(turn.body.size() < 12000 * 6);
  const int64_t after = Must(agent->InputTokens());
  CHECK(after < 12000);
  const Context& context = agent->context();
  CHECK(Must(context.Preview()).body.find("Listing part 9.") != std::string::npos);

  // Persisted: the record's pool, degradation and notes, and the compaction event.
  auto store = Must(OpenSqliteStore(db));
  auto records = Must(store->RecentRequests("compacting", 10));
  REQUIRE(records.size() == 1);
  CHECK(records[0].pool == "medium");
  CHECK(records[0].degradation == "compact");
  CHECK(records[0].degradation_notes == turn.record.degradation_notes);
  CHECK(blocker.Release().ok());
  PoolSetMetrics m = pools->Metrics();
  CHECK(m.pools[1].compacted_total == 1);
}

TEST_CASE("the task is forked into a request that fits when compaction is not on the ladder",
          "[agent][pools]") {
  Sim sim;
  Gate long_gate(sim.http.get());
  PoolSetConfig config;
  config.pools = {Pool("short", 8000, sim.http.get(), 0), Pool("long", 60000, &long_gate, 1)};
  config.pools[1].max_queue = 0;
  config.ladder = {DegradationStep::kFork, DegradationStep::kRefuse};
  auto pools = Must(PoolSet::Create(config));
  testing::TempDir dir;
  const std::string db = dir.File("agents.db");
  auto agent = Must(Agent::Create(Config("parent", db), {pools.get(), nullptr, nullptr}));
  Session(*agent, 8, 180);
  Must(agent->context().AppendAssistant(AssistantMessage{"The lists are in.", "", {}}));
  Must(agent->AppendUser("Now summarize which modules mention retries."));
  const int64_t before = Must(agent->InputTokens());
  REQUIRE(before > 8000);

  Blocker blocker(pools.get(), &long_gate, 30000);
  sim.server->ClearRequests();
  Turn turn = Must(agent->Complete());
  CHECK(turn.record.pool == "short");
  CHECK(turn.record.degradation == "fork");
  CHECK_THAT(turn.record.degradation_notes,
             Catch::Contains("task forked into agent \"parent.fork-1\""));
  CHECK(turn.compactions.empty());
  auto requests = sim.server->requests();
  REQUIRE(requests.size() == 1);
  CHECK(requests[0].prompt_tokens <= 8000);
  // The fork carries the latest user message and the stable layers, not the long tool output.
  CHECK(requests[0].body.find("Now summarize which modules mention retries.") != std::string::npos);
  CHECK(requests[0].body.find("You are a coding agent") != std::string::npos);
  CHECK(requests[0].body.find(ToolOutput(3, 180)) == std::string::npos);
  // The parent's turn is answered by its fork; its history is untouched otherwise.
  CHECK(Must(agent->InputTokens()) > before);
  std::vector<Segment> segments = agent->context().Segments();
  CHECK(segments.back().kind == SegmentKind::kAssistant);
  CHECK(segments.back().content == turn.response.content);
  // The fork is a stored agent holding its task and the answer.
  auto store = Must(OpenSqliteStore(db));
  auto child = Must(Agent::Open(*store, "parent.fork-1"));
  std::vector<Segment> child_segments = child->context().Segments();
  CHECK(child_segments.back().kind == SegmentKind::kAssistant);
  CHECK(child_segments.back().content == turn.response.content);
  auto records = Must(store->RecentRequests("parent", 10));
  REQUIRE(records.size() == 1);
  CHECK(records[0].degradation == "fork");
  CHECK(records[0].pool == "short");
  CHECK(blocker.Release().ok());
}

// The strata policy, noting the previous request each planning was handed (its body, "" none)
// with the limit it planned against.
class NotingPolicy final : public CompactionPolicy {
 public:
  std::string Name() const override { return inner_->Name(); }
  bool ShouldCompact(const CompactionInput& input) const override {
    return inner_->ShouldCompact(input);
  }
  StatusOr<HistoryEdit> Plan(const CompactionInput& input) override {
    plans.emplace_back(input.limit_tokens, input.summary_request != nullptr
                                               ? std::string(input.summary_request->body)
                                               : std::string());
    return inner_->Plan(input);
  }
  std::vector<std::pair<size_t, std::string>> plans;

 private:
  std::unique_ptr<CompactionPolicy> inner_ = MakeStrataPolicy();
};

// A summarizer that notes the previous request it was handed and says how it was asked.
class NotingSummarizer final : public Summarizer {
 public:
  std::string Name() const override { return "noting@1"; }
  StatusOr<std::string> Summarize(const std::vector<const Segment*>& span, size_t,
                                  const Tokenizer&) override {
    return "A summary of " + std::to_string(span.size()) + " messages.";
  }
  StatusOr<SummaryResult> SummarizeFor(const std::vector<const Segment*>& span, size_t max_tokens,
                                       const Tokenizer& tokenizer,
                                       const SummaryRequestContext* previous) override {
    previous_bodies.push_back(previous != nullptr ? std::string(previous->body) : std::string());
    SummaryResult result;
    STRATA_ASSIGN_OR_RETURN(result.text, Summarize(span, max_tokens, tokenizer));
    result.request = "noted";
    return result;
  }
  std::vector<std::string> previous_bodies;
};

TEST_CASE("a pool's compact step plans its summaries against the agent's previous request",
          "[agent][pools][compaction]") {
  GatedPools gated("medium", 12000);
  NotingPolicy policy;
  AgentServices services;
  services.transport = gated.pools.get();
  services.policy = &policy;
  auto agent = Must(Agent::Create(Config("planner", ""), services));
  const Turn first = OverTheMediumPool(*agent);

  Blocker blocker(gated.pools.get(), &gated.long_gate, 30000);
  policy.plans.clear();
  Turn turn = Must(agent->Complete());
  REQUIRE(turn.record.degradation == "compact");
  // Every planning against the pool's length (below the agent's own limit) saw the request the
  // agent sent last, which a cache-keeping summary continues.
  int pool_plans = 0;
  for (const auto& [limit, body] : policy.plans) {
    if (limit > 12000) continue;
    ++pool_plans;
    CHECK(body == first.body);
  }
  CHECK(pool_plans > 0);
  CHECK(blocker.Release().ok());
}

TEST_CASE("a pool's compact step's summary request is the turn's compaction request",
          "[agent][pools][compaction]") {
  GatedPools gated("medium", 12000);
  // Through the pool set, as the agent's requests go (a summarizer on another endpoint never
  // continues the agent's request).
  std::unique_ptr<Summarizer> summarizer = MakeLlmSummarizer(gated.pools.get());
  AgentServices services;
  services.transport = gated.pools.get();
  services.summarizer = summarizer.get();
  auto agent = Must(Agent::Create(Config("priced", ""), services));
  OverTheMediumPool(*agent);

  Blocker blocker(gated.pools.get(), &gated.long_gate, 30000);
  Turn turn = Must(agent->Complete());
  REQUIRE(turn.record.degradation == "compact");
  REQUIRE(turn.compactions.size() == 1);
  // Down to the medium pool's length the span reaches into the messages added since the previous
  // request, which that request cannot continue: the transcript request, and the report says why.
  CHECK_THAT(turn.compactions[0].summary_request,
             Catch::StartsWith("transcript (cache-keeping not used: the span to summarize"));
  // Either way the summary request is recorded with the turn and priced in its growth point.
  REQUIRE(turn.compaction_requests.size() == 1);
  const RequestRecord& summary = turn.compaction_requests[0];
  CHECK(summary.purpose == "compaction");
  CHECK(summary.input_tokens > 0);
  CHECK(turn.growth.summary_input_tokens == summary.input_tokens);
  CHECK(turn.growth.summary_output_tokens == summary.output_tokens);
  CHECK(turn.growth.summary_cached_tokens ==
        std::min(summary.input_tokens,
                 summary.cached_tokens_reported.value_or(summary.cached_tokens_predicted)));
  CHECK(blocker.Release().ok());
}

TEST_CASE("a pool's fork step summarizes the history against the agent's previous request",
          "[agent][pools][compaction]") {
  GatedPools gated("short", 8000, {DegradationStep::kFork, DegradationStep::kRefuse});
  NotingSummarizer summarizer;
  AgentServices services;
  services.transport = gated.pools.get();
  services.summarizer = &summarizer;
  auto agent = Must(Agent::Create(Config("summarized", ""), services));
  Session(*agent, 2, 180);
  Turn first = Must(agent->Complete());  // fits the short pool
  REQUIRE(first.record.pool == "short");
  Listings(*agent, 2, 3, 180);
  Must(agent->AppendUser("Now summarize which modules mention retries."));
  REQUIRE(Must(agent->InputTokens()) > 8000);

  Blocker blocker(gated.pools.get(), &gated.long_gate, 30000);
  summarizer.previous_bodies.clear();
  Turn turn = Must(agent->Complete());
  REQUIRE(turn.record.degradation == "fork");
  REQUIRE(summarizer.previous_bodies.size() == 1);
  CHECK(summarizer.previous_bodies[0] == first.body);
  CHECK_THAT(turn.record.degradation_notes,
             Catch::Contains("with a summary of the history (noted)"));
  CHECK(blocker.Release().ok());
}

TEST_CASE("a request waits in the full pool's queue and is recorded with its wait",
          "[agent][pools][concurrency]") {
  // The byte estimator on both sides, not the SentencePiece model: this case runs under
  // ThreadSanitizer, whose builds cannot load libsentencepiece next to libprotobuf.
  auto server = testing::StartSim();
  HttpTransportOptions h;
  h.base_url = server->base_url();
  auto http = Must(MakeHttpTransport(h));
  Gate long_gate(http.get());
  testing::FakeClock clock;  // the queue wait is the time the test advances, not real time
  PoolSetConfig config;
  config.pools = {Pool("short", 4000, http.get(), 0), Pool("long", 60000, &long_gate, 1)};
  config.pools[1].max_queue = 4;
  config.ladder = {DegradationStep::kWait, DegradationStep::kRefuse};
  config.clock = &clock;
  auto pools = Must(PoolSet::Create(config));
  auto agent =
      Must(Agent::Create(Config("waiting", "", "estimate"), {pools.get(), nullptr, nullptr}));
  Session(*agent, 4, 400);
  REQUIRE(Must(agent->InputTokens()) > 4000);

  Blocker blocker(pools.get(), &long_gate, 30000);
  StatusOr<Turn> turn = InternalError("not run");
  std::thread waiter([&] { turn = agent->Complete(); });
  REQUIRE(testing::WaitFor([&] { return pools->Metrics().pools[1].queued == 1; }));
  clock.Advance(20000);
  CHECK(blocker.Release().ok());
  waiter.join();
  REQUIRE(turn.ok());
  CHECK(turn->record.pool == "long");
  CHECK(turn->record.degradation == "wait");
  CHECK(turn->record.queue_wait_ms == 20);
  CHECK(turn->record.degradation_notes.empty());  // nothing was skipped before waiting
}

TEST_CASE("a refused request names the pool, its cap and queue depth and changes nothing",
          "[agent][pools]") {
  Sim sim;
  Gate long_gate(sim.http.get());
  PoolSetConfig config;
  config.pools = {Pool("short", 4000, sim.http.get(), 0), Pool("long", 60000, &long_gate, 1)};
  config.pools[1].max_queue = 0;
  auto pools = Must(PoolSet::Create(config));
  testing::TempDir dir;
  const std::string db = dir.File("agents.db");
  AgentConfig c = Config("refused", db);
  auto agent = Must(Agent::Create(c, {pools.get(), nullptr, nullptr}));
  // Stable layers larger than the short pool: neither compaction nor a fork can get under it.
  MustOk(
      agent->SetSystemPrompt("You are a coding agent. The repository map:\n" + ToolOutput(1, 500)));
  Must(agent->AppendUser("Read the log."));
  const int64_t before = Must(agent->InputTokens());
  REQUIRE(before > 4000);

  Blocker blocker(pools.get(), &long_gate, 30000);
  sim.server->ClearRequests();
  StatusOr<Turn> turn = agent->Complete();
  REQUIRE_FALSE(turn.ok());
  CHECK(turn.status().code() == StatusCode::kResourceExhausted);
  CHECK_THAT(turn.status().message(),
             Catch::Contains("pool \"long\" is full") && Catch::Contains("cap 1") &&
                 Catch::Contains("queue depth 0 of 0") &&
                 Catch::Contains("compacting the history of agent \"refused\" left") &&
                 Catch::Contains("wait skipped"));
  CHECK(sim.server->requests().empty());
  CHECK(Must(agent->InputTokens()) == before);  // nothing compacted, nothing forked
  auto store = Must(OpenSqliteStore(db));
  auto records = Must(store->RecentRequests("refused", 10));
  REQUIRE(records.size() == 1);
  CHECK(records[0].code == StatusCode::kResourceExhausted);
  CHECK(records[0].pool == "long");
  CHECK(records[0].degradation == "refuse");
  CHECK_THAT(records[0].degradation_notes, Catch::Contains("fork failed"));
  CHECK_FALSE(store->GetAgent("refused.fork-1").ok());  // the unfitting fork is deleted again
  CHECK(blocker.Release().ok());
}

TEST_CASE("agents sharing stable layers go to one replica, different ones spread",
          "[agent][pools]") {
  Sim a, b, c;
  PoolSetConfig config;
  PoolConfig pool;
  pool.name = "all";
  pool.max_input_tokens = 60000;
  pool.transports = {a.http.get(), b.http.get(), c.http.get()};
  config.pools = {pool};
  // Without the agent's header, every request would hash the same (empty) body prefix.
  config.affinity_prefix_bytes = 0;
  auto pools = Must(PoolSet::Create(config));
  auto replica_of = [&](const std::string& system, const std::string& id,
                        const std::string& question) {
    AgentConfig cfg = Config(id, "");
    auto agent = Must(Agent::Create(cfg, {pools.get(), nullptr, nullptr}));
    MustOk(agent->SetSystemPrompt(system));
    Must(agent->AppendUser(question));
    return Must(agent->Complete()).record.endpoint;
  };
  const std::string shared = "You review pull requests of the payments service.";
  std::string first = replica_of(shared, "reviewer-1", "Review PR 17.");
  for (int i = 2; i <= 6; ++i) {
    CHECK(replica_of(shared, "reviewer-" + std::to_string(i),
                     "Review PR " + std::to_string(i * 31) + " with care.") == first);
  }
  std::set<std::string> used;
  for (int i = 0; i < 12; ++i) {
    used.insert(replica_of("You maintain service number " + std::to_string(i) + ".",
                           "maintainer-" + std::to_string(i), "Check the build."));
  }
  CHECK(used.size() >= 2);
  // The header is the PoolSet's: it is not forwarded to the server.
  for (Sim* s : {&a, &b, &c}) {
    for (const sim::SimRequestLog& r : s->server->requests()) {
      CHECK(r.headers.count(kPrefixHashHeader) == 0);
    }
  }
}

}  // namespace
}  // namespace strata
