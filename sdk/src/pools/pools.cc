// Length pools: admission, the degradation ladder, prefix-affinity routing, health and alerts.
#include "strata/pools.h"
#include "strata/grpc_transport.h"
#include "strata/metrics.h"

#include <algorithm>
#include <climits>
#include <cmath>
#include <condition_variable>
#include <deque>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

namespace strata {
namespace {

uint64_t Mix(uint64_t x) {  // splitmix64 finalizer: spreads FNV's low-entropy bits over the ring
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

uint64_t Hash(std::string_view s) {
  uint64_t h = 1469598103934665603ULL;  // FNV-1a 64
  for (unsigned char c : s) {
    h ^= c;
    h *= 1099511628211ULL;
  }
  return Mix(h);
}

bool CountsAsReplicaFailure(StatusCode code) {
  return code == StatusCode::kUnavailable || code == StatusCode::kDeadlineExceeded ||
         code == StatusCode::kInternal || code == StatusCode::kDataLoss;
}

std::string Ms(double ms) {
  std::ostringstream out;
  out.setf(std::ios::fixed);
  out.precision(0);
  out << ms << " ms";
  return out.str();
}

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

std::string JoinNotes(const std::vector<std::string>& notes) {
  std::string out;
  for (const std::string& n : notes) out += (out.empty() ? "" : "; ") + n;
  return out;
}

}  // namespace

std::string DegradationStepName(DegradationStep step) {
  switch (step) {
    case DegradationStep::kCompact:
      return "compact";
    case DegradationStep::kFork:
      return "fork";
    case DegradationStep::kWait:
      return "wait";
    case DegradationStep::kRefuse:
      return "refuse";
  }
  return "unknown";
}

StatusOr<DegradationStep> ParseDegradationStep(const std::string& name) {
  if (name == "compact") return DegradationStep::kCompact;
  if (name == "fork") return DegradationStep::kFork;
  if (name == "wait") return DegradationStep::kWait;
  if (name == "refuse") return DegradationStep::kRefuse;
  return InvalidArgumentError("unknown degradation step \"" + name +
                              "\" (known: compact, fork, wait, refuse)");
}

class PoolSet::Impl {
 public:
  PoolSetConfig config_;
  Clock* clock_ = nullptr;
  DegradationHandler* handler_ = nullptr;
  int64_t kv_bytes_per_token_ = 7600;

  mutable std::mutex mu_;
  std::condition_variable slot_freed_;
  std::deque<Pool> pools_;  // guarded by mu_ (counts and health); a deque: Pool is move-only
  int64_t kv_in_flight_tokens_ = 0;                     // guarded by mu_
  std::deque<bool> recent_long_;                        // guarded by mu_
  uint64_t next_ticket_ = 1;                            // guarded by mu_
  std::map<std::string, std::pair<int, int>> running_;  // request id -> (pool, replica); mu_
  std::map<std::string, Decision> decisions_;           // guarded by mu_
  std::deque<std::string> decision_order_;              // guarded by mu_

  size_t LongIndex() const { return pools_.size() - 1; }

  bool KvAlertLocked() const {
    return config_.kv_capacity_tokens > 0 &&
           static_cast<double>(kv_in_flight_tokens_) / config_.kv_capacity_tokens >
               config_.kv_watermark;
  }
  double LongShareLocked() const {
    int64_t long_count = std::count(recent_long_.begin(), recent_long_.end(), true);
    return static_cast<double>(long_count) / std::max(1, config_.long_share_window);
  }
  bool LongShareAlertLocked() const { return LongShareLocked() > config_.long_share_watermark; }
  bool AlertLocked() const { return KvAlertLocked() || LongShareAlertLocked(); }

  int EffectiveCapLocked(size_t p) const {
    int cap = pools_[p].config.max_concurrency;
    if (pools_.size() > 1 && p == LongIndex() && AlertLocked()) {
      cap = cap == 0 ? config_.alert_long_max_concurrency
                     : std::min(cap, config_.alert_long_max_concurrency);
    }
    return cap;
  }
  bool HasSlotLocked(size_t p) const {
    int cap = EffectiveCapLocked(p);
    return cap == 0 || pools_[p].in_flight < cap;
  }
  // A newcomer is admitted only when a slot is free and nobody is queued before it.
  bool CanAdmitLocked(size_t p) const { return HasSlotLocked(p) && pools_[p].queue.empty(); }

