#include "sidecar_metrics.h"

#include <algorithm>
#include <atomic>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <set>
#include <utility>
#include <vector>

#include "strata/metrics.h"
#include "strata/pools.h"

namespace strata::sidecar {
namespace {

using json = nlohmann::json;

constexpr char kNoPool[] = "none";  // the pool label of requests not scheduled by a PoolSet

std::string Shown(const json& value) {
  std::string text = value.dump();
  if (text.size() > 60) text = text.substr(0, 57) + "...";
  return text;
}

Status BadValue(const std::string& key, const char* expected, const json& value) {
  return InvalidArgumentError("metrics." + key + ": expected " + expected + ", got " +
                              Shown(value));
}

// Distinct model label values at most (then "other").
constexpr size_t kMaxModelLabels = 32;

// The PoolSet's own KV estimate (strata_kv_*, against the pool set's planned capacity, which the
// sidecar does not configure) would be a second KV family beside strata_sidecar_kv_*: left out of
// the sidecar's exposition, with its HELP and TYPE lines.
std::string WithoutPoolKvFamilies(const std::string& text) {
  std::string out;
  size_t start = 0;
  while (start < text.size()) {
    size_t end = text.find('\n', start);
    end = end == std::string::npos ? text.size() : end + 1;
    std::string_view line(text.data() + start, end - start);
    const bool kv = line.rfind("strata_kv_", 0) == 0 || line.rfind("# HELP strata_kv_", 0) == 0 ||
                    line.rfind("# TYPE strata_kv_", 0) == 0;
    if (!kv) out.append(line.data(), line.size());
    start = end;
  }
  return out;
}

std::string PoolLabel(std::string_view pool) {
  return pool.empty() ? std::string(kNoPool) : std::string(pool);
}

std::string Percent(double ratio) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f%%", ratio * 100);
  return buf;
}

const std::vector<double>& SecondsBuckets() {
  static const std::vector<double> b = {0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1,
                                        2.5,   5,    10,    30,   60,  120,  300, 600};
  return b;
}
const std::vector<double>& InputTokenBuckets() {
  static const std::vector<double> b = {256,   1024,   4096,   16384,  32768,
                                        65536, 131072, 262144, 524288, 1048576};
  return b;
}
const std::vector<double>& OutputTokenBuckets() {
  static const std::vector<double> b = {16, 64, 256, 1024, 4096, 16384, 65536};
  return b;
}

}  // namespace

StatusOr<MetricsConfig> ParseMetricsConfig(const json& metrics) {
  MetricsConfig c;
  if (metrics.is_null()) return c;
  if (!metrics.is_object()) {
    return InvalidArgumentError("metrics: expected an object, got " + Shown(metrics));
  }
  auto integer = [&](const char* key, int64_t min, int64_t* out) -> Status {
    auto it = metrics.find(key);
    if (it == metrics.end()) return Status();
    if (!it->is_number_integer() || it->get<int64_t>() < min) {
      const std::string expected = "an integer >= " + std::to_string(min);
      return BadValue(key, expected.c_str(), *it);
    }
    *out = it->get<int64_t>();
    return Status();
  };
  auto ratio = [&](const char* key, double* out) -> Status {
    auto it = metrics.find(key);
    if (it == metrics.end()) return Status();
    if (!it->is_number() || !(it->get<double>() > 0) || it->get<double>() > 1) {
      return BadValue(key, "a number in (0, 1]", *it);
    }
    *out = it->get<double>();
    return Status();
  };
  static const std::set<std::string> kKnown = {
      "kv_capacity_bytes",   "kv_bytes_per_token", "kv_alert_ratio",         "long_request_tokens",
      "long_share_window_s", "long_share_alert",   "long_share_min_requests"};
  for (auto it = metrics.begin(); it != metrics.end(); ++it) {
    if (kKnown.count(it.key()) == 0) {
      std::string known;
      for (const std::string& k : kKnown) known += (known.empty() ? "" : ", ") + k;
      return InvalidArgumentError("metrics." + it.key() +
                                  ": unknown key (known keys here: " + known + ")");
    }
  }
  STRATA_RETURN_IF_ERROR(integer("kv_capacity_bytes", 0, &c.kv_capacity_bytes));
  STRATA_RETURN_IF_ERROR(integer("kv_bytes_per_token", 1, &c.kv_bytes_per_token));
  STRATA_RETURN_IF_ERROR(ratio("kv_alert_ratio", &c.kv_alert_ratio));
  STRATA_RETURN_IF_ERROR(integer("long_request_tokens", 1, &c.long_request_tokens));
  STRATA_RETURN_IF_ERROR(integer("long_share_window_s", 1, &c.long_share_window_s));
  if (c.long_share_window_s > 86400) {
    return BadValue("long_share_window_s", "at most 86400 (one day)",
                    metrics.at("long_share_window_s"));
  }
  STRATA_RETURN_IF_ERROR(ratio("long_share_alert", &c.long_share_alert));
  STRATA_RETURN_IF_ERROR(integer("long_share_min_requests", 1, &c.long_share_min_requests));
  return c;
}

