// The compaction policy an AgentPolicyConfig names, with its knobs checked (private to
// strata::agent).
#ifndef STRATA_SRC_AGENT_POLICY_CONFIG_H_
#define STRATA_SRC_AGENT_POLICY_CONFIG_H_

#include <memory>

#include "strata/agent.h"
#include "strata/builtin_policies.h"
#include "strata/compaction_policy.h"

namespace strata::agent_internal {

// The StrataPolicyOptions of `config` (every knob copied), writing summaries with `summarizer`.
StrataPolicyOptions StrataOptionsOf(const AgentPolicyConfig& config, Summarizer* summarizer);

// INVALID_ARGUMENT naming the field ("policy.cached_price") and its value for a knob out of range:
// a price, the prior or the margin negative or not finite, uncached_price 0, tokens_per_identifier
// or placeholder_identifiers 0.
Status CheckPolicyConfig(const AgentPolicyConfig& config);

// The policy `config` names (checked first); INVALID_ARGUMENT for an unknown name, listing them.
StatusOr<std::unique_ptr<CompactionPolicy>> MakeConfiguredPolicy(const AgentPolicyConfig& config,
                                                                 Summarizer* summarizer);

}  // namespace strata::agent_internal

#endif  // STRATA_SRC_AGENT_POLICY_CONFIG_H_
