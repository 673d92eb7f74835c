// Unwrapping Status and StatusOr in tests: the value, or an exception carrying the status, which
// Catch2 reports as the test's failure (so setup code reads as straight-line calls).
#ifndef STRATA_TESTS_TESTING_STATUS_TESTING_H_
#define STRATA_TESTS_TESTING_STATUS_TESTING_H_

#include <stdexcept>
#include <utility>

#include "strata/status.h"

namespace strata::testing {

// The value of `value`; throws std::runtime_error with the status when it is an error.
template <typename T>
T Must(StatusOr<T> value) {
  if (!value.ok()) throw std::runtime_error(value.status().ToString());
  return std::move(value).value();
}

// Throws std::runtime_error with the status when it is an error.
inline void MustOk(const Status& status) {
  if (!status.ok()) throw std::runtime_error(status.ToString());
}

}  // namespace strata::testing

#endif  // STRATA_TESTS_TESTING_STATUS_TESTING_H_
