// What the strata policy reads of every segment at each plan, as one contiguous row per segment
// (SegmentFacts::Rows, kept from plan to plan and filled again only for the entries the context
// does not vouch unchanged), with lists of the rows by flags and running sums kept with them. The
// policy's passes (its protections, its economics, the recent messages, the cached tail, the
// candidates below the trigger) read the lists and the rows of the recent turns, not every row,
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
  kRowSummary = 128,    // a summary: of the turn it was made in, placed among older segments
  // May be a candidate above the trigger: a live result, or reasoning worth dropping.
  kRowAboveCandidate = 256,
};

// The strata policy's lists of rows by flags (KeptRows::with_bits), by position.
enum StrataRowList : size_t {
  kListBelow = 0,   // kRowBelowCandidate or kRowLiveResult: what a plan below the trigger reads
  kListResults,     // kRowResult
  kListUsers,       // kRowUser
  kListAssistants,  // kRowAssistant
  kListCalling,     // kRowCalling
  kListPinnedOrExcluded,  // kRowPinnedOrExcluded
  kListSummaries,         // kRowSummary
  kListAbove,             // kRowAboveCandidate: what a plan above the trigger reads
};

// The rows of `in` for a policy with `options`, with their lists (the plan's `facts` keep them).
const KeptRows& StrataRows(const CompactionInput& in, const StrataPolicyOptions& options,
                           SegmentFacts& facts);

// Where the rows split by `turn`: the first index from which every row's turn is `turn` or later,
// when every row before it but summaries is of an earlier turn; SIZE_MAX when they do not split
// so. A summary takes the turn it was made in and sits among older segments: those before the
// split of `turn` or later are ForEachLateSummary's. Reads the rows from the split on only.
size_t TurnSplit(const KeptRows& rows, int64_t turn);

// Calls f(i) for each summary before `split` (a TurnSplit of `turn`) whose turn is `turn` or
// later, in history order: the rows before a split that are not of an earlier turn. Reads the
// summaries' rows only.
template <typename F>
void ForEachLateSummary(const KeptRows& rows, size_t split, int64_t turn, F f) {
  for (uint32_t i : rows.with_bits[kListSummaries]) {
    if (i >= split) return;
    if (rows.rows[i].turn >= turn) f(i);
  }
}

// Which rows a plan must not touch (prot[i] for history[i]): the pinned ones and excluded tools'
// results, with by_turn those of recent_turn or later, and the results from results_from on (the
// latest ones the plan keeps); asked of a row, not written for every row. And where the task (the
// first user message) is.
struct ProtectedRows {
  const std::vector<SegmentRow>* rows = nullptr;
  bool by_turn = false;
  int64_t recent_turn = 0;
  size_t results_from = SIZE_MAX;
  size_t first_user = 0;         // index of the first user message, or the number of rows
  bool keep_first_user = false;  // the task is never summarized (set by the policy)
  bool operator[](size_t k) const {
    const SegmentRow& r = (*rows)[k];
    return (r.bits & kRowPinnedOrExcluded) || (by_turn && r.turn >= recent_turn) ||
           ((r.bits & kRowResult) && k >= results_from);
  }
};

// The rows protected by pins and excluded tools, with by_turn by the turns from recent_turn on,
// and as the latest `keep_results` results. From the kept lists, or from every row when `whole`.
ProtectedRows ProtectRows(const KeptRows& rows, bool by_turn, int64_t recent_turn,
                          size_t keep_results, bool whole);

// tail[i]: the tokens of the rows from i on that are of a turn before `turn` (the server has them
// cached; the current turn's segments, added since the last request, are prefilled anyway): what
// a boundary at i makes the server prefill again. From the kept running sums, less the summaries
// of `turn` before the split, when the rows split by `turn`; summed over every row when they do
// not, or when `whole` (the whole computation).
class CachedTail {
 public:
  CachedTail(const KeptRows& rows, int64_t turn, bool whole);
  size_t operator[](size_t i) const {
    if (split_ == SIZE_MAX) return summed_[i];
    if (i >= split_) return 0;
    size_t tail = rows_->tokens_before[split_] - rows_->tokens_before[i];
    for (size_t j : late_) tail -= j >= i ? rows_->rows[j].tokens : 0;
    return tail;
  }

 private:
  const KeptRows* rows_;
  size_t split_;
  std::vector<size_t> summed_;  // without a split: tail[i] for each i, and 0 at the end
  std::vector<size_t> late_;    // with a split: the summaries of `turn` or later before it
};

}  // namespace strata::compact_internal

#endif  // STRATA_SRC_COMPACT_STRATA_ROWS_H_
