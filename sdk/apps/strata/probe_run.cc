// strata probe: sending the probes to the endpoints with bounded concurrency (probe.h).
#include <algorithm>
#include <atomic>
#include <mutex>
#include <thread>

#include "probe.h"

namespace strata::cli::probe {
namespace {

// Sends `body` to `transport` until it succeeds or `retries` re-sends have failed too.
void SendOne(Transport* transport, const std::string& body, const ProbeSpec& spec, const std::string& request_id,
             const RunOptions& options, ProbeOutcome* out) {
  Status status = Status::Ok();
  Response response;
  for (int attempt = 0; attempt <= options.retries; ++attempt) {
    CallOptions call;
    call.deadline = options.deadline;
    call.request_id = request_id + (attempt > 0 ? "-again" + std::to_string(attempt) : "");
    call.prompt_tokens = out->tokens;
    status = transport->Send(body, call, &response);
    out->attempts += std::max(1, response.attempts);
    if (status.ok()) break;
  }
  if (!status.ok()) {
    out->failed = true;
    out->error = status.ToString();
    return;
  }
  out->given = response.content;
  out->correct = NormalizeAnswer(response.content) == NormalizeAnswer(spec.expected);
  out->ttft_ms = response.timings.ttft_ms;
  out->prompt_tokens = response.usage.prompt_tokens;
  out->cached_tokens = response.usage.cached_tokens;
}

std::string RequestId(const std::string& probe_id, size_t endpoint) {
  std::string id = "probe-" + probe_id + "-" + static_cast<char>('a' + endpoint % 26);
  std::replace(id.begin(), id.end(), '/', '-');
  return id;
}

}  // namespace

StatusOr<std::vector<ProbeOutcome>> RunProbes(const ProbeGenerator& generator, const std::vector<ProbeSpec>& plan,
                                              const std::vector<Transport*>& transports, const RunOptions& options) {
  const size_t endpoints = transports.size();
  std::vector<ProbeOutcome> outcomes(plan.size() * endpoints);
  std::atomic<size_t> next{0};
  std::mutex mu;  // guards first_error, done, failed, correct and the progress stream
  Status first_error = Status::Ok();
  size_t done = 0, failed = 0, discarded = 0;
  std::vector<size_t> correct(endpoints, 0);
  auto worker = [&] {
    for (size_t i = next++; i < plan.size(); i = next++) {
      StatusOr<RenderedProbe> rendered = generator.Render(plan[i]);
      if (!rendered.ok()) {
        std::lock_guard<std::mutex> lock(mu);
        if (first_error.ok()) first_error = rendered.status();
        next = plan.size();  // stop: the run is refused whole
        return;
      }
      for (size_t e = 0; e < endpoints; ++e) {
        ProbeOutcome& out = outcomes[i * endpoints + e];
        out.probe = i;
        out.endpoint = e;
        out.tokens = rendered->tokens;
        out.depth_actual = rendered->depth_actual;
        out.discarded = !rendered->discard_reason.empty();
        out.discard_reason = rendered->discard_reason;
        if (!out.discarded) SendOne(transports[e], rendered->body, plan[i], RequestId(plan[i].id, e), options, &out);
      }
      std::lock_guard<std::mutex> lock(mu);
      ++done;
      for (size_t e = 0; e < endpoints; ++e) {
        const ProbeOutcome& out = outcomes[i * endpoints + e];
        failed += out.failed ? 1 : 0;
        correct[e] += out.correct ? 1 : 0;
        discarded += (e == 0 && out.discarded) ? 1 : 0;
      }
      const size_t step = std::max<size_t>(1, plan.size() / 20);
      if (options.progress != nullptr && (done % step == 0 || done == plan.size())) {
        *options.progress << "probe: " << done << "/" << plan.size() << " probes";
        for (size_t e = 0; e < endpoints; ++e) *options.progress << ", " << static_cast<char>('A' + e) << " " << correct[e] << " correct";
        *options.progress << ", " << failed << " failed requests, " << discarded << " discarded\n" << std::flush;
      }
    }
  };
  const int threads = std::max(1, std::min<int>(options.concurrency, static_cast<int>(plan.size())));
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t) pool.emplace_back(worker);
  for (std::thread& t : pool) t.join();
  if (!first_error.ok()) return first_error;
  return outcomes;
}

}  // namespace strata::cli::probe
