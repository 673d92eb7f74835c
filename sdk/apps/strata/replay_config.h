// The agent configuration `strata replay --db` stores with the replayed agent: the AgentConfig an
// Agent stores (strata/agent.h, AgentConfigToJson), made from the replay's options, so that
// `strata inspect --json` shows it and Agent::Open (or `strata run`) continues the agent with the
// budget, policy and its knobs, tokenizer, chat template, hygiene and render options the replay
// used.
#ifndef STRATA_APPS_STRATA_REPLAY_CONFIG_H_
#define STRATA_APPS_STRATA_REPLAY_CONFIG_H_

#include <optional>
#include <string>

#include "replay_budget.h"
#include "replay_send.h"
#include "strata/agent.h"
#include "strata/context.h"

namespace strata::cli {

// The configuration of a replay whose context was made with `options` (the final agent id), the
// budget arguments, the tokenizer spec of --tokenizer ("" for the context's own estimate, counted
// without a chat template), the store path and the send arguments (their HTTP endpoint becomes
// the configuration's base URL, without credentials). std::nullopt when an Agent could not run
// the replay's policy (the clear-tool-uses and observation-masking baselines): nothing is stored
// then.
std::optional<AgentConfig> ReplayAgentConfig(const ContextOptions& options, const ReplayBudgetArgs& budget,
                                             const std::string& tokenizer_spec, const std::string& db_path,
                                             const ReplaySendArgs& send);

}  // namespace strata::cli

#endif  // STRATA_APPS_STRATA_REPLAY_CONFIG_H_
