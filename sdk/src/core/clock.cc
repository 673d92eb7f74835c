#include "strata/clock.h"

#include <chrono>
#include <mutex>
#include <random>
#include <thread>

#include "core/thread_annotations.h"

namespace strata {
namespace {

class RealClock final : public Clock {
 public:
  RealClock() {
    std::random_device rd;
    rng_.seed((uint64_t{rd()} << 32) ^ rd());
  }
  int64_t NowMicros() override {
    return std::chrono::duration_cast<std::chrono::microseconds>(
               std::chrono::steady_clock::now().time_since_epoch())
        .count();
  }
  int64_t UnixMillis() override {
    return std::chrono::duration_cast<std::chrono::milliseconds>(
               std::chrono::system_clock::now().time_since_epoch())
        .count();
  }
  void SleepForMicros(int64_t micros) override {
    if (micros > 0) std::this_thread::sleep_for(std::chrono::microseconds(micros));
  }
  uint64_t Random64() override {
    internal::MutexLock lock(mu_);
    return rng_();
  }

 private:
  internal::Mutex mu_;
  std::mt19937_64 rng_ STRATA_GUARDED_BY(mu_);
};

}  // namespace

Clock* SystemClock() {
  static RealClock* clock = new RealClock();
  return clock;
}

}  // namespace strata
