// GET /v1/strata/agents/{id}/recall/{recall_id}: the originals behind the markers hygiene and
// compaction leave in a proxied conversation (proxy.h Proxy::Recall).
#include <algorithm>
#include <cctype>
#include <nlohmann/json.hpp>

#include "core/utf8.h"
#include "proxy.h"
#include "proxy_recall.h"
#include "strata/compaction_policy.h"
#include "strata/context.h"

namespace strata::sidecar {
namespace {

// A query parameter's value as a non-negative integer; `fallback` when absent.
StatusOr<size_t> QueryNumber(std::string_view value, std::string_view name, size_t fallback) {
  if (value.empty()) return fallback;
  if (value.size() > 12 ||
      !std::all_of(value.begin(), value.end(), [](char c) { return std::isdigit(c) != 0; })) {
    return InvalidArgumentError(std::string(name) + "=\"" +
                                internal::Utf8Prefix(value, 40, "...") +
                                "\" is not a non-negative integer");
  }
  return static_cast<size_t>(std::stoull(std::string(value)));
}

}  // namespace

nlohmann::json WantedTools(const nlohmann::json& client_tools, bool recall_tool) {
  if (!recall_tool) return client_tools;
  nlohmann::json tools = nlohmann::json::array({nlohmann::json::parse(RecallToolSchema())});
  for (const nlohmann::json& tool : client_tools) tools.push_back(tool);
  return tools;
}

bool HasWantedTools(const Agent& agent, const ChatTools& client_tools, bool recall_tool) {
  static const std::string kRecallTool = nlohmann::json::parse(RecallToolSchema()).dump();
  const std::vector<const Segment*> tools = agent.context().LayerSegments(Layer::kTools);
  const size_t first = recall_tool ? 1 : 0;
  if (tools.size() != first + client_tools.dumps.size()) return false;
  if (recall_tool && tools[0]->content != kRecallTool) return false;
  for (size_t i = 0; i < client_tools.dumps.size(); ++i) {
    if (tools[first + i]->content != client_tools.dumps[i]) return false;
  }
  return true;
}

bool OnlyRecallCalls(const Response& response) {
  if (response.tool_calls.empty()) return false;
  for (const ToolCall& c : response.tool_calls) {
    if (c.name != kRecallToolName) return false;
  }
  return true;
}

Status AnswerRecallCalls(Agent& agent, const Response& response) {
  for (const ToolCall& c : response.tool_calls) {
    STRATA_RETURN_IF_ERROR(agent.context().AnswerRecall(c.id).status());
  }
  return Status::Ok();
}

HttpReply Proxy::Recall(const TenantConfig& tenant, std::string_view agent_id,
                        std::string_view recall_id, std::string_view offset,
                        std::string_view max_tokens) {
  auto fail = [this, &tenant](const Status& status) {
    if (options_.on_error) options_.on_error(tenant.name, status.code());
    return ErrorReply(status);
  };
  if (Status valid = CheckAgentId(std::string(agent_id), "agent id"); !valid.ok()) {
    return fail(valid);
  }
  if (recall_id.empty()) return fail(InvalidArgumentError("the recall id is empty"));
  StatusOr<size_t> from = QueryNumber(offset, "offset", 0);
  if (!from.ok()) return fail(from.status());
  StatusOr<size_t> cap = QueryNumber(max_tokens, "max_tokens", 0);
  if (!cap.ok()) return fail(cap.status());
  StatusOr<AgentLease> lease = options_.registry->Acquire(tenant, agent_id);
  if (!lease.ok()) return fail(lease.status());
  StatusOr<RecallPage> page = lease->agent().Recall(recall_id, *from, *cap);
  if (!page.ok()) return fail(page.status());
  HttpReply reply;
  reply.body = internal::DumpOutsideJson(nlohmann::json{
      {"object", "strata.recall"},
      {"agent", std::string(agent_id)},
      {"recall_id", page->recall_id},
      {"content", page->content},
      {"offset", page->offset},
      {"total_bytes", page->total_bytes},
      {"remaining_bytes", page->remaining_bytes},
      {"tokens", page->tokens}});
  return reply;
}

}  // namespace strata::sidecar
