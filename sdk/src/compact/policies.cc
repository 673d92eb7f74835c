// The strata compaction policy: cache-aware, hysteresis, latest boundary (the baselines are in
// baseline_policies.cc).
#include <algorithm>
#include <cstdio>
#include <limits>
#include <optional>
#include <set>
#include <string_view>
#include <unordered_map>

#include "compact/call_index.h"
#include "compact/common.h"
#include "compact/history_units.h"
#include "compact/placeholder.h"
#include "compact/plan_memo.h"
#include "compact/segment_facts.h"
#include "compact/strata_policy.h"
#include "compact/strata_rows.h"
#include "core/identifiers.h"
#include "strata/builtin_policies.h"

namespace strata {

namespace {

using compact_internal::CachedTail;
using compact_internal::CallIndex;
using compact_internal::IsToolResult;
using compact_internal::KeptRows;
using compact_internal::kListAbove;
using compact_internal::kListAssistants;
using compact_internal::kListBelow;
using compact_internal::kListCalling;
using compact_internal::kListPinnedOrExcluded;
using compact_internal::kListResults;
using compact_internal::kMinTokensBelowTrigger;
using compact_internal::kRowAssistant;
using compact_internal::kRowBelowCandidate;
using compact_internal::kRowCalling;
using compact_internal::kRowLiveResult;
using compact_internal::kRowPinnedOrExcluded;
using compact_internal::kRowResult;
using compact_internal::kRowUser;
using compact_internal::MessageTokens;
using compact_internal::SegmentFacts;
using compact_internal::SegmentRow;
using compact_internal::StrataRows;
using compact_internal::TurnSplit;
using Protected = compact_internal::ProtectedRows;
using compact_internal::Unit;

const std::vector<std::string> kNoIdentifiers;

// The strata policy's thresholds.
// A mask pays only when its placeholder is more than this many tokens shorter than the content.
constexpr size_t kMinMaskSaving = 8;
// Placeholders list at least this many of a result's identifiers (placeholder_identifiers caps it).
constexpr size_t kMinPlaceholderIdentifiers = 8;
// Identifiers read from each recent assistant message (with its calls): the names the agent uses.
constexpr size_t kIdentifiersPerRecentMessage = 256;
// A result is in use when the agent's recent messages use a path, or at least kSharedNamesInUse
// names, among the first kResultIdentifiersChecked identifiers of the result or the first
// kCallIdentifiersChecked of its call's arguments.
constexpr size_t kResultIdentifiersChecked = 16;
constexpr size_t kCallIdentifiersChecked = 8;
constexpr size_t kSharedNamesInUse = 2;
// A summary takes at most 1/kSummaryShareDivisor of the target (so that small budgets keep room
// for turns), and at least kMinSummaryTokens.
constexpr size_t kSummaryShareDivisor = 4;
constexpr size_t kMinSummaryTokens = 64;

// How far the strata policy's protections hold. Above the hard limit, when what the configured
// protections leave cannot be compacted enough, the policy relaxes them step by step in one plan
// (so that one build needs one round).
enum class Protection {
  kConfigured,    // keep_turns, keep_tool_results and keep_first_user as configured
  kLatestResult,  // recent turns unprotected; only the latest tool result is kept (if any is)
  kPinsOnly,      // only pins and excluded tools: the task and the latest turn may be summarized
};

// ---------------------------------------------------------------------------------- strata policy

class StrataPolicy final : public CompactionPolicy {
 public:
  StrataPolicy(StrataPolicyOptions options, bool consider_every_candidate)
      : options_(std::move(options)),
        consider_every_candidate_(consider_every_candidate),
        extractive_(MakeExtractiveSummarizer()) {}

  std::string Name() const override { return "strata@1"; }

  bool ShouldCompact(const CompactionInput& in) const override {
    if (in.forced) return true;
    if (in.limit_tokens && in.total_tokens > in.limit_tokens) return true;
    if (in.trigger_tokens && in.total_tokens > in.trigger_tokens) return true;
    // Below the trigger the cost model decides (in Plan), once per build and only with a budget.
    return options_.cost_model && in.round == 0 && in.limit_tokens > 0 && !in.history.empty();
  }

  // The same input as the last plan kept (a prediction, then the build it predicted) gets the
  // same edit without planning again (nor summarizing again). Kept: a prediction's plans, and plans
  // that summarize (a build that failed and is retried asks the same, and a summary is a request).
  StatusOr<HistoryEdit> Plan(const CompactionInput& in) override {
    std::string key;
    if (std::optional<HistoryEdit> kept = memo_.Find(in, &key)) {
      facts_.Advance(in);
      return *std::move(kept);
    }
    SegmentFacts facts = facts_.Begin(in);
    StatusOr<HistoryEdit> plan = PlanAnew(in, facts);
    facts_.Keep(std::move(facts));
    if (plan.ok() && (in.prediction || !plan->summaries.empty())) {
      memo_.Keep(in, *plan, std::move(key));
    }
    return plan;
  }

