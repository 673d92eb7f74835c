// Helpers shared by the store tests: segment comparison, and TempDir (tests/testing/temp_dir.h).
#ifndef STRATA_TESTS_UNIT_STORE_STORE_TEST_UTIL_H_
#define STRATA_TESTS_UNIT_STORE_STORE_TEST_UTIL_H_

#include <sstream>
#include <string>

#include "strata/segment.h"
#include "testing/temp_dir.h"

namespace strata::testing {

// Every field of a segment as text, for exact comparison in assertions.
inline std::string Describe(const Segment& s) {
  std::ostringstream out;
  out << s.id << "|" << s.seq << "|" << s.position << "|" << static_cast<int>(s.kind) << "|"
      << static_cast<int>(s.layer) << "|" << s.content << "|" << s.reasoning << "|";
  for (const ToolCall& c : s.tool_calls)
    out << "[" << c.id << "," << c.name << "," << c.arguments << "]";
  out << "|" << s.tool_call_id << "|" << s.name << "|" << s.version << "|" << s.order << "|"
      << s.turn << "|" << s.tokens << "|" << s.pinned << "|"
      << static_cast<int>(s.state) << "|" << static_cast<int>(s.hygiene) << "|" << s.recall_id
      << "|" << s.duplicate_of;
  return out.str();
}

}  // namespace strata::testing

#endif  // STRATA_TESTS_UNIT_STORE_STORE_TEST_UTIL_H_
