// PoolSet::Impl, shared by the files that implement strata/pools.h, and which file does what:
//   pools.cc            making a PoolSet (pools and their hash rings), sending through it (Send:
//                       admit, reserve, forward, release), health checks, Abort, Annotate
//   pools_admission.cc  admission and the degradation ladder (compact, fork, wait, refuse) and the
//                       alerts that choose the ladder
//   pools_routing.cc    prefix-affinity routing (consistent hashing with bounded load), replica
//                       reservation, health counting
//   pools_config.cc     the pool-set configuration's JSON and the step names
//   pools_metrics.cc    PoolSet::Metrics and the Prometheus exposition
#ifndef STRATA_SRC_POOLS_POOLS_IMPL_H_
#define STRATA_SRC_POOLS_POOLS_IMPL_H_

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/thread_annotations.h"
#include "strata/pools.h"

namespace strata {
namespace pools_internal {

struct Replica {
  Transport* transport = nullptr;
  std::unique_ptr<Transport> owned;
  std::string endpoint;
  int in_flight = 0;
  int consecutive_failures = 0;
  bool healthy = true;
  int64_t unhealthy_since_us = 0;
};

struct Pool {
  PoolConfig config;
  std::vector<Replica> replicas;
  std::vector<std::pair<uint64_t, int>> ring;  // (point, replica index), sorted
  int in_flight = 0;
  std::deque<uint64_t> queue;  // tickets, FIFO
  PoolMetrics counters;        // the *_total fields
};

struct Decision {
  std::string pool;
  std::string endpoint;
  double queue_wait_ms = 0;
  std::string degradation;
  std::vector<std::string> notes;
  int64_t input_tokens = 0;
};

// FNV-1a 64 of `s`, mixed so that the ring's points spread (pools_routing.cc).
uint64_t Hash(std::string_view s);
// The notes joined with "; " (pools.cc).
std::string JoinNotes(const std::vector<std::string>& notes);

}  // namespace pools_internal

class PoolSet::Impl {
 public:
  using Replica = pools_internal::Replica;
  using Pool = pools_internal::Pool;
  using Decision = pools_internal::Decision;

  PoolSetConfig config_;
  Clock* clock_ = nullptr;
  mutable internal::Mutex mu_;
  DegradationHandler* handler_ STRATA_GUARDED_BY(mu_) = nullptr;  // SetDegradationHandler
  int64_t kv_bytes_per_token_ STRATA_GUARDED_BY(mu_) = 7600;      // SetKvBytesPerToken

  std::condition_variable_any slot_freed_;  // waited on with mu_ (WaitLocked)
  // The pools, their counts and health; a deque: Pool is move-only.
  std::deque<Pool> pools_ STRATA_GUARDED_BY(mu_);
  int64_t kv_in_flight_tokens_ STRATA_GUARDED_BY(mu_) = 0;
  std::deque<bool> recent_long_ STRATA_GUARDED_BY(mu_);
  uint64_t next_ticket_ STRATA_GUARDED_BY(mu_) = 1;
  // Request id -> (pool, replica).
  std::map<std::string, std::pair<int, int>> running_ STRATA_GUARDED_BY(mu_);
  std::map<std::string, Decision> decisions_ STRATA_GUARDED_BY(mu_);
  std::deque<std::string> decision_order_ STRATA_GUARDED_BY(mu_);

  size_t LongIndex() const STRATA_REQUIRES(mu_) { return pools_.size() - 1; }

  bool KvAlertLocked() const STRATA_REQUIRES(mu_);
  double LongShareLocked() const STRATA_REQUIRES(mu_);
  bool LongShareAlertLocked() const STRATA_REQUIRES(mu_) {
    return LongShareLocked() > config_.long_share_watermark;
  }
  bool AlertLocked() const STRATA_REQUIRES(mu_) {
    return KvAlertLocked() || LongShareAlertLocked();
  }

  int EffectiveCapLocked(size_t p) const STRATA_REQUIRES(mu_);
  bool HasSlotLocked(size_t p) const STRATA_REQUIRES(mu_);
  // A newcomer is admitted only when a slot is free and nobody is queued before it.
  bool CanAdmitLocked(size_t p) const STRATA_REQUIRES(mu_) {
    return HasSlotLocked(p) && pools_[p].queue.empty();
  }