  StatusOr<HistoryEdit> PlanAnew(const CompactionInput& in, SegmentFacts& facts) {
    const size_t goal = in.target_tokens ? in.target_tokens : in.limit_tokens;
    if (goal == 0) return HistoryEdit{};
    const bool must = in.forced || (in.limit_tokens && in.total_tokens > in.limit_tokens) ||
                      (in.trigger_tokens && in.total_tokens > in.trigger_tokens);
    if (!must || in.total_tokens <= goal) {
      if (!options_.cost_model || in.forced || in.round > 0) return HistoryEdit{};
      return PlanWith(in, /*need=*/0, Protection::kConfigured, facts);  // below: when it pays
    }
    const size_t need = in.total_tokens - goal;
    const bool over_limit = in.limit_tokens && in.total_tokens > in.limit_tokens;
    size_t freed = 0;  // counted only where it is compared: above the hard limit
    StatusOr<HistoryEdit> plan =
        PlanWith(in, need, Protection::kConfigured, facts, over_limit ? &freed : nullptr);
    if (!plan.ok()) return plan;
    // Nothing, or not enough to fit, could be done within the protections. Above the hard limit,
    // relax them step by step, in this one plan (so that one build needs one round): first the
    // recent turns and results (keeping the latest result), then everything but pins and excluded
    // tools, the task and the latest turn included (summarized, never dropped).
    if (over_limit) {
      for (Protection relaxed_to : {Protection::kLatestResult, Protection::kPinsOnly}) {
        const bool fits =
            !plan->empty() && in.total_tokens - std::min(freed, in.total_tokens) <= in.limit_tokens;
        if (fits) break;
        size_t relaxed_freed = 0;
        StatusOr<HistoryEdit> relaxed = PlanWith(in, need, relaxed_to, facts, &relaxed_freed);
        if (!relaxed.ok()) return relaxed;
        if (!relaxed->empty() && (plan->empty() || relaxed_freed > freed)) {
          plan = std::move(relaxed);
          freed = relaxed_freed;
        }
      }
    }
    return plan;
  }

 private:
  // How much the agent may still need a candidate's content, least first.
  enum class Use { kStale, kSuperseded, kUnused, kInUse };
  static const char* UseName(Use use) {
    switch (use) {
      case Use::kStale:
        return "stale";
      case Use::kSuperseded:
        return "superseded";
      case Use::kUnused:
        return "unused";
      case Use::kInUse:
        return "in use";
    }
    return "";
  }

  struct Candidate {
    size_t index;
    SegmentEdit edit;
    size_t saving;
    bool stale;  // stale or superseded: first to go, and the only ones below the trigger
    Use use = Use::kUnused;
    bool lossless = false;  // a mask whose placeholder lists every name the content mentions
  };

  // The cost model's view of one request.
  struct Economics {
    double remaining = 0;  // estimated turns the context is still sent
    double growth = 1;     // mean history tokens added per turn
    double u = 1, c = 0.1;
    size_t total = 0, trigger = 0;
    // Turns a removal of `removed` tokens is counted over: the remaining turns, but no further than
    // the turn the trigger would force a compaction anyway.
    double Horizon(size_t removed) const {
      const size_t after = total > removed ? total - removed : 0;
      const double to_trigger = trigger > after ? static_cast<double>(trigger - after) / growth : 0;
      return std::max(1.0, std::min(remaining, 1.0 + to_trigger));
    }
    double Saving(size_t removed) const {
      return c * static_cast<double>(removed) * Horizon(removed);
    }
    double Cost(size_t invalidated, size_t removed) const {
      return (u - c) * static_cast<double>(invalidated > removed ? invalidated - removed : 0);
    }
    // The price of requests of `input` prompt tokens, `cached` of them cached (a summarizer's).
    double RequestPrice(int64_t input, int64_t cached) const {
      const int64_t hit = std::clamp<int64_t>(cached, 0, std::max<int64_t>(0, input));
      return u * static_cast<double>(std::max<int64_t>(0, input) - hit) +
             c * static_cast<double>(hit);
    }
  };

  Economics EstimateEconomics(const CompactionInput& in, const KeptRows& kept, bool whole) const {
    Economics e;
    e.u = options_.uncached_price;
    e.c = options_.cached_price;
    e.total = in.total_tokens;
    e.trigger = in.trigger_tokens ? in.trigger_tokens : in.limit_tokens;
    size_t assistant = kept.with_bits[kListAssistants].size();
    size_t calling = kept.with_bits[kListCalling].size();
    if (whole) {
      assistant = calling = 0;
      for (const SegmentRow& r : kept.rows) {
        assistant += (r.bits & kRowAssistant) != 0;
        calling += (r.bits & kRowCalling) != 0;
      }
    }
    const double tool_rate =
        assistant ? static_cast<double>(calling) / static_cast<double>(assistant) : 1.0;
    const double elapsed = static_cast<double>(std::max<int64_t>(1, in.turn));
    const double w = std::max(0.0, options_.prior_weight);
    e.remaining = tool_rate * (w * options_.prior_remaining_turns + elapsed) / (w + 1);
    e.growth = std::max(1.0, static_cast<double>(in.history_tokens) / elapsed);
    return e;
  }

