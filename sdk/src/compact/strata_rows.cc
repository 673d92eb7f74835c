#include "compact/strata_rows.h"

#include "compact/history_units.h"

namespace strata::compact_internal {

const KeptRows& StrataRows(const CompactionInput& in, const StrataPolicyOptions& options,
                           SegmentFacts& facts) {
  // In the order of StrataRowList.
  static const std::vector<uint32_t> kListMasks = {kRowBelowCandidate | kRowLiveResult,
                                                   kRowResult,
                                                   kRowUser,
                                                   kRowAssistant,
                                                   kRowCalling,
                                                   kRowPinnedOrExcluded,
                                                   kRowSummary,
                                                   kRowAboveCandidate};
  const bool after_use_below = options.cost_model && options.mask_after_use;
  const auto bit = [](bool on, StrataRowBit b) { return on ? static_cast<uint32_t>(b) : 0u; };
  const auto fill = [&](size_t i) {
    const Segment& s = *in.history[i];
    SegmentRow row;
    row.turn = s.turn;
    row.tokens = MessageTokens(in, s);
    const bool result = IsToolResult(s);
    const bool assistant = s.kind == SegmentKind::kAssistant || s.kind == SegmentKind::kToolCall;
    const bool excluded = result && options.exclude_tools.count(s.name) > 0;
    row.bits = bit(result, kRowResult) | bit(s.kind == SegmentKind::kUser, kRowUser) |
               bit(assistant, kRowAssistant) |
               bit(assistant && !s.tool_calls.empty(), kRowCalling) |
               bit(s.pinned || excluded, kRowPinnedOrExcluded) |
               bit(s.kind == SegmentKind::kSummary, kRowSummary);
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
    // The strata policy's candidates above the trigger (CandidateAt's conditions).
    const bool reasoning = assistant && !s.reasoning.empty() && facts.ReasoningTokens(i) > 0;
    if ((result && s.state == SegmentState::kLive) || reasoning) row.bits |= kRowAboveCandidate;
    return row;
  };
  return facts.Rows(fill, kListMasks, kRowSummary);
}

size_t TurnSplit(const KeptRows& rows, int64_t turn) {
  size_t split = rows.rows.size();
  while (split > 0 && rows.rows[split - 1].turn >= turn) --split;
  return rows.max_turn_before[split] < turn ? split : SIZE_MAX;
}

ProtectedRows ProtectRows(const KeptRows& rows, bool by_turn, int64_t recent_turn,
                          size_t keep_results, bool whole) {
  const std::vector<SegmentRow>& r = rows.rows;
  const size_t n = r.size();
  ProtectedRows out;
  out.rows = &r;
  out.by_turn = by_turn;
  out.recent_turn = recent_turn;
  const std::vector<uint32_t>& users = rows.with_bits[kListUsers];
  const std::vector<uint32_t>& results = rows.with_bits[kListResults];
  out.first_user = users.empty() ? n : users.front();
  if (keep_results > 0) {
    out.results_from = results.size() <= keep_results ? 0 : results[results.size() - keep_results];
  }
  if (whole) {  // the same, from every row
    out.first_user = n;
    for (size_t i = 0; i < n && out.first_user == n; ++i) {
      if (r[i].bits & kRowUser) out.first_user = i;
    }
    out.results_from = keep_results > 0 ? 0 : SIZE_MAX;
    for (size_t k = n, seen = 0; k-- > 0 && keep_results > 0;) {
      if ((r[k].bits & kRowResult) && ++seen == keep_results) {
        out.results_from = k;
        break;
      }
    }
  }
  return out;
}

CachedTail::CachedTail(const KeptRows& rows, int64_t turn, bool whole)
    : rows_(&rows), split_(whole ? SIZE_MAX : TurnSplit(rows, turn)) {
  if (split_ != SIZE_MAX) {
    ForEachLateSummary(rows, split_, turn, [this](size_t j) { late_.push_back(j); });
    return;
  }
  const std::vector<SegmentRow>& r = rows.rows;
  summed_.assign(r.size() + 1, 0);
  for (size_t i = r.size(); i-- > 0;)
    summed_[i] = summed_[i + 1] + (r[i].turn < turn ? r[i].tokens : 0);
}

}  // namespace strata::compact_internal
