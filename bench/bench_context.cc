// Context benchmarks. For contexts of about 10K, 100K and 1M tokens, built from
// the traces (bench/traces_dir.h) repeated until the size is reached:
//   BM_AppendTurnAndBuild   append one assistant turn with its tool result, then Build()
//   BM_MemcpyFloor          memcpy of the same rendered body into a reused buffer (physical floor)
//   BM_CopyIntoNewString    the body copied into a freshly allocated std::string
//   BM_NlohmannFromScratch  append the turn to an nlohmann::json request and serialize it whole
//   BM_ContextMemory        heap bytes the context holds per byte of rendered request
//   BM_CompactingBuild      as BM_AppendTurnAndBuild with a budget and a policy that masks one
//                           earlier tool result in every Build() (no request counter: the policy
//                           plans on the context's own count); 1,000 turns, so that the context grows
//                           by about 60K tokens
//   BM_ExtractIdentifiers   the identifiers of every tool result and user message of the traces
//                           of 512 bytes or more (core/identifiers.h, what a policy reads of each
//                           new segment once), each text given a prefix that differs at every
//                           iteration so that the process-wide memo does not answer; the copy
//                           with the prefix is timed too (bytes per second)
// Tokens are counted by the 4-bytes-per-token estimator (the tokenizer benchmarks are separate).
//
//   build/bench/bench_context --benchmark_min_time=0.2
#include <benchmark/benchmark.h>
#include <malloc.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <new>
#include <filesystem>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/identifiers.h"
#include "strata/compaction_policy.h"
#include "strata/context.h"
#include "strata/replay/trace.h"
#include "traces_dir.h"

namespace {
// Exact live-heap accounting for BM_ContextMemory: every operator new/delete of this program updates
// g_live_bytes by the usable size of the block.
std::atomic<int64_t> g_live_bytes{0};
}  // namespace

void* operator new(size_t size) {
  void* p = std::malloc(size ? size : 1);
  if (!p) throw std::bad_alloc();
  g_live_bytes.fetch_add(static_cast<int64_t>(malloc_usable_size(p)), std::memory_order_relaxed);
  return p;
}
void operator delete(void* p) noexcept {
  if (!p) return;
  g_live_bytes.fetch_sub(static_cast<int64_t>(malloc_usable_size(p)), std::memory_order_relaxed);
  std::free(p);
}
void operator delete(void* p, size_t) noexcept { operator delete(p); }

namespace {

namespace fs = std::filesystem;
using strata::Context;
using strata::TraceMessage;
using strata::TraceRole;

const std::vector<TraceMessage>& AllMessages() {
  static const std::vector<TraceMessage> messages = [] {
    const std::vector<std::string> files = strata::bench::TraceFiles();
    std::vector<TraceMessage> all;
    for (const std::string& file : files) {
      auto trace = strata::ReadTrace(file);
      if (!trace.ok()) std::abort();
      all.insert(all.end(), trace->begin(), trace->end());
    }
    return all;
  }();
  return messages;
}

// Feeds trace messages into `context` (and mirrors them into `json_messages` when given) until the
// rendered request holds about `tokens` tokens. Keeps pairing valid across trace boundaries.
void Fill(Context& context, size_t tokens, nlohmann::json* json_messages) {
  const auto& messages = AllMessages();
  bool have_system = false;
  size_t round = 0;
  for (size_t i = 0;; i = (i + 1) % messages.size()) {
    if (i == 0) ++round;
    const TraceMessage& m = messages[i];
    if (m.role == TraceRole::kSystem) {
      if (!have_system) {
        (void)context.SetSystemPrompt(m.content);
        if (json_messages) json_messages->push_back({{"role", "system"}, {"content", m.content}});
        have_system = true;
      }
      continue;
    }
    for (const std::string& open : context.OpenToolCalls()) {
      if (m.role == TraceRole::kTool) break;
      (void)context.AppendToolResult({open, "(no output)", false});
      if (json_messages) {
        json_messages->push_back({{"role", "tool"}, {"tool_call_id", open}, {"content", "(no output)"}});
      }
    }
    // Ids repeat across traces; make them unique per round.
    const std::string suffix = "_" + std::to_string(round);
    if (m.role == TraceRole::kUser) {
      if (!context.OpenToolCalls().empty()) continue;
      (void)context.AppendUser(m.content);
      if (json_messages) json_messages->push_back({{"role", "user"}, {"content", m.content}});
    } else if (m.role == TraceRole::kAssistant) {
      auto calls = m.tool_calls;
      for (auto& call : calls) call.id += suffix;
      (void)context.AppendAssistant({m.content, m.reasoning, calls});
      if (json_messages) {
        nlohmann::json message = {{"role", "assistant"}, {"content", m.content}};
        for (const auto& call : calls) {
          message["tool_calls"].push_back(
              {{"id", call.id},
               {"type", "function"},
               {"function", {{"name", call.name}, {"arguments", call.arguments}}}});
        }
        json_messages->push_back(std::move(message));
      }
    } else if (m.role == TraceRole::kTool) {
      const std::string id = m.tool_call_id + suffix;
      if (!context.AppendToolResult({id, m.content, false}).ok()) continue;
      if (json_messages) {
        json_messages->push_back({{"role", "tool"}, {"tool_call_id", id}, {"content", m.content}});
      }
    }
    if (context.OpenToolCalls().empty() && context.Stats().layers[4].tokens >= tokens) return;
  }
}

std::unique_ptr<Context> MakeContext(size_t tokens, nlohmann::json* json_messages = nullptr,
                                     strata::CompactionPolicy* policy = nullptr) {
  strata::ContextOptions options;
  if (policy != nullptr) {
    options.budget = strata::Budget();
    options.budget->window = static_cast<int64_t>(8 * tokens + 200'000);  // never the limit
    options.compaction = policy;
  }
  options.agent.id = "bench";
  // Hygiene off so that the rendered body mirrors the nlohmann baseline byte for byte in size.
  options.hygiene.max_segment_tokens = 0;
  options.hygiene.deduplicate = false;
  options.hygiene.fold_error_logs = false;
  auto context = std::move(Context::Create(options)).value();
  Fill(*context, tokens, json_messages);
  return context;
}

const std::string kTurnArguments = R"({"command": "grep -rn \"def test_\" tests/ | head -20"})";
const std::string kTurnResult =
    "tests/test_core.py:12:def test_parse():\ntests/test_core.py:40:def test_render():\n"
    "tests/test_io.py:7:def test_roundtrip():\n";

