// strata/pools.h — length pools: admission by exact input tokens, a degradation ladder, and
// prefix-affinity routing across the replicas of each pool (docs/serving.md).
//
// A PoolSet is itself a Transport: an Agent or a Client sends through it as through one endpoint,
// and every Send() is admitted to the smallest pool whose maximum input length holds the request,
// routed to one of that pool's replicas and forwarded. When the fitting pool is at its concurrency
// cap, or the request exceeds every pool, the configured degradation ladder applies in order:
//   compact  the caller's DegradationHandler (strata/pool_call.h) compacts the history so that
//            it fits a smaller pool (or, when the request exceeds every pool, the largest one)
//            that has a free slot;
//   fork     the handler forks the task into a request that fits such a pool;
//   wait     the request waits in the pool's bounded queue, at most the pool's queue timeout;
//   refuse   RESOURCE_EXHAUSTED naming the pool, its cap and its queue depth.
// A step that cannot apply (no handler set, no smaller pool with room, queue full, a request that
// no pool can hold cannot wait) is skipped and the reason is recorded.
//
//   strata::StatusOr<strata::PoolSetConfig> config = strata::ParsePoolSetConfig(json_text);
//   auto pools = strata::PoolSet::Create(*config).value();  // HTTP/gRPC transports from URLs
//   strata::CallOptions call;
//   call.prompt_tokens = exact_input_tokens;                    // from the exact tokenizer
//   call.degradation = &my_handler;                             // optional, per call
//   call.headers.push_back({strata::kPrefixHashHeader, request.stable_prefix_hash});
//   strata::RequestRecord record;
//   strata::Status s = pools->Send(request.body, call, &response, &record);
//   // record.pool, record.endpoint, record.queue_wait_ms, record.degradation say what happened.
//
// Prefix affinity: requests with the same stable-prefix hash (the kPrefixHashHeader call header,
// which is removed before forwarding; without it, a hash of the body's first
// affinity_prefix_bytes) go to the same replica of a pool — consistent hashing with bounded load:
// a replica takes a request only while its in-flight count is below
// ceil(load_factor * (pool in-flight + 1) / healthy replicas), else the next replica on the ring;
// the least-loaded healthy replica when the whole ring is at its bound. A replica that failed
// `unhealthy_after_failures` times in a row (UNAVAILABLE, DEADLINE_EXCEEDED, INTERNAL, DATA_LOSS)
// is skipped until a health check (RunHealthChecks()) passes, or after `unhealthy_cooldown` one
// probe request is let through.
//
// Alerts: the estimated KV in flight (admitted requests' input + output reserve, in tokens)
// against `kv_capacity_tokens`, and the share of the last `long_share_window` admissions that
// went to the longest pool. With two or more pools, while either is above its watermark, the
// longest pool's concurrency cap is lowered to `alert_long_max_concurrency` and its ladder is
// replaced by `alert_ladder`.
// Metrics() returns the values (and PrometheusText() the exposition text) an exporter reads.
//
// Thread safety: PoolSet is thread-safe; Send() may be called from many threads (it blocks while
// a request waits in a queue). The DegradationHandler is called from the sending thread, without
// PoolSet locks held.
#ifndef STRATA_POOLS_H_
#define STRATA_POOLS_H_

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "strata/clock.h"
#include "strata/pool_call.h"
#include "strata/record.h"
#include "strata/status.h"
#include "strata/transport.h"

