// strata/clock.h — time and randomness, injectable so that tests control them.
//
// Every component that reads the time, sleeps or draws random numbers takes a `Clock*` option
// (ClientOptions::clock, StoreOptions::clock, HttpTransportOptions::clock,
// GrpcTransportOptions::clock, PoolSetConfig::clock, AgentServices::clock); nullptr means
// SystemClock(). A test passes a fake whose time moves only when the test says so, so that retries
// never wait and records carry known timestamps and ids. `scripts/check-time` fails on a read of
// the real clock in sdk/src outside SystemClock() and the few it allows.
//
//   strata::Clock* clock = strata::SystemClock();
//   int64_t started = clock->NowMicros();
//   clock->SleepForMicros(1000);
//   int64_t elapsed_us = clock->NowMicros() - started;   // >= 1000
//   int64_t stamp_ms = clock->UnixMillis();             // wall time, for records and rows
//   uint64_t salt = clock->Random64();                  // for ids and jitter
//
// Thread safety: implementations must be thread-safe; SystemClock() is.
#ifndef STRATA_CLOCK_H_
#define STRATA_CLOCK_H_

#include <cstdint>

namespace strata {

// The time, sleeping and randomness a component uses (see the file comment).
class Clock {
 public:
  virtual ~Clock() = default;
  // Monotonic time in microseconds (the steady clock): for durations, deadlines and backoff.
  virtual int64_t NowMicros() = 0;
  // Wall-clock time in milliseconds since the Unix epoch: for timestamps in records and rows.
  virtual int64_t UnixMillis() = 0;
  // Blocks the calling thread for `micros` microseconds (nothing when `micros` <= 0).
  virtual void SleepForMicros(int64_t micros) = 0;
  // 64 uniformly random bits: for request ids and retry jitter seeds. Not for secrets.
  virtual uint64_t Random64() = 0;
};

// The process's clock: std::chrono::steady_clock, std::chrono::system_clock,
// std::this_thread::sleep_for and a generator seeded from std::random_device. Never null; owned
// by strata (never delete it).
Clock* SystemClock();

}  // namespace strata

#endif  // STRATA_CLOCK_H_