void BM_AppendTurnAndBuild(benchmark::State& state) {
  auto context = MakeContext(static_cast<size_t>(state.range(0)));
  const strata::ContextSnapshot baseline = context->Snapshot();
  size_t n = 0, bytes = 0;
  for (auto _ : state) {
    // Every 16 turns, go back to the nominal size (untimed), so the context does not drift.
    if (++n % 16 == 0) {
      state.PauseTiming();
      context = std::move(Context::Restore(context->options(), baseline)).value();
      state.ResumeTiming();
    }
    const std::string id = "bench_" + std::to_string(n);
    (void)context->AppendAssistant({"Looking for tests.", "", {{id, "bash", kTurnArguments}}});
    (void)context->AppendToolResult({id, kTurnResult + std::to_string(n), false});
    auto request = context->Build();
    bytes = request->body.size();
    benchmark::DoNotOptimize(request->body.data());
  }
  state.counters["request_bytes"] = static_cast<double>(bytes);
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * bytes));
}

// Masks the live tool result kKeep places before the last one, in every first round.
class MaskBehindPolicy final : public strata::CompactionPolicy {
 public:
  static constexpr size_t kKeep = 3;
  std::string Name() const override { return "mask-behind@1"; }
  bool ShouldCompact(const strata::CompactionInput& input) const override {
    return input.round == 0;
  }
  strata::StatusOr<strata::HistoryEdit> Plan(const strata::CompactionInput& input) override {
    strata::HistoryEdit edit;
    size_t seen = 0;
    for (auto it = input.history.rbegin(); it != input.history.rend(); ++it) {
      const strata::Segment& s = **it;
      if (s.kind != strata::SegmentKind::kToolResult || ++seen <= kKeep) continue;
      if (s.state == strata::SegmentState::kLive) {
        edit.edits.push_back({s.id, strata::SegmentEdit::Action::kMask, "[masked]"});
      }
      break;
    }
    return edit;
  }
};

void BM_CompactingBuild(benchmark::State& state) {
  MaskBehindPolicy policy;
  auto context = MakeContext(static_cast<size_t>(state.range(0)), nullptr, &policy);
  (void)context->Build();
  size_t n = 0, compactions = 0;
  for (auto _ : state) {
    const std::string id = "bench_" + std::to_string(++n);
    (void)context->AppendAssistant({"Looking for tests.", "", {{id, "bash", kTurnArguments}}});
    (void)context->AppendToolResult({id, kTurnResult + std::to_string(n), false});
    auto request = context->Build();
    if (!request.ok()) return state.SkipWithError(request.status().ToString().c_str());
    if (request->compaction) ++compactions;
    benchmark::DoNotOptimize(request->body.data());
    context->Recycle(std::move(request->body));
  }
  state.counters["compacting_share"] =
      static_cast<double>(compactions) / static_cast<double>(std::max<size_t>(1, n));
}