namespace strata {

// A step of the degradation ladder (see the file comment for what each does).
enum class DegradationStep : int { kCompact = 0, kFork = 1, kWait = 2, kRefuse = 3 };
// "compact", "fork", "wait", "refuse".
std::string DegradationStepName(DegradationStep step);
// INVALID_ARGUMENT naming the known steps.
StatusOr<DegradationStep> ParseDegradationStep(const std::string& name);

// One length pool: the longest input it admits, its replicas and its limits.
struct PoolConfig {
  std::string name;  // required, unique, e.g. "short"
  // Largest input (prompt tokens + PoolSetConfig::turn_reserve_tokens) this pool admits. Required:
  // the default, 0, is refused (at least 1).
  int64_t max_input_tokens = 0;
  // Replica endpoints: "http(s)://host:port/v1" (HTTP) or "grpc://host:port" (SGLang gRPC), made
  // into Transports by PoolSet::Create. Ignored when `transports` is set.
  std::vector<std::string> endpoints;
  // Replica transports given directly (not owned; must outlive the PoolSet), e.g. in tests.
  std::vector<Transport*> transports;
  // Requests in flight at once; 0 = unlimited. Default 0.
  int max_concurrency = 0;
  // Requests waiting for a slot (the "wait" step); 0 = no queue. Default 16.
  int max_queue = 16;
  // Longest wait in the queue. Default 30 s.
  std::chrono::milliseconds queue_timeout{30000};
  // Output (and reasoning) tokens reserved per request when estimating KV in flight. Default 4096.
  int64_t output_reserve_tokens = 4096;
};

// The pools of a PoolSet and how it admits, degrades, routes and alerts (see the file comment).
struct PoolSetConfig {
  // Pools; sorted by max_input_tokens on creation. At least one.
  std::vector<PoolConfig> pools;
  // Applied in order when the fitting pool is full or no pool fits. Default: compact, fork, wait,
  // refuse.
  std::vector<DegradationStep> ladder = {DegradationStep::kCompact, DegradationStep::kFork,
                                         DegradationStep::kWait, DegradationStep::kRefuse};
  // Tokens added to every request's input before choosing a pool: room for the next tool result
  // and reasoning of an agent's turn. Default 0.
  int64_t turn_reserve_tokens = 0;
  // Bounded-load factor of the consistent-hash routing (>= 1). Default 1.25.
  double load_factor = 1.25;
  // Points per replica on the hash ring. Default 64.
  int virtual_nodes = 64;
  // Without a kPrefixHashHeader, the routing key is a hash of this many leading body bytes.
  // Default 4096.
  size_t affinity_prefix_bytes = 4096;
  // Consecutive failures that mark a replica unhealthy. Default 3.
  int unhealthy_after_failures = 3;
  // After this long unhealthy, one probe request may go to the replica. Default 10 s.
  std::chrono::milliseconds unhealthy_cooldown{10000};
  // Alerts. KV capacity of the deployment in tokens (e.g. from `strata plan`); 0 disables the KV
  // watermark. Default 0.
  int64_t kv_capacity_tokens = 0;
  double kv_watermark = 0.85;  // alert when KV in flight / capacity exceeds this. Default 0.85
  // Alert when this share of recent admissions is long. Default 0.25.
  double long_share_watermark = 0.25;
  int long_share_window = 100;  // admissions the long share is computed over. Default 100
  // While an alert is active: the longest pool's cap (>= 1) and ladder. Defaults 1 and
  // {compact, refuse} (waiting behind long prefills is what makes a service unusable).
  int alert_long_max_concurrency = 1;
  // The ladder while an alert is active (see above). Default {compact, refuse}.
  std::vector<DegradationStep> alert_ladder = {DegradationStep::kCompact, DegradationStep::kRefuse};
  // Time source for queue waits and cooldowns. Not owned; default nullptr: SystemClock().
  Clock* clock = nullptr;
  // Makes a Transport of an endpoint URL. Empty: HTTP for http(s)://, gRPC for grpc://.
  std::function<StatusOr<std::unique_ptr<Transport>>(const std::string& url)> transport_factory;
};

// Parses a pool set from JSON:
//   {"pools": [{"name": "short", "max_input_tokens": 32768, "endpoints": ["http://a:8000/v1"],
//               "max_concurrency": 64, "max_queue": 128, "queue_timeout_ms": 5000,
//               "output_reserve_tokens": 4096}, ...],
//    "ladder": ["compact", "fork", "wait", "refuse"], "turn_reserve_tokens": 8192,
//    "load_factor": 1.25, "kv_capacity_tokens": 4356448, "kv_watermark": 0.85,
//    "long_share_watermark": 0.25, "long_share_window": 100, "alert_long_max_concurrency": 1,
//    "alert_ladder": ["compact", "refuse"]}
// INVALID_ARGUMENT naming the offending field and value (unknown keys included).
StatusOr<PoolSetConfig> ParsePoolSetConfig(std::string_view json_text);

// One pool's state and counters since the PoolSet was created (PoolSet::Metrics()).
struct PoolMetrics {
  std::string name;              // PoolConfig::name
  int64_t max_input_tokens = 0;  // PoolConfig::max_input_tokens
  int max_concurrency = 0;        // configured cap (0 unlimited)
  int effective_concurrency = 0;  // cap in force now (lowered by an alert)
  int in_flight = 0;  // requests admitted here and not yet answered
  int queued = 0;     // requests waiting for a slot now
  int max_queue = 0;  // PoolConfig::max_queue
  int64_t admitted_total = 0;  // requests admitted here (after any degradation step)
  // Requests refused here by the ladder (a request that exceeds every pool: the largest pool).
  int64_t refused_total = 0;
  int64_t queue_timeouts_total = 0;  // waits that ended at the queue timeout
  int64_t compacted_total = 0;  // requests admitted here after a compaction
  int64_t forked_total = 0;  // requests admitted here after a fork
  int64_t waited_total = 0;  // requests admitted here after waiting
  double queue_wait_ms_total = 0;  // queue wait of the admitted requests, milliseconds
  int healthy_replicas = 0;        // replicas not marked unhealthy
  int replicas = 0;                // replicas configured
};

// A PoolSet's state at one moment (PoolSet::Metrics()): per pool, then the alerts' inputs.
struct PoolSetMetrics {
  std::vector<PoolMetrics> pools;  // by max_input_tokens, shortest first
  // Estimated KV in flight: admitted requests' input + output reserve, in tokens.
  int64_t kv_in_flight_tokens = 0;
  int64_t kv_capacity_tokens = 0;  // PoolSetConfig::kv_capacity_tokens (0: no KV watermark)
  double kv_usage = 0;    // kv_in_flight_tokens / kv_capacity_tokens (0 without a capacity)
  double long_share = 0;  // of the last long_share_window admissions
  bool kv_alert = false;          // kv_usage is above PoolSetConfig::kv_watermark
  bool long_share_alert = false;  // long_share is above PoolSetConfig::long_share_watermark
};

// Length pools behind one Transport (see the file comment). Thread-safe; owns the transports it
// makes from endpoint URLs, not those given in PoolConfig::transports.
class PoolSet : public Transport {
 public:
  // Validates the config (INVALID_ARGUMENT naming what is wrong: no pools, duplicate names, a pool
  // without replicas, max_input_tokens < 1, load_factor < 1, ...) and makes the transports.
  static StatusOr<std::unique_ptr<PoolSet>> Create(PoolSetConfig config);
  ~PoolSet() override;

