// strata-sim's KV-memory model (see sim_kv.h).
#include "sim_kv.h"

#include <algorithm>
#include <chrono>
#include <sstream>

namespace strata::sim {

KvSim::KvSim(KvSimOptions options, std::function<bool(int64_t)> sleep)
    : options_(options), sleep_(std::move(sleep)) {
  options_.block_tokens = std::max<int64_t>(1, options_.block_tokens);
  capacity_blocks_ =
      options_.capacity_tokens > 0 ? options_.capacity_tokens / options_.block_tokens : 0;
  stats_.capacity_blocks = capacity_blocks_;
}

int64_t KvSim::Blocks(int64_t tokens) const {
  return (std::max<int64_t>(0, tokens) + options_.block_tokens - 1) / options_.block_tokens;
}

int64_t KvSim::PrefillMicros(int64_t prompt_tokens, int64_t cached_tokens) const {
  const double uncached = static_cast<double>(std::max<int64_t>(0, prompt_tokens - cached_tokens));
  const double context_k = (static_cast<double>(cached_tokens) + uncached / 2) / 1000.0;
  return static_cast<int64_t>(uncached * options_.prefill_us_per_token +
                              uncached * context_k * options_.prefill_attention_us);
}

bool KvSim::WaitAdmittedLocked(std::unique_lock<std::mutex>& lock, uint64_t id, int64_t* wait_us) {
  const auto start = std::chrono::steady_clock::now();
  waiting_.push_back(id);
  for (;;) {
    if (stopping_) return false;
    Sequence& s = sequences_[id];
    if (waiting_.front() == id &&
        (capacity_blocks_ == 0 || used_blocks_ + s.need_blocks <= capacity_blocks_)) {
      waiting_.pop_front();
      s.blocks = s.need_blocks;
      used_blocks_ += s.blocks;
      s.running = true;
      s.preempted = false;
      s.admit_order = next_order_++;
      changed_.notify_all();  // the next in line may fit too
      break;
    }
    changed_.wait(lock);
  }
  const double waited =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  stats_.queue_wait_seconds_total += waited;
  stats_.queue_wait_seconds_max = std::max(stats_.queue_wait_seconds_max, waited);
  if (wait_us != nullptr) *wait_us += static_cast<int64_t>(waited * 1e6);
  return true;
}

KvSim::Admission KvSim::Admit(int64_t prompt_tokens, int64_t max_output_tokens, uint64_t* id,
                              int64_t* wait_us) {
  std::unique_lock<std::mutex> lock(mu_);
  if (wait_us != nullptr) *wait_us = 0;
  const int64_t need = options_.preempt
                           ? Blocks(prompt_tokens + 1)
                           : Blocks(prompt_tokens + std::max<int64_t>(1, max_output_tokens));
  if (capacity_blocks_ > 0 && need > capacity_blocks_) {
    ++stats_.rejected_too_large_total;
    return Admission::kTooLarge;
  }
  *id = next_id_++;
  sequences_[*id].need_blocks = need;
  if (!WaitAdmittedLocked(lock, *id, wait_us)) {
    waiting_.erase(std::remove(waiting_.begin(), waiting_.end(), *id), waiting_.end());
    sequences_.erase(*id);
    return Admission::kStopping;
  }
  ++stats_.admitted_total;
  return Admission::kAdmitted;
}

bool KvSim::Prefill(uint64_t, int64_t prefill_us, const SleepFn& sleep) {
  if (prefill_us <= 0) return true;
  const SleepFn& sleep_fn = sleep ? sleep : sleep_;
  if (!options_.serial_prefill) return sleep_fn(prefill_us);
  std::lock_guard<std::mutex> serial(prefill_mu_);
  return sleep_fn(prefill_us);
}

bool KvSim::Grow(uint64_t id, int64_t tokens, int64_t prefill_us, const SleepFn& sleep) {
  if (capacity_blocks_ == 0 || !options_.preempt) return true;
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    if (stopping_) return false;
    Sequence& s = sequences_[id];
    if (s.preempted) {
      // Recompute preemption: wait to be re-admitted with everything so far, then prefill again.
      s.need_blocks = Blocks(tokens);
      int64_t waited = 0;
      if (!WaitAdmittedLocked(lock, id, &waited)) return false;
      lock.unlock();
      if (!Prefill(id, prefill_us, sleep)) return false;
      lock.lock();
      continue;
    }
    const int64_t want = Blocks(tokens);
    if (want <= s.blocks) return true;
    if (used_blocks_ + (want - s.blocks) <= capacity_blocks_) {
      used_blocks_ += want - s.blocks;
      s.blocks = want;
      return true;
    }
    // Preempt the youngest running sequence (possibly this one).
    uint64_t victim = 0, youngest = 0;
    for (auto& [other_id, other] : sequences_) {
      if (other.running && other.admit_order > youngest) {
        youngest = other.admit_order;
        victim = other_id;
      }
    }
    Sequence& v = sequences_[victim];
    used_blocks_ -= v.blocks;
    v.blocks = 0;
    v.running = false;
    v.preempted = true;
    ++stats_.preemptions_total;
    changed_.notify_all();
  }
}

