// Admission and the degradation ladder of a PoolSet (pools_impl.h).
#include <algorithm>
#include <sstream>
#include <string>
#include <vector>

#include "pools/pools_impl.h"

namespace strata {

using pools_internal::Decision;
using pools_internal::JoinNotes;
using pools_internal::Pool;

namespace {

std::string Ms(double ms) {
  std::ostringstream out;
  out.setf(std::ios::fixed);
  out.precision(0);
  out << ms << " ms";
  return out.str();
}

}  // namespace

bool PoolSet::Impl::KvAlertLocked() const {
  return config_.kv_capacity_tokens > 0 &&
         static_cast<double>(kv_in_flight_tokens_) / config_.kv_capacity_tokens >
             config_.kv_watermark;
}

double PoolSet::Impl::LongShareLocked() const {
  int64_t long_count = std::count(recent_long_.begin(), recent_long_.end(), true);
  return static_cast<double>(long_count) / std::max(1, config_.long_share_window);
}

int PoolSet::Impl::EffectiveCapLocked(size_t p) const {
  int cap = pools_[p].config.max_concurrency;
  if (pools_.size() > 1 && p == LongIndex() && AlertLocked()) {
    cap = cap == 0 ? config_.alert_long_max_concurrency
                   : std::min(cap, config_.alert_long_max_concurrency);
  }
  return cap;
}

bool PoolSet::Impl::HasSlotLocked(size_t p) const {
  int cap = EffectiveCapLocked(p);
  return cap == 0 || pools_[p].in_flight < cap;
}

int PoolSet::Impl::FitIndex(int64_t tokens) const {
  for (size_t i = 0; i < pools_.size(); ++i) {
    if (tokens + config_.turn_reserve_tokens <= pools_[i].config.max_input_tokens) {
      return static_cast<int>(i);
    }
  }
  return -1;
}

int PoolSet::Impl::DegradeTargetLocked(int fit) const {
  int limit = fit < 0 ? static_cast<int>(pools_.size()) : fit;
  for (int i = limit - 1; i >= 0; --i) {
    if (CanAdmitLocked(static_cast<size_t>(i))) return i;
  }
  return -1;
}

const std::vector<DegradationStep>& PoolSet::Impl::LadderLocked(int fit, Decision* decision) const {
  if (fit >= 0 && pools_.size() > 1 && static_cast<size_t>(fit) == LongIndex() && AlertLocked()) {
    decision->notes.push_back("long-pool alert active");
    return config_.alert_ladder;
  }
  return config_.ladder;
}

bool PoolSet::Impl::DegradeLocked(DegradationStep step, DegradationHandler* handler,
                                  std::string_view body, int64_t tokens, int fit,
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
  mu_.unlock();  // the handler compacts or forks without the pools' lock
  StatusOr<DegradedRequest> smaller =
      step == DegradationStep::kCompact ? handler->Compact(body, tokens, target_tokens, target_name)
                                        : handler->Fork(body, tokens, target_tokens, target_name);
  mu_.lock();
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

StatusOr<bool> PoolSet::Impl::WaitLocked(int fit, int64_t tokens, const CallOptions& options,
                                         Decision* decision, Admission* admission) {
  if (fit < 0) {
    decision->notes.push_back("wait skipped: no pool admits " + std::to_string(tokens) + " tokens");
    return false;
  }
  Pool& pool = pools_[fit];
  if (static_cast<int>(pool.queue.size()) >= pool.config.max_queue) {
    decision->notes.push_back("wait skipped: queue of pool \"" + pool.config.name + "\" is full (" +
                              std::to_string(pool.queue.size()) + " of " +
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
    slot_freed_.wait_for(mu_,
                         std::chrono::microseconds(std::min<int64_t>(timeout_us - waited, 10000)));
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

Status PoolSet::Impl::RefuseLocked(int fit, int64_t tokens, Decision* decision) {
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

Status PoolSet::Impl::AdmitLocked(std::string_view body, int64_t tokens, const CallOptions& options,
                                  DegradationHandler* handler, Decision* decision,
                                  Admission* admission) {
  admission->send_tokens = tokens;
  const int fit = FitIndex(tokens);
  if (fit >= 0 && CanAdmitLocked(static_cast<size_t>(fit))) {
    admission->pool_index = fit;
    return Status::Ok();
  }
  for (DegradationStep step : LadderLocked(fit, decision)) {
    if (step == DegradationStep::kRefuse) break;
    if (step == DegradationStep::kCompact || step == DegradationStep::kFork) {
      if (DegradeLocked(step, handler, body, tokens, fit, decision, admission)) {
        return Status::Ok();
      }
      continue;
    }
    STRATA_ASSIGN_OR_RETURN(bool admitted,
                            WaitLocked(fit, tokens, options, decision, admission));
    if (admitted) return Status::Ok();
  }
  return RefuseLocked(fit, tokens, decision);
}

}  // namespace strata
