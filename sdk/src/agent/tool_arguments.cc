// The model's tool-call arguments as the agent keeps them (tool_arguments.h).
#include "agent/tool_arguments.h"

#include <nlohmann/json.hpp>
#include <utility>

#include "core/utf8.h"

namespace strata::agent_internal {

std::vector<ToolCall> KeepableToolCalls(std::vector<ToolCall> calls) {
  for (ToolCall& call : calls) {
    if (call.arguments.empty()) continue;
    const nlohmann::json parsed = nlohmann::json::parse(call.arguments, nullptr, false);
    if (!parsed.is_discarded() && parsed.is_object()) continue;
    call.arguments =
        internal::DumpOutsideJson(nlohmann::json{{kUnparsedArgumentsKey, call.arguments}});
  }
  return calls;
}

std::optional<std::string> UnparsedArguments(const std::string& arguments) {
  const nlohmann::json parsed = nlohmann::json::parse(arguments, nullptr, false);
  if (parsed.is_discarded() || !parsed.is_object() || parsed.size() != 1) return std::nullopt;
  const auto it = parsed.find(kUnparsedArgumentsKey);
  if (it == parsed.end() || !it->is_string()) return std::nullopt;
  return it->get<std::string>();
}

}  // namespace strata::agent_internal
