// What the Agent's next request would be, without sending it (agent_impl.h): PredictCachedTokens,
// PreviewRequest and InputTokens; a due compaction is computed on a copy (Context::PreviewBuild).
#include <memory>
#include <string>
#include <utility>

#include "agent/agent_impl.h"

namespace strata {

StatusOr<Agent::Impl::NextRequest> Agent::Impl::Next(const BuildOptions& fields) const {
  NextRequest out;
  // The policy plans on the context itself; only a compaction is computed on a copy.
  StatusOr<BuiltRequest> built = context_->PreviewBuild(fields);
  if (!built.ok()) return built.status();
  out.prediction.compaction = built->compaction;
  out.prediction.compaction_due = built->compaction.has_value();
  STRATA_ASSIGN_OR_RETURN(std::shared_ptr<const std::string> prompt, PromptOf(built->body));
  const std::shared_ptr<const PromptBlocks> blocks =
      prompt_tokens_->Hash(*prompt, salt_, config_.cache);
  out.prediction.input_tokens =
      built->input_tokens_exact ? static_cast<int64_t>(built->input_tokens) : blocks->prompt_tokens;
  out.prediction.input_tokens_exact = built->input_tokens_exact;
  out.prediction.predicted_cached_tokens = model_->Lookup(*blocks);
  out.built = std::move(built).value();
  return out;
}

StatusOr<CachePrediction> Agent::Impl::Predict() const {
  STRATA_ASSIGN_OR_RETURN(NextRequest next, Next(Fields("predict")));
  context_->Recycle(std::move(next.built.body));  // the next render writes there
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
  STRATA_ASSIGN_OR_RETURN(size_t tokens, context_->CountRequest(Fields("count")));
  return static_cast<int64_t>(tokens);
}

}  // namespace strata