std::string PrefixBreakReasonLabel(std::string_view cause) {
  size_t end = std::min(cause.find(" ("), cause.find(';'));
  std::string_view label = cause.substr(0, end);
  while (!label.empty() && label.back() == ' ') label.remove_suffix(1);
  return label.empty() ? "unknown" : std::string(label);
}

class SidecarMetrics::Impl {
 public:
  Impl(MetricsConfig c, Clock* clk, WarningSink w)
      : config(std::move(c)), clock(clk != nullptr ? clk : SystemClock()), warn(std::move(w)) {
    if (!warn) {
      warn = [](const std::string& message) {
        std::fprintf(stderr, "strata-sidecar: warning: %s\n", message.c_str());
      };
    }
    window.resize(static_cast<size_t>(config.long_share_window_s));
    const std::vector<std::string> tp = {"tenant", "pool"};
    // The names are constants checked by the tests, so registration cannot fail.
    auto histogram = [&](const char* name, const char* help, const std::vector<double>& bounds) {
      return registry.AddHistogram(name, help, tp, bounds).value();
    };
    auto counter = [&](const char* name, const char* help, std::vector<std::string> labels) {
      return registry.AddCounter(name, help, std::move(labels)).value();
    };
    auto gauge = [&](const char* name, const char* help, std::vector<std::string> labels = {}) {
      return registry.AddGauge(name, help, std::move(labels)).value();
    };
    requests = counter("strata_sidecar_requests_total",
                       "Completed model requests by model and finish reason.",
                       {"tenant", "pool", "model", "finish_reason"});
    errors = counter("strata_sidecar_errors_total",
                     "Failed requests and calls by status code; class client (the caller's "
                     "mistake) or server.",
                     {"tenant", "pool", "code", "class"});
    input_tokens = histogram("strata_sidecar_input_tokens", "Input (prompt) tokens per request.",
                             InputTokenBuckets());
    output_tokens = histogram("strata_sidecar_output_tokens", "Output tokens per request.",
                              OutputTokenBuckets());
    cached_tokens = counter("strata_sidecar_cached_tokens_total",
                            "Prompt tokens the server reported as cached.", tp);
    predicted_cached_tokens =
        counter("strata_sidecar_predicted_cached_tokens_total",
                "Prompt tokens strata's prefix-cache model predicted as cached.", tp);
    reasoning_tokens = counter("strata_sidecar_reasoning_tokens_total",
                               "Reasoning tokens (part of the output tokens).", tp);
    ttft = histogram("strata_sidecar_ttft_seconds", "Time to first token (prefill).",
                     SecondsBuckets());
    decode = histogram("strata_sidecar_decode_seconds", "First token to last token (decode).",
                       SecondsBuckets());
    duration = histogram("strata_sidecar_request_duration_seconds",
                         "Whole model call including retries.", SecondsBuckets());
    queue_wait = histogram("strata_sidecar_queue_wait_seconds",
                           "Time waiting for admission to a length pool.", SecondsBuckets());
    retries = counter("strata_sidecar_retries_total", "Retried attempts of model requests.", tp);
    degradations = counter("strata_sidecar_degradations_total",
                           "Requests a length pool degraded, by step.", {"tenant", "pool", "step"});
    compactions =
        counter("strata_sidecar_compactions_total", "Compactions before a request.", {"tenant"});
    tokens_saved = counter("strata_sidecar_compaction_tokens_saved_total",
                           "Input tokens removed by compaction (before - after).", {"tenant"});
    invalidated = counter("strata_sidecar_compaction_invalidated_tokens_total",
                          "Cached prompt tokens compaction invalidated.", {"tenant"});
    prefix_breaks =
        counter("strata_sidecar_prefix_breaks_total",
                "Requests that reused less of the cached prefix, by cause.", {"tenant", "reason"});
    turn_warnings = counter("strata_sidecar_turn_warnings_total",
                            "What went wrong in completed turns without failing them "
                            "(Turn::warnings).",
                            {"tenant"});
    record_write_failures = counter("strata_sidecar_record_write_failures_total",
                                    "Writes the store refused: turns failed whole, records of "
                                    "failed turns, warnings' writes.",
                                    {"tenant"});
    agents = gauge("strata_sidecar_agents", "Agents stored for the tenant.", {"tenant"});
    in_flight = gauge("strata_sidecar_requests_in_flight", "Model requests in flight.", {"tenant"});
    long_requests =
        counter("strata_sidecar_long_requests_total",
                "Requests of at least long_request_tokens (input + max output).", {"tenant"});
    kv_bytes = &gauge("strata_sidecar_kv_bytes_in_flight",
                      "Estimated KV cache bytes of the requests in flight.")
                    ->WithLabels({});
    kv_capacity = &gauge("strata_sidecar_kv_capacity_bytes",
                         "Configured KV cache capacity (0: not configured).")
                       ->WithLabels({});
    kv_usage = &gauge("strata_sidecar_kv_usage_ratio",
                      "KV bytes in flight / capacity (0 without a capacity).")
                    ->WithLabels({});
    long_share = &gauge("strata_sidecar_long_request_share",
                        "Share of long requests among those begun in the window.")
                      ->WithLabels({});
    kv_alert_gauge =
        &gauge("strata_sidecar_kv_watermark_alert", "1 while KV usage is above kv_alert_ratio.")
             ->WithLabels({});
    long_alert_gauge = &gauge("strata_sidecar_long_share_alert",
                              "1 while the long-request share is above long_share_alert.")
                            ->WithLabels({});
    GaugeFamily* thresholds =
        gauge("strata_sidecar_alert_threshold", "Configured alert thresholds.", {"alert"});
    thresholds->WithLabels({"kv_watermark"}).Set(config.kv_alert_ratio);
    thresholds->WithLabels({"long_share"}).Set(config.long_share_alert);
    kv_capacity->Set(static_cast<double>(config.kv_capacity_bytes));
  }

