// The model's tool-call arguments as the agent keeps them in its context (private to
// strata::agent).
#ifndef STRATA_SRC_AGENT_TOOL_ARGUMENTS_H_
#define STRATA_SRC_AGENT_TOOL_ARGUMENTS_H_

#include <optional>
#include <string>
#include <vector>

#include "strata/segment.h"

namespace strata::agent_internal {

// The key under which KeepableToolCalls keeps arguments that are not a JSON object.
inline constexpr char kUnparsedArgumentsKey[] = "unparsed_arguments";

// `calls` as the context keeps them: the chat templates (as vLLM's json.loads) render a call's
// arguments only when they are empty or a JSON object, so a model's call whose arguments are
// anything else (cut-off JSON, plain text) would make every later request unrenderable. Such
// arguments are kept as {"unparsed_arguments": "<the text>"} (invalid UTF-8 replaced), which
// renders and keeps every byte of what the model wrote; other calls are unchanged. Tool handlers
// (dispatched from the context) receive the kept form, which parses as JSON.
std::vector<ToolCall> KeepableToolCalls(std::vector<ToolCall> calls);

// The model's text when `arguments` is the form KeepableToolCalls keeps unparsable arguments in;
// else nullopt.
std::optional<std::string> UnparsedArguments(const std::string& arguments);

}  // namespace strata::agent_internal

#endif  // STRATA_SRC_AGENT_TOOL_ARGUMENTS_H_
