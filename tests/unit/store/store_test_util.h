// Helpers shared by the store tests: segment comparison, a migrated growth curve's check, and
// TempDir (tests/testing/temp_dir.h).
#ifndef STRATA_TESTS_UNIT_STORE_STORE_TEST_UTIL_H_
#define STRATA_TESTS_UNIT_STORE_STORE_TEST_UTIL_H_

#include <catch2/catch.hpp>
#include <sstream>
#include <string>

#include "strata/segment.h"
#include "strata/store.h"
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

// A store migrated from before the summary request columns, whose agent "old" had one growth point
// (1,000 tokens, 1 compaction, 300 invalidated): that point reads 0 for them, and a new point keeps them.
inline void CheckMigratedGrowth(Store& store) {
  auto curve = store.Growth("old");
  REQUIRE(curve.ok());
  REQUIRE(curve->size() == 1);
  CHECK(curve->at(0).TotalTokens() == 1000);
  CHECK(curve->at(0).compactions == 1);
  CHECK(curve->at(0).invalidated_tokens == 300);
  CHECK(curve->at(0).summary_input_tokens == 0);  // the new columns' default
  CHECK(curve->at(0).summary_cached_tokens == 0);
  CHECK(curve->at(0).summary_output_tokens == 0);
  GrowthPoint p = curve->at(0);
  p.turn = 2;
  p.summary_input_tokens = 5000;
  p.summary_cached_tokens = 4800;
  p.summary_output_tokens = 60;
  REQUIRE(store.RecordGrowth(p).ok());
  curve = store.Growth("old");
  REQUIRE(curve.ok());
  REQUIRE(curve->size() == 2);
  CHECK(curve->at(1).summary_input_tokens == 5000);
  CHECK(curve->at(1).summary_cached_tokens == 4800);
  CHECK(curve->at(1).summary_output_tokens == 60);
}

}  // namespace strata::testing

#endif  // STRATA_TESTS_UNIT_STORE_STORE_TEST_UTIL_H_
