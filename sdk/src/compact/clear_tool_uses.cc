// The clear-tool-uses baseline: Anthropic's context editing (clear_tool_uses_20250919) done on the
// client. Above the trigger it clears the oldest tool results, keeping the last `keep`, until the
// request is at most clear_to x trigger; each cleared result renders as the placeholder text.
#include <cmath>
#include <string>

#include "compact/history_units.h"
#include "strata/builtin_policies.h"

namespace strata {
namespace {

using compact_internal::EvictOldest;
using compact_internal::IsToolResult;
using compact_internal::Units;

class ClearToolUsesPolicy final : public CompactionPolicy {
 public:
  explicit ClearToolUsesPolicy(ClearToolUsesOptions options) : options_(std::move(options)) {}

  std::string Name() const override { return "clear-tool-uses@1"; }

  bool ShouldCompact(const CompactionInput& in) const override {
    const size_t trigger = Trigger(in);
    return in.forced || (trigger > 0 && in.total_tokens > trigger) ||
           (in.limit_tokens > 0 && in.total_tokens > in.limit_tokens);
  }

  StatusOr<HistoryEdit> Plan(const CompactionInput& in) override {
    HistoryEdit edit;
    const size_t trigger = Trigger(in);
    if (trigger == 0) return edit;
    const size_t goal = static_cast<size_t>(std::floor(options_.clear_to * static_cast<double>(trigger)));
    if (in.total_tokens <= goal) return edit;
    const size_t need = in.total_tokens - goal;
    const size_t placeholder_tokens = in.Count(options_.placeholder);
    // The last `keep` tool results stay, whatever their state; older live ones are cleared
    // oldest first.
    std::vector<bool> kept(in.history.size(), false);
    size_t seen = 0;
    for (size_t k = in.history.size(); k-- > 0 && seen < options_.keep;) {
      if (IsToolResult(*in.history[k])) {
        kept[k] = true;
        ++seen;
      }
    }
    std::vector<bool> cleared(in.history.size(), false);
    size_t freed = 0;
    for (size_t i = 0; i < in.history.size() && freed < need; ++i) {
      const Segment& s = *in.history[i];
      if (!IsToolResult(s) || kept[i] || s.pinned || s.state != SegmentState::kLive ||
          options_.exclude_tools.count(s.name) > 0 || s.tokens <= placeholder_tokens) {
        continue;
      }
      edit.edits.push_back({s.id, SegmentEdit::Action::kMask, options_.placeholder});
      freed += s.tokens - placeholder_tokens;
      cleared[i] = true;
    }
    // Clearing every result it may was not enough to fit the hard limit: slide (a server-side
    // context editor would refuse the request instead).
    const size_t remaining = in.total_tokens > freed ? in.total_tokens - freed : 0;
    if (in.limit_tokens > 0 && remaining > in.limit_tokens) {
      EvictOldest(in, Units(in.history), remaining - in.limit_tokens, cleared, edit);
    }
    return edit;
  }

 private:
  size_t Trigger(const CompactionInput& in) const {
    return options_.trigger_tokens > 0 ? options_.trigger_tokens : in.limit_tokens;
  }

  const ClearToolUsesOptions options_;
};

}  // namespace

std::unique_ptr<CompactionPolicy> MakeClearToolUsesPolicy(ClearToolUsesOptions options) {
  return std::make_unique<ClearToolUsesPolicy>(std::move(options));
}

}  // namespace strata