  // Which history segments the plan must not touch at `level` (prot[i] for in.history[i]), and
  // where the task (the first user message) is.
  Protected Protect(const KeptRows& kept, const CompactionInput& in, Protection level,
                    bool after_use, bool whole) const {
    const size_t configured_turns =
        after_use ? std::min<size_t>(options_.keep_turns, 1) : options_.keep_turns;
    const int64_t keep_turns =
        level == Protection::kConfigured ? static_cast<int64_t>(configured_turns) : 0;
    const int64_t recent_turn = in.turn - keep_turns + 1;  // turns >= this are protected
    size_t keep_results = 0;
    switch (level) {
      case Protection::kConfigured:
        keep_results = after_use ? std::min<size_t>(options_.keep_tool_results, 1)
                                 : options_.keep_tool_results;
        break;
      case Protection::kLatestResult:
        keep_results = std::min<size_t>(options_.keep_tool_results, 1);
        break;
      case Protection::kPinsOnly:
        keep_results = 0;
        break;
    }
    Protected out =
        compact_internal::ProtectRows(kept, keep_turns > 0, recent_turn, keep_results, whole);
    out.keep_first_user = options_.keep_first_user && level != Protection::kPinsOnly;
    return out;
  }

  // What tells whether the agent still uses a result (cost model only).
  struct UseSignals {
    // The names and paths of the assistant messages (and their calls) of the last
    // use_window_turns turns, each with the latest turn that mentions it. The keys view the
    // identifiers the plan's SegmentFacts hold, which outlive the signals: none is copied, and a
    // lookup costs one hash however many turns the window holds.
    std::unordered_map<std::string_view, int64_t> last_use;
    // (*superseded)[i]: a later call with the same tool and arguments superseded result i (the
    // plan's CallIndex::Superseded, which outlives the signals).
    const std::vector<uint8_t>* superseded = nullptr;

    // Whether a message of the window, of a turn after `after`, mentions `name` (kAnyTurn: any).
    static constexpr int64_t kAnyTurn = std::numeric_limits<int64_t>::min();
    bool Uses(std::string_view name, int64_t after) const {
      auto it = last_use.find(name);
      return it != last_use.end() && it->second > after;
    }
  };

  UseSignals ReadUse(const CompactionInput& in, const KeptRows& kept, const CallIndex& calls,
                     SegmentFacts& facts, bool whole) const {
    UseSignals use;
    if (options_.cost_model) {
      const std::vector<SegmentRow>& rows = kept.rows;
      const int64_t since = in.turn - static_cast<int64_t>(options_.use_window_turns) + 1;
      auto read = [&](size_t i) {
        const int64_t turn = rows[i].turn;
        if (turn < since || (rows[i].bits & (kRowResult | kRowUser))) return;
        const std::vector<std::string>& ids = facts.MessageIds(i);
        for (size_t k = 0; k < ids.size() && k < kIdentifiersPerRecentMessage; ++k) {
          auto [it, added] = use.last_use.emplace(ids[k], turn);
          if (!added) it->second = std::max(it->second, turn);
        }
      };
      // The rows of the window's turns: from where the rows split by turn, when they do, and the
      // window's summaries before that.
      const size_t split = whole ? SIZE_MAX : TurnSplit(kept, since);
      if (split != SIZE_MAX) compact_internal::ForEachLateSummary(kept, split, since, read);
      for (size_t i = split == SIZE_MAX ? 0 : split; i < rows.size(); ++i) read(i);
    }
    use.superseded = &calls.Superseded();
    return use;
  }

  // Whether tool result h[i] is stale (kStale: an ephemeral tool's, or an error log whose call a
  // later result answered without an error) or superseded (kSuperseded: cost model only); nullopt
  // when it is neither.
  std::optional<Use> StaleUse(const std::vector<const Segment*>& h, size_t i,
                              const CallIndex& calls, const UseSignals& signals) const {
    const Segment& s = *h[i];
    if (options_.ephemeral_tools.count(s.name) > 0 ||
        (s.kind == SegmentKind::kErrorLog && calls.AnsweredLater()[i])) {
      return Use::kStale;
    }
    if (options_.cost_model && (*signals.superseded)[i]) return Use::kSuperseded;
    return std::nullopt;
  }

  // How much the agent may still need tool result h[i], whose StaleUse is `stale`. Below the
  // trigger with mask_after_use (`after_use`), a result is judged by the assistant messages after
  // it only (its own call names what was asked, not what was used).
  Use ClassifyResult(const std::vector<const Segment*>& h, size_t i, const ToolCall* call,
                     std::optional<Use> stale, const UseSignals& signals, bool after_use,
                     SegmentFacts& facts) const {
    if (stale) return *stale;
    if (!options_.cost_model) return Use::kUnused;
    const Segment& s = *h[i];
    const int64_t after = after_use ? s.turn : UseSignals::kAnyTurn;
    auto used = [&](const std::string& id) { return signals.Uses(id, after); };
    size_t shared = 0;
    bool shared_path = false;
    const std::vector<std::string>& ids = facts.ContentIds(i);
    for (size_t k = 0; k < ids.size() && k < kResultIdentifiersChecked; ++k) {
      const std::string& id = ids[k];
      if (!used(id)) continue;
      ++shared;
      shared_path |= id.find('/') != std::string::npos;
    }
    if (call != nullptr) {
      const std::vector<std::string>& call_ids = facts.CallIds(i, call->arguments);
      for (size_t k = 0; k < call_ids.size() && k < kCallIdentifiersChecked; ++k) {
        shared_path |= call_ids[k].find('/') != std::string::npos && used(call_ids[k]);
      }
    }
    return shared_path || shared >= kSharedNamesInUse ? Use::kInUse : Use::kUnused;
  }

