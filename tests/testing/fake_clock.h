// A Clock (strata/clock.h) whose time only moves when someone sleeps on it or Advance()s it, so
// retry and backoff tests never wait, and whose wall time and random numbers are fixed, so records
// and rows carry known timestamps and ids. Thread-safe.
#ifndef STRATA_TESTS_TESTING_FAKE_CLOCK_H_
#define STRATA_TESTS_TESTING_FAKE_CLOCK_H_

#include <cstdint>
#include <mutex>
#include <vector>

#include "strata/clock.h"

namespace strata::testing {

class FakeClock : public Clock {
 public:
  // The wall time UnixMillis() starts at: 2023-11-14T22:13:20Z.
  static constexpr int64_t kStartUnixMillis = 1700000000000;

  int64_t NowMicros() override {
    std::lock_guard<std::mutex> lock(mu_);
    return now_;
  }
  // kStartUnixMillis plus the time slept and advanced, in whole milliseconds.
  int64_t UnixMillis() override {
    std::lock_guard<std::mutex> lock(mu_);
    return kStartUnixMillis + (now_ - kStartMicros) / 1000;
  }
  void SleepForMicros(int64_t micros) override {
    std::lock_guard<std::mutex> lock(mu_);
    sleeps_.push_back(micros);
    now_ += micros;
  }
  // The splitmix64 sequence from set_seed() (default 0): the same for every FakeClock.
  uint64_t Random64() override {
    std::lock_guard<std::mutex> lock(mu_);
    uint64_t z = (random_state_ += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
  }
  void Advance(int64_t micros) {
    std::lock_guard<std::mutex> lock(mu_);
    now_ += micros;
  }
  void set_seed(uint64_t seed) {
    std::lock_guard<std::mutex> lock(mu_);
    random_state_ = seed;
  }
  std::vector<int64_t> sleeps() {
    std::lock_guard<std::mutex> lock(mu_);
    return sleeps_;
  }

 private:
  static constexpr int64_t kStartMicros = 1000000;
  std::mutex mu_;
  int64_t now_ = kStartMicros;   // guarded by mu_
  uint64_t random_state_ = 0;    // guarded by mu_
  std::vector<int64_t> sleeps_;  // guarded by mu_
};

}  // namespace strata::testing

#endif  // STRATA_TESTS_TESTING_FAKE_CLOCK_H_
