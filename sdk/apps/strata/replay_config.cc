#include "replay_config.h"

#include <filesystem>
#include <set>

#include "replay_common.h"
#include "strata/store.h"
#include "strata/transport.h"

namespace strata::cli {
namespace {

// The policies AgentPolicyConfig names (strata/agent.h).
const std::set<std::string> kAgentPolicies = {"strata",  "none",           "sliding",
                                              "last-n", "clear-tool-uses", "observation-masking"};

// A tokenizer spec whose file path is absolute, so that the stored agent opens from any directory
// ("hf:PATH", "spm:PATH"; other specs as given).
std::string AbsoluteSpec(const std::string& spec) {
  for (const char* scheme : {"hf:", "spm:"}) {
    const std::string prefix = scheme;
    if (spec.compare(0, prefix.size(), prefix) != 0) continue;
    std::error_code error;
    const std::filesystem::path path = std::filesystem::absolute(spec.substr(prefix.size()), error);
    return error ? spec : prefix + path.lexically_normal().string();
  }
  return spec;
}

std::vector<std::string> SplitNames(const std::string& text) {
  std::vector<std::string> out;
  size_t at = 0;
  while (at <= text.size()) {
    size_t end = text.find(',', at);
    if (end == std::string::npos) end = text.size();
    if (end > at) out.push_back(text.substr(at, end - at));
    at = end + 1;
  }
  return out;
}

}  // namespace

std::optional<AgentConfig> ReplayAgentConfig(const ContextOptions& options, const ReplayBudgetArgs& budget,
                                             const std::string& tokenizer_spec, const std::string& db_path,
                                             const ReplaySendArgs& send) {
  const std::string policy = budget.budget > 0 ? budget.policy : "none";
  if (kAgentPolicies.count(policy) == 0) return std::nullopt;
  AgentConfig config;
  config.identity = options.agent;
  // Without --tokenizer the replay counts with the context's own estimate (4 bytes per token, no
  // chat template).
  config.tokenizer = tokenizer_spec.empty() ? "estimate" : AbsoluteSpec(tokenizer_spec);
  config.chat_template = tokenizer_spec.empty() ? "" : "glm5";
  config.budget.enforce = budget.budget > 0;
  if (budget.budget > 0) {
    config.budget.window = static_cast<int64_t>(budget.budget);
    config.budget.reserve_output = config.budget.reserve_reasoning = config.budget.reserve_headroom = 0;
    config.budget.trigger = BudgetLimit::Fraction(budget.trigger);
    config.budget.target = BudgetLimit::Fraction(budget.target);
  }
  config.policy.name = policy;
  config.policy.keep_turns = budget.keep_turns;
  config.policy.keep_tool_results = budget.keep_tool_results;
  config.policy.exclude_tools = SplitNames(budget.exclude_tools);
  config.policy.ephemeral_tools = SplitNames(budget.ephemeral_tools);
  config.policy.last_n = 5;  // MakePolicyByName's last-n
  config.hygiene = options.hygiene;
  config.render = options.render;
  config.keep_originals = options.keep_originals;
  config.message_overhead_tokens = options.message_overhead_tokens;
  // The replay exposes no context_recall tool: an agent that added one would change the request.
  config.recall.expose_tool = false;
  if (send.send && !send.grpc) {
    config.endpoint.backend = send.backend;
    config.endpoint.base_url = RedactUrl(send.endpoint);  // credentials are never stored
  }
  std::error_code error;
  const std::filesystem::path db = std::filesystem::absolute(db_path, error);
  config.store_path =
      error || IsPostgresUrl(db_path) ? db_path : db.lexically_normal().string();
  return config;
}

}  // namespace strata::cli