  // The edits the plan may choose from, in history order: masks of unprotected live tool results
  // and drops of old reasoning. Below the trigger (`below`) only what the agent no longer needs.
  // With `enough` > 0 only the latest candidates whose savings reach it (the plan takes the latest
  // boundary that reaches its need, so older ones are never chosen): they are found newest first.
  std::vector<Candidate> FindCandidates(const CompactionInput& in, const KeptRows& kept,
                                        const Protected& prot, const CallIndex& calls,
                                        const UseSignals& signals, bool below, bool after_use,
                                        size_t enough, SegmentFacts& facts, bool whole) const {
    const std::vector<SegmentRow>& rows = kept.rows;
    const size_t n = rows.size();
    // Identifiers the request keeps anyway (messages that are never masked, protected results):
    // placeholders need not repeat them. Computed only when a placeholder is needed.
    compact_internal::PresentNames present;  // views of the plan's facts
    bool present_ready = false;
    auto ensure_present = [&] {
      if (present_ready) return;
      present_ready = true;
      // The messages' names are kept from plan to plan; the protected results' are this plan's.
      present = compact_internal::PresentNames(&facts.MessageNames());
      auto add = [&](size_t i) {
        if (!prot[i] || !(rows[i].bits & kRowResult)) return;
        for (const std::string& id : facts.MessageIds(i)) present.insert(id);
      };
      // The protected results: pinned or excluded, the latest ones, those of the protected turns
      // (from the split: the rows before it that are not of an earlier turn are summaries).
      const std::vector<uint32_t>& results = kept.with_bits[kListResults];
      const size_t split = whole || !prot.by_turn ? SIZE_MAX : TurnSplit(kept, prot.recent_turn);
      if (whole || (prot.by_turn && split == SIZE_MAX)) {
        for (size_t i = 0; i < n; ++i) add(i);
        return;
      }
      for (uint32_t i : kept.with_bits[kListPinnedOrExcluded]) add(i);
      for (auto i = results.rbegin(); i != results.rend() && *i >= prot.results_from; ++i) add(*i);
      for (size_t i = prot.by_turn ? split : n; i < n; ++i) add(i);
    };

    std::vector<Candidate> candidates;
    size_t found = 0;
    auto look_at = [&](size_t i) {
      if (prot[i]) return;
      // Below the trigger a segment is a candidate only if its row says it may be or a later
      // result superseded it: the others are not looked at.
      if (below && !(rows[i].bits & kRowBelowCandidate) &&
          !((*signals.superseded)[i] && (rows[i].bits & kRowLiveResult)))
        return;
      std::optional<Candidate> c =
          CandidateAt(in, i, calls, signals, below, after_use, present, ensure_present, facts);
      if (!c) return;
      found += c->saving;
      candidates.push_back(std::move(*c));
    };
    if (whole) {
      for (size_t i = n; i-- > 0 && (enough == 0 || found < enough);) look_at(i);
    } else {  // only the rows that may be candidates below or above the trigger, newest first
      const std::vector<uint32_t>& may = kept.with_bits[below ? kListBelow : kListAbove];
      for (auto i = may.rbegin(); i != may.rend() && (enough == 0 || found < enough); ++i)
        look_at(*i);
    }
    std::reverse(candidates.begin(), candidates.end());
    return candidates;
  }

