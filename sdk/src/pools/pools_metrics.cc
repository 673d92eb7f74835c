// A PoolSet's metrics and their Prometheus exposition (pools_impl.h).
#include <sstream>
#include <string>

#include "pools/pools_impl.h"
#include "strata/metrics.h"

namespace strata {

using pools_internal::Pool;
using pools_internal::Replica;

PoolSetMetrics PoolSet::Metrics() const {
  internal::MutexLock lock(impl_->mu_);
  PoolSetMetrics m;
  for (size_t i = 0; i < impl_->pools_.size(); ++i) {
    const Pool& p = impl_->pools_[i];
    PoolMetrics pm = p.counters;
    pm.name = p.config.name;
    pm.max_input_tokens = p.config.max_input_tokens;
    pm.max_concurrency = p.config.max_concurrency;
    pm.effective_concurrency = impl_->EffectiveCapLocked(i);
    pm.in_flight = p.in_flight;
    pm.queued = static_cast<int>(p.queue.size());
    pm.max_queue = p.config.max_queue;
    pm.replicas = static_cast<int>(p.replicas.size());
    pm.healthy_replicas = static_cast<int>(std::count_if(
        p.replicas.begin(), p.replicas.end(), [](const Replica& r) { return r.healthy; }));
    m.pools.push_back(pm);
  }
  m.kv_in_flight_tokens = impl_->kv_in_flight_tokens_;
  m.kv_capacity_tokens = impl_->config_.kv_capacity_tokens;
  m.kv_usage = m.kv_capacity_tokens > 0
                   ? static_cast<double>(m.kv_in_flight_tokens) / m.kv_capacity_tokens
                   : 0;
  m.long_share = impl_->LongShareLocked();
  m.kv_alert = impl_->KvAlertLocked();
  m.long_share_alert = impl_->LongShareAlertLocked();
  return m;
}

std::string PoolSet::PrometheusText() const {
  PoolSetMetrics m = Metrics();
  std::vector<MetricFamilySnapshot> families;
  auto family = [&](const char* name, MetricType type, const char* help, auto value) {
    MetricFamilySnapshot f{name, help, type, {"pool"}, {}, {}};
    for (const PoolMetrics& p : m.pools) {
      MetricSeries s;
      s.label_values = {p.name};
      s.value = static_cast<double>(value(p));
      f.series.push_back(std::move(s));
    }
    families.push_back(std::move(f));
  };
  auto single = [&](const char* name, const char* help, std::vector<std::string> label_names,
                    std::vector<std::pair<std::vector<std::string>, double>> values) {
    MetricFamilySnapshot f{name, help, MetricType::kGauge, std::move(label_names), {}, {}};
    for (auto& [labels, value] : values) {
      MetricSeries s;
      s.label_values = std::move(labels);
      s.value = value;
      f.series.push_back(std::move(s));
    }
    families.push_back(std::move(f));
  };
  const MetricType kGauge = MetricType::kGauge, kCounter = MetricType::kCounter;
  family("strata_pool_in_flight", kGauge, "Requests in flight.",
         [](const PoolMetrics& p) { return p.in_flight; });
  family("strata_pool_queued", kGauge, "Requests waiting in the queue.",
         [](const PoolMetrics& p) { return p.queued; });
  family("strata_pool_concurrency_cap", kGauge, "Concurrency cap in force (0 unlimited).",
         [](const PoolMetrics& p) { return p.effective_concurrency; });
  family("strata_pool_admitted_total", kCounter, "Requests admitted.",
         [](const PoolMetrics& p) { return p.admitted_total; });
  family("strata_pool_refused_total", kCounter, "Requests refused with RESOURCE_EXHAUSTED.",
         [](const PoolMetrics& p) { return p.refused_total; });
  family("strata_pool_queue_timeouts_total", kCounter, "Queue waits that timed out.",
         [](const PoolMetrics& p) { return p.queue_timeouts_total; });
  family("strata_pool_compacted_total", kCounter, "Requests admitted after compaction.",
         [](const PoolMetrics& p) { return p.compacted_total; });
  family("strata_pool_forked_total", kCounter, "Requests admitted after a fork.",
         [](const PoolMetrics& p) { return p.forked_total; });
  family("strata_pool_queue_wait_seconds_total", kCounter, "Time admitted requests waited.",
         [](const PoolMetrics& p) { return p.queue_wait_ms_total / 1000.0; });
  family("strata_pool_healthy_replicas", kGauge, "Replicas considered healthy.",
         [](const PoolMetrics& p) { return p.healthy_replicas; });
  single("strata_kv_in_flight_tokens", "Estimated KV tokens of requests in flight.", {},
         {{{}, static_cast<double>(m.kv_in_flight_tokens)}});
  single("strata_kv_capacity_tokens", "Configured KV capacity.", {},
         {{{}, static_cast<double>(m.kv_capacity_tokens)}});
  single("strata_kv_usage_ratio", "KV in flight / capacity.", {}, {{{}, m.kv_usage}});
  single("strata_long_request_share", "Share of recent admissions in the longest pool.", {},
         {{{}, m.long_share}});
  single("strata_alert_active", "Alerts in force (1) or not (0).", {"alert"},
         {{{"kv_watermark"}, m.kv_alert ? 1.0 : 0.0},
          {{"long_share"}, m.long_share_alert ? 1.0 : 0.0}});
  // Pool names are unique (Create checks) and the family names are fixed, so this cannot fail.
  StatusOr<std::string> text = RenderPrometheusText(families);
  return text.ok() ? *std::move(text)
                   : "# " + EscapePrometheusHelp(text.status().ToString()) + "\n";
}

}  // namespace strata
