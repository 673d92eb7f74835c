// What the Agent's next request would be, without sending it (agent_impl.h): PredictCachedTokens,
// PreviewRequest and InputTokens, a due compaction computed on a copy of the context.
#include <algorithm>
#include <memory>
#include <string>
#include <utility>

#include "agent/agent_impl.h"

namespace strata {

StatusOr<std::unique_ptr<Context>> Agent::Impl::Scratch(bool with_budget) const {
  ContextOptions options = context_->options();
  options.journal = nullptr;
  if (!with_budget) {
    options.budget.reset();
    options.compaction = nullptr;
  }
  return Context::Restore(std::move(options), context_->Snapshot());
}

StatusOr<Agent::Impl::NextRequest> Agent::Impl::Next(const BuildOptions& fields) const {
  NextRequest out;
  StatusOr<BuiltRequest> built = context_->Preview(fields);
  bool due = !built.ok() && built.status().code() == StatusCode::kResourceExhausted;
  if (!built.ok() && !due) return built.status();
  if (built.ok() && budget_) {
    // last-n, observation-masking, strata (masking after use, below the trigger) and an
    // injected policy may compact at any build.
    due =
        built->input_tokens > static_cast<size_t>(std::max<int64_t>(0, TriggerTokens(*budget_))) ||
        config_.policy.name == "last-n" || config_.policy.name == "strata" ||
        config_.policy.name == "observation-masking" || shared_.policy != nullptr;
  }
  std::unique_ptr<Context> scratch;
  if (due) {
    STRATA_ASSIGN_OR_RETURN(scratch, Scratch(true));
    StatusOr<BuiltRequest> compacted = scratch->Build(fields);
    if (!compacted.ok()) return compacted.status();
    // A build that did not compact predicts from the context as it is (the scratch copy is
    // only for a compaction that Complete() would apply).
    if (compacted->compaction.has_value() || !built.ok()) {
      built = std::move(compacted);
      out.prediction.compaction = built->compaction;
      out.prediction.compaction_due = built->compaction.has_value();
    }
  }
  STRATA_ASSIGN_OR_RETURN(std::shared_ptr<const std::string> prompt, PromptOf(built->body));
  const std::shared_ptr<const PromptBlocks> blocks = prompt_tokens_->Hash(*prompt, salt_, config_.cache);
  out.prediction.input_tokens =
      built->input_tokens_exact ? static_cast<int64_t>(built->input_tokens) : blocks->prompt_tokens;
  out.prediction.input_tokens_exact = built->input_tokens_exact;
  out.prediction.predicted_cached_tokens = model_->Lookup(*blocks);
  out.built = std::move(built).value();
  return out;
}

StatusOr<CachePrediction> Agent::Impl::Predict() const {
  STRATA_ASSIGN_OR_RETURN(NextRequest next, Next(Fields("predict")));
  return next.prediction;
}

StatusOr<RequestPreview> Agent::Impl::PreviewRequest() const {
  STRATA_ASSIGN_OR_RETURN(NextRequest next, Next(Fields("preview")));
  RequestPreview out;
  out.input_tokens = next.prediction.input_tokens;
  out.input_tokens_exact = next.prediction.input_tokens_exact;
  out.predicted_cached_tokens = next.prediction.predicted_cached_tokens;
  out.compaction_due = next.prediction.compaction_due;
  out.compaction = std::move(next.prediction.compaction);
  for (int i = 0; i < kLayerCount; ++i)
    out.layer_tokens[i] = static_cast<int64_t>(next.built.layers[i].tokens);
  out.message_count = next.built.message_count;
  out.body = std::move(next.built.body);
  return out;
}

StatusOr<int64_t> Agent::Impl::InputTokens() const {
  StatusOr<BuiltRequest> built = context_->Preview(Fields("count"));
  if (built.ok()) return static_cast<int64_t>(built->input_tokens);
  if (built.status().code() != StatusCode::kResourceExhausted) return built.status();
  STRATA_ASSIGN_OR_RETURN(std::unique_ptr<Context> scratch, Scratch(false));
  STRATA_ASSIGN_OR_RETURN(BuiltRequest unlimited, scratch->Preview(Fields("count")));
  return static_cast<int64_t>(unlimited.input_tokens);
}

}  // namespace strata
