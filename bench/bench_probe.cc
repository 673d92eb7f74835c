// strata probe's own costs (docs/benchmarks.md "strata probe"): generating probes from about 1M
// tokens of content (reading the sources, counting their blocks, rendering 1M-token probes), and
// the harness's overhead per probe next to the endpoint's time, against strata-sim --answer
// retrieve in-process. A plain main: bench_probe [SOURCE_DIR...] (default: the repository's sdk,
// tests and docs).
#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include "bench_paths.h"
#include "probe.h"
#include "sim_retrieve.h"
#include "sim_server.h"
#include "strata/chat_template.h"
#include "strata/http_transport.h"
#include "strata/tokenizer_spec.h"

namespace {

using Clock = std::chrono::steady_clock;
using strata::cli::probe::GenerateOptions;
using strata::cli::probe::ProbeGenerator;

double Ms(Clock::time_point since) {
  return std::chrono::duration<double, std::milli>(Clock::now() - since).count();
}

template <typename T>
T Must(strata::StatusOr<T> v) {
  if (!v.ok()) {
    std::fprintf(stderr, "bench_probe: %s\n", v.status().ToString().c_str());
    std::exit(1);
  }
  return std::move(v).value();
}

void Generation(const std::vector<std::string>& dirs, const std::string& spec) {
  auto tokenizer = Must(strata::MakeTokenizer(spec));
  auto glm = strata::MakeGlm5ChatTemplate();
  auto counter = strata::MakeRequestTokenCounter(*glm, *tokenizer);
  auto start = Clock::now();
  auto sources = Must(strata::cli::probe::LoadSources(dirs));
  const double load_ms = Ms(start);
  GenerateOptions options;
  options.lengths = {{"1m", 1048576}};
  options.probes_per_bucket = 1;
  start = Clock::now();
  auto generator = Must(ProbeGenerator::Create(std::move(sources), tokenizer.get(), counter.get(), options));
  const double create_ms = Ms(start);
  start = Clock::now();
  const auto plan = generator->Plan();
  int64_t tokens = 0;
  for (const auto& probe : plan) tokens += Must(generator->Render(probe)).tokens;
  const double render_ms = Ms(start) / static_cast<double>(plan.size());
  std::printf("generation, %s: %zu files, %lld bytes, %lld content tokens; read %.0f ms, count blocks and "
              "find candidates %.0f ms; render one 1M-token probe %.0f ms (mean of %zu, %lld tokens each)\n",
              spec.c_str(), generator->sources().files.size(), static_cast<long long>(generator->sources().bytes),
              static_cast<long long>(generator->content_tokens()), load_ms, create_ms, render_ms, plan.size(),
              static_cast<long long>(tokens / static_cast<int64_t>(plan.size())));
}

void Overhead(const std::vector<std::string>& dirs, const std::string& label, int64_t length, int probes) {
  auto tokenizer = strata::MakeEstimateTokenizer(4);
  auto glm = strata::MakeGlm5ChatTemplate();
  auto counter = strata::MakeRequestTokenCounter(*glm, *tokenizer);
  GenerateOptions options;
  options.lengths = {{label, length}};
  options.depths = {0.5};
  options.probes_per_bucket = probes;
  auto generator = Must(ProbeGenerator::Create(Must(strata::cli::probe::LoadSources(dirs)), tokenizer.get(),
                                               counter.get(), options));
  const auto plan = generator->Plan();
  auto start = Clock::now();
  for (const auto& probe : plan) Must(generator->Render(probe));
  const double render_ms = Ms(start) / probes;
  strata::sim::SimOptions sim_options;
  sim_options.answer = [](const std::string& request, int64_t prompt_tokens) {
    return strata::sim::AnswerRetrieve(request, prompt_tokens, {});
  };
  auto sim = Must(strata::sim::SimServer::Start(sim_options));
  strata::HttpTransportOptions http;
  http.base_url = sim->base_url();
  auto transport = Must(strata::MakeHttpTransport(http));
  strata::cli::probe::RunOptions run;
  run.concurrency = 1;
  start = Clock::now();
  auto outcomes = Must(strata::cli::probe::RunProbes(*generator, plan, {transport.get()}, run));
  const double run_ms = Ms(start) / probes;
  int correct = 0, sent = 0;
  for (const auto& o : outcomes) {
    correct += o.correct ? 1 : 0;
    sent += o.discarded ? 0 : 1;
  }
  std::printf("per probe at %s (estimate:4, %d probes, %d sent, %d correct, concurrency 1): render %.1f ms, send and "
              "answer (transport + strata-sim) %.1f ms, whole probe %.1f ms\n",
              label.c_str(), probes, sent, correct, render_ms, run_ms - render_ms, run_ms);
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> dirs(argv + 1, argv + argc);
  if (dirs.empty()) {
    for (const char* d : {"/sdk", "/tests", "/docs"}) dirs.push_back(std::string(STRATA_SOURCE_DIR) + d);
  }
  Generation(dirs, "estimate:4");
  Generation(dirs, std::string("spm:") + STRATA_SOURCE_DIR + "/tests/data/strata-test-spm.model");
  Overhead(dirs, "32k", 32768, 12);
  Overhead(dirs, "128k", 131072, 12);
  Overhead(dirs, "1m", 1048576, 4);
  return 0;
}
