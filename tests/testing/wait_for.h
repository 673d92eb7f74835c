// WaitFor: waits for a condition another thread or process makes true (a server took the
// connections, a call is queued, the server saw a cancellation).
//
//   REQUIRE(testing::WaitFor([&] { return pools->Metrics().pools[1].queued == 1; }));
//
// The test asserts what the condition says, never how long it took: `limit` only bounds a broken
// run. Time that a test itself controls goes through testing::FakeClock instead.
#ifndef STRATA_TESTS_TESTING_WAIT_FOR_H_
#define STRATA_TESTS_TESTING_WAIT_FOR_H_

#include <chrono>
#include <functional>
#include <thread>

namespace strata::testing {

// Polls `condition` every millisecond until it holds (true) or `limit` of real time has passed
// (its last value).
inline bool WaitFor(const std::function<bool()>& condition,
                    std::chrono::milliseconds limit = std::chrono::seconds(30)) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  while (!condition()) {
    if (std::chrono::steady_clock::now() >= deadline) return condition();
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return true;
}

}  // namespace strata::testing

#endif  // STRATA_TESTS_TESTING_WAIT_FOR_H_
