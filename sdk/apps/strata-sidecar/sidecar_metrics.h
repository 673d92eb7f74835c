// strata-sidecar's metrics: every RequestRecord field by tenant and pool, compactions, prefix
// breaks, agents, and the two watermarks the operator is alerted on — the estimated KV bytes of
// the requests in flight against a configured capacity, and the share of long requests over a
// time window — exported in the Prometheus text format on GET /metrics (strata/metrics.h).
// docs/sidecar.md "Metrics" lists every series; "Alert rules" has rules for them.
//
//   SidecarMetrics metrics(ParseMetricsConfig(config.metrics).value());
//   {
//     SidecarMetrics::InFlight in_flight = metrics.Begin("acme", input_tokens, max_output_tokens);
//     StatusOr<strata::Turn> turn = agent.Complete();
//     if (turn.ok()) metrics.ObserveTurn("acme", *turn);
//     else metrics.ObserveError("acme", "", turn.status().code());
//   }  // the request leaves the in-flight gauges here
//   std::string body = metrics.RenderPrometheus();
//
// Alerts: when the KV usage (bytes in flight / kv_capacity_bytes) rises above kv_alert_ratio, or
// the long-request share rises above long_share_alert (with at least long_share_min_requests
// requests in the window), the gauge strata_sidecar_<name>_alert becomes 1 and one warning is
// logged; the gauge returns to 0 when the value falls back to the threshold or below, and the next
// rise logs again.
//
// Thread safety: SidecarMetrics is thread-safe.
#ifndef STRATA_APPS_STRATA_SIDECAR_SIDECAR_METRICS_H_
#define STRATA_APPS_STRATA_SIDECAR_SIDECAR_METRICS_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "strata/agent.h"
#include "strata/status.h"
#include "strata/transport.h"

namespace strata {
class PoolSet;
}  // namespace strata

namespace strata::sidecar {

// The "metrics" section of the sidecar's configuration (every key optional).
struct MetricsConfig {
  // KV cache capacity of the deployment behind the sidecar in bytes (e.g. `strata plan`'s KV
  // capacity in tokens x its bytes per token). 0 (the default) disables the KV watermark alert;
  // the bytes in flight are exported either way.
  int64_t kv_capacity_bytes = 0;
  // Bytes of KV cache per token used to estimate a request's KV from its tokens. Default 7600
  // (GLM-5.3-Flash, the same default as RequestRecord::kv_cache_bytes and PoolSet).
  int64_t kv_bytes_per_token = 7600;
  // The KV alert rises above this share of kv_capacity_bytes. Default 0.85.
  double kv_alert_ratio = 0.85;
  // A request whose input tokens + max output tokens reach this is "long". Default 131072.
  int64_t long_request_tokens = 131072;
  // The long-request share is computed over the requests begun in the last this many seconds.
  // Default 300.
  int64_t long_share_window_s = 300;
  // The long-share alert rises above this share. Default 0.25.
  double long_share_alert = 0.25;
  // Fewer requests than this in the window never raise the long-share alert (one long request
  // alone is not a share). Default 20.
  int64_t long_share_min_requests = 20;
};

// Parses the "metrics" object: {"kv_capacity_bytes": 68719476736, "kv_bytes_per_token": 7600,
// "kv_alert_ratio": 0.85, "long_request_tokens": 131072, "long_share_window_s": 300,
// "long_share_alert": 0.25, "long_share_min_requests": 20}. INVALID_ARGUMENT naming the key path
// ("metrics.kv_alert_ratio: expected a number in (0, 1], got 85") for unknown keys, wrong types
// and values out of range.
StatusOr<MetricsConfig> ParseMetricsConfig(const nlohmann::json& metrics);

// The finish_reason label of a turn: one of the values servers send (stop, length, tool_calls,
// content_filter, function_call, abort, error, cancelled), "unknown" for none, and "other" for
// any other value, so that an upstream cannot add series without bound.
std::string FinishReasonLabel(std::string_view finish_reason);

class SidecarMetrics {
 public:
  // Receives each alert warning (one line, no trailing newline). Default: stderr, prefixed
  // "strata-sidecar: warning: ".
  using WarningSink = std::function<void(const std::string& message)>;

