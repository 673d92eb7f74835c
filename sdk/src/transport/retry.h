// Backoff computation and timing helpers, shared by the HTTP and gRPC transports.
#ifndef STRATA_SRC_TRANSPORT_RETRY_H_
#define STRATA_SRC_TRANSPORT_RETRY_H_

#include <chrono>
#include <cstdint>
#include <optional>
#include <random>
#include <string>
#include <string_view>

#include "core/thread_annotations.h"
#include "strata/clock.h"
#include "strata/transport.h"

namespace strata::transport_internal {

// Thread-safe jitter source over RetryPolicy::uniform01 or a seeded generator.
class Backoff {
 public:
  // `clock` (not null) seeds the generator when policy.seed is 0.
  Backoff(const RetryPolicy& policy, Clock* clock);
  // Delay before retry number `retry` (1 = first retry), in microseconds. When
  // `retry_after_seconds` >= 0 it replaces the exponential backoff (capped at max_retry_after).
  int64_t DelayMicros(int retry, double retry_after_seconds);

 private:
  RetryPolicy policy_;
  internal::Mutex mu_;
  std::mt19937_64 rng_ STRATA_GUARDED_BY(mu_);
};

// A request id for retry `attempt` (2, 3, ...) of a call: "<id>-retry<attempt - 1>". SGLang refuses a
// rid that is still in flight and vLLM an id already running, and after a lost connection the first
// attempt may be, so each attempt carries its own id. Attempt 1 keeps `id`.
std::string RetryRequestId(const std::string& id, int attempt);

// `body` with its top-level "rid" and "request_id" strings replaced by RetryRequestId(value,
// attempt); std::nullopt when it has neither (or is not a JSON object): send it unchanged.
std::optional<std::string> BodyForAttempt(std::string_view body, int attempt);

// Milliseconds on the steady clock, for transfer timings.
inline double SteadyMillis() {
  return std::chrono::duration<double, std::milli>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

}  // namespace strata::transport_internal

#endif  // STRATA_SRC_TRANSPORT_RETRY_H_
