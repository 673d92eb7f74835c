// What the policies of strata::compact share about a history: which segments are tool results, the
// units that can go without breaking tool-call pairing, and evicting the oldest of them (the
// sliding window, which the baselines fall back on above the hard limit).
#ifndef STRATA_SRC_COMPACT_HISTORY_UNITS_H_
#define STRATA_SRC_COMPACT_HISTORY_UNITS_H_

#include <cstddef>
#include <string>
#include <vector>

#include "strata/compaction_policy.h"
#include "strata/segment.h"

namespace strata::compact_internal {

// Tool results and error logs (the segments a mask may replace).
inline bool IsToolResult(const Segment& s) {
  return s.kind == SegmentKind::kToolResult || s.kind == SegmentKind::kErrorLog;
}

// Tokens `s` costs in the request: its content plus the per-message overhead.
inline size_t MessageTokens(const CompactionInput& in, const Segment& s) {
  return s.tokens + in.message_overhead_tokens;
}

// A unit is what can be removed without breaking tool-call pairing: an assistant message with its
// tool results, or a lone user or summary message. [begin, end) indexes CompactionInput::history.
struct Unit {
  size_t begin = 0;
  size_t end = 0;
};

// The unit that starts at history[begin] (begin < history.size()).
Unit UnitAt(const std::vector<const Segment*>& history, size_t begin);

// The history's units, in order.
std::vector<Unit> Units(const std::vector<const Segment*>& history);

// The history's units from the first, found only as far as they are asked for: what reads the
// oldest units reads those it needs, not the whole history.
class UnitsFromStart {
 public:
  // `history` must outlive this.
  explicit UnitsFromStart(const std::vector<const Segment*>& history) : history_(history) {}
  // Whether unit u exists, finding the units up to it.
  bool Has(size_t u);
  // Unit u, once Has(u) said it exists.
  const Unit& operator[](size_t u) const { return units_[u]; }

 private:
  const std::vector<const Segment*>& history_;
  std::vector<Unit> units_;
};

// Evicts the oldest units (never the last one, never one holding a pinned segment) until at least
// `need` tokens are freed. already[i]: history[i] is to be masked by `edit`; evicting it replaces
// that mask.
void EvictOldest(const CompactionInput& in, const std::vector<Unit>& units, size_t need,
                 const std::vector<bool>& already, HistoryEdit& edit);

// The number of lines of `text` (1 for a text without a newline).
size_t LineCount(const std::string& text);

// The plan of the masking baselines (last-n, observation masking): every live, unpinned tool
// result but the last `keep` replaced by placeholder(segment); then, if the request would still be
// above the hard limit, the oldest units evicted as the sliding window does.
HistoryEdit MaskAllButLastToolResults(const CompactionInput& in, size_t keep,
                                      std::string (*placeholder)(const Segment&));

}  // namespace strata::compact_internal

#endif  // STRATA_SRC_COMPACT_HISTORY_UNITS_H_