  // The long share at `now_s` over the window. Requires mu.
  double LongShareLocked(int64_t now_s, int64_t* requests_in_window) const {
    int64_t total = 0, long_count = 0;
    for (const Slot& s : window) {
      if (s.second > now_s - config.long_share_window_s && s.second <= now_s) {
        total += s.total;
        long_count += s.long_count;
      }
    }
    *requests_in_window = total;
    return total > 0 ? static_cast<double>(long_count) / static_cast<double>(total) : 0;
  }

  int64_t NowSeconds() const { return clock->NowMicros() / 1000000; }

  // Updates the gauges and alert states; returns the warnings of alerts that rose. Requires mu.
  std::vector<std::string> EvaluateLocked() {
    std::vector<std::string> rose;
    const double usage =
        config.kv_capacity_bytes > 0
            ? static_cast<double>(kv_in_flight) / static_cast<double>(config.kv_capacity_bytes)
            : 0;
    kv_bytes->Set(static_cast<double>(kv_in_flight));
    kv_usage->Set(usage);
    const bool kv_now = config.kv_capacity_bytes > 0 && usage > config.kv_alert_ratio;
    if (kv_now && !kv_alert_on) {
      rose.push_back("KV watermark alert: an estimated " + std::to_string(kv_in_flight) +
                     " KV bytes in flight of " + std::to_string(config.kv_capacity_bytes) +
                     " configured (" + Percent(usage) + ", threshold " +
                     Percent(config.kv_alert_ratio) +
                     "); long prefills will queue: lower concurrency or route long requests to "
                     "their own pool");
    }
    kv_alert_on = kv_now;
    kv_alert_gauge->Set(kv_now ? 1 : 0);

    int64_t n = 0;
    const double share = LongShareLocked(NowSeconds(), &n);
    long_share->Set(share);
    const bool long_now = n >= config.long_share_min_requests && share > config.long_share_alert;
    if (long_now && !long_alert_on) {
      rose.push_back("long-request share alert: " + Percent(share) + " of the " +
                     std::to_string(n) + " requests of the last " +
                     std::to_string(config.long_share_window_s) + " s had at least " +
                     std::to_string(config.long_request_tokens) + " tokens (threshold " +
                     Percent(config.long_share_alert) +
                     "); compact or split long tasks before they queue behind each other");
    }
    long_alert_on = long_now;
    long_alert_gauge->Set(long_now ? 1 : 0);
    return rose;
  }