  // The candidate history[i] is (an unprotected segment), if any.
  template <typename EnsurePresent>
  std::optional<Candidate> CandidateAt(const CompactionInput& in, size_t i, const CallIndex& calls,
                                       const UseSignals& signals, bool below, bool after_use,
                                       const compact_internal::PresentNames& present,
                                       EnsurePresent& ensure_present, SegmentFacts& facts) const {
    const Segment& s = *in.history[i];
    if (IsToolResult(s) && s.state == SegmentState::kLive) {
      if (below && s.tokens < kMinTokensBelowTrigger) return std::nullopt;
      const std::optional<Use> stale_use = StaleUse(in.history, i, calls, signals);
      const bool stale = stale_use.has_value();
      // Below the trigger only what the agent no longer needs: stale or superseded results, and
      // with mask_after_use those its latest turns do not use, only when its placeholder can list
      // every name it mentions (nothing is lost). A result that fails these whatever its use is
      // not classified: most of a long history below the trigger, at every build.
      if (below && !stale &&
          (!after_use || (!options_.mask_unused_beyond_placeholder &&
                          facts.ContentIds(i).size() > options_.placeholder_identifiers))) {
        return std::nullopt;
      }
      const ToolCall* call = calls.Of(i);
      const Use use = ClassifyResult(in.history, i, call, stale_use, signals, after_use, facts);
      if (below && !stale && use != Use::kUnused) return std::nullopt;
      ensure_present();
      // A result masked after one use may still be needed: its placeholder lists every name it
      // can (up to placeholder_identifiers).
      const size_t identifiers =
          below && use == Use::kUnused
              ? options_.placeholder_identifiers
              : std::clamp<size_t>(
                    s.tokens / std::max<size_t>(1, options_.tokens_per_identifier),
                    std::min<size_t>(kMinPlaceholderIdentifiers, options_.placeholder_identifiers),
                    options_.placeholder_identifiers);
      const compact_internal::PlaceholderFacts placeholder_facts{
          identifiers > 0 ? facts.ContentIds(i) : kNoIdentifiers, facts.ExitStatus(i),
          facts.RecallId(i)};
      std::string placeholder = compact_internal::MaskPlaceholderFrom(
          placeholder_facts, s, call, identifiers, present, in.OriginalBytes(i));
      const size_t placeholder_tokens = in.Count(placeholder);
      if (placeholder_tokens + kMinMaskSaving >= s.tokens) return std::nullopt;  // does not pay
      return Candidate{i,
                       {s.id, SegmentEdit::Action::kMask, std::move(placeholder)},
                       s.tokens - placeholder_tokens,
                       stale,
                       use,
                       facts.ContentIds(i).size() <= identifiers};
    }
    if (!s.reasoning.empty() &&
        (s.kind == SegmentKind::kAssistant || s.kind == SegmentKind::kToolCall)) {
      const size_t saving = facts.ReasoningTokens(i);
      if (saving == 0 || (below && saving < kMinTokensBelowTrigger)) return std::nullopt;
      return Candidate{
          i, {s.id, SegmentEdit::Action::kDropReasoning, ""}, saving, true, Use::kStale, false};
    }
    return std::nullopt;
  }

  // `freed`, when given, is set to the tokens the plan frees by the policy's own count: the savings
  // of the candidates it takes and of its summary (read from the candidates, not the history).
  StatusOr<HistoryEdit> PlanWith(const CompactionInput& in, size_t need, Protection level,
                                 SegmentFacts& facts, size_t* freed = nullptr) {
    const CallIndex calls(in, facts);
    const bool below = need == 0;  // below the trigger: the cost model alone decides
    // Below the trigger with mask_after_use, a result the agent has seen once and does not use is a
    // candidate from the next request on: only what the server has not seen yet (the current turn)
    // and the latest result stay protected.
    const bool after_use = below && options_.cost_model && options_.mask_after_use;
    const KeptRows& rows = StrataRows(in, options_, facts);
    const bool whole = consider_every_candidate_;  // every row read, as a test's reference
    const Protected prot = Protect(rows, in, level, after_use, whole);
    const Economics econ = EstimateEconomics(in, rows, whole);
    const UseSignals signals = ReadUse(in, rows, calls, facts, whole);
    // Candidates: stale first (superseded error logs, ephemeral tools, old reasoning), then masks.
    // Without the cost model a plan above the trigger takes the latest boundary that reaches the
    // need, so only the latest candidates that reach it are looked at.
    const size_t enough = options_.cost_model || below || consider_every_candidate_ ? 0 : need;
    const std::vector<Candidate> candidates =
        FindCandidates(in, rows, prot, calls, signals, below, after_use, enough, facts, whole);
    const CachedTail tail(rows, in.turn, whole);

    // suffix[i]: what masking everything from candidate i on would free.
    std::vector<size_t> suffix(candidates.size() + 1, 0);
    for (size_t c = candidates.size(); c-- > 0;) suffix[c] = suffix[c + 1] + candidates[c].saving;

    HistoryEdit edit;
    size_t summary_saving = 0;
    if (options_.cost_model && (below || suffix[0] >= need)) {
      ChooseByValue(in, econ, candidates, tail, need, edit);
    } else if (below) {
      return edit;
    } else if (suffix[0] >= need) {
      // The latest boundary that reaches the goal: the last candidate c with suffix[c] >= need.
      size_t start = 0;
      for (size_t c = candidates.size(); c-- > 0;) {
        if (suffix[c] >= need) {
          start = c;
          break;
        }
      }
      SelectFrom(candidates, start, need, edit);
    } else {
      STRATA_RETURN_IF_ERROR(
          SummarizeOldest(in, need, prot, econ, candidates, suffix, tail, edit, summary_saving));
    }
    if (freed != nullptr) *freed = FreedBy(candidates, edit, summary_saving);
    return edit;
  }

  // The savings of the candidates `edit` takes, plus `summary_saving`.
  static size_t FreedBy(const std::vector<Candidate>& candidates, const HistoryEdit& edit,
                        size_t summary_saving) {
    std::unordered_map<std::string_view, size_t> saving_of;
    saving_of.reserve(candidates.size());
    for (const Candidate& c : candidates) saving_of.emplace(c.edit.segment_id, c.saving);
    size_t freed = summary_saving;
    for (const SegmentEdit& e : edit.edits) {
      auto it = saving_of.find(e.segment_id);
      if (it != saving_of.end()) freed += it->second;
    }
    return freed;
  }