  // Not owned; nullptr (the default) skips the compact and fork steps with a recorded reason.
  // Set before the first Send(). A handler in CallOptions::degradation takes its place for that
  // call (each Agent passes itself, so that the conversation compacted is the request's own).
  void SetDegradationHandler(DegradationHandler* handler);

  std::string Name() const override;      // "pools"
  std::string Endpoint() const override;  // "pools:short,medium,long"
  // Admits, routes and forwards (see the file comment). Errors: RESOURCE_EXHAUSTED when the
  // ladder refuses (the message names the pool, its cap and queue depth, or the largest pool when
  // the request exceeds every pool); otherwise the replica transport's status.
  Status Send(std::string_view body, const CallOptions& options, Response* response) override;
  // The same, and fills *record's pool, endpoint, input_tokens, queue_wait_ms, kv_cache_bytes
  // (tokens x kv_bytes_per_token), degradation and degradation_notes (and code/error on failure).
  Status Send(std::string_view body, const CallOptions& options, Response* response,
              RequestRecord* record);
  // OK when every pool has at least one replica that answers its health check.
  Status HealthCheck(std::chrono::milliseconds timeout) override;
  // Forwards to the replica that serves `request_id` now; NOT_FOUND when none does.
  Status Abort(const std::string& request_id) override;

  // Health-checks every replica: a pass makes an unhealthy replica healthy again, a failure makes
  // it unhealthy. Returns the number of healthy replicas.
  int RunHealthChecks(std::chrono::milliseconds timeout);

  // Copies the decisions about `record->request_id` (pool, endpoint, queue wait, degradation) into
  // *record; for callers whose record is filled elsewhere (a Client over this PoolSet). NOT_FOUND
  // when the request is not among the last 1024 sent.
  Status Annotate(RequestRecord* record) const;

  // The pools' state and counters now (a consistent snapshot).
  PoolSetMetrics Metrics() const;
  // Metrics() in Prometheus text exposition format (strata_pool_* and strata_kv_* families).
  std::string PrometheusText() const;

  // Bytes of KV per token used for RequestRecord::kv_cache_bytes. Default 7600 (GLM-5.3-Flash).
  void SetKvBytesPerToken(int64_t bytes);

  class Impl;

 private:
  explicit PoolSet(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace strata

#endif  // STRATA_POOLS_H_