  // The model label: the model a record names, the first kMaxModelLabels distinct ones as they
  // are (names of letters, digits and ._:/@- up to 128 bytes), "other" for any other, "unknown"
  // for none, so that what an upstream or a client names cannot add series without bound.
  std::string ModelLabel(const std::string& model) {
    if (model.empty()) return "unknown";
    const bool plain = model.size() <= 128 && std::all_of(model.begin(), model.end(), [](char c) {
                         return std::isalnum(static_cast<unsigned char>(c)) ||
                                std::strchr("._:/@-", c) != nullptr;
                       });
    if (!plain) return "other";
    std::lock_guard<std::mutex> lock(models_mu);
    if (models.count(model) || models.size() < kMaxModelLabels) {
      models.insert(model);
      return model;
    }
    return "other";
  }

  void Warn(const std::vector<std::string>& messages) {
    for (const std::string& m : messages) warn(m);
  }

  const MetricsConfig config;
  Clock* const clock;
  WarningSink warn;
  MetricRegistry registry;
  CounterFamily *requests, *errors, *cached_tokens, *predicted_cached_tokens, *reasoning_tokens,
      *retries, *degradations, *compactions, *tokens_saved, *invalidated, *prefix_breaks,
      *long_requests, *turn_warnings, *record_write_failures;
  HistogramFamily *input_tokens, *output_tokens, *ttft, *decode, *duration, *queue_wait;
  GaugeFamily *agents, *in_flight;
  Gauge *kv_bytes, *kv_capacity, *kv_usage, *long_share, *kv_alert_gauge, *long_alert_gauge;
  std::atomic<const PoolSet*> pools{nullptr};

  struct Slot {
    int64_t second = -1;
    int64_t total = 0;
    int64_t long_count = 0;
  };
  std::mutex models_mu;
  std::set<std::string> models;  // guarded by models_mu: the model labels given so far
  mutable std::mutex mu;
  std::vector<Slot> window;    // guarded by mu; one slot per second of the window, by second % size
  int64_t kv_in_flight = 0;    // guarded by mu
  bool kv_alert_on = false;    // guarded by mu
  bool long_alert_on = false;  // guarded by mu
};

SidecarMetrics::SidecarMetrics(MetricsConfig config, Clock* clock, WarningSink warn)
    : impl_(std::make_unique<Impl>(std::move(config), clock, std::move(warn))) {}

SidecarMetrics::~SidecarMetrics() = default;

SidecarMetrics::InFlight::InFlight(InFlight&& other) noexcept
    : metrics_(std::exchange(other.metrics_, nullptr)),
      tenant_(std::move(other.tenant_)),
      kv_bytes_(other.kv_bytes_) {}

