// Compaction policies: strata's (cache-aware, hysteresis, latest boundary) and the baselines.
#include <algorithm>
#include <set>
#include <unordered_map>

#include "strata/compact.h"

namespace strata {
namespace {

constexpr size_t kAllIdentifiers = 1 << 20;

bool IsToolResult(const Segment& s) {
  return s.kind == SegmentKind::kToolResult || s.kind == SegmentKind::kErrorLog;
}

// A unit is what can be removed without breaking tool-call pairing: an assistant message with its
// tool results, or a lone user or summary message. [begin, end) indexes CompactionInput::history.
struct Unit {
  size_t begin = 0;
  size_t end = 0;
};

std::vector<Unit> Units(const std::vector<const Segment*>& history) {
  std::vector<Unit> units;
  for (size_t i = 0; i < history.size();) {
    size_t j = i + 1;
    if (!history[i]->tool_calls.empty()) {
      while (j < history.size() && IsToolResult(*history[j])) ++j;
    }
    units.push_back({i, j});
    i = j;
  }
  return units;
}

size_t MessageTokens(const CompactionInput& in, const Segment& s) {
  return s.tokens + in.message_overhead_tokens;
}

// Tool calls of the history by id (the last assistant message holding each id).
std::unordered_map<std::string, const ToolCall*> CallsById(const std::vector<const Segment*>& history) {
  std::unordered_map<std::string, const ToolCall*> calls;
  for (const Segment* s : history) {
    for (const ToolCall& call : s->tool_calls) calls[call.id] = &call;
  }
  return calls;
}

const ToolCall* CallOf(const std::unordered_map<std::string, const ToolCall*>& calls, const Segment& s) {
  auto it = calls.find(s.tool_call_id);
  return it == calls.end() ? nullptr : it->second;
}

std::string RecallIdOf(const Segment& s) { return s.recall_id.empty() ? RecallIdFor(s.content) : s.recall_id; }

// Evicts the oldest units (never the last one, never one holding a pinned segment) until at least
// `need` tokens are freed.
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

// ------------------------------------------------------------------------------------ baselines

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
    HistoryEdit edit;
    std::vector<bool> masked(in.history.size(), false);
    size_t seen = 0, freed = 0;
    for (size_t k = in.history.size(); k-- > 0;) {
      const Segment& s = *in.history[k];
      if (!IsToolResult(s) || ++seen <= n_ || s.state != SegmentState::kLive || s.pinned) continue;
      const size_t lines = static_cast<size_t>(std::count(s.content.begin(), s.content.end(), '\n')) + 1;
      std::string placeholder = "[Old tool output omitted: " + std::to_string(lines) + " lines]";
      const size_t placeholder_tokens = in.Count(placeholder);
      if (placeholder_tokens < s.tokens) freed += s.tokens - placeholder_tokens;
      edit.edits.push_back({s.id, SegmentEdit::Action::kMask, std::move(placeholder)});
      masked[k] = true;
    }
    const size_t remaining = in.total_tokens > freed ? in.total_tokens - freed : 0;
    if (in.limit_tokens && remaining > in.limit_tokens) {
      EvictOldest(in, Units(in.history), remaining - in.limit_tokens, masked, edit);
    }
    return edit;
  }

 private:
  const size_t n_;
};

// ---------------------------------------------------------------------------------- strata policy

class StrataPolicy final : public CompactionPolicy {
 public:
  explicit StrataPolicy(StrataPolicyOptions options)
      : options_(std::move(options)), extractive_(MakeExtractiveSummarizer()) {}

  std::string Name() const override { return "strata@1"; }

  bool ShouldCompact(const CompactionInput& in) const override {
    if (in.forced) return true;
    if (in.limit_tokens && in.total_tokens > in.limit_tokens) return true;
    return in.trigger_tokens && in.total_tokens > in.trigger_tokens;
  }

  StatusOr<HistoryEdit> Plan(const CompactionInput& in) override {
    const size_t goal = in.target_tokens ? in.target_tokens : in.limit_tokens;
    if (goal == 0 || in.total_tokens <= goal) return HistoryEdit{};
    const size_t need = in.total_tokens - goal;
    StatusOr<HistoryEdit> plan = PlanWith(in, need, /*relax=*/0);
    if (!plan.ok() || !plan->empty()) return plan;
    // Nothing could be done within the protections. Above the hard limit, relax them step by step:
    // first the recent turns and results (keeping the latest result), then everything but pins
    // and excluded tools, the task and the latest turn included (summarized, never dropped).
    if (in.limit_tokens && in.total_tokens > in.limit_tokens) {
      for (int relax = 1; relax <= 2; ++relax) {
        plan = PlanWith(in, need, relax);
        if (!plan.ok() || !plan->empty()) return plan;
      }
    }
    return plan;
  }

