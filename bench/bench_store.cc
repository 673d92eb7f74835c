// Store benchmarks, on the traces of bench/traces_dir.h:
//   BM_DurableAppend/<sync>     one context append persisted through the store (one WAL
//   transaction);
//                               sync 0 = FULL (fsync per commit), 1 = NORMAL (fsync at checkpoints)
//   BM_Reopen1MTokens           open the store, restore an agent holding >= 1M tokens of history
//                               (the traces' message contents appended as user messages until
//                               that size) and render its request
//   BM_BytesPer1MTokens/<mode>  database bytes per 1M tokens of content for every trace replayed
//                               once, then the whole corpus again as a second set of agents
//                               (mode 0 = dedup + zstd, 1 = dedup only, 2 = neither, all inline)
//   BM_PostgresDurableAppend    BM_DurableAppend on the PostgreSQL store at $STRATA_BENCH_POSTGRES
//   BM_PostgresReopen1MTokens   BM_Reopen1MTokens on it
//   BM_PostgresTakeover         a process holding an agent's lease (TTL 1000 ms, renewed) is
//                               SIGKILLed: the time until another takes the lease and reopens the
//                               agent (counters p50_ms, p99_ms over the iterations)
// Tokens are counted by the 4-bytes-per-token estimator. Databases live in $TMPDIR (or /tmp).
//
//   build/bench/bench_store --benchmark_min_time=1
//   STRATA_BENCH_POSTGRES=postgresql://user@127.0.0.1:5432/db build/bench/bench_store
#include <benchmark/benchmark.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "strata/replay/trace.h"
#include "strata/store.h"
#include "traces_dir.h"

namespace {

namespace fs = std::filesystem;

std::string TempPath(const std::string& name) {
  const char* base = std::getenv("TMPDIR");
  std::string dir = std::string(base != nullptr ? base : "/tmp") + "/strata-bench-store-" +
                    std::to_string(::getpid());
  fs::create_directories(dir);
  return dir + "/" + name;
}

void RemoveDb(const std::string& path) {
  for (const char* suffix : {"", "-wal", "-shm"}) fs::remove(path + suffix);
}

std::vector<std::vector<strata::TraceMessage>> LoadTraces() {
  std::vector<std::vector<strata::TraceMessage>> traces;
  for (const std::string& file : strata::bench::TraceFiles()) {
    auto trace = strata::ReadTrace(file);
    if (trace.ok()) traces.push_back(std::move(*trace));
  }
  return traces;
}

const std::vector<std::vector<strata::TraceMessage>>& Traces() {
  static const auto* traces = new std::vector<std::vector<strata::TraceMessage>>(LoadTraces());
  return *traces;
}

strata::ContextOptions AgentOptions(const std::string& id) {
  strata::ContextOptions options;
  options.agent.id = id;
  options.hygiene.deduplicate =
      false;  // keep repeated outputs whole: measure the store, not hygiene
  return options;
}

strata::Status Feed(const std::vector<strata::TraceMessage>& messages, strata::Context& context) {
  return strata::ReplayTrace(messages, context,
                             [](const strata::TraceMessage&, const strata::BuiltRequest&) {
                               return strata::Status::Ok();
                             });
}

// $STRATA_BENCH_POSTGRES, or "" (the PostgreSQL cases are then skipped).
std::string PostgresUrl() {
  const char* url = std::getenv("STRATA_BENCH_POSTGRES");
  return url != nullptr ? url : "";
}

void DurableAppend(benchmark::State& state, const std::string& path) {
  strata::StoreOptions options;
  options.synchronous = state.range(0) == 0 ? strata::StoreSync::kFull : strata::StoreSync::kNormal;
  auto store = strata::OpenStore(path, options);
  if (store.ok()) (*store)->DeleteAgent("append").IgnoreError();
  if (!store.ok()) return state.SkipWithError(store.status().ToString().c_str());
  auto context = strata::CreateContext(**store, AgentOptions("append"));
  if (!context.ok()) return state.SkipWithError(context.status().ToString().c_str());
  // Message contents of the corpus, in order (tool outputs included), appended as user messages.
  std::vector<std::string> contents;
  for (const auto& trace : Traces()) {
    for (const auto& m : trace) {
      if (!m.content.empty()) contents.push_back(m.content);
    }
  }
  size_t i = 0, bytes = 0;
  for (auto _ : state) {
    const std::string& content = contents[i++ % contents.size()];
    auto id = (*context)->AppendUser(content);
    if (!id.ok()) return state.SkipWithError(id.status().ToString().c_str());
    bytes += content.size();
  }
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations()));
  state.SetBytesProcessed(static_cast<int64_t>(bytes));
  state.SetLabel(state.range(0) == 0 ? "synchronous=FULL" : "synchronous=NORMAL");
}