void BM_MemcpyFloor(benchmark::State& state) {
  auto context = MakeContext(static_cast<size_t>(state.range(0)));
  const std::string body = context->Build()->body;
  std::string target(body.size(), '\0');
  for (auto _ : state) {
    std::memcpy(target.data(), body.data(), body.size());
    benchmark::DoNotOptimize(target.data());
    benchmark::ClobberMemory();
  }
  state.counters["request_bytes"] = static_cast<double>(body.size());
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * body.size()));
}

void BM_CopyIntoNewString(benchmark::State& state) {
  auto context = MakeContext(static_cast<size_t>(state.range(0)));
  const std::string body = context->Build()->body;
  for (auto _ : state) {
    std::string copy = body;
    benchmark::DoNotOptimize(copy.data());
  }
  state.counters["request_bytes"] = static_cast<double>(body.size());
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * body.size()));
}

void BM_NlohmannFromScratch(benchmark::State& state) {
  nlohmann::json messages = nlohmann::json::array();
  auto context = MakeContext(static_cast<size_t>(state.range(0)), &messages);
  nlohmann::json request = {{"model", "glm-5.3-flash"}, {"messages", std::move(messages)}};
  size_t n = 0, bytes = 0;
  for (auto _ : state) {
    const std::string id = "bench_" + std::to_string(n++);
    request["messages"].push_back(
        {{"role", "assistant"},
         {"content", "Looking for tests."},
         {"tool_calls",
          {{{"id", id}, {"type", "function"}, {"function", {{"name", "bash"}, {"arguments", kTurnArguments}}}}}}});
    request["messages"].push_back(
        {{"role", "tool"}, {"tool_call_id", id}, {"content", kTurnResult + std::to_string(n)}});
    std::string body = request.dump(-1, ' ', false);
    bytes = body.size();
    benchmark::DoNotOptimize(body.data());
  }
  state.counters["request_bytes"] = static_cast<double>(bytes);
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * bytes));
}

void BM_ContextMemory(benchmark::State& state) {
  AllMessages();  // load the traces before measuring
  double ratio = 0, held = 0, rendered = 0;
  for (auto _ : state) {
    const int64_t before = g_live_bytes.load();
    auto context = MakeContext(static_cast<size_t>(state.range(0)));
    const int64_t after = g_live_bytes.load();
    state.counters["segments"] = static_cast<double>(context->Stats().segments);
    state.counters["content_bytes"] = static_cast<double>(context->Stats().layers[4].bytes);
    rendered = static_cast<double>(context->Build()->body.size());
    held = static_cast<double>(after - before);
    ratio = held / rendered;
  }
  state.counters["held_bytes"] = held;
  state.counters["rendered_bytes"] = rendered;
  state.counters["held_per_rendered_byte"] = ratio;
}

#define STRATA_SIZES Arg(10'000)->Arg(100'000)->Arg(1'000'000)
void BM_ExtractIdentifiers(benchmark::State& state) {
  std::vector<const std::string*> texts;
  for (const TraceMessage& m : AllMessages()) {
    if ((m.role == TraceRole::kTool || m.role == TraceRole::kUser) && m.content.size() >= 512)
      texts.push_back(&m.content);
  }
  static size_t iteration = 0;  // across runs too: the memo outlives each
  size_t bytes = 0, names = 0;
  std::string text;
  for (auto _ : state) {
    const std::string prefix = "iteration " + std::to_string(++iteration) + "\n";
    for (const std::string* t : texts) {
      text.assign(prefix).append(*t);
      names += strata::internal::ExtractIdentifiers(text, 16).size();
      bytes += text.size();
    }
  }
  state.SetBytesProcessed(static_cast<int64_t>(bytes));
  state.counters["texts"] = static_cast<double>(texts.size());
  benchmark::DoNotOptimize(names);
}

BENCHMARK(BM_AppendTurnAndBuild)->STRATA_SIZES->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_CompactingBuild)->STRATA_SIZES->Iterations(1000)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_MemcpyFloor)->STRATA_SIZES->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_CopyIntoNewString)->STRATA_SIZES->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_NlohmannFromScratch)->STRATA_SIZES->Iterations(20)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_ContextMemory)->STRATA_SIZES->Iterations(1)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_ExtractIdentifiers)->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