 private:
  struct Candidate {
    size_t index;
    SegmentEdit edit;
    size_t saving;
    bool stale;
  };

  StatusOr<HistoryEdit> PlanWith(const CompactionInput& in, size_t need, int relax) {
    const std::vector<const Segment*>& h = in.history;
    const size_t n = h.size();
    const auto calls = CallsById(h);

    // Protection.
    const int64_t keep_turns = relax > 0 ? 0 : static_cast<int64_t>(options_.keep_turns);
    const int64_t recent_turn = in.turn - keep_turns + 1;  // turns >= this are protected
    const size_t keep_results =
        relax == 0 ? options_.keep_tool_results : (relax == 1 ? std::min<size_t>(options_.keep_tool_results, 1) : 0);
    const bool keep_first_user = options_.keep_first_user && relax < 2;
    std::vector<bool> protect(n, false);
    size_t first_user = n;
    for (size_t i = 0; i < n; ++i) {
      if (h[i]->kind == SegmentKind::kUser) {
        first_user = i;
        break;
      }
    }
    size_t results_seen = 0;
    for (size_t k = n; k-- > 0;) {
      const Segment& s = *h[k];
      bool p = s.pinned || (keep_turns > 0 && s.turn >= recent_turn);
      if (IsToolResult(s)) {
        if (results_seen++ < keep_results) p = true;
        if (options_.exclude_tools.count(s.name)) p = true;
      }
      protect[k] = p;
    }

    // Identifiers the request keeps anyway (messages that are never masked, protected results):
    // placeholders need not repeat them.
    std::set<std::string> present;
    for (size_t i = 0; i < n; ++i) {
      const Segment& s = *h[i];
      if (IsToolResult(s) && !protect[i]) continue;
      std::string text = s.content;
      for (const ToolCall& call : s.tool_calls) text += "\n" + call.arguments;
      for (std::string& id : ExtractIdentifiers(text, kAllIdentifiers)) present.insert(std::move(id));
    }

    // Candidates: stale first (superseded error logs, ephemeral tools, old reasoning), then masks.
    std::vector<Candidate> candidates;
    for (size_t i = 0; i < n; ++i) {
      const Segment& s = *h[i];
      if (protect[i]) continue;
      if (IsToolResult(s) && s.state == SegmentState::kLive) {
        const ToolCall* call = CallOf(calls, s);
        const size_t identifiers = std::clamp<size_t>(
            s.tokens / std::max<size_t>(1, options_.tokens_per_identifier), std::min<size_t>(8, options_.placeholder_identifiers),
            options_.placeholder_identifiers);
        std::string placeholder = MaskPlaceholder(s, call, RecallIdOf(s), identifiers, present);
        const size_t placeholder_tokens = in.Count(placeholder);
        if (placeholder_tokens + 8 >= s.tokens) continue;  // masking would not pay
        bool stale = options_.ephemeral_tools.count(s.name) > 0 ||
                     (s.kind == SegmentKind::kErrorLog && Superseded(h, i, calls));
        candidates.push_back({i, {s.id, SegmentEdit::Action::kMask, std::move(placeholder)},
                              s.tokens - placeholder_tokens, stale});
      } else if (!s.reasoning.empty() &&
                 (s.kind == SegmentKind::kAssistant || s.kind == SegmentKind::kToolCall)) {
        candidates.push_back({i, {s.id, SegmentEdit::Action::kDropReasoning, ""}, in.Count(s.reasoning), true});
      }
    }

    // suffix[i]: what masking everything from candidate i on would free.
    std::vector<size_t> suffix(candidates.size() + 1, 0);
    for (size_t c = candidates.size(); c-- > 0;) suffix[c] = suffix[c + 1] + candidates[c].saving;

    HistoryEdit edit;
    if (suffix[0] >= need) {
      // The latest boundary that reaches the goal: the last candidate c with suffix[c] >= need.
      size_t start = 0;
      for (size_t c = candidates.size(); c-- > 0;) {
        if (suffix[c] >= need) {
          start = c;
          break;
        }
      }
      SelectFrom(candidates, start, need, edit);
      return edit;
    }

    // Masking alone cannot reach the goal: summarize the oldest turns (after the task), then mask
    // from what follows, stale and oldest first.
    const std::vector<Unit> units = Units(h);
    auto unit_eligible = [&](const Unit& u) {
      if (keep_first_user && u.begin <= first_user && first_user < u.end) return false;
      for (size_t i = u.begin; i < u.end; ++i) {
        if (protect[i] || h[i]->pinned) return false;
      }
      return true;
    };
    size_t first_unit = 0;
    while (first_unit < units.size() && !unit_eligible(units[first_unit])) ++first_unit;
    if (first_unit == units.size()) {
      SelectFrom(candidates, 0, need, edit);  // free what masking can
      return edit;
    }
    // A summary takes at most a quarter of the target, so that small budgets keep room for turns.
    const size_t goal = in.target_tokens ? in.target_tokens : in.limit_tokens;
    const size_t summary_limit = std::min(options_.max_summary_tokens, std::max<size_t>(64, goal / 4));
    const size_t summary_estimate = summary_limit + in.message_overhead_tokens;
    size_t span_tokens = 0, last_unit = first_unit;
    size_t c_after = 0;  // first candidate after the span
    for (; last_unit < units.size() && unit_eligible(units[last_unit]); ++last_unit) {
      for (size_t i = units[last_unit].begin; i < units[last_unit].end; ++i) span_tokens += MessageTokens(in, *h[i]);
      while (c_after < candidates.size() && candidates[c_after].index < units[last_unit].end) ++c_after;
      const size_t span_saving = span_tokens > summary_estimate ? span_tokens - summary_estimate : 0;
      if (span_saving + suffix[c_after] >= need) {
        ++last_unit;
        break;
      }
    }
    std::vector<const Segment*> span;
    for (size_t u = first_unit; u < last_unit; ++u) {
      for (size_t i = units[u].begin; i < units[u].end; ++i) span.push_back(h[i]);
    }
    if (span.size() >= 2 || (span.size() == 1 && span.front()->kind != SegmentKind::kSummary)) {
      Summarizer* summarizer = options_.summarizer ? options_.summarizer : extractive_.get();
      const Tokenizer* tokenizer = in.tokenizer;
      std::unique_ptr<Tokenizer> fallback;
      if (tokenizer == nullptr) {
        fallback = MakeEstimateTokenizer(4.0);
        tokenizer = fallback.get();
      }
      STRATA_ASSIGN_OR_RETURN(std::string summary,
                              summarizer->Summarize(span, summary_limit, *tokenizer));
      SummaryEdit summary_edit;
      for (const Segment* s : span) summary_edit.replaces.push_back(s->id);
      summary_edit.content = std::move(summary);
      const size_t actual = in.Count(summary_edit.content) + in.message_overhead_tokens;
      const size_t saving = span_tokens > actual ? span_tokens - actual : 0;
      edit.summaries.push_back(std::move(summary_edit));
      if (saving < need) SelectFrom(candidates, c_after, need - saving, edit);
    } else {
      SelectFrom(candidates, c_after, need, edit);
    }
    return edit;
  }