  // Masking alone cannot reach the goal: summarizes the oldest turns (after the task), then masks
  // from what follows, stale and oldest first. `summary_saving`: the tokens the summary frees.
  Status SummarizeOldest(const CompactionInput& in, size_t need, const Protected& prot,
                         const Economics& econ, const std::vector<Candidate>& candidates,
                         const std::vector<size_t>& suffix, const CachedTail& tail,
                         HistoryEdit& edit, size_t& summary_saving) {
    const std::vector<const Segment*>& h = in.history;
    compact_internal::UnitsFromStart units(h);  // found only as far as the span needs
    auto unit_eligible = [&](const Unit& u) {
      if (prot.keep_first_user && u.begin <= prot.first_user && prot.first_user < u.end) {
        return false;
      }
      for (size_t i = u.begin; i < u.end; ++i) {
        if (prot[i] || h[i]->pinned) return false;
      }
      return true;
    };
    size_t first_unit = 0;
    while (units.Has(first_unit) && !unit_eligible(units[first_unit])) ++first_unit;
    if (!units.Has(first_unit)) {
      SelectFrom(candidates, 0, need, edit);  // free what masking can
      return Status::Ok();
    }
    const size_t goal = in.target_tokens ? in.target_tokens : in.limit_tokens;
    const size_t summary_limit =
        std::min(options_.max_summary_tokens,
                 std::max<size_t>(kMinSummaryTokens, goal / kSummaryShareDivisor));
    const size_t summary_estimate = summary_limit + in.message_overhead_tokens;
    size_t span_tokens = 0, last_unit = first_unit;
    size_t c_after = 0;  // first candidate after the span
    const size_t span_need = SpanNeed(need, goal);
    for (; units.Has(last_unit) && unit_eligible(units[last_unit]); ++last_unit) {
      for (size_t i = units[last_unit].begin; i < units[last_unit].end; ++i)
        span_tokens += MessageTokens(in, *h[i]);
      while (c_after < candidates.size() && candidates[c_after].index < units[last_unit].end)
        ++c_after;
      const size_t span_saving =
          span_tokens > summary_estimate ? span_tokens - summary_estimate : 0;
      if (span_saving + suffix[c_after] >= span_need) {
        ++last_unit;
        break;
      }
    }
    std::vector<const Segment*> span;
    for (size_t u = first_unit; u < last_unit; ++u) {
      for (size_t i = units[u].begin; i < units[u].end; ++i) span.push_back(h[i]);
    }
    if (!(span.size() >= 2 || (span.size() == 1 && span.front()->kind != SegmentKind::kSummary))) {
      SelectFrom(candidates, c_after, need, edit);
      if (options_.cost_model) FinishExplanation(in, econ, candidates, tail, edit);
      return Status::Ok();
    }
    Summarizer* summarizer = options_.summarizer ? options_.summarizer : extractive_.get();
    const Tokenizer* tokenizer = in.tokenizer;
    std::unique_ptr<Tokenizer> fallback;
    if (tokenizer == nullptr) {
      fallback = MakeEstimateTokenizer(4.0);
      tokenizer = fallback.get();
    }
    STRATA_ASSIGN_OR_RETURN(
        SummaryResult summary,
        summarizer->SummarizeFor(span, summary_limit, *tokenizer, in.summary_request));
    SummaryEdit summary_edit;
    for (const Segment* s : span) summary_edit.replaces.push_back(s->id);
    summary_edit.content = std::move(summary.text);
    summary_edit.summarizer = summarizer->Name();
    summary_edit.summary_request = std::move(summary.request);
    const size_t actual = in.Count(summary_edit.content) + in.message_overhead_tokens;
    if (actual >= span_tokens) {
      // The summary would not be shorter than what it replaces (e.g. a span of placeholders and
      // duplicate references): never apply an edit that adds tokens; mask what can be masked.
      SelectFrom(candidates, 0, need, edit);
      return Status::Ok();
    }
    const size_t saving = span_tokens - actual;
    if (options_.cost_model) {
      edit.explanation.mode = ModeOf(in);
      edit.explanation.need_tokens = need;
      CompactionCandidate summary_candidate;
      summary_candidate.segment_id = span.front()->id;
      summary_candidate.action = "summarize";
      summary_candidate.tokens_removed = saving;
      summary_candidate.invalidated_tokens = tail[units[first_unit].begin];
      summary_candidate.expected_saving = econ.Saving(saving);
      summary_candidate.invalidation_cost = econ.Cost(summary_candidate.invalidated_tokens, saving);
      summary_candidate.request_cost =
          econ.RequestPrice(summary.request_input_tokens, summary.request_cached_tokens);
      summary_candidate.value = "oldest turns";
      summary_candidate.chosen = true;
      edit.explanation.candidates.push_back(summary_candidate);
    }
    edit.summaries.push_back(std::move(summary_edit));
    summary_saving = saving;
    if (saving < need) SelectFrom(candidates, c_after, need - saving, edit);
    if (options_.cost_model) AddWhatTheBreakPaysFor(candidates, c_after, edit);
    if (options_.cost_model) FinishExplanation(in, econ, candidates, tail, edit);
    return Status::Ok();
  }