void BM_DurableAppend(benchmark::State& state) {
  const std::string path = TempPath("append.db");
  RemoveDb(path);
  DurableAppend(state, path);
  RemoveDb(path);
}
BENCHMARK(BM_DurableAppend)->Arg(0)->Arg(1)->UseRealTime()->Unit(benchmark::kMicrosecond);

void BM_PostgresDurableAppend(benchmark::State& state) {
  if (PostgresUrl().empty()) return state.SkipWithError("set STRATA_BENCH_POSTGRES to a URL");
  DurableAppend(state, PostgresUrl());
}
BENCHMARK(BM_PostgresDurableAppend)->Arg(0)->Arg(1)->UseRealTime()->Unit(benchmark::kMicrosecond);

// Appends the corpus's message contents as user messages to agent `id` until it holds `tokens`
// tokens (one transaction each, synchronous=NORMAL to fill quickly).
strata::Status FillWithAppends(strata::Store& store, const std::string& id, size_t tokens) {
  STRATA_ASSIGN_OR_RETURN(auto context, strata::CreateContext(store, AgentOptions(id)));
  size_t n = 0;
  while (context->Stats().layers[4].tokens < tokens) {
    for (const auto& trace : Traces()) {
      for (const auto& m : trace) {
        if (m.content.empty()) continue;
        STRATA_RETURN_IF_ERROR(context->AppendUser(m.content + " #" + std::to_string(n++)).status());
      }
      if (context->Stats().layers[4].tokens >= tokens) break;
    }
  }
  return strata::Status::Ok();
}

void Reopen1MTokens(benchmark::State& state, const std::string& path) {
  {
    auto store = strata::OpenStore(path);
    if (!store.ok()) return state.SkipWithError(store.status().ToString().c_str());
    (*store)->DeleteAgent("big").IgnoreError();
    strata::Status filled = FillWithAppends(**store, "big", 1000000);
    if (!filled.ok()) return state.SkipWithError(filled.ToString().c_str());
  }
  size_t tokens = 0, segments = 0, body_bytes = 0;
  for (auto _ : state) {
    auto store = strata::OpenStore(path);
    if (!store.ok()) return state.SkipWithError(store.status().ToString().c_str());
    auto context = strata::OpenContext(**store, "big");
    if (!context.ok()) return state.SkipWithError(context.status().ToString().c_str());
    auto built = (*context)->Build();
    if (!built.ok()) return state.SkipWithError(built.status().ToString().c_str());
    tokens = built->total_tokens;
    body_bytes = built->body.size();
    segments = (*context)->Stats().segments;
    benchmark::DoNotOptimize(built->body.data());
  }
  state.counters["tokens"] = static_cast<double>(tokens);
  state.counters["segments"] = static_cast<double>(segments);
  state.counters["body_MB"] = static_cast<double>(body_bytes) / 1e6;
}

void BM_Reopen1MTokens(benchmark::State& state) {
  const std::string path = TempPath("reopen.db");
  RemoveDb(path);
  Reopen1MTokens(state, path);
  state.counters["file_MB"] = static_cast<double>(fs::file_size(path)) / 1e6;
  RemoveDb(path);
}
BENCHMARK(BM_Reopen1MTokens)->Unit(benchmark::kMillisecond)->Iterations(5);

void BM_PostgresReopen1MTokens(benchmark::State& state) {
  if (PostgresUrl().empty()) return state.SkipWithError("set STRATA_BENCH_POSTGRES to a URL");
  Reopen1MTokens(state, PostgresUrl());
}
BENCHMARK(BM_PostgresReopen1MTokens)->Unit(benchmark::kMillisecond)->Iterations(5);

