// The load tester behind `strata bench`: agent-shaped workloads (synthetic documents of a target
// length, or the messages of recorded agent trajectories, growing over an agent's turns), cold or
// warm prefix, at several concurrencies, through
// one endpoint or a PoolSet; per-cell latency percentiles, throughput and cached share; the JSON
// results and the self-contained HTML report.
#ifndef STRATA_APPS_STRATA_BENCH_RUN_H_
#define STRATA_APPS_STRATA_BENCH_RUN_H_

#include <cstdint>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "strata/pools.h"
#include "strata/status.h"
#include "strata/transport.h"

namespace strata::cli::bench {

// Recorded agent trajectories (strata/replay/trace.h JSON lines), as the (role, content) messages a
// workload is cut from: a tool call becomes assistant text naming the call, a tool result a user
// message holding the output, so any chat template accepts the sequence.
struct TraceCorpus {
  std::vector<std::vector<std::pair<std::string, std::string>>> trajectories;
  size_t files = 0;
  int64_t bytes = 0;  // of message contents
};
// Every *.jsonl under each of `dirs` (recursively; manifest.jsonl excepted), sorted by path.
// INVALID_ARGUMENT naming the file and line of a malformed trajectory; NOT_FOUND for a missing
// directory or one holding no trajectory.
StatusOr<TraceCorpus> LoadTraceCorpus(const std::vector<std::string>& dirs);

struct Percentiles {
  double p50 = 0, p90 = 0, p99 = 0;
};
// Nearest-rank percentiles of `values` (all 0 when empty).
Percentiles ComputePercentiles(std::vector<double> values);

struct CellSpec {
  int64_t length = 0;  // target input tokens of an agent's document
  int concurrency = 1;
  bool warm = false;  // warm: each agent primes its prefix once, then grows it; cold: fresh docs
  int requests_per_agent = 2;
  int64_t output_tokens = 16;
  int bytes_per_token = 4;  // size of the synthetic document per target token
  std::string model = "glm-5.3-flash";
  uint64_t seed = 1;
  // Not owned. Set: agents' contexts are cut from these trajectories instead of synthetic
  // documents (see AgentBody).
  const TraceCorpus* traces = nullptr;
};

struct CellResult {
  CellSpec spec;
  std::string mode;  // "direct" or "pools"
  int64_t requests = 0;
  int64_t errors = 0;
  std::vector<std::string> error_samples;  // first few error messages
  std::vector<double> ttft_ms, tpot_ms, e2e_ms, queue_wait_ms;
  // The bench's own CPU time per request (its thread's: building the body, sending it, reading
  // the answer), so that a TTFT can be told from what the harness itself spent.
  std::vector<double> client_ms;
  int64_t prompt_tokens = 0, cached_tokens = 0, output_tokens = 0;
  bool cached_reported = false;
  double wall_s = 0;
};

// The body of an agent's turn: a system message, a synthetic document of about
// length * bytes_per_token bytes (deterministic in `doc_seed`), then `turn` follow-up exchanges.
// With spec.traces: a system message naming the session (`doc_seed`), then the trajectories'
// messages from a place chosen by `doc_seed` (continuing into the next trajectories) up to about
// length * bytes_per_token bytes, then the `turn` messages that follow them in the trajectories
// (each cut to 256 tokens' bytes), ending on a user message.
std::string AgentBody(const CellSpec& spec, uint64_t doc_seed, int turn);

// Runs one cell. `on_request_done` is called after every measured request (for a progress bar).
// `pools` may be nullptr (then `transport` is used; else the PoolSet, and queue waits are taken
// from its records).
CellResult RunCell(const CellSpec& spec, Transport* transport, PoolSet* pools,
                   const std::function<void()>& on_request_done);

nlohmann::ordered_json CellToJson(const CellResult& cell);

// CPU time the calling thread has used so far, in milliseconds (a request's client-side time is
// the difference around it).
double ThreadCpuMs();

// A self-contained HTML page (charts drawn with the inlined `chart_js` bundle) of `results`, the
// object written by --json.
std::string RenderHtmlReport(const nlohmann::ordered_json& results, const std::string& chart_js);

// The Chart.js bundle compiled into this binary ("" when the build found none).
const std::string& ChartJsBundle();

}  // namespace strata::cli::bench

#endif  // STRATA_APPS_STRATA_BENCH_RUN_H_