  static std::string ModeOf(const CompactionInput& in) {
    if (in.forced) return "forced";
    if (in.limit_tokens && in.total_tokens > in.limit_tokens) return "limit";
    if (in.trigger_tokens && in.total_tokens > in.trigger_tokens) return "trigger";
    return "below-trigger";
  }

  // The chosen set: for every candidate boundary b, the batch that boundary allows (from b on:
  // stale and superseded first, then unused, then in-use results, oldest first, until `need` is
  // reached; then every further stale or superseded result, which the invalidation already pays
  // for). Above the trigger, the batch with the best expected net saving among those that reach the
  // goal; below it, the best batch of stale and superseded results, applied only when its saving
  // exceeds below_trigger_margin times its re-prefill cost.
  void ChooseByValue(const CompactionInput& in, const Economics& econ,
                     const std::vector<Candidate>& candidates, const CachedTail& tail, size_t need,
                     HistoryEdit& edit) const {
    const bool below = need == 0;
    const size_t m = candidates.size();
    // Stale and superseded first, then unused, then in-use results.
    constexpr int kUseRanks = 3;
    auto rank = [](Use use) {
      return use == Use::kStale || use == Use::kSuperseded ? 0 : (use == Use::kUnused ? 1 : 2);
    };
    std::vector<bool> best_set;
    double best_net = -1e300;
    size_t best_removed = 0, best_invalidated = 0;
    for (size_t b = 0; b < m; ++b) {
      std::vector<bool> take(m, false);
      size_t freed = 0;
      for (int r = 0; r < kUseRanks && freed < need; ++r) {
        for (size_t k = b; k < m && freed < need; ++k) {
          if (rank(candidates[k].use) != r) continue;
          take[k] = true;
          freed += candidates[k].saving;
        }
      }
      if (freed < need) continue;
      for (size_t k = b; k < m; ++k) {
        // below: every candidate is stale or unused
        if (!take[k] && (candidates[k].stale || below || JoinsTheBreak(candidates[k]))) {
          take[k] = true;
          freed += candidates[k].saving;
        }
      }
      size_t first = m;
      for (size_t k = b; k < m && first == m; ++k) {
        if (take[k]) first = k;
      }
      if (first != b) continue;  // the same set is evaluated from its own first candidate
      const size_t invalidated = tail[candidates[first].index];
      const double net = econ.Saving(freed) - econ.Cost(invalidated, freed);
      if (net > best_net) {
        best_net = net;
        best_set = std::move(take);
        best_removed = freed;
        best_invalidated = invalidated;
      }
    }
    if (best_set.empty()) return;
    if (below) {
      const double saving = econ.Saving(best_removed),
                   cost = econ.Cost(best_invalidated, best_removed);
      if (!(saving > options_.below_trigger_margin * cost)) {
        return;  // does not pay: nothing to do
      }
      edit.reason = "expected saving " + Fixed(saving) + " over " +
                    Fixed(econ.Horizon(best_removed)) + " turns exceeds " +
                    Fixed(options_.below_trigger_margin) + " x re-prefill cost " + Fixed(cost) +
                    " (input " + std::to_string(in.total_tokens) + " tokens, below the trigger " +
                    std::to_string(in.trigger_tokens) + ")";
    }
    for (size_t k = 0; k < m; ++k) {
      if (best_set[k]) edit.edits.push_back(candidates[k].edit);
    }
    edit.explanation.mode = ModeOf(in);
    edit.explanation.need_tokens = need;
    FinishExplanation(in, econ, candidates, tail, edit);
  }

  // Lists every candidate (chosen ones marked) and the chosen set's totals in edit.explanation.
  void FinishExplanation(const CompactionInput& in, const Economics& econ,
                         const std::vector<Candidate>& candidates, const CachedTail& tail,
                         HistoryEdit& edit) const {
    CompactionExplanation& x = edit.explanation;
    if (x.mode.empty()) x.mode = ModeOf(in);
    x.remaining_turns = econ.remaining;
    x.uncached_price = econ.u;
    x.cached_price = econ.c;
    std::set<std::string> chosen;
    for (const SegmentEdit& e : edit.edits) chosen.insert(e.segment_id);
    std::vector<CompactionCandidate> listed =
        std::move(x.candidates);  // a summary, when there is one
    // Listed in history order (a segment's index; ids absent from the history last): each entry's
    // index is known as it is listed (a candidate carries its own), not looked up by id.
    std::vector<std::pair<size_t, size_t>> order;  // (history index, listed index)
    order.reserve(listed.size() + candidates.size());
    size_t boundary = SIZE_MAX;
    for (const CompactionCandidate& c : listed) {
      size_t at = in.history.size();
      for (size_t i = 0; i < in.history.size(); ++i) {
        if (in.history[i]->id == c.segment_id) {
          at = i;
          boundary = std::min(boundary, i);
          break;
        }
      }
      order.emplace_back(at, order.size());
      x.tokens_removed += c.tokens_removed;
      x.request_cost += c.request_cost;
    }
    for (const Candidate& c : candidates) {
      CompactionCandidate out;
      out.segment_id = c.edit.segment_id;
      out.action = c.edit.action == SegmentEdit::Action::kMask ? "mask" : "drop-reasoning";
      out.tokens_removed = c.saving;
      out.invalidated_tokens = tail[c.index];
      out.expected_saving = econ.Saving(c.saving);
      out.invalidation_cost = econ.Cost(out.invalidated_tokens, c.saving);
      out.value = UseName(c.use);
      out.chosen = chosen.count(c.edit.segment_id) > 0;
      if (out.chosen) {
        boundary = std::min(boundary, c.index);
        x.tokens_removed += c.saving;
      }
      order.emplace_back(c.index, listed.size());
      listed.push_back(std::move(out));
    }
    std::stable_sort(order.begin(), order.end(),
                     [](const auto& a, const auto& b) { return a.first < b.first; });
    std::vector<CompactionCandidate> sorted;
    sorted.reserve(listed.size());
    for (const auto& [index, k] : order) sorted.push_back(std::move(listed[k]));
    listed = std::move(sorted);
    x.candidates = std::move(listed);
    if (boundary != SIZE_MAX) {
      x.boundary_segment_id = in.history[boundary]->id;
      x.invalidated_tokens = tail[boundary];
    }
    x.horizon_turns = econ.Horizon(x.tokens_removed);
    x.expected_saving = econ.Saving(x.tokens_removed);
    x.invalidation_cost = econ.Cost(x.invalidated_tokens, x.tokens_removed);
  }