// A child process that takes agent "takeover"'s lease (TTL 1000 ms, renewed) and then waits to be
// killed; returns its pid once it holds the lease.
pid_t StartHolder(const std::string& url) {
  int ready[2];
  if (::pipe(ready) != 0) return -1;
  pid_t pid = ::fork();
  if (pid == 0) {
    strata::StoreOptions options;
    options.lease_ttl_ms = 1000;
    auto store = strata::OpenStore(url, options);
    if (!store.ok() || !(*store)->AcquireLease("takeover").ok()) ::_exit(2);
    if (::write(ready[1], "r", 1) != 1) ::_exit(3);
    for (;;) ::pause();
  }
  char c;
  if (::read(ready[0], &c, 1) != 1) pid = -1;
  ::close(ready[0]);
  ::close(ready[1]);
  return pid;
}

void BM_PostgresTakeover(benchmark::State& state) {
  if (PostgresUrl().empty()) return state.SkipWithError("set STRATA_BENCH_POSTGRES to a URL");
  auto store = strata::OpenStore(PostgresUrl());
  if (!store.ok()) return state.SkipWithError(store.status().ToString().c_str());
  (*store)->DeleteAgent("takeover").IgnoreError();
  if (!strata::CreateContext(**store, AgentOptions("takeover")).ok()) {
    return state.SkipWithError("cannot create the agent");
  }
  std::vector<double> ms;
  for (auto _ : state) {
    state.PauseTiming();
    (*store)->ReleaseLease("takeover").IgnoreError();
    pid_t holder = StartHolder(PostgresUrl());
    if (holder < 0) return state.SkipWithError("the lease holder did not start");
    state.ResumeTiming();
    const auto killed = std::chrono::steady_clock::now();
    ::kill(holder, SIGKILL);
    while (!(*store)->AcquireLease("takeover").ok()) ::usleep(5000);
    auto context = strata::OpenContext(**store, "takeover");
    if (!context.ok()) return state.SkipWithError(context.status().ToString().c_str());
    ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - killed)
                     .count());
    ::waitpid(holder, nullptr, 0);
  }
  std::sort(ms.begin(), ms.end());
  state.counters["p50_ms"] = ms[ms.size() / 2];
  state.counters["p99_ms"] = ms[std::min(ms.size() - 1, ms.size() * 99 / 100)];
}
BENCHMARK(BM_PostgresTakeover)->Unit(benchmark::kMillisecond)->Iterations(20)->UseRealTime();

void BM_BytesPer1MTokens(benchmark::State& state) {
  const std::string path = TempPath("bytes.db");
  strata::StoreOptions options;
  options.synchronous = strata::StoreSync::kNormal;
  if (state.range(0) >= 1) options.compression_level = 0;
  if (state.range(0) >= 2) options.deduplicate = false;
  for (auto _ : state) {
    state.PauseTiming();
    RemoveDb(path);
    state.ResumeTiming();
    auto store = strata::OpenSqliteStore(path, options);
    if (!store.ok()) return state.SkipWithError(store.status().ToString().c_str());
    double tokens = 0, once_bytes = 0, once_tokens = 0;
    for (int copy = 0; copy < 2; ++copy) {
      for (size_t t = 0; t < Traces().size(); ++t) {
        auto context = strata::CreateContext(
            **store, AgentOptions("trace-" + std::to_string(t) + "-copy-" + std::to_string(copy)));
        if (!context.ok()) return state.SkipWithError(context.status().ToString().c_str());
        strata::Status fed = Feed(Traces()[t], **context);
        if (!fed.ok()) return state.SkipWithError(fed.ToString().c_str());
        for (const auto& layer : (*context)->Stats().layers)
          tokens += static_cast<double>(layer.tokens);
      }
      if (copy == 0) {
        once_tokens = tokens;
        once_bytes = static_cast<double>((*store)->Stats()->file_bytes);
      }
    }
    auto stats = (*store)->Stats();
    state.counters["MB_per_1M_tokens_once"] =
        once_bytes / once_tokens;  // bytes/token = MB/1M tokens
    state.counters["MB_per_1M_tokens_twice"] = static_cast<double>(stats->file_bytes) / tokens;
    state.counters["corpus_tokens"] = once_tokens;
    state.counters["blob_ratio"] = stats->blob_stored_bytes > 0
                                       ? static_cast<double>(stats->blob_raw_bytes) /
                                             static_cast<double>(stats->blob_stored_bytes)
                                       : 0;
  }
  state.SetLabel(state.range(0) == 0 ? "dedup+zstd" : state.range(0) == 1 ? "dedup" : "inline");
  RemoveDb(path);
}
BENCHMARK(BM_BytesPer1MTokens)->DenseRange(0, 2)->Unit(benchmark::kMillisecond)->Iterations(1);

}  // namespace

BENCHMARK_MAIN();