void KvSim::Release(uint64_t id) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = sequences_.find(id);
  if (it == sequences_.end()) return;
  used_blocks_ -= it->second.blocks;
  waiting_.erase(std::remove(waiting_.begin(), waiting_.end(), id), waiting_.end());
  sequences_.erase(it);
  changed_.notify_all();
}

void KvSim::Stop() {
  std::lock_guard<std::mutex> lock(mu_);
  stopping_ = true;
  changed_.notify_all();
}

KvSim::Stats KvSim::stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  Stats s = stats_;
  s.used_blocks = used_blocks_;
  s.waiting = static_cast<int>(waiting_.size());
  s.running = static_cast<int>(std::count_if(sequences_.begin(), sequences_.end(),
                                             [](const auto& e) { return e.second.running; }));
  return s;
}

std::string KvSim::MetricsText(int64_t prefix_cache_blocks) const {
  Stats s = stats();
  std::ostringstream out;
  auto gauge = [&](const char* name, const char* type, const char* help, auto value) {
    out << "# HELP " << name << " " << help << "\n# TYPE " << name << " " << type << "\n"
        << name << " " << value << "\n";
  };
  gauge("strata_sim_kv_capacity_blocks", "gauge", "KV cache capacity in blocks (0: not modelled).",
        s.capacity_blocks);
  gauge("strata_sim_kv_block_tokens", "gauge", "Tokens per KV block.", options_.block_tokens);
  gauge("strata_sim_kv_used_blocks", "gauge", "Blocks held by running sequences.", s.used_blocks);
  gauge("strata_sim_kv_usage_ratio", "gauge", "Blocks held by running sequences / capacity.",
        s.capacity_blocks > 0 ? static_cast<double>(s.used_blocks) / s.capacity_blocks : 0.0);
  gauge("strata_sim_prefix_cache_blocks", "gauge", "Blocks resident in the prefix cache.",
        prefix_cache_blocks);
  gauge("strata_sim_running", "gauge", "Sequences running.", s.running);
  gauge("strata_sim_queue_waiting", "gauge", "Sequences waiting for KV blocks.", s.waiting);
  gauge("strata_sim_admitted_total", "counter", "Sequences admitted.", s.admitted_total);
  gauge("strata_sim_preemptions_total", "counter", "Running sequences preempted for KV blocks.",
        s.preemptions_total);
  gauge("strata_sim_rejected_too_large_total", "counter", "Requests larger than the KV capacity.",
        s.rejected_too_large_total);
  gauge("strata_sim_queue_wait_seconds_total", "counter", "Time sequences waited for admission.",
        s.queue_wait_seconds_total);
  gauge("strata_sim_queue_wait_seconds_max", "gauge", "Longest admission wait.",
        s.queue_wait_seconds_max);
  return out.str();
}

}  // namespace strata::sim
