// The tool calls of a plan's history by id, and which tool results a later result with the same
// call superseded. Built once per plan over every segment, from hashes the plan's SegmentFacts keep
// with each segment (an id or a call's arguments is hashed once in its segment's life, not at every
// build) into flat tables (no allocation per call); strings are compared only where hashes match.
//
//   CallIndex calls(input, facts);
//   const ToolCall* call = calls.Of(i);           // the call tool result history[i] answers
//   std::vector<bool> later = calls.Superseded();  // a later result answers the same call again
//
// Thread safety: one plan's (like its SegmentFacts).
#ifndef STRATA_SRC_COMPACT_CALL_INDEX_H_
#define STRATA_SRC_COMPACT_CALL_INDEX_H_

#include <cstddef>
#include <cstdint>
#include <vector>

#include "compact/segment_facts.h"
#include "strata/compaction_policy.h"

namespace strata::compact_internal {

class CallIndex {
 public:
  // `in` and `facts` (the plan's facts of `in`) must outlive the index.
  CallIndex(const CompactionInput& in, SegmentFacts& facts);

  // The call tool result history[i] answers: the last call in the history with its tool_call_id
  // (of the last assistant message holding that id, its last call with it); null when none.
  const ToolCall* Of(size_t i) const;
  // superseded[k]: history[k] is a tool result whose call (Of) has the same tool name and arguments
  // as the call of a later tool result. Parallel to the history.
  std::vector<bool> Superseded() const;

 private:
  static constexpr uint32_t kEmpty = UINT32_MAX;
  struct Slot {
    uint64_t hash = 0;
    uint32_t segment = kEmpty;  // the history index of the assistant message holding the call
    uint32_t call = 0;          // the call's index in its tool_calls
  };
  const ToolCall& CallAt(const Slot& slot) const;
  void Insert(uint64_t hash, uint32_t segment, uint32_t call);
  const Slot* Find(size_t i) const;

  const CompactionInput& in_;
  SegmentFacts& facts_;
  std::vector<Slot> slots_;  // open addressing, a power of two in size, at most half full
  size_t used_ = 0;
};

}  // namespace strata::compact_internal

#endif  // STRATA_SRC_COMPACT_CALL_INDEX_H_
