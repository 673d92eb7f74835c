// The baseline compaction policies strata's is compared with: none, a sliding window, and masking
// all but the last n tool results.
#include <string>
#include <vector>

#include "compact/history_units.h"
#include "strata/builtin_policies.h"

namespace strata {
namespace {

using compact_internal::EvictOldest;
using compact_internal::IsToolResult;
using compact_internal::LineCount;
using compact_internal::MaskAllButLastToolResults;
using compact_internal::Units;

class NoCompactionPolicy final : public CompactionPolicy {
 public:
  std::string Name() const override { return "none@1"; }
  bool ShouldCompact(const CompactionInput&) const override { return false; }
  StatusOr<HistoryEdit> Plan(const CompactionInput&) override { return HistoryEdit{}; }
};

class SlidingWindowPolicy final : public CompactionPolicy {
 public:
  std::string Name() const override { return "sliding@1"; }
  bool ShouldCompact(const CompactionInput& in) const override {
    return in.limit_tokens && in.total_tokens > in.limit_tokens;
  }
  StatusOr<HistoryEdit> Plan(const CompactionInput& in) override {
    HistoryEdit edit;
    if (in.total_tokens <= in.limit_tokens) return edit;
    EvictOldest(in, Units(in.history), in.total_tokens - in.limit_tokens,
                std::vector<bool>(in.history.size(), false), edit);
    return edit;
  }
};

class LastNPolicy final : public CompactionPolicy {
 public:
  explicit LastNPolicy(size_t n) : n_(n) {}
  std::string Name() const override { return "last-n@1(" + std::to_string(n_) + ")"; }
  bool ShouldCompact(const CompactionInput& in) const override {
    if (in.limit_tokens && in.total_tokens > in.limit_tokens) return true;
    size_t live_results = 0;
    for (auto it = in.history.rbegin(); it != in.history.rend(); ++it) {
      if (!IsToolResult(**it)) continue;
      if (++live_results > n_ && (*it)->state == SegmentState::kLive) return true;
    }
    return false;
  }
  StatusOr<HistoryEdit> Plan(const CompactionInput& in) override {
    return MaskAllButLastToolResults(in, n_, &Placeholder);
  }

 private:
  static std::string Placeholder(const Segment& s) {
    return "[Old tool output omitted: " + std::to_string(LineCount(s.content)) + " lines]";
  }

  const size_t n_;
};

}  // namespace

std::unique_ptr<CompactionPolicy> MakeNoCompactionPolicy() { return std::make_unique<NoCompactionPolicy>(); }
std::unique_ptr<CompactionPolicy> MakeSlidingWindowPolicy() { return std::make_unique<SlidingWindowPolicy>(); }
std::unique_ptr<CompactionPolicy> MakeLastNPolicy(size_t n) { return std::make_unique<LastNPolicy>(n); }

}  // namespace strata
