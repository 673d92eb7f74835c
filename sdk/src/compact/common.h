// What more than one source of strata::compact uses: the recall id a segment stands under and
// numbers written with thousands separators.
#ifndef STRATA_SRC_COMPACT_COMMON_H_
#define STRATA_SRC_COMPACT_COMMON_H_

#include <string>

#include "strata/segment.h"

namespace strata::compact_internal {

// The recall id of `s`: the one it carries, else the one its content gives (RecallIdFor).
inline std::string RecallIdOf(const Segment& s) {
  return s.recall_id.empty() ? RecallIdFor(s.content) : s.recall_id;
}

// `n` with a comma between groups of three digits: "-1,234,567".
inline std::string Thousands(long long n) {
  std::string digits = std::to_string(n < 0 ? -n : n), out = n < 0 ? "-" : "";
  for (size_t i = 0; i < digits.size(); ++i) {
    if (i && (digits.size() - i) % 3 == 0) out.push_back(',');
    out.push_back(digits[i]);
  }
  return out;
}

}  // namespace strata::compact_internal

#endif  // STRATA_SRC_COMPACT_COMMON_H_
