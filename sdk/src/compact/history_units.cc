#include "compact/history_units.h"

#include <algorithm>
#include <string>

namespace strata::compact_internal {

Unit UnitAt(const std::vector<const Segment*>& history, size_t begin) {
  size_t end = begin + 1;
  if (!history[begin]->tool_calls.empty()) {
    while (end < history.size() && IsToolResult(*history[end])) ++end;
  }
  return {begin, end};
}

std::vector<Unit> Units(const std::vector<const Segment*>& history) {
  std::vector<Unit> units;
  for (size_t i = 0; i < history.size(); i = units.back().end) units.push_back(UnitAt(history, i));
  return units;
}

bool UnitsFromStart::Has(size_t u) {
  while (units_.size() <= u) {
    const size_t begin = units_.empty() ? 0 : units_.back().end;
    if (begin >= history_.size()) return false;
    units_.push_back(UnitAt(history_, begin));
  }
  return true;
}

void EvictOldest(const CompactionInput& in, const std::vector<Unit>& units, size_t need,
                 const std::vector<bool>& already, HistoryEdit& edit) {
  size_t freed = 0;
  for (size_t u = 0; u + 1 < units.size() && freed < need; ++u) {
    bool pinned = false;
    for (size_t i = units[u].begin; i < units[u].end; ++i) pinned |= in.history[i]->pinned;
    if (pinned) continue;  // pinned turns stay; slide past them
    for (size_t i = units[u].begin; i < units[u].end; ++i) {
      edit.edits.push_back({in.history[i]->id, SegmentEdit::Action::kEvict, ""});
      freed += MessageTokens(in, *in.history[i]);
      if (already[i]) {
        // The segment was to be masked: evicting replaces that edit.
        auto it = std::find_if(edit.edits.begin(), edit.edits.end(), [&](const SegmentEdit& e) {
          return e.segment_id == in.history[i]->id && e.action == SegmentEdit::Action::kMask;
        });
        if (it != edit.edits.end()) edit.edits.erase(it);
      }
    }
  }
}

size_t LineCount(const std::string& text) {
  return static_cast<size_t>(std::count(text.begin(), text.end(), '\n')) + 1;
}

HistoryEdit MaskAllButLastToolResults(const CompactionInput& in, size_t keep,
                                      std::string (*placeholder)(const Segment&)) {
  HistoryEdit edit;
  std::vector<bool> masked(in.history.size(), false);
  size_t seen = 0, freed = 0;
  for (size_t k = in.history.size(); k-- > 0;) {
    const Segment& s = *in.history[k];
    if (!IsToolResult(s) || ++seen <= keep || s.state != SegmentState::kLive || s.pinned) continue;
    std::string text = placeholder(s);
    const size_t placeholder_tokens = in.Count(text);
    if (placeholder_tokens < s.tokens) freed += s.tokens - placeholder_tokens;
    edit.edits.push_back({s.id, SegmentEdit::Action::kMask, std::move(text)});
    masked[k] = true;
  }
  const size_t remaining = in.total_tokens > freed ? in.total_tokens - freed : 0;
  if (in.limit_tokens > 0 && remaining > in.limit_tokens) {
    EvictOldest(in, Units(in.history), remaining - in.limit_tokens, masked, edit);
  }
  return edit;
}

}  // namespace strata::compact_internal
