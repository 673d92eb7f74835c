// A Clock whose time only moves when someone sleeps on it or Advance()s it, so retry and backoff
// tests never wait. Thread-safe.
#ifndef STRATA_TESTS_TESTING_FAKE_CLOCK_H_
#define STRATA_TESTS_TESTING_FAKE_CLOCK_H_

#include <mutex>
#include <vector>

#include "strata/transport.h"

namespace strata::testing {

class FakeClock : public Clock {
 public:
  int64_t NowMicros() override {
    std::lock_guard<std::mutex> lock(mu_);
    return now_;
  }
  void SleepForMicros(int64_t micros) override {
    std::lock_guard<std::mutex> lock(mu_);
    sleeps_.push_back(micros);
    now_ += micros;
  }
  void Advance(int64_t micros) {
    std::lock_guard<std::mutex> lock(mu_);
    now_ += micros;
  }
  std::vector<int64_t> sleeps() {
    std::lock_guard<std::mutex> lock(mu_);
    return sleeps_;
  }

 private:
  std::mutex mu_;
  int64_t now_ = 1000000;        // guarded by mu_
  std::vector<int64_t> sleeps_;  // guarded by mu_
};

}  // namespace strata::testing

#endif  // STRATA_TESTS_TESTING_FAKE_CLOCK_H_