  // `clock` (not owned; nullptr: SystemClock()) times the long-share window.
  explicit SidecarMetrics(MetricsConfig config, Clock* clock = nullptr, WarningSink warn = {});
  ~SidecarMetrics();
  SidecarMetrics(const SidecarMetrics&) = delete;
  SidecarMetrics& operator=(const SidecarMetrics&) = delete;

  // A request in flight: counted in the KV bytes in flight (input + max output tokens, times
  // kv_bytes_per_token) and the tenant's requests in flight while alive. Movable.
  class InFlight {
   public:
    InFlight() = default;
    InFlight(InFlight&& other) noexcept;
    InFlight& operator=(InFlight&& other) noexcept;
    ~InFlight();
    // Leaves the in-flight gauges now (the destructor then does nothing).
    void End();

   private:
    friend class SidecarMetrics;
    SidecarMetrics* metrics_ = nullptr;
    std::string tenant_;
    int64_t kv_bytes_ = 0;
  };

  // Counts a request of `tenant` beginning: the in-flight gauges, the long-request share (and
  // strata_sidecar_long_requests_total when it is long); evaluates both alerts.
  [[nodiscard]] InFlight Begin(std::string_view tenant, int64_t input_tokens,
                               int64_t max_output_tokens);
  // A completed turn: its record (tokens, latencies, finish reason, retries, degradation), its
  // compaction, its prefix break and its warnings (strata_sidecar_turn_warnings_total).
  void ObserveTurn(std::string_view tenant, const strata::Turn& turn);
  // A failed request or call; `pool` "" when unknown (label "none"), `tenant` "" when the call
  // failed before authentication (label "none").
  void ObserveError(std::string_view tenant, std::string_view pool, strata::StatusCode code);
  // `count` writes the store refused for a tenant's turn (Agent::record_write_failures grew):
  // strata_sidecar_record_write_failures_total.
  void ObserveRecordWriteFailures(std::string_view tenant, int64_t count);
  // The number of agents the tenant has now.
  void SetAgents(std::string_view tenant, int64_t n);
  // The pool set the sidecar sends through (not owned; nullptr: none); its strata_pool_* and
  // strata_kv_* families are appended to RenderPrometheus().
  void SetPoolSet(const strata::PoolSet* pools);

  // The exposition text (Content-Type: text/plain; version=0.0.4). Re-evaluates the long share
  // (the window slides) and the alerts first.
  std::string RenderPrometheus() const;

  // Current values, for the sidecar's own decisions and for tests. The alert states are as last
  // evaluated (by Begin, the end of an InFlight, or RenderPrometheus).
  int64_t kv_bytes_in_flight() const;
  double long_request_share() const;  // now, over the window
  bool kv_alert() const;
  bool long_share_alert() const;

  class Impl;

 private:
  void EndRequest(const std::string& tenant, int64_t kv_bytes);
  std::unique_ptr<Impl> impl_;
};

// The class label of strata_sidecar_errors_total: "client" for the caller's mistakes and choices
// (INVALID_ARGUMENT, NOT_FOUND, ALREADY_EXISTS, PERMISSION_DENIED, UNAUTHENTICATED,
// FAILED_PRECONDITION, OUT_OF_RANGE, ABORTED, CANCELLED), "server" for every other code (the
// error-ratio alert counts these: UNAVAILABLE, DEADLINE_EXCEEDED, RESOURCE_EXHAUSTED, INTERNAL,
// ...).
const char* ErrorClass(StatusCode code);

// The label a prefix-break cause is counted under: the cause without its details in parentheses
// ("doc version change (v1 -> v2)" -> "doc version change"), so the label set stays small.
std::string PrefixBreakReasonLabel(std::string_view cause);

}  // namespace strata::sidecar

#endif  // STRATA_APPS_STRATA_SIDECAR_SIDECAR_METRICS_H_
