// Prefix-affinity routing of a PoolSet and the replicas' reservations and health (pools_impl.h).
#include <algorithm>
#include <cmath>
#include <string>

#include "pools/pools_impl.h"

namespace strata {

using pools_internal::Decision;
using pools_internal::Hash;
using pools_internal::Pool;
using pools_internal::Replica;

namespace {

uint64_t Mix(uint64_t x) {  // splitmix64 finalizer: spreads FNV's low-entropy bits over the ring
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

bool CountsAsReplicaFailure(StatusCode code) {
  return code == StatusCode::kUnavailable || code == StatusCode::kDeadlineExceeded ||
         code == StatusCode::kInternal || code == StatusCode::kDataLoss;
}

}  // namespace

namespace pools_internal {

uint64_t Hash(std::string_view s) {
  uint64_t h = 1469598103934665603ULL;  // FNV-1a 64
  for (unsigned char c : s) {
    h ^= c;
    h *= 1099511628211ULL;
  }
  return Mix(h);
}

}  // namespace pools_internal

bool PoolSet::Impl::EligibleLocked(const Replica& r, int64_t now) const {
  return r.healthy || now - r.unhealthy_since_us >= config_.unhealthy_cooldown.count() * 1000;
}

int PoolSet::Impl::RouteLocked(Pool& pool, uint64_t key) {
  const int64_t now = clock_->NowMicros();
  int eligible = 0, load = 0;
  for (const Replica& r : pool.replicas) {
    if (EligibleLocked(r, now)) {
      ++eligible;
      load += r.in_flight;
    }
  }
  if (eligible == 0) return -1;
  const int bound = static_cast<int>(std::ceil(config_.load_factor * (load + 1) / eligible));
  auto it = std::lower_bound(pool.ring.begin(), pool.ring.end(), std::make_pair(key, -1));
  std::vector<bool> seen(pool.replicas.size(), false);
  for (size_t step = 0; step < pool.ring.size(); ++step, ++it) {
    if (it == pool.ring.end()) it = pool.ring.begin();
    int index = it->second;
    if (seen[index]) continue;
    seen[index] = true;
    const Replica& r = pool.replicas[index];
    if (EligibleLocked(r, now) && r.in_flight < bound) return index;
  }
  int best = -1;
  for (size_t i = 0; i < pool.replicas.size(); ++i) {
    const Replica& r = pool.replicas[i];
    if (!EligibleLocked(r, now)) continue;
    if (best < 0 || r.in_flight < pool.replicas[best].in_flight) best = static_cast<int>(i);
  }
  return best;
}

CallOptions PoolSet::Impl::ForwardOptions(std::string_view body, const CallOptions& options,
                                          uint64_t* key) const {
  CallOptions forward = options;
  forward.degradation = nullptr;
  std::string key_text;
  forward.headers.clear();
  for (const auto& [name, value] : options.headers) {
    std::string lower = name;
    for (char& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    if (lower == kPrefixHashHeader) {
      key_text = value;
    } else {
      forward.headers.emplace_back(name, value);
    }
  }
  if (key_text.empty()) key_text = std::string(body.substr(0, config_.affinity_prefix_bytes));
  *key = Hash(key_text);
  return forward;
}

StatusOr<PoolSet::Impl::Reservation> PoolSet::Impl::ReserveLocked(const Admission& admission,
                                                                  uint64_t key,
                                                                  const std::string& request_id,
                                                                  Decision* decision) {
  Pool& pool = pools_[admission.pool_index];
  const int replica_index = RouteLocked(pool, key);
  decision->pool = pool.config.name;
  if (replica_index < 0) {
    return UnavailableError("every replica of pool \"" + pool.config.name + "\" (" +
                            std::to_string(pool.replicas.size()) +
                            ") is unhealthy; RunHealthChecks() re-admits them");
  }
  Replica& replica = pool.replicas[replica_index];
  if (!replica.healthy) replica.unhealthy_since_us = clock_->NowMicros();  // one probe per cooldown
  ++replica.in_flight;
  ++pool.in_flight;
  ++pool.counters.admitted_total;
  pool.counters.queue_wait_ms_total += decision->queue_wait_ms;
  Reservation reservation;
  reservation.pool_index = admission.pool_index;
  reservation.replica_index = replica_index;
  reservation.kv_tokens = admission.send_tokens + pool.config.output_reserve_tokens;
  reservation.transport = replica.transport;
  kv_in_flight_tokens_ += reservation.kv_tokens;
  recent_long_.push_back(pools_.size() > 1 &&
                         static_cast<size_t>(admission.pool_index) == LongIndex());
  while (static_cast<int>(recent_long_.size()) > std::max(1, config_.long_share_window)) {
    recent_long_.pop_front();
  }
  decision->endpoint = replica.endpoint;
  decision->input_tokens = admission.send_tokens;
  if (!request_id.empty()) running_[request_id] = {admission.pool_index, replica_index};
  return reservation;
}

void PoolSet::Impl::ReleaseLocked(const Reservation& reservation, const Status& status,
                                  const std::string& request_id) {
  Replica& done = pools_[reservation.pool_index].replicas[reservation.replica_index];
  --done.in_flight;
  --pools_[reservation.pool_index].in_flight;
  kv_in_flight_tokens_ -= reservation.kv_tokens;
  if (status.ok()) {
    done.consecutive_failures = 0;
    done.healthy = true;
  } else if (CountsAsReplicaFailure(status.code())) {
    if (++done.consecutive_failures >= config_.unhealthy_after_failures && done.healthy) {
      done.healthy = false;
      done.unhealthy_since_us = clock_->NowMicros();
    }
  }
  if (!request_id.empty()) running_.erase(request_id);
}

}  // namespace strata