  static std::string Fixed(double value) {
    char text[32];
    std::snprintf(text, sizeof text, "%.1f", value);
    return text;
  }

  // What the summarized span must free (with the masks after it): `need`, plus with summary_depth
  // below 1 the part of the target `goal` it asks to come down by.
  size_t SpanNeed(size_t need, size_t goal) const {
    const double depth = std::clamp(options_.summary_depth, 0.0, 1.0);
    return need + static_cast<size_t>((1.0 - depth) * static_cast<double>(goal));
  }

  // With mask_unused_at_break, a result the agent does not use whose placeholder keeps every name
  // it mentions is masked by any compaction that re-prefills it anyway (a boundary before it).
  bool JoinsTheBreak(const Candidate& c) const {
    return options_.mask_unused_at_break && c.use == Use::kUnused && c.lossless;
  }

  // Adds to `edit` every stale candidate from `start` on and, with mask_unused_at_break, every
  // lossless unused one, not chosen yet: the summary before them already re-prefills them.
  void AddWhatTheBreakPaysFor(const std::vector<Candidate>& candidates, size_t start,
                              HistoryEdit& edit) const {
    if (!options_.mask_unused_at_break) return;
    std::set<std::string> chosen;
    for (const SegmentEdit& e : edit.edits) chosen.insert(e.segment_id);
    for (size_t c = start; c < candidates.size(); ++c) {
      if ((candidates[c].stale || JoinsTheBreak(candidates[c])) &&
          !chosen.count(candidates[c].edit.segment_id)) {
        edit.edits.push_back(candidates[c].edit);
      }
    }
  }

  // Adds candidates from `start` on: stale ones first, then the rest oldest first, until `need`.
  static void SelectFrom(const std::vector<Candidate>& candidates, size_t start, size_t need,
                         HistoryEdit& edit) {
    size_t freed = 0;
    for (int pass = 0; pass < 2 && freed < need; ++pass) {
      for (size_t c = start; c < candidates.size() && freed < need; ++c) {
        if (candidates[c].stale != (pass == 0)) continue;
        edit.edits.push_back(candidates[c].edit);
        freed += candidates[c].saving;
      }
    }
  }

  StrataPolicyOptions options_;
  // No early stop, and every row read instead of the kept lists and sums: the whole computation,
  // for tests.
  const bool consider_every_candidate_;
  std::unique_ptr<Summarizer> extractive_;
  compact_internal::SegmentFactsCache facts_;
  compact_internal::PlanMemo memo_;
};

}  // namespace

std::unique_ptr<CompactionPolicy> MakeStrataPolicy(StrataPolicyOptions options) {
  return std::make_unique<StrataPolicy>(std::move(options), /*consider_every_candidate=*/false);
}

std::unique_ptr<CompactionPolicy> compact_internal::MakeStrataPolicyConsideringEveryCandidate(
    StrataPolicyOptions options) {
  return std::make_unique<StrataPolicy>(std::move(options), /*consider_every_candidate=*/true);
}

StatusOr<std::unique_ptr<CompactionPolicy>> MakePolicyByName(const std::string& name) {
  if (name == "strata") return MakeStrataPolicy();
  if (name == "none") return MakeNoCompactionPolicy();
  if (name == "sliding") return MakeSlidingWindowPolicy();
  if (name == "last-n") return MakeLastNPolicy(5);
  if (name == "clear-tool-uses") return MakeClearToolUsesPolicy();
  if (name == "observation-masking") return MakeObservationMaskingPolicy();
  return InvalidArgumentError("unknown compaction policy \"" + name +
                              "\" (known: strata, none, sliding, last-n, clear-tool-uses, "
                              "observation-masking)");
}

}  // namespace strata