  int FitIndex(int64_t tokens) const STRATA_REQUIRES(mu_);

  // The largest pool below `fit` (all pools when fit < 0) with a free slot; -1 when none.
  int DegradeTargetLocked(int fit) const STRATA_REQUIRES(mu_);

  bool EligibleLocked(const Replica& r, int64_t now) const STRATA_REQUIRES(mu_);

  // Consistent hashing with bounded load; -1 when no replica is eligible.
  int RouteLocked(Pool& pool, uint64_t key) STRATA_REQUIRES(mu_);

  void RememberLocked(const std::string& request_id, Decision decision) STRATA_REQUIRES(mu_);

  // What admission decided: the pool, and the body a degradation step replaced (if any).
  struct Admission {
    int pool_index = -1;
    int64_t send_tokens = 0;
    bool replaced = false;
    std::string replaced_body;
  };

  // The replica an admitted request was routed to, with what it holds until the answer.
  struct Reservation {
    int pool_index = -1;
    int replica_index = -1;
    int64_t kv_tokens = 0;
    Transport* transport = nullptr;
  };

  // `options` as forwarded to a replica (no degradation handler, no kPrefixHashHeader), and in
  // *key the routing key: the header's value, else a hash of the body's first
  // affinity_prefix_bytes.
  CallOptions ForwardOptions(std::string_view body, const CallOptions& options,
                             uint64_t* key) const;

  // The ladder for a request that fits pool `fit` (-1: none) and was not admitted at once: the
  // alert ladder when `fit` is the longest of several pools and an alert is active.
  const std::vector<DegradationStep>& LadderLocked(int fit, Decision* decision) const
      STRATA_REQUIRES(mu_);

  // The compact or fork step: `handler` (called without the lock) makes a request that fits the
  // largest pool below `fit` with a free slot. True when it did and that pool still admits it;
  // otherwise the reason is noted.
  bool DegradeLocked(DegradationStep step, DegradationHandler* handler, std::string_view body,
                     int64_t tokens, int fit,
                     Decision* decision, Admission* admission) STRATA_REQUIRES(mu_);

  // The wait step: queues for a slot of pool `fit`, at most its queue timeout. True when
  // admitted, false when skipped or timed out (the reason noted); CANCELLED when the call was
  // cancelled while waiting.
  StatusOr<bool> WaitLocked(int fit, int64_t tokens, const CallOptions& options,
                            Decision* decision, Admission* admission) STRATA_REQUIRES(mu_);

  // The refusal of a request the ladder did not admit: RESOURCE_EXHAUSTED naming the pool it
  // fits (its cap and queue depth) or, when it fits none, the largest; counted there.
  Status RefuseLocked(int fit, int64_t tokens, Decision* decision) STRATA_REQUIRES(mu_);

  // Admits a request of `tokens` to the pool it fits when that pool has room, else by the
  // ladder. OK with admission->pool_index set; RESOURCE_EXHAUSTED when refused; CANCELLED when
  // cancelled while waiting.
  Status AdmitLocked(std::string_view body, int64_t tokens, const CallOptions& options,
                     DegradationHandler* handler, Decision* decision, Admission* admission)
      STRATA_REQUIRES(mu_);

  // Routes an admitted request to a replica of its pool and counts it in flight there.
  // UNAVAILABLE when every replica of the pool is unhealthy.
  StatusOr<Reservation> ReserveLocked(const Admission& admission, uint64_t key,
                                      const std::string& request_id, Decision* decision)
      STRATA_REQUIRES(mu_);

  // Gives back what ReserveLocked() took and counts the replica's success or failure.
  void ReleaseLocked(const Reservation& reservation, const Status& status,
                     const std::string& request_id) STRATA_REQUIRES(mu_);

  Status Send(std::string_view body, const CallOptions& options, Response* response,
              RequestRecord* record);

  void Fill(RequestRecord* record, const Decision& d, const Status& status) const;
};

}  // namespace strata

#endif  // STRATA_SRC_POOLS_POOLS_IMPL_H_
