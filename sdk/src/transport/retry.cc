#include "transport/retry.h"

#include <algorithm>
#include <cmath>
#include <thread>

namespace strata {
namespace {

class SteadyClock : public Clock {
 public:
  int64_t NowMicros() override {
    return std::chrono::duration_cast<std::chrono::microseconds>(
               std::chrono::steady_clock::now().time_since_epoch())
        .count();
  }
  void SleepForMicros(int64_t micros) override {
    if (micros > 0) std::this_thread::sleep_for(std::chrono::microseconds(micros));
  }
};

}  // namespace

Clock* SystemClock() {
  static SteadyClock* clock = new SteadyClock();
  return clock;
}

namespace transport_internal {

Backoff::Backoff(const RetryPolicy& policy) : policy_(policy) {
  uint64_t seed = policy.seed;
  if (seed == 0) seed = (uint64_t{std::random_device{}()} << 32) ^ std::random_device{}();
  rng_.seed(seed);
}

int64_t Backoff::DelayMicros(int retry, double retry_after_seconds) {
  if (retry_after_seconds >= 0) {
    double cap = static_cast<double>(policy_.max_retry_after.count()) * 1000.0;
    return static_cast<int64_t>(std::min(retry_after_seconds * 1e6, cap));
  }
  double base = static_cast<double>(policy_.initial_backoff.count()) * 1000.0;
  double cap = static_cast<double>(policy_.max_backoff.count()) * 1000.0;
  double d = std::min(cap, base * std::pow(2.0, std::max(0, retry - 1)));
  double u;
  if (policy_.uniform01) {
    u = policy_.uniform01();
  } else {
    std::lock_guard<std::mutex> lock(mu_);
    u = std::uniform_real_distribution<double>(0.0, 1.0)(rng_);
  }
  u = std::clamp(u, 0.0, 1.0);
  return static_cast<int64_t>(d / 2 + u * d / 2);
}

}  // namespace transport_internal
}  // namespace strata
