// strata-sim's memory model: a KV cache of a fixed number of tokens, cut into blocks, that running
// sequences hold; admission that queues (FIFO, like vLLM's scheduler) when the blocks run out, and
// optional preemption of the youngest running sequence when a running one needs a block to grow
// (vLLM's recompute preemption: the victim frees its blocks, waits again and re-runs its prefill);
// and a prefill time with a linear and an attention (quadratic) term, optionally one prefill at a
// time (an engine without chunked-prefill mixing). Queue wait, KV usage and preemptions are
// reported in Prometheus text for strata-sim's /metrics.
//
//   KvSimOptions options;
//   options.capacity_tokens = 262144;  // e.g. from `strata plan --json`
//   KvSim kv(options, sleep_fn);
//   uint64_t id;
//   if (kv.Admit(prompt_tokens, max_output_tokens, &id, &wait_us) == KvSim::Admission::kAdmitted) {
//     kv.Prefill(id, kv.PrefillMicros(prompt_tokens, cached_tokens));
//     for (each output token n) kv.Grow(id, prompt_tokens + n, prefill_us);
//     kv.Release(id);
//   }
//
// Thread safety: KvSim is thread-safe; Admit, Prefill and Grow block the calling thread.
#ifndef STRATA_APPS_STRATA_SIM_SIM_KV_H_
#define STRATA_APPS_STRATA_SIM_SIM_KV_H_

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <mutex>
#include <string>

namespace strata::sim {

struct KvSimOptions {
  // KV capacity in tokens; 0 (default): memory is not modelled and admission never waits.
  int64_t capacity_tokens = 0;
  // Tokens per KV block. Default 16.
  int64_t block_tokens = 16;
  // false (default): a sequence reserves blocks for its prompt and its whole output at admission,
  // so it never needs to preempt. true: it reserves its prompt only and grows while decoding;
  // when no block is free the youngest running sequence is preempted.
  bool preempt = false;
  // Prefill time: linear_us x uncached tokens + attention_us x uncached tokens x (context they
  // attend to, cached + half the uncached, in thousands of tokens). Defaults 0.
  double prefill_us_per_token = 0;
  double prefill_attention_us = 0;
  // One prefill at a time, FIFO. Default false (prefills overlap freely).
  bool serial_prefill = false;
};

class KvSim {
 public:
  // `sleep(micros)` waits and returns false when the server is stopping.
  KvSim(KvSimOptions options, std::function<bool(int64_t)> sleep);

  enum class Admission { kAdmitted, kTooLarge, kStopping };

  int64_t PrefillMicros(int64_t prompt_tokens, int64_t cached_tokens) const;
  // Waits (FIFO) until the sequence's blocks fit. kTooLarge when it can never fit the capacity.
  // *wait_us: time spent waiting.
  Admission Admit(int64_t prompt_tokens, int64_t max_output_tokens, uint64_t* id, int64_t* wait_us);
  // A caller's own sleep (e.g. one that ends early when a gRPC call is cancelled): false stops.
  using SleepFn = std::function<bool(int64_t)>;
  // Sleeps the prefill (after the running prefill when serial_prefill) with `sleep`, or the
  // constructor's sleep when empty. False when stopping (or `sleep` returned false).
  bool Prefill(uint64_t id, int64_t prefill_us, const SleepFn& sleep = {});
  // Makes the sequence hold blocks for `tokens`; with preemption, may preempt younger sequences,
  // and when this sequence itself was preempted it waits to be re-admitted and re-runs its
  // prefill (`prefill_us`, slept with `sleep` as in Prefill). False when stopping.
  bool Grow(uint64_t id, int64_t tokens, int64_t prefill_us, const SleepFn& sleep = {});
  void Release(uint64_t id);
  // Wakes every waiter (they return kStopping / false).
  void Stop();
  int64_t capacity_tokens() const { return options_.capacity_tokens; }

  struct Stats {
    int64_t capacity_blocks = 0;
    int64_t used_blocks = 0;  // held by running sequences
    int running = 0;
    int waiting = 0;
    int64_t admitted_total = 0;
    int64_t preemptions_total = 0;
    int64_t rejected_too_large_total = 0;
    double queue_wait_seconds_total = 0;
    double queue_wait_seconds_max = 0;
  };
  Stats stats() const;
  // Prometheus text: strata_sim_kv_* and strata_sim_queue_* families. `prefix_cache_blocks` is the
  // prefix cache's resident block count, reported beside the running sequences' blocks.
  std::string MetricsText(int64_t prefix_cache_blocks) const;

 private:
  struct Sequence {
    int64_t blocks = 0;
    int64_t need_blocks = 0;  // to (re-)admit
    bool running = false;
    bool preempted = false;
    uint64_t admit_order = 0;
  };
  int64_t Blocks(int64_t tokens) const;
  bool WaitAdmittedLocked(std::unique_lock<std::mutex>& lock, uint64_t id, int64_t* wait_us);

  KvSimOptions options_;
  std::function<bool(int64_t)> sleep_;
  int64_t capacity_blocks_ = 0;
  mutable std::mutex mu_;
  std::condition_variable changed_;
  std::map<uint64_t, Sequence> sequences_;  // guarded by mu_
  std::deque<uint64_t> waiting_;            // guarded by mu_
  int64_t used_blocks_ = 0;                 // guarded by mu_
  uint64_t next_id_ = 1;                    // guarded by mu_
  uint64_t next_order_ = 1;                 // guarded by mu_
  bool stopping_ = false;                   // guarded by mu_
  Stats stats_;                             // guarded by mu_ (the totals)
  std::mutex prefill_mu_;                   // held during a serial prefill
};

}  // namespace strata::sim

#endif  // STRATA_APPS_STRATA_SIM_SIM_KV_H_
