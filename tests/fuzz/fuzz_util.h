// Helpers shared by the fuzz harnesses (tests/fuzz/fuzz_*.cc): splitting one input into parts, and
// failing loudly when an invariant does not hold (libFuzzer and the corpus replay both treat an
// abort as a finding).
#ifndef STRATA_TESTS_FUZZ_FUZZ_UTIL_H_
#define STRATA_TESTS_FUZZ_FUZZ_UTIL_H_

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

namespace strata::fuzz {

// Stops the process with a message: an invariant of the code under test was broken.
[[noreturn]] inline void Fail(const std::string& what) {
  std::fprintf(stderr, "fuzz invariant broken: %s\n", what.c_str());
  std::abort();
}

#define STRATA_FUZZ_CHECK(condition, what) \
  do {                                     \
    if (!(condition)) ::strata::fuzz::Fail(what); \
  } while (false)

// The input as text.
inline std::string_view AsText(const uint8_t* data, size_t size) {
  return std::string_view(reinterpret_cast<const char*>(data), size);
}

// Parts of the input separated by `separator` (a byte sequence unlikely in seeds), so that one
// input can carry several pieces: network reads, stream fragments, fields.
inline std::vector<std::string_view> Split(std::string_view text, std::string_view separator) {
  std::vector<std::string_view> parts;
  size_t start = 0;
  for (;;) {
    size_t at = text.find(separator, start);
    if (at == std::string_view::npos) {
      parts.push_back(text.substr(start));
      return parts;
    }
    parts.push_back(text.substr(start, at - start));
    start = at + separator.size();
  }
}

}  // namespace strata::fuzz

#endif  // STRATA_TESTS_FUZZ_FUZZ_UTIL_H_
