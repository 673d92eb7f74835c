// strata/isolation.h — deriving the request's cache_salt from the isolation key.
//
// Model servers (vLLM, SGLang) share prefix-cache blocks only between requests with the same
// `cache_salt`. strata derives the salt with HMAC-SHA256 under a per-deployment secret from the
// isolation key (tenant, model version, template version, permission scope), so two tenants or
// two scopes never share cache blocks, and the salt reveals nothing about the key without the
// secret. A sensitive agent may get a salt of its own (the agent id joins the key).
//
//   strata::IsolationKey key = strata::IsolationKeyOf(agent);  // or fill the fields yourself
//   std::string salt = strata::DeriveCacheSalt(secret, key);   // 64 hex digits
//
// Thread safety: pure functions.
#ifndef STRATA_ISOLATION_H_
#define STRATA_ISOLATION_H_

#include <string>
#include <string_view>

#include "strata/context.h"

namespace strata {

// What may share cache blocks: requests with equal keys get the same cache_salt.
struct IsolationKey {
  std::string tenant;  // the agent's tenant (AgentIdentity::tenant)
  std::string model_version;  // AgentIdentity::model_version
  std::string template_version;  // AgentIdentity::template_version
  std::string scope;  // the agent's scope (AgentIdentity::scope)
  // Non-empty only for agents that must not share cache blocks with any other agent.
  std::string agent_id;
};

// The key of an agent; `per_agent` adds the agent id (for sensitive agents).
IsolationKey IsolationKeyOf(const AgentIdentity& agent, bool per_agent = false);

// HMAC-SHA256(secret, length-prefixed fields of the key), lower-case hex (64 digits). The fields
// are length-prefixed so ("ab","c") and ("a","bc") differ. An empty secret is allowed (tests) but
// makes the salt guessable: deployments set one.
std::string DeriveCacheSalt(std::string_view secret, const IsolationKey& key);

}  // namespace strata

#endif  // STRATA_ISOLATION_H_
