#include "compact/strata_rows.h"

#include "compact/history_units.h"

namespace strata::compact_internal {

const std::vector<SegmentRow>& StrataRows(const CompactionInput& in,
                                          const StrataPolicyOptions& options, SegmentFacts& facts) {
  const bool after_use_below = options.cost_model && options.mask_after_use;
  return facts.Rows([&](size_t i) {
    const Segment& s = *in.history[i];
    SegmentRow row;
    row.turn = s.turn;
    row.tokens = MessageTokens(in, s);
    const bool result = IsToolResult(s);
    const bool assistant = s.kind == SegmentKind::kAssistant || s.kind == SegmentKind::kToolCall;
    const bool excluded = result && options.exclude_tools.count(s.name) > 0;
    row.bits = (result ? kRowResult : 0) | (s.kind == SegmentKind::kUser ? kRowUser : 0) |
               (assistant ? kRowAssistant : 0) |
               (assistant && !s.tool_calls.empty() ? kRowCalling : 0) |
               (s.pinned || excluded ? kRowPinnedOrExcluded : 0);
    // The strata policy's conditions for a candidate below the trigger that do not depend on later
    // results (a result a later one superseded is asked too, when it is live).
    const bool live =
        result && s.state == SegmentState::kLive && s.tokens >= kMinTokensBelowTrigger;
    if (live) row.bits |= kRowLiveResult;
    const bool below_result =
        live &&
        (options.ephemeral_tools.count(s.name) > 0 || s.kind == SegmentKind::kErrorLog ||
         (after_use_below && (options.mask_unused_beyond_placeholder ||
                              facts.ContentIds(i).size() <= options.placeholder_identifiers)));
    const bool below_reasoning =
        assistant && !s.reasoning.empty() && facts.ReasoningTokens(i) >= kMinTokensBelowTrigger;
    if (below_result || below_reasoning) row.bits |= kRowBelowCandidate;
    return row;
  });
}

}  // namespace strata::compact_internal