  int FitIndex(int64_t tokens) const {
    for (size_t i = 0; i < pools_.size(); ++i) {
      if (tokens + config_.turn_reserve_tokens <= pools_[i].config.max_input_tokens) {
        return static_cast<int>(i);
      }
    }
    return -1;
  }

  // The largest pool below `fit` (all pools when fit < 0) with a free slot; -1 when none.
  int DegradeTargetLocked(int fit) const {
    int limit = fit < 0 ? static_cast<int>(pools_.size()) : fit;
    for (int i = limit - 1; i >= 0; --i) {
      if (CanAdmitLocked(static_cast<size_t>(i))) return i;
    }
    return -1;
  }

  bool EligibleLocked(const Replica& r, int64_t now) const {
    return r.healthy || now - r.unhealthy_since_us >= config_.unhealthy_cooldown.count() * 1000;
  }

  // Consistent hashing with bounded load; -1 when no replica is eligible.
  int RouteLocked(Pool& pool, uint64_t key) {
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

  void RememberLocked(const std::string& request_id, Decision decision) {
    if (request_id.empty()) return;
    if (decisions_.count(request_id) == 0) decision_order_.push_back(request_id);
    decisions_[request_id] = std::move(decision);
    while (decision_order_.size() > 1024) {
      decisions_.erase(decision_order_.front());
      decision_order_.pop_front();
    }
  }

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

  // The ladder for a request that fits pool `fit` (-1: none) and was not admitted at once: the
  // alert ladder when `fit` is the longest of several pools and an alert is active.
  const std::vector<DegradationStep>& LadderLocked(int fit, Decision* decision) const {
    if (fit >= 0 && pools_.size() > 1 && static_cast<size_t>(fit) == LongIndex() && AlertLocked()) {
      decision->notes.push_back("long-pool alert active");
      return config_.alert_ladder;
    }
    return config_.ladder;
  }

  // The compact or fork step: `handler` (called without the lock) makes a request that fits the
  // largest pool below `fit` with a free slot. True when it did and that pool still admits it;
  // otherwise the reason is noted.
  bool DegradeLocked(DegradationStep step, DegradationHandler* handler, std::string_view body,
                     int64_t tokens, int fit, std::unique_lock<std::mutex>& lock,
                     Decision* decision, Admission* admission) {
    const std::string name = DegradationStepName(step);
    if (handler == nullptr) {
      decision->notes.push_back(name + " skipped: no degradation handler set");
      return false;
    }
    int target = DegradeTargetLocked(fit);
    if (target < 0) {
      decision->notes.push_back(name + " skipped: no " + std::string(fit < 0 ? "" : "smaller ") +
                                "pool has a free slot");
      return false;
    }
    const std::string target_name = pools_[target].config.name;
    const int64_t target_tokens =
        pools_[target].config.max_input_tokens - config_.turn_reserve_tokens;
    lock.unlock();
    StatusOr<DegradedRequest> smaller =
        step == DegradationStep::kCompact
            ? handler->Compact(body, tokens, target_tokens, target_name)
            : handler->Fork(body, tokens, target_tokens, target_name);
    lock.lock();
    if (!smaller.ok()) {
      decision->notes.push_back(name + " failed: " + smaller.status().ToString());
      return false;
    }
    if (smaller->input_tokens > target_tokens || smaller->input_tokens < 1) {
      decision->notes.push_back(name + " left " + std::to_string(smaller->input_tokens) +
                                " tokens, pool \"" + target_name + "\" admits " +
                                std::to_string(target_tokens));
      return false;
    }
    if (!CanAdmitLocked(static_cast<size_t>(target))) {
      decision->notes.push_back(name + " skipped: pool \"" + target_name +
                                "\" filled while degrading");
      return false;
    }
    admission->replaced_body = std::move(smaller->body);
    admission->replaced = true;
    admission->send_tokens = smaller->input_tokens;
    admission->pool_index = target;
    decision->degradation = name;
    (step == DegradationStep::kCompact ? pools_[target].counters.compacted_total
                                       : pools_[target].counters.forked_total)++;
    return true;
  }

  // The wait step: queues for a slot of pool `fit`, at most its queue timeout. True when
  // admitted, false when skipped or timed out (the reason noted); CANCELLED when the call was
  // cancelled while waiting.
  StatusOr<bool> WaitLocked(int fit, int64_t tokens, const CallOptions& options,
                            std::unique_lock<std::mutex>& lock, Decision* decision,
                            Admission* admission) {
    if (fit < 0) {
      decision->notes.push_back("wait skipped: no pool admits " + std::to_string(tokens) +
                                " tokens");
      return false;
    }
    Pool& pool = pools_[fit];
    if (static_cast<int>(pool.queue.size()) >= pool.config.max_queue) {
      decision->notes.push_back("wait skipped: queue of pool \"" + pool.config.name +
                                "\" is full (" + std::to_string(pool.queue.size()) + " of " +
                                std::to_string(pool.config.max_queue) + ")");
      return false;
    }
    const uint64_t ticket = next_ticket_++;
    pool.queue.push_back(ticket);
    const int64_t wait_start = clock_->NowMicros();
    const int64_t timeout_us = pool.config.queue_timeout.count() * 1000;
    bool admitted = false;
    for (;;) {
      if (pool.queue.front() == ticket && HasSlotLocked(static_cast<size_t>(fit))) {
        pool.queue.pop_front();
        admitted = true;
        break;
      }
      if (options.cancel != nullptr && options.cancel->cancelled()) break;
      const int64_t waited = clock_->NowMicros() - wait_start;
      if (waited >= timeout_us) break;
      // Real-time slices keep an injected clock's time advances visible to the waiter.
      slot_freed_.wait_for(
          lock, std::chrono::microseconds(std::min<int64_t>(timeout_us - waited, 10000)));
    }
    decision->queue_wait_ms += static_cast<double>(clock_->NowMicros() - wait_start) / 1000.0;
    if (admitted) {
      admission->pool_index = fit;
      decision->degradation = DegradationStepName(DegradationStep::kWait);
      ++pool.counters.waited_total;
      return true;
    }
    pool.queue.erase(std::find(pool.queue.begin(), pool.queue.end(), ticket));
    slot_freed_.notify_all();  // the next in line may now be at the front
    if (options.cancel != nullptr && options.cancel->cancelled()) {
      return CancelledError("cancelled while waiting in the queue of pool \"" + pool.config.name +
                            "\"");
    }
    ++pool.counters.queue_timeouts_total;
    decision->notes.push_back("waited " + Ms(decision->queue_wait_ms) + " in the queue of pool \"" +
                              pool.config.name + "\" (timeout " +
                              Ms(static_cast<double>(pool.config.queue_timeout.count())) + ")");
    return false;
  }

  // The refusal of a request the ladder did not admit: RESOURCE_EXHAUSTED naming the pool it
  // fits (its cap and queue depth) or, when it fits none, the largest; counted there.
  Status RefuseLocked(int fit, int64_t tokens, Decision* decision) {
    std::string message;
    if (fit < 0) {
      const Pool& largest = pools_.back();
      message = "input of " + std::to_string(tokens) + " tokens (+" +
                std::to_string(config_.turn_reserve_tokens) +
                " reserved) exceeds every pool: the largest, \"" + largest.config.name +
                "\", admits " + std::to_string(largest.config.max_input_tokens) +
                "; compact or split the task";
      ++pools_.back().counters.refused_total;
      decision->pool = largest.config.name;
    } else {
      Pool& pool = pools_[fit];
      message =
          "pool \"" + pool.config.name + "\" is full: " + std::to_string(pool.in_flight) +
          " in flight of cap " + std::to_string(EffectiveCapLocked(fit)) +
          (EffectiveCapLocked(fit) != pool.config.max_concurrency
               ? " (lowered from " + std::to_string(pool.config.max_concurrency) + " by an alert)"
               : "") +
          ", queue depth " + std::to_string(pool.queue.size()) + " of " +
          std::to_string(pool.config.max_queue) + "; input " + std::to_string(tokens) + " tokens";
      ++pool.counters.refused_total;
      decision->pool = pool.config.name;
    }
    if (!decision->notes.empty()) message += " (" + JoinNotes(decision->notes) + ")";
    decision->degradation = "refuse";
    return ResourceExhaustedError(message);
  }

  // Admits a request of `tokens` to the pool it fits when that pool has room, else by the
  // ladder. OK with admission->pool_index set; RESOURCE_EXHAUSTED when refused; CANCELLED when
  // cancelled while waiting.
  Status AdmitLocked(std::string_view body, int64_t tokens, const CallOptions& options,
                     DegradationHandler* handler, std::unique_lock<std::mutex>& lock,
                     Decision* decision, Admission* admission) {
    admission->send_tokens = tokens;
    const int fit = FitIndex(tokens);
    if (fit >= 0 && CanAdmitLocked(static_cast<size_t>(fit))) {
      admission->pool_index = fit;
      return Status::Ok();
    }
    for (DegradationStep step : LadderLocked(fit, decision)) {
      if (step == DegradationStep::kRefuse) break;
      if (step == DegradationStep::kCompact || step == DegradationStep::kFork) {
        if (DegradeLocked(step, handler, body, tokens, fit, lock, decision, admission)) {
          return Status::Ok();
        }
        continue;
      }
      STRATA_ASSIGN_OR_RETURN(bool admitted,
                              WaitLocked(fit, tokens, options, lock, decision, admission));
      if (admitted) return Status::Ok();
    }
    return RefuseLocked(fit, tokens, decision);
  }

  // Routes an admitted request to a replica of its pool and counts it in flight there.
  // UNAVAILABLE when every replica of the pool is unhealthy.
  StatusOr<Reservation> ReserveLocked(const Admission& admission, uint64_t key,
                                      const std::string& request_id, Decision* decision) {
    Pool& pool = pools_[admission.pool_index];
    const int replica_index = RouteLocked(pool, key);
    decision->pool = pool.config.name;
    if (replica_index < 0) {
      return UnavailableError("every replica of pool \"" + pool.config.name + "\" (" +
                              std::to_string(pool.replicas.size()) +
                              ") is unhealthy; RunHealthChecks() re-admits them");
    }
    Replica& replica = pool.replicas[replica_index];
    if (!replica.healthy)
      replica.unhealthy_since_us = clock_->NowMicros();  // one probe per cooldown
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

  // Gives back what ReserveLocked() took and counts the replica's success or failure.
  void ReleaseLocked(const Reservation& reservation, const Status& status,
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

  Status Send(std::string_view body, const CallOptions& options, Response* response,
              RequestRecord* record) {
    *response = Response();
    DegradationHandler* const handler =
        options.degradation != nullptr ? options.degradation : handler_;
    // Tells the call's own handler what was decided, on every return path.
    struct Notify {
      const Impl* impl;
      DegradationHandler* handler;
      const Decision* decision;
      const Status* status;
      ~Notify() {
        if (handler == nullptr) return;
        RequestRecord record;
        impl->Fill(&record, *decision, *status);
        handler->OnDecision(record);
      }
    };
    const int64_t tokens =
        options.prompt_tokens > 0 ? options.prompt_tokens : static_cast<int64_t>(body.size() / 4);
    uint64_t key = 0;
    CallOptions forward = ForwardOptions(body, options, &key);

    Decision decision;
    decision.input_tokens = tokens;
    Status outcome;
    Notify notify{this, options.degradation, &decision, &outcome};
    Admission admission;

    std::unique_lock<std::mutex> lock(mu_);
    outcome = AdmitLocked(body, tokens, options, handler, lock, &decision, &admission);
    if (outcome.code() == StatusCode::kCancelled) return outcome;  // not remembered nor recorded
    StatusOr<Reservation> reserved =
        outcome.ok() ? ReserveLocked(admission, key, options.request_id, &decision)
                     : StatusOr<Reservation>(outcome);
    if (!reserved.ok()) {
      RememberLocked(options.request_id, decision);
      lock.unlock();
      outcome = reserved.status();
      Fill(record, decision, outcome);
      return outcome;
    }
    lock.unlock();

    forward.prompt_tokens = admission.send_tokens;
    Status status = reserved->transport->Send(
        admission.replaced ? std::string_view(admission.replaced_body) : body, forward, response);

    lock.lock();
    ReleaseLocked(*reserved, status, options.request_id);
    RememberLocked(options.request_id, decision);
    slot_freed_.notify_all();
    lock.unlock();
    Fill(record, decision, status);
    if (record != nullptr) {
      record->kv_cache_bytes =
          (admission.send_tokens + response->usage.completion_tokens) * kv_bytes_per_token_;
    }
    outcome = status;
    return status;
  }

  void Fill(RequestRecord* record, const Decision& d, const Status& status) const {
    if (record == nullptr) return;
    record->pool = d.pool;
    if (!d.endpoint.empty()) record->endpoint = d.endpoint;
    record->queue_wait_ms = d.queue_wait_ms;
    record->degradation = d.degradation;
    record->degradation_notes = JoinNotes(d.notes);
    if (record->input_tokens == 0) record->input_tokens = d.input_tokens;
    record->code = status.code();
    record->error = status.ok() ? "" : status.message();
  }
};

namespace {

// A JSON array of degradation step names into *out; INVALID_ARGUMENT naming `field`.
Status ParseSteps(const nlohmann::json& value, const std::string& field,
                  std::vector<DegradationStep>* out) {
  if (!value.is_array()) return InvalidArgumentError("\"" + field + "\" must be an array of steps");
  out->clear();
  for (const nlohmann::json& s : value) {
    if (!s.is_string())
      return InvalidArgumentError("\"" + field + "\" holds a non-string: " + s.dump());
    StatusOr<DegradationStep> step = ParseDegradationStep(s.get<std::string>());
    if (!step.ok()) return InvalidArgumentError("\"" + field + "\": " + step.status().message());
    out->push_back(*step);
  }
  return Status();
}

// A JSON number into *out; INVALID_ARGUMENT naming `field` and the value otherwise.
Status ParseNumber(const nlohmann::json& value, const std::string& field, double* out) {
  if (!value.is_number()) {
    return InvalidArgumentError("\"" + field + "\" must be a number, got " + value.dump());
  }
  *out = value.get<double>();
  return Status();
}

// Entry `index` of "pools"; INVALID_ARGUMENT naming the field ("pools[1].max_queue").
StatusOr<PoolConfig> ParsePoolConfig(const nlohmann::json& p, size_t index) {
  using nlohmann::json;
  const std::string where = "pools[" + std::to_string(index) + "]";
  if (!p.is_object()) return InvalidArgumentError(where + " is not an object");
  double x = 0;
  PoolConfig pool;
  for (auto pit = p.begin(); pit != p.end(); ++pit) {
    const std::string field = where + "." + pit.key();
    const json& pv = pit.value();
    if (pit.key() == "name") {
      if (!pv.is_string()) return InvalidArgumentError("\"" + field + "\" must be a string");
      pool.name = pv.get<std::string>();
    } else if (pit.key() == "endpoints") {
      if (!pv.is_array()) return InvalidArgumentError("\"" + field + "\" must be an array of URLs");
      for (const json& e : pv) {
        if (!e.is_string())
          return InvalidArgumentError("\"" + field + "\" holds a non-string: " + e.dump());
        pool.endpoints.push_back(e.get<std::string>());
      }
    } else if (pit.key() == "max_input_tokens") {
      STRATA_RETURN_IF_ERROR(ParseNumber(pv, field, &x));
      pool.max_input_tokens = static_cast<int64_t>(x);
    } else if (pit.key() == "max_concurrency") {
      STRATA_RETURN_IF_ERROR(ParseNumber(pv, field, &x));
      pool.max_concurrency = static_cast<int>(x);
    } else if (pit.key() == "max_queue") {
      STRATA_RETURN_IF_ERROR(ParseNumber(pv, field, &x));
      pool.max_queue = static_cast<int>(x);
    } else if (pit.key() == "queue_timeout_ms") {
      STRATA_RETURN_IF_ERROR(ParseNumber(pv, field, &x));
      pool.queue_timeout = std::chrono::milliseconds(static_cast<int64_t>(x));
    } else if (pit.key() == "output_reserve_tokens") {
      STRATA_RETURN_IF_ERROR(ParseNumber(pv, field, &x));
      pool.output_reserve_tokens = static_cast<int64_t>(x);
    } else {
      return InvalidArgumentError("unknown key \"" + field +
                                  "\" (known: name, max_input_tokens, endpoints, "
                                  "max_concurrency, max_queue, queue_timeout_ms, "
                                  "output_reserve_tokens)");
    }
  }
  return pool;
}

}  // namespace

StatusOr<PoolSetConfig> ParsePoolSetConfig(std::string_view json_text) {
  using nlohmann::json;
  json j = json::parse(json_text.begin(), json_text.end(), nullptr, false);
  if (j.is_discarded() || !j.is_object()) {
    return InvalidArgumentError("pool config is not a JSON object");
  }
  PoolSetConfig config;
  for (auto it = j.begin(); it != j.end(); ++it) {
    const std::string& k = it.key();
    const json& v = it.value();
    double x = 0;
    if (k == "pools") {
      if (!v.is_array()) return InvalidArgumentError("\"pools\" must be an array");
      for (size_t i = 0; i < v.size(); ++i) {
        STRATA_ASSIGN_OR_RETURN(PoolConfig pool, ParsePoolConfig(v[i], i));
        config.pools.push_back(std::move(pool));
      }
    } else if (k == "ladder") {
      STRATA_RETURN_IF_ERROR(ParseSteps(v, k, &config.ladder));
    } else if (k == "alert_ladder") {
      STRATA_RETURN_IF_ERROR(ParseSteps(v, k, &config.alert_ladder));
    } else if (k == "turn_reserve_tokens") {
      STRATA_RETURN_IF_ERROR(ParseNumber(v, k, &x));
      config.turn_reserve_tokens = static_cast<int64_t>(x);
    } else if (k == "load_factor") {
      STRATA_RETURN_IF_ERROR(ParseNumber(v, k, &config.load_factor));
    } else if (k == "virtual_nodes") {
      STRATA_RETURN_IF_ERROR(ParseNumber(v, k, &x));
      config.virtual_nodes = static_cast<int>(x);
    } else if (k == "affinity_prefix_bytes") {
      STRATA_RETURN_IF_ERROR(ParseNumber(v, k, &x));
      config.affinity_prefix_bytes = static_cast<size_t>(std::max(0.0, x));
    } else if (k == "unhealthy_after_failures") {
      STRATA_RETURN_IF_ERROR(ParseNumber(v, k, &x));
      config.unhealthy_after_failures = static_cast<int>(x);
    } else if (k == "unhealthy_cooldown_ms") {
      STRATA_RETURN_IF_ERROR(ParseNumber(v, k, &x));
      config.unhealthy_cooldown = std::chrono::milliseconds(static_cast<int64_t>(x));
    } else if (k == "kv_capacity_tokens") {
      STRATA_RETURN_IF_ERROR(ParseNumber(v, k, &x));
      config.kv_capacity_tokens = static_cast<int64_t>(x);
    } else if (k == "kv_watermark") {
      STRATA_RETURN_IF_ERROR(ParseNumber(v, k, &config.kv_watermark));
    } else if (k == "long_share_watermark") {
      STRATA_RETURN_IF_ERROR(ParseNumber(v, k, &config.long_share_watermark));
    } else if (k == "long_share_window") {
      STRATA_RETURN_IF_ERROR(ParseNumber(v, k, &x));
      config.long_share_window = static_cast<int>(x);
    } else if (k == "alert_long_max_concurrency") {
      STRATA_RETURN_IF_ERROR(ParseNumber(v, k, &x));
      config.alert_long_max_concurrency = static_cast<int>(x);
    } else {
      return InvalidArgumentError(
          "unknown key \"" + k +
          "\" (known: pools, ladder, alert_ladder, turn_reserve_tokens, load_factor, "
          "virtual_nodes, affinity_prefix_bytes, unhealthy_after_failures, unhealthy_cooldown_ms, "
          "kv_capacity_tokens, kv_watermark, long_share_watermark, long_share_window, "
          "alert_long_max_concurrency)");
    }
  }
  return config;
}

StatusOr<std::unique_ptr<PoolSet>> PoolSet::Create(PoolSetConfig config) {
  if (config.pools.empty()) return InvalidArgumentError("a pool set needs at least one pool");
  if (!(config.load_factor >= 1)) {
    return InvalidArgumentError("load_factor must be >= 1, got " +
                                std::to_string(config.load_factor));
  }
  if (config.virtual_nodes < 1) {
    return InvalidArgumentError("virtual_nodes must be >= 1, got " +
                                std::to_string(config.virtual_nodes));
  }
  if (config.alert_long_max_concurrency < 1) {
    return InvalidArgumentError("alert_long_max_concurrency must be >= 1, got " +
                                std::to_string(config.alert_long_max_concurrency));
  }
  if (config.ladder.empty()) return InvalidArgumentError("the degradation ladder is empty");
  if (config.turn_reserve_tokens < 0) {
    return InvalidArgumentError("turn_reserve_tokens must be >= 0, got " +
                                std::to_string(config.turn_reserve_tokens));
  }
  std::set<std::string> names;
  for (const PoolConfig& p : config.pools) {
    if (p.name.empty()) return InvalidArgumentError("a pool has no name");
    if (!names.insert(p.name).second)
      return InvalidArgumentError("pool name \"" + p.name + "\" is used twice");
    if (p.max_input_tokens < 1) {
      return InvalidArgumentError("pool \"" + p.name + "\": max_input_tokens must be >= 1, got " +
                                  std::to_string(p.max_input_tokens));
    }
    if (p.endpoints.empty() && p.transports.empty()) {
      return InvalidArgumentError("pool \"" + p.name + "\" has no endpoints");
    }
    if (p.max_concurrency < 0 || p.max_queue < 0 || p.queue_timeout.count() < 0 ||
        p.output_reserve_tokens < 0) {
      return InvalidArgumentError("pool \"" + p.name +
                                  "\": max_concurrency, max_queue, queue_timeout and "
                                  "output_reserve_tokens must be >= 0");
    }
  }
  std::stable_sort(config.pools.begin(), config.pools.end(),
                   [](const PoolConfig& a, const PoolConfig& b) {
                     return a.max_input_tokens < b.max_input_tokens;
                   });
  auto impl = std::make_unique<Impl>();
  impl->clock_ = config.clock != nullptr ? config.clock : SystemClock();
  for (const PoolConfig& pc : config.pools) {
    Pool pool;
    pool.config = pc;
    if (!pc.transports.empty()) {
      for (Transport* t : pc.transports) {
        if (t == nullptr)
          return InvalidArgumentError("pool \"" + pc.name + "\" has a null transport");
        Replica r;
        r.transport = t;
        r.endpoint = t->Endpoint();
        pool.replicas.push_back(std::move(r));
      }
    } else {
      for (const std::string& url : pc.endpoints) {
        StatusOr<std::unique_ptr<Transport>> made = Status(StatusCode::kUnknown, "");
        if (config.transport_factory) {
          made = config.transport_factory(url);
        } else if (url.rfind("grpc://", 0) == 0) {
          GrpcTransportOptions g;
          g.target = url.substr(7);
          made = MakeGrpcTransport(g);
        } else {
          HttpTransportOptions h;
          h.base_url = url;
          made = MakeHttpTransport(h);
        }
        if (!made.ok()) {
          return InvalidArgumentError("pool \"" + pc.name + "\" endpoint \"" + url +
                                      "\": " + made.status().message());
        }
        Replica r;
        r.owned = std::move(made).value();
        r.transport = r.owned.get();
        r.endpoint = url;
        pool.replicas.push_back(std::move(r));
      }
    }
    for (size_t i = 0; i < pool.replicas.size(); ++i) {
      for (int v = 0; v < config.virtual_nodes; ++v) {
        pool.ring.emplace_back(
            Hash(pool.replicas[i].endpoint + "#" + std::to_string(i) + "#" + std::to_string(v)),
            static_cast<int>(i));
      }
    }
    std::sort(pool.ring.begin(), pool.ring.end());
    impl->pools_.push_back(std::move(pool));
  }
  impl->config_ = std::move(config);
  return std::unique_ptr<PoolSet>(new PoolSet(std::move(impl)));
}

PoolSet::PoolSet(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
PoolSet::~PoolSet() = default;

void PoolSet::SetDegradationHandler(DegradationHandler* handler) {
  std::lock_guard<std::mutex> lock(impl_->mu_);
  impl_->handler_ = handler;
}

void PoolSet::SetKvBytesPerToken(int64_t bytes) {
  std::lock_guard<std::mutex> lock(impl_->mu_);
  impl_->kv_bytes_per_token_ = bytes;
}

std::string PoolSet::Name() const { return "pools"; }

std::string PoolSet::Endpoint() const {
  std::string out = "pools:";
  for (size_t i = 0; i < impl_->pools_.size(); ++i) {
    out += (i == 0 ? "" : ",") + impl_->pools_[i].config.name;
  }
  return out;
}

Status PoolSet::Send(std::string_view body, const CallOptions& options, Response* response) {
  return impl_->Send(body, options, response, nullptr);
}

Status PoolSet::Send(std::string_view body, const CallOptions& options, Response* response,
                     RequestRecord* record) {
  return impl_->Send(body, options, response, record);
}

int PoolSet::RunHealthChecks(std::chrono::milliseconds timeout) {
  std::vector<std::pair<std::pair<size_t, size_t>, Transport*>> targets;
  {
    std::lock_guard<std::mutex> lock(impl_->mu_);
    for (size_t p = 0; p < impl_->pools_.size(); ++p) {
      for (size_t r = 0; r < impl_->pools_[p].replicas.size(); ++r) {
        targets.push_back({{p, r}, impl_->pools_[p].replicas[r].transport});
      }
    }
  }
  int healthy = 0;
  for (auto& [where, transport] : targets) {
    Status s = transport->HealthCheck(timeout);
    std::lock_guard<std::mutex> lock(impl_->mu_);
    Replica& r = impl_->pools_[where.first].replicas[where.second];
    if (s.ok()) {
      r.healthy = true;
      r.consecutive_failures = 0;
      ++healthy;
    } else if (r.healthy) {
      r.healthy = false;
      r.unhealthy_since_us = impl_->clock_->NowMicros();
    }
  }
  impl_->slot_freed_.notify_all();
  return healthy;
}

Status PoolSet::HealthCheck(std::chrono::milliseconds timeout) {
  RunHealthChecks(timeout);
  std::lock_guard<std::mutex> lock(impl_->mu_);
  for (const Pool& p : impl_->pools_) {
    bool any = std::any_of(p.replicas.begin(), p.replicas.end(),
                           [](const Replica& r) { return r.healthy; });
    if (!any) return UnavailableError("no healthy replica in pool \"" + p.config.name + "\"");
  }
  return Status();
}

Status PoolSet::Abort(const std::string& request_id) {
  Transport* transport = nullptr;
  {
    std::lock_guard<std::mutex> lock(impl_->mu_);
    auto it = impl_->running_.find(request_id);
    if (it == impl_->running_.end()) {
      return NotFoundError("request \"" + request_id + "\" is not in flight in any pool");
    }
    transport = impl_->pools_[it->second.first].replicas[it->second.second].transport;
  }
  return transport->Abort(request_id);
}

Status PoolSet::Annotate(RequestRecord* record) const {
  std::lock_guard<std::mutex> lock(impl_->mu_);
  auto it = impl_->decisions_.find(record->request_id);
  if (it == impl_->decisions_.end()) {
    return NotFoundError("no pool decision for request \"" + record->request_id + "\"");
  }
  const Decision& d = it->second;
  record->pool = d.pool;
  if (!d.endpoint.empty()) record->endpoint = d.endpoint;
  record->queue_wait_ms = d.queue_wait_ms;
  record->degradation = d.degradation;
  record->degradation_notes = JoinNotes(d.notes);
  return Status();
}

PoolSetMetrics PoolSet::Metrics() const {
  std::lock_guard<std::mutex> lock(impl_->mu_);
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
  return text.ok() ? *std::move(text) : "# " + EscapePrometheusHelp(text.status().ToString()) + "\n";
}

}  // namespace strata
