// Skipping a test case whose capability is missing (not a file the test needs: that is a failure).
// strata_test() registers every Catch2 case as its own ctest test with SKIP_RETURN_CODE
// kSkipReturnCode, so STRATA_SKIP prints the reason and ends the process with that code, and ctest
// reports the case as skipped with the reason in its output. Run by hand, the binary stops there.
#ifndef STRATA_TESTS_TESTING_SKIP_H_
#define STRATA_TESTS_TESTING_SKIP_H_

#include <cstdio>
#include <cstdlib>
#include <sstream>
#include <string>

namespace strata::testing {

inline constexpr int kSkipReturnCode = 77;  // also in tests/CMakeLists.txt (STRATA_SKIP_RETURN_CODE)

[[noreturn]] inline void SkipTest(const std::string& reason) {
  std::fprintf(stderr, "SKIPPED: %s\n", reason.c_str());
  std::fflush(stdout);
  std::fflush(stderr);
  std::_Exit(kSkipReturnCode);
}

}  // namespace strata::testing

// STRATA_SKIP("reason " << value): ends this test case as skipped (ctest status "Skipped").
#define STRATA_SKIP(stream_expression)                     \
  do {                                                     \
    std::ostringstream strata_skip_reason_;                \
    strata_skip_reason_ << stream_expression;              \
    ::strata::testing::SkipTest(strata_skip_reason_.str()); \
  } while (false)

#endif  // STRATA_TESTS_TESTING_SKIP_H_