SidecarMetrics::InFlight& SidecarMetrics::InFlight::operator=(InFlight&& other) noexcept {
  if (this != &other) {
    End();
    metrics_ = std::exchange(other.metrics_, nullptr);
    tenant_ = std::move(other.tenant_);
    kv_bytes_ = other.kv_bytes_;
  }
  return *this;
}

SidecarMetrics::InFlight::~InFlight() { End(); }

void SidecarMetrics::InFlight::End() {
  if (metrics_ == nullptr) return;
  std::exchange(metrics_, nullptr)->EndRequest(tenant_, kv_bytes_);
}

SidecarMetrics::InFlight SidecarMetrics::Begin(std::string_view tenant, int64_t input_tokens,
                                               int64_t max_output_tokens) {
  const MetricsConfig& c = impl_->config;
  const int64_t tokens =
      std::max<int64_t>(0, input_tokens) + std::max<int64_t>(0, max_output_tokens);
  const bool is_long = tokens >= c.long_request_tokens;
  InFlight handle;
  handle.metrics_ = this;
  handle.tenant_ = std::string(tenant);
  handle.kv_bytes_ = tokens * c.kv_bytes_per_token;
  impl_->in_flight->WithLabels({tenant}).Add(1);
  if (is_long) impl_->long_requests->WithLabels({tenant}).Increment();
  std::vector<std::string> rose;
  {
    std::lock_guard<std::mutex> lock(impl_->mu);
    impl_->kv_in_flight += handle.kv_bytes_;
    const int64_t now_s = impl_->NowSeconds();
    Impl::Slot& slot = impl_->window[static_cast<size_t>(now_s % c.long_share_window_s)];
    if (slot.second != now_s) slot = Impl::Slot{now_s, 0, 0};
    ++slot.total;
    if (is_long) ++slot.long_count;
    rose = impl_->EvaluateLocked();
  }
  impl_->Warn(rose);
  return handle;
}

void SidecarMetrics::EndRequest(const std::string& tenant, int64_t kv_bytes) {
  impl_->in_flight->WithLabels({tenant}).Add(-1);
  std::vector<std::string> rose;
  {
    std::lock_guard<std::mutex> lock(impl_->mu);
    impl_->kv_in_flight -= kv_bytes;
    rose = impl_->EvaluateLocked();
  }
  impl_->Warn(rose);
}

std::string FinishReasonLabel(std::string_view finish_reason) {
  if (finish_reason.empty()) return "unknown";
  for (const char* known : {"stop", "length", "tool_calls", "content_filter", "function_call",
                            "abort", "error", "cancelled"}) {
    if (finish_reason == known) return known;
  }
  return "other";
}

void SidecarMetrics::ObserveTurn(std::string_view tenant, const strata::Turn& turn) {
  const RequestRecord& r = turn.record;
  const std::string pool = PoolLabel(r.pool);
  Impl& m = *impl_;
  m.requests->WithLabels({tenant, pool, m.ModelLabel(r.model), FinishReasonLabel(r.finish_reason)})
      .Increment();
  m.input_tokens->WithLabels({tenant, pool}).Observe(static_cast<double>(r.input_tokens));
  m.output_tokens->WithLabels({tenant, pool}).Observe(static_cast<double>(r.output_tokens));
  if (r.cached_tokens_reported) {
    m.cached_tokens->WithLabels({tenant, pool})
        .Increment(static_cast<double>(*r.cached_tokens_reported));
  }
  // Increment(0) creates the series, so that rate() over it works before the first hit.
  m.cached_tokens->WithLabels({tenant, pool}).Increment(0);
  m.predicted_cached_tokens->WithLabels({tenant, pool})
      .Increment(static_cast<double>(r.cached_tokens_predicted));
  m.reasoning_tokens->WithLabels({tenant, pool}).Increment(static_cast<double>(r.reasoning_tokens));
  m.ttft->WithLabels({tenant, pool}).Observe(r.ttft_ms / 1000.0);
  m.decode->WithLabels({tenant, pool}).Observe(r.decode_ms / 1000.0);
  m.duration->WithLabels({tenant, pool}).Observe(r.total_ms / 1000.0);
  m.queue_wait->WithLabels({tenant, pool}).Observe(r.queue_wait_ms / 1000.0);
  m.retries->WithLabels({tenant, pool}).Increment(static_cast<double>(std::max(0, r.attempts - 1)));
  if (!r.degradation.empty()) m.degradations->WithLabels({tenant, pool, r.degradation}).Increment();

  m.turn_warnings->WithLabels({tenant}).Increment(static_cast<double>(turn.warnings.size()));
  m.compactions->WithLabels({tenant}).Increment(static_cast<double>(turn.compactions.size()));
  for (const CompactionReport& c : turn.compactions) {
    if (c.tokens_before > c.tokens_after) {
      m.tokens_saved->WithLabels({tenant}).Increment(
          static_cast<double>(c.tokens_before - c.tokens_after));
    }
    m.invalidated->WithLabels({tenant}).Increment(static_cast<double>(c.invalidated_tokens));
  }
  if (turn.prefix_break) {
    std::set<std::string> reasons;
    if (turn.prefix_break->kind == PrefixBreakEvent::Kind::kServerShortfall) {
      reasons.insert("server evicted or mismatched");
    }
    for (const std::string& cause : turn.break_causes)
      reasons.insert(PrefixBreakReasonLabel(cause));
    if (reasons.empty()) reasons.insert(PrefixBreakReasonLabel(turn.prefix_break->reason));
    for (const std::string& reason : reasons)
      m.prefix_breaks->WithLabels({tenant, reason}).Increment();
  }
}

