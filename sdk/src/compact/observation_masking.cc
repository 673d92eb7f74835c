// The observation-masking baseline (SWE-agent's LastNObservations history processor, the strategy
// of "The Complexity Trap", Lindenbauer et al. 2025): on every request, every tool result but the
// last `keep_observations` renders as "Old environment output: (N lines omitted)".
#include <string>

#include "compact/history_units.h"
#include "strata/builtin_policies.h"

namespace strata {
namespace {

using compact_internal::IsToolResult;
using compact_internal::LineCount;
using compact_internal::MaskAllButLastToolResults;

class ObservationMaskingPolicy final : public CompactionPolicy {
 public:
  explicit ObservationMaskingPolicy(size_t keep) : keep_(keep) {}

  std::string Name() const override { return "observation-masking@1(" + std::to_string(keep_) + ")"; }

  bool ShouldCompact(const CompactionInput& in) const override {
    if (in.forced || (in.limit_tokens > 0 && in.total_tokens > in.limit_tokens)) return true;
    size_t seen = 0;
    for (size_t k = in.history.size(); k-- > 0;) {
      const Segment& s = *in.history[k];
      if (IsToolResult(s) && ++seen > keep_ && Maskable(s)) return true;
    }
    return false;
  }

  StatusOr<HistoryEdit> Plan(const CompactionInput& in) override {
    // Above the hard limit with every old observation masked, it slides, as the other baselines do.
    return MaskAllButLastToolResults(in, keep_, &Placeholder);
  }

  // SWE-agent's placeholder: the observation's line count.
  static std::string Placeholder(const Segment& s) {
    return "Old environment output: (" + std::to_string(LineCount(s.content)) + " lines omitted)";
  }

 private:
  static bool Maskable(const Segment& s) { return s.state == SegmentState::kLive && !s.pinned; }

  const size_t keep_;
};

}  // namespace

std::unique_ptr<CompactionPolicy> MakeObservationMaskingPolicy(size_t keep_observations) {
  return std::make_unique<ObservationMaskingPolicy>(keep_observations);
}

}  // namespace strata
