// proxy_recall.h — the proxy's context_recall tool (ProxyOptions::recall_tool): offered upstream
// beside the client's tools and answered by the sidecar, as the Agent does.
//
// Thread safety: callers hold the agent's lease.
#ifndef STRATA_APPS_STRATA_SIDECAR_PROXY_RECALL_H_
#define STRATA_APPS_STRATA_SIDECAR_PROXY_RECALL_H_

#include <nlohmann/json.hpp>

#include "chat_body.h"
#include "strata/agent.h"

namespace strata::sidecar {

// The tools the agent should have for a request's `client_tools`: with `recall_tool`, the
// context_recall schema first, then the client's.
nlohmann::json WantedTools(const nlohmann::json& client_tools, bool recall_tool);
// Whether the agent's tools layer holds those tools already, compared as Context::SetTools keeps
// them (no tool is parsed).
bool HasWantedTools(const Agent& agent, const ChatTools& client_tools, bool recall_tool);

// True when the answer made tool calls and every one is context_recall.
bool OnlyRecallCalls(const Response& response);

// Appends the answer of each of `response`'s context_recall calls (Context::AnswerRecall).
Status AnswerRecallCalls(Agent& agent, const Response& response);

}  // namespace strata::sidecar

#endif  // STRATA_APPS_STRATA_SIDECAR_PROXY_RECALL_H_