void SidecarMetrics::ObserveRecordWriteFailures(std::string_view tenant, int64_t count) {
  impl_->record_write_failures->WithLabels({tenant}).Increment(static_cast<double>(count));
}

void SidecarMetrics::ObserveError(std::string_view tenant, std::string_view pool,
                                  strata::StatusCode code) {
  // A call refused before authentication has no tenant.
  impl_->errors
      ->WithLabels({tenant.empty() ? std::string_view(kNoPool) : tenant, PoolLabel(pool),
                    StatusCodeName(code), ErrorClass(code)})
      .Increment();
}

const char* ErrorClass(StatusCode code) {
  switch (code) {
    case StatusCode::kInvalidArgument:
    case StatusCode::kNotFound:
    case StatusCode::kAlreadyExists:
    case StatusCode::kPermissionDenied:
    case StatusCode::kUnauthenticated:
    case StatusCode::kFailedPrecondition:
    case StatusCode::kOutOfRange:
    case StatusCode::kAborted:
    case StatusCode::kCancelled:
      return "client";
    default:
      return "server";
  }
}

void SidecarMetrics::SetAgents(std::string_view tenant, int64_t n) {
  impl_->agents->WithLabels({tenant}).Set(static_cast<double>(n));
}

void SidecarMetrics::SetPoolSet(const strata::PoolSet* pools) { impl_->pools.store(pools); }

std::string SidecarMetrics::RenderPrometheus() const {
  std::vector<std::string> rose;
  {
    std::lock_guard<std::mutex> lock(impl_->mu);
    rose = impl_->EvaluateLocked();
  }
  impl_->Warn(rose);
  std::string text = impl_->registry.RenderPrometheus();
  if (const PoolSet* pools = impl_->pools.load()) {
    text += WithoutPoolKvFamilies(pools->PrometheusText());
  }
  return text;
}

int64_t SidecarMetrics::kv_bytes_in_flight() const {
  std::lock_guard<std::mutex> lock(impl_->mu);
  return impl_->kv_in_flight;
}

double SidecarMetrics::long_request_share() const {
  std::lock_guard<std::mutex> lock(impl_->mu);
  int64_t n = 0;
  return impl_->LongShareLocked(impl_->NowSeconds(), &n);
}

bool SidecarMetrics::kv_alert() const {
  std::lock_guard<std::mutex> lock(impl_->mu);
  return impl_->kv_alert_on;
}

bool SidecarMetrics::long_share_alert() const {
  std::lock_guard<std::mutex> lock(impl_->mu);
  return impl_->long_alert_on;
}

}  // namespace strata::sidecar
