// The tool calls of a plan's history by id, and which tool results a later result with the same
// call superseded. Flat tables (no allocation per call) from hashes the plan's SegmentFacts keep
// with each segment (an id or a call's arguments is hashed once in its segment's life), strings
// compared only where hashes match. The tables are kept with the facts: when the history only grew
// since the last plan and no segment holding calls changed, the index continues them with the new
// segments alone, so a turn that appends costs what it appends.
//
//   CallIndex calls(input, facts);
//   const ToolCall* call = calls.Of(i);                   // the call tool result history[i]
//   const std::vector<uint8_t>& later = calls.Superseded();  // 1: a later result answers the
//   same call
//   calls.AnsweredLater()[i]             // 1: one of those later results is not an error log
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
  // `in` and `facts` (the plan's facts of `in`, whose call tables it continues or rebuilds) must
  // outlive the index.
  CallIndex(const CompactionInput& in, SegmentFacts& facts);

  // The call tool result history[i] answers: the last call in the history with its tool_call_id
  // (of the last assistant message holding that id, its last call with it); null when none.
  const ToolCall* Of(size_t i) const;
  // superseded[k]: history[k] is a tool result whose call (Of) has the same tool name and arguments
  // as the call of a later tool result (1, else 0). Parallel to the history. Bytes, not bits: a
  // plan reads it at every candidate it looks at.
  const std::vector<uint8_t>& Superseded() const { return t_.superseded; }
  // answered_later[k]: a later tool result with the same call (tool name and arguments) as
  // history[k]'s is not an error log (1, else 0): an error log the call was retried past. Parallel
  // to the history. Kept as the history grows like the rest: a segment's kind and tool_call_id are
  // its own for life (a Context never changes them in place).
  const std::vector<uint8_t>& AnsweredLater() const { return t_.answered_later; }
  // Whether the tables were continued from the last plan's (not built from every segment).
  bool continued() const { return continued_; }

 private:
  using Slot = KeptCallTables::Slot;
  // Adds segments [from, history size); false when a call of them takes an id a call before
  // `from` holds (the results of that id answer another call now: everything is indexed again).
  bool Add(size_t from);
  // Puts a call in the table; false when `from` > 0 and an earlier segment's call held its id.
  bool Insert(uint64_t hash, uint32_t segment, uint32_t call, size_t from);
  const Slot* Find(size_t i) const;
  const ToolCall& CallAt(const Slot& slot) const;

  const CompactionInput& in_;
  SegmentFacts& facts_;
  KeptCallTables& t_;
  bool continued_ = false;
};

}  // namespace strata::compact_internal

#endif  // STRATA_SRC_COMPACT_CALL_INDEX_H_
