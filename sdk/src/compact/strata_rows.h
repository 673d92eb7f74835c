// What the strata policy reads of every segment at each plan, as one contiguous row per segment
// (SegmentFacts::Rows, kept from plan to plan and filled again only for the entries the context
// does not vouch unchanged). The policy's passes over the whole history (its protections, its
// economics, the recent messages, the cached tail, the candidates below the trigger) read the rows
// and touch a segment only where its row says it may matter.
#ifndef STRATA_SRC_COMPACT_STRATA_ROWS_H_
#define STRATA_SRC_COMPACT_STRATA_ROWS_H_

#include <cstddef>
#include <cstdint>
#include <vector>

#include "compact/segment_facts.h"
#include "strata/builtin_policies.h"
#include "strata/compaction_policy.h"

namespace strata::compact_internal {

// Below the trigger, a result or reasoning smaller than this is not worth an invalidation alone.
inline constexpr size_t kMinTokensBelowTrigger = 64;

// The flags of a row (SegmentRow::bits).
enum StrataRowBit : uint32_t {
  kRowResult = 1,
  kRowUser = 2,
  kRowAssistant = 4,          // an assistant message, with or without calls
  kRowCalling = 8,            // an assistant message with calls
  kRowPinnedOrExcluded = 16,  // pinned, or a result of an excluded tool
  // May be a candidate below the trigger whatever the later results are: a live result the
  // policy's options let go below the trigger (an ephemeral tool's, an error log, one a mask
  // after use may take), or reasoning worth dropping.
  kRowBelowCandidate = 32,
  kRowLiveResult = 64,  // a live result of kMinTokensBelowTrigger tokens or more
};

// The rows of `in` for a policy with `options` (the plan's `facts` keep them).
const std::vector<SegmentRow>& StrataRows(const CompactionInput& in,
                                          const StrataPolicyOptions& options, SegmentFacts& facts);

}  // namespace strata::compact_internal

#endif  // STRATA_SRC_COMPACT_STRATA_ROWS_H_
