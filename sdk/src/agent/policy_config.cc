// The compaction policy an AgentPolicyConfig names (policy_config.h).
#include "agent/policy_config.h"

#include <cmath>
#include <set>
#include <string>

namespace strata::agent_internal {
namespace {

std::string Number(double value) {
  std::string text = std::to_string(value);
  while (text.size() > 1 && text.back() == '0') text.pop_back();
  if (!text.empty() && text.back() == '.') text.pop_back();
  return text;
}

Status CheckNumber(const char* field, double value, bool zero_allowed) {
  if (std::isfinite(value) && (value > 0 || (zero_allowed && value == 0))) return Status::Ok();
  return InvalidArgumentError(
      std::string("policy.") + field + " is " + Number(value) +
      (zero_allowed ? "; it must be a finite number >= 0" : "; it must be a finite number > 0"));
}

}  // namespace

StrataPolicyOptions StrataOptionsOf(const AgentPolicyConfig& p, Summarizer* summarizer) {
  StrataPolicyOptions o;
  o.keep_turns = p.keep_turns;
  o.keep_tool_results = p.keep_tool_results;
  o.keep_first_user = p.keep_first_user;
  o.exclude_tools = std::set<std::string>(p.exclude_tools.begin(), p.exclude_tools.end());
  o.ephemeral_tools = std::set<std::string>(p.ephemeral_tools.begin(), p.ephemeral_tools.end());
  o.placeholder_identifiers = p.placeholder_identifiers;
  o.tokens_per_identifier = p.tokens_per_identifier;
  o.max_summary_tokens = p.max_summary_tokens;
  o.summarizer = summarizer;
  o.cost_model = p.cost_model;
  o.uncached_price = p.uncached_price;
  o.cached_price = p.cached_price;
  o.prior_remaining_turns = p.prior_remaining_turns;
  o.prior_weight = p.prior_weight;
  o.below_trigger_margin = p.below_trigger_margin;
  o.use_window_turns = p.use_window_turns;
  o.mask_after_use = p.mask_after_use;
  return o;
}

Status CheckPolicyConfig(const AgentPolicyConfig& p) {
  STRATA_RETURN_IF_ERROR(CheckNumber("uncached_price", p.uncached_price, false));
  STRATA_RETURN_IF_ERROR(CheckNumber("cached_price", p.cached_price, true));
  STRATA_RETURN_IF_ERROR(CheckNumber("prior_remaining_turns", p.prior_remaining_turns, true));
  STRATA_RETURN_IF_ERROR(CheckNumber("prior_weight", p.prior_weight, true));
  STRATA_RETURN_IF_ERROR(CheckNumber("below_trigger_margin", p.below_trigger_margin, true));
  if (p.placeholder_identifiers == 0 || p.tokens_per_identifier == 0) {
    return InvalidArgumentError(
        "policy.placeholder_identifiers (" + std::to_string(p.placeholder_identifiers) +
        ") and policy.tokens_per_identifier (" + std::to_string(p.tokens_per_identifier) +
        ") must be > 0 (defaults 64 and 32)");
  }
  return Status::Ok();
}

StatusOr<std::unique_ptr<CompactionPolicy>> MakeConfiguredPolicy(const AgentPolicyConfig& p,
                                                                 Summarizer* summarizer) {
  STRATA_RETURN_IF_ERROR(CheckPolicyConfig(p));
  if (p.name == "strata") return MakeStrataPolicy(StrataOptionsOf(p, summarizer));
  if (p.name == "none") return MakeNoCompactionPolicy();
  if (p.name == "sliding") return MakeSlidingWindowPolicy();
  if (p.name == "last-n") return MakeLastNPolicy(p.last_n);
  // The baselines users run elsewhere, with their documented defaults (builtin_policies.h).
  if (p.name == "clear-tool-uses" || p.name == "observation-masking") {
    return MakePolicyByName(p.name);
  }
  return InvalidArgumentError(
      "policy.name \"" + p.name +
      "\" is not a policy (strata, none, sliding, last-n, clear-tool-uses, observation-masking)");
}

}  // namespace strata::agent_internal
