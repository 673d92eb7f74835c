// Backoff computation and the system clock, shared by the HTTP and gRPC transports.
#ifndef STRATA_SRC_TRANSPORT_RETRY_H_
#define STRATA_SRC_TRANSPORT_RETRY_H_

#include <chrono>
#include <cstdint>
#include <mutex>
#include <random>

#include "strata/transport.h"

namespace strata::transport_internal {

// Thread-safe jitter source over RetryPolicy::uniform01 or a seeded generator.
class Backoff {
 public:
  explicit Backoff(const RetryPolicy& policy);
  // Delay before retry number `retry` (1 = first retry), in microseconds. When
  // `retry_after_seconds` >= 0 it replaces the exponential backoff (capped at max_retry_after).
  int64_t DelayMicros(int retry, double retry_after_seconds);

 private:
  RetryPolicy policy_;
  std::mutex mu_;
  std::mt19937_64 rng_;  // guarded by mu_
};

// Milliseconds on the steady clock, for transfer timings.
inline double SteadyMillis() {
  return std::chrono::duration<double, std::milli>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

}  // namespace strata::transport_internal

#endif  // STRATA_SRC_TRANSPORT_RETRY_H_