  // Adds candidates from `start` on: stale ones first, then the rest oldest first, until `need`.
  static void SelectFrom(const std::vector<Candidate>& candidates, size_t start, size_t need, HistoryEdit& edit) {
    size_t freed = 0;
    for (int pass = 0; pass < 2 && freed < need; ++pass) {
      for (size_t c = start; c < candidates.size() && freed < need; ++c) {
        if (candidates[c].stale != (pass == 0)) continue;
        edit.edits.push_back(candidates[c].edit);
        freed += candidates[c].saving;
      }
    }
  }

  // An error log is superseded when a later result of the same tool with the same arguments is not
  // an error log.
  static bool Superseded(const std::vector<const Segment*>& h, size_t i,
                         const std::unordered_map<std::string, const ToolCall*>& calls) {
    const ToolCall* call = CallOf(calls, *h[i]);
    if (call == nullptr) return false;
    for (size_t j = i + 1; j < h.size(); ++j) {
      if (!IsToolResult(*h[j]) || h[j]->kind == SegmentKind::kErrorLog) continue;
      const ToolCall* later = CallOf(calls, *h[j]);
      if (later && later->name == call->name && later->arguments == call->arguments) return true;
    }
    return false;
  }

  StrataPolicyOptions options_;
  std::unique_ptr<Summarizer> extractive_;
};

}  // namespace

std::unique_ptr<CompactionPolicy> MakeStrataPolicy(StrataPolicyOptions options) {
  return std::make_unique<StrataPolicy>(std::move(options));
}
std::unique_ptr<CompactionPolicy> MakeNoCompactionPolicy() { return std::make_unique<NoCompactionPolicy>(); }
std::unique_ptr<CompactionPolicy> MakeSlidingWindowPolicy() { return std::make_unique<SlidingWindowPolicy>(); }
std::unique_ptr<CompactionPolicy> MakeLastNPolicy(size_t n) { return std::make_unique<LastNPolicy>(n); }

StatusOr<std::unique_ptr<CompactionPolicy>> MakePolicyByName(const std::string& name) {
  if (name == "strata") return MakeStrataPolicy();
  if (name == "none") return MakeNoCompactionPolicy();
  if (name == "sliding") return MakeSlidingWindowPolicy();
  if (name == "last-n") return MakeLastNPolicy(5);
  return InvalidArgumentError("unknown compaction policy \"" + name +
                              "\" (known: strata, none, sliding, last-n)");
}

}  // namespace strata
