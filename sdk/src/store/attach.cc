// Contexts attached to a Store: CreateContext, OpenContext, GrowthPointOf (strata/store.h).
#include <utility>

#include "strata/store.h"

namespace strata {

StatusOr<std::unique_ptr<Context>> CreateContext(Store& store, ContextOptions options) {
  // Validate the options before anything is written, so a refused context leaves no agent behind.
  {
    ContextOptions probe = options;
    probe.journal = nullptr;
    STRATA_ASSIGN_OR_RETURN(std::unique_ptr<Context> unused, Context::Create(std::move(probe)));
    (void)unused;
  }
  STRATA_RETURN_IF_ERROR(store.CreateAgent(options));
  options.journal = store.Journal(options.agent.id);
  return Context::Create(std::move(options));
}

StatusOr<std::unique_ptr<Context>> OpenContext(Store& store, std::string_view agent_id,
                                               ContextOptions options) {
  if (!options.agent.id.empty() && options.agent.id != agent_id) {
    return InvalidArgumentError("OpenContext: options.agent.id \"" + options.agent.id +
                                "\" differs from the agent to open \"" + std::string(agent_id) +
                                "\"");
  }
  options.agent.id = std::string(agent_id);
  STRATA_ASSIGN_OR_RETURN(ContextSnapshot snapshot, store.LoadSnapshot(agent_id));
  options.journal = store.Journal(agent_id);
  StatusOr<std::unique_ptr<Context>> context =
      Context::Restore(std::move(options), std::move(snapshot));
  if (!context.ok() && context.status().code() == StatusCode::kInvalidArgument) {
    return DataLossError("stored context of agent \"" + std::string(agent_id) + "\" in " +
                         store.path() + " does not restore: " + context.status().message());
  }
  return context;
}

StatusOr<std::unique_ptr<Context>> OpenContext(Store& store, std::string_view agent_id,
                                               const Tokenizer* tokenizer) {
  STRATA_ASSIGN_OR_RETURN(StoredAgent agent, store.GetAgent(agent_id));
  ContextOptions options = std::move(agent.options);
  options.tokenizer = tokenizer;
  return OpenContext(store, agent_id, std::move(options));
}

GrowthPoint GrowthPointOf(const Context& context, int64_t compactions, int64_t invalidated_tokens) {
  ContextStats stats = context.Stats();
  GrowthPoint point;
  point.agent_id = context.options().agent.id;
  point.turn = static_cast<int64_t>(stats.turns);
  for (int i = 0; i < kLayerCount; ++i) {
    point.layer_tokens[i] = static_cast<int64_t>(stats.layers[i].tokens);
  }
  point.compactions = compactions;
  point.invalidated_tokens = invalidated_tokens;
  return point;
}

}  // namespace strata
