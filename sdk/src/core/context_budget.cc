// Context, the token budget: the context's own token accounting, Build() within the budget (render,
// count exactly when a request counter is set, compact in bounded rounds), and the error that says
// where the tokens are when a request does not fit.
#include <algorithm>
#include <atomic>

#include "core/context_impl.h"
#include "core/hygiene.h"

namespace strata {

using internal::IsRendered;

namespace {

// How many compactions one Build() may apply. The first round is the policy's plan (down to the
// target above the trigger, or the cost model's choice below it); later rounds run only while the
// request is still above the hard limit, which happens when the exact count (chat template,
// tokenizer) is higher than the context's own count the policy planned with, and every round must
// lower the input tokens or it is not applied. One plan plus up to three such corrections: a
// policy that keeps removing a few tokens at a time cannot turn one build into many prefix
// invalidations; if the request still does not fit after them, Build() fails (RESOURCE_EXHAUSTED)
// instead. The report says how many rounds were used (CompactionReport::rounds).
constexpr size_t kMaxCompactionRounds = 4;

// One Build, one report: the first round's report, widened by later rounds to the earliest boundary
// and the largest measured invalidation, with their counts added.
void MergeRound(std::optional<CompactionReport>& merged, const CompactionReport& report) {
  if (!merged) {
    merged = report;
    return;
  }
  if (report.boundary_index < merged->boundary_index) {
    merged->boundary_index = report.boundary_index;
    merged->boundary_segment_id = report.boundary_segment_id;
  }
  merged->invalidated_tokens = std::max(merged->invalidated_tokens, report.invalidated_tokens);
  merged->masked += report.masked;
  merged->evicted += report.evicted;
  merged->summarized += report.summarized;
  merged->reasoning_dropped += report.reasoning_dropped;
  size_t at = 0;  // a round's names are already distinct
  for (size_t end; at < report.summarizer.size(); at = end + 2) {
    end = std::min(report.summarizer.find(", ", at), report.summarizer.size());
    internal::AddSummarizerName(report.summarizer.substr(at, end - at), merged->summarizer);
  }
  internal::AddSummaryRequest(report.summary_request, merged->summary_request);
}

}  // namespace

size_t Context::Impl::VolatileTokens() const {
  size_t tokens = 0;
  for (const auto& item : volatile_) {
    tokens += tokenizer_->Count(item.first) + tokenizer_->Count(item.second) + 1;
  }
  return tokens;
}

size_t Context::Impl::MessageCount() const {
  return stable_messages_ + rendered_history_messages_ + (volatile_.empty() ? 0 : 1);
}

size_t Context::Impl::InputTokens() const {
  size_t tokens = VolatileTokens();
  for (Layer layer : internal::kStableLayers) tokens += Usage(layer).tokens;
  tokens += Usage(Layer::kHistory).tokens;
  const size_t tools = StableSlot(Layer::kTools).size();
  return tokens + options_.message_overhead_tokens * (MessageCount() + tools + 1);
}

size_t Context::Impl::LimitTokens() const {
  return options_.budget
             ? static_cast<size_t>(std::max<int64_t>(0, UsableInputTokens(*options_.budget)))
             : 0;
}

Context::Impl::LentInput Context::Impl::MakeInput(bool forced) const {
  // The kept view, unless it is lent to an input still alive (no caller keeps two): then this
  // input gathers its own, in a view of its own that vouches for nothing.
  internal::RenderedHistoryView own;
  internal::RenderedHistoryView& view = input_view_.lent ? own : input_view_;
  LentInput lent(&view == &own ? nullptr : &view);
  CompactionInput& input = lent.input;
  if (!view.valid) {
    view.Drop();
    for (size_t i = 0; i < history_.size(); ++i) {
      const Segment& s = history_[i];
      // Hygiene kept the original under the segment's recall id: a placeholder states its size.
      if (IsRendered(s)) view.Add(&s, history_hashes_[i], OriginalBytesOf(s));
    }
    view.valid = true;
  }
  static std::atomic<uint64_t> next_serial{1};  // process-wide: a copy's inputs name none of ours
  input.history_serial = next_serial.fetch_add(1, std::memory_order_relaxed);
  input.previous_history_serial = view.last_serial;
  input.history_unchanged =
      view.last_serial != 0 ? std::min(view.unchanged, view.segments.size()) : 0;
  view.last_serial = input.history_serial;
  view.unchanged = view.segments.size();
  view.Lend(input);
  for (Layer layer : internal::kStableLayers) input.stable_tokens += Usage(layer).tokens;
  input.volatile_tokens = VolatileTokens();
  input.history_tokens = Usage(Layer::kHistory).tokens;
  input.total_tokens = InputTokens();
  if (options_.budget) {
    input.limit_tokens = LimitTokens();
    input.trigger_tokens =
        static_cast<size_t>(std::max<int64_t>(0, TriggerTokens(*options_.budget)));
    input.target_tokens = static_cast<size_t>(std::max<int64_t>(0, TargetTokens(*options_.budget)));
  }
  input.message_overhead_tokens = options_.message_overhead_tokens;
  input.turn = turn_;
  input.forced = forced;
  input.tokenizer = tokenizer_;
  input.recall_id_of = [this](const Segment& s) { return RememberedRecallId(s); };
  return lent;
}

Status Context::Impl::OverBudgetError(size_t tokens, size_t limit, bool can_compact) const {
  using internal::WithThousands;
  size_t protected_history = 0;
  for (const Segment& s : history_) {
    if (IsRendered(s) && s.pinned) protected_history += s.tokens + options_.message_overhead_tokens;
  }
  std::string layers;
  for (Layer layer :
       {Layer::kSystem, Layer::kTools, Layer::kIndex, Layer::kDocs, Layer::kHistory}) {
    layers += std::string(LayerName(layer)) + " " + WithThousands(Usage(layer).tokens) + ", ";
  }
  layers += "volatile " + WithThousands(VolatileTokens()) + " (pinned history " +
            WithThousands(protected_history) + ")";
  std::string advice =
      can_compact
          ? "the compaction policy could not reduce it further; shrink the stable or volatile "
            "layers, unpin history, or raise the budget"
          : (options_.compaction == nullptr
                 ? "set ContextOptions::compaction to let strata compact the history, or raise the "
                   "budget"
                 : "call Build(), which compacts first, instead of Preview()");
  return ResourceExhaustedError("request needs " + WithThousands(tokens) +
                                " input tokens but the budget allows " + WithThousands(limit) +
                                " (tokens by layer: " + layers + "); " + advice);
}

// Renders and, with a request counter, counts the request exactly.
StatusOr<BuiltRequest> Context::Impl::RenderCounted(const BuildOptions& build) const {
  STRATA_ASSIGN_OR_RETURN(BuiltRequest request, Render(build));
  if (options_.request_counter != nullptr) {
    const RenderContinuation render{request.render_serial, request.previous_render_serial,
                                    request.unchanged_bytes};
    STRATA_ASSIGN_OR_RETURN(request.input_tokens,
                            options_.request_counter->CountRendered(request.body, render));
    request.input_tokens_exact = true;
  }
  return request;
}

StatusOr<HistoryEdit> Context::Impl::PlanRound(const BuildOptions& build, size_t tokens,
                                               size_t limit, size_t round, bool prediction) const {
  CompactionPolicy* policy = options_.compaction;
  LentInput lent = MakeInput(false);
  CompactionInput& input = lent.input;
  input.summary_request = build.summary_request;
  input.total_tokens = tokens;  // plan against the exact count when there is one
  input.round = round;
  input.prediction = prediction;
  if (tokens <= limit && !policy->ShouldCompact(input)) return HistoryEdit{};
  STRATA_ASSIGN_OR_RETURN(HistoryEdit edit, policy->Plan(input));
  if (edit.reason.empty() && !edit.empty()) edit.reason = DescribeTrigger(input);
  return edit;
}

StatusOr<std::optional<CompactionReport>> Context::Impl::CompactionRound(
    const BuildOptions& build, size_t tokens, size_t limit, size_t round,
    const HistoryEdit* planned) {
  HistoryEdit planned_here;
  if (planned == nullptr) {
    STRATA_ASSIGN_OR_RETURN(planned_here, PlanRound(build, tokens, limit, round));
    planned = &planned_here;
  }
  if (planned->empty()) return std::optional<CompactionReport>();
  bool not_reducing = false;
  STRATA_ASSIGN_OR_RETURN(CompactionReport report,
                          ApplyEdit(*planned, options_.compaction->Name(), planned->reason,
                                    /*require_reduction=*/true, &not_reducing));
  if (not_reducing) return std::optional<CompactionReport>();
  report.tokens_before = tokens;
  return std::optional<CompactionReport>(std::move(report));
}

StatusOr<BuiltRequest> Context::Impl::BuildWithinBudget(const BuildOptions& build,
                                                        const HistoryEdit* first_plan) {
  std::optional<CompactionReport> merged;
  size_t rounds = 0;
  // A build that compacts renders again after each round and returns only its last render, so
  // that one is described against the render before the build: the bytes every render on the way
  // kept of the one before it (a shared prefix of each pair is one of the whole sequence).
  bool rendered = false;
  uint64_t previous_serial = 0;
  size_t unchanged = 0;
  for (;;) {
    // Without a request counter the count is the context's own (InputTokens(), what Render()
    // reports), known without a render: the round plans and applies first, and the request is
    // rendered once, when no round changes it any more.
    bool planned = false;
    if (PlansBeforeRendering()) {
      planned = true;
      STRATA_ASSIGN_OR_RETURN(std::optional<CompactionReport> round,
                              MaybeCompactionRound(build, InputTokens(), rounds, first_plan));
      if (round) {
        ++rounds;
        MergeRound(merged, *round);
        merged->rounds = rounds;
        continue;
      }
    }
    STRATA_ASSIGN_OR_RETURN(BuiltRequest request, RenderCounted(build));
    if (!rendered) {
      rendered = true;
      previous_serial = request.previous_render_serial;
      unchanged = request.unchanged_bytes;
    } else {
      unchanged = std::min(unchanged, request.unchanged_bytes);
      request.previous_render_serial = previous_serial;
      request.unchanged_bytes = unchanged;
    }
    if (!options_.budget) return request;
    const size_t tokens = request.input_tokens;
    const size_t limit = LimitTokens();
    if (!planned) {
      STRATA_ASSIGN_OR_RETURN(std::optional<CompactionReport> round,
                              MaybeCompactionRound(build, tokens, rounds, first_plan));
      if (round) {
        ++rounds;
        MergeRound(merged, *round);
        merged->rounds = rounds;
        // The next render writes where this one did, from the round's edit on.
        RecycleRender(std::move(request.body), request.render_serial);
        continue;  // render and count again
      }
    }
    if (tokens > limit) return OverBudgetError(tokens, limit, options_.compaction != nullptr);
    if (merged) {
      merged->tokens_after = tokens;
      compactions_.back().tokens_after = tokens;
      compactions_.back().rounds = merged->rounds;
    }
    request.compaction = std::move(merged);
    return request;
  }
}

StatusOr<std::optional<CompactionReport>> Context::Impl::MaybeCompactionRound(
    const BuildOptions& build, size_t tokens, size_t rounds, const HistoryEdit* first_plan) {
  const size_t limit = LimitTokens();
  // The first round may compact ahead of the limit (the policy's trigger); later ones only to fit.
  const bool may_compact = options_.compaction != nullptr && rounds < kMaxCompactionRounds &&
                           (rounds == 0 || tokens > limit);
  if (!may_compact) return std::optional<CompactionReport>();
  return CompactionRound(build, tokens, limit, rounds, rounds == 0 ? first_plan : nullptr);
}

StatusOr<BuiltRequest> Context::Impl::Preview(const BuildOptions& build) const {
  STRATA_ASSIGN_OR_RETURN(BuiltRequest request, RenderCounted(build));
  if (options_.budget && request.input_tokens > LimitTokens()) {
    return OverBudgetError(request.input_tokens, LimitTokens(), false);
  }
  return request;
}

StatusOr<size_t> Context::Impl::CountRequest(const BuildOptions& build) const {
  STRATA_ASSIGN_OR_RETURN(BuiltRequest request, RenderCounted(build));
  const size_t tokens = request.input_tokens;
  RecycleRender(std::move(request.body), request.render_serial);
  return tokens;
}

StatusOr<BuiltRequest> Context::Impl::PreviewBuild(const BuildOptions& build) const {
  HistoryEdit plan;
  const bool plan_first = PlansBeforeRendering();
  if (plan_first) {  // as BuildWithinBudget: a plan that compacts needs no render of this context
    STRATA_ASSIGN_OR_RETURN(plan,
                            PlanRound(build, InputTokens(), LimitTokens(), 0, /*prediction=*/true));
    if (!plan.empty()) return CopyForPreview().BuildWithinBudget(build, &plan);
  }
  STRATA_ASSIGN_OR_RETURN(BuiltRequest request, RenderCounted(build));
  if (!options_.budget) return request;
  const size_t limit = LimitTokens();
  if (!plan_first && options_.compaction != nullptr) {
    STRATA_ASSIGN_OR_RETURN(plan,
                            PlanRound(build, request.input_tokens, limit, 0, /*prediction=*/true));
  }
  if (plan.empty()) {
    if (request.input_tokens > limit) {
      return OverBudgetError(request.input_tokens, limit, options_.compaction != nullptr);
    }
    return request;
  }
  // Only a plan that compacts needs a copy to apply it to, whose renders write where this one did.
  RecycleRender(std::move(request.body), request.render_serial);
  return CopyForPreview().BuildWithinBudget(build, &plan);
}

}  // namespace strata
