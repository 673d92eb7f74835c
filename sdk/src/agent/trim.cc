// TrimMessages: a stateless, one-call trimmer for callers who keep their own message list.
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/utf8.h"
#include "strata/agent.h"
#include "strata/builtin_policies.h"
#include "strata/chat_template.h"
#include "strata/tokenizer_spec.h"

namespace strata {
namespace {

using json = nlohmann::json;

StatusOr<std::string> TextOf(const json& message, size_t index, const char* key) {
  auto it = message.find(key);
  if (it == message.end() || it->is_null()) return std::string();
  if (!it->is_string()) {
    return InvalidArgumentError("messages[" + std::to_string(index) + "]." + key +
                                ": expected a string (content parts are not supported), got " +
                                internal::Utf8Prefix(it->dump(), 60));
  }
  return it->get<std::string>();
}

// Appends messages[i] (`m`) to the context; a system or developer message goes to *system
// instead (they are set together, first). INVALID_ARGUMENT naming the message.
Status AppendMessage(const json& m, size_t i, Context* context, std::vector<std::string>* system) {
  const std::string where = "messages[" + std::to_string(i) + "]";
  if (!m.is_object() || !m.contains("role") || !m["role"].is_string()) {
    return InvalidArgumentError(where + ": expected an object with a \"role\" string");
  }
  const std::string role = m["role"].get<std::string>();
  STRATA_ASSIGN_OR_RETURN(std::string content, TextOf(m, i, "content"));
  Status status;
  if (role == "system" || role == "developer") {
    system->push_back(std::move(content));  // system messages go first, in their order
  } else if (role == "user") {
    status = context->AppendUser(std::move(content)).status();
  } else if (role == "assistant") {
    AssistantMessage message;
    message.content = std::move(content);
    STRATA_ASSIGN_OR_RETURN(message.reasoning, TextOf(m, i, "reasoning_content"));
    if (m.contains("tool_calls") && m["tool_calls"].is_array()) {
      for (const json& call : m["tool_calls"]) {
        if (!call.is_object() || !call.contains("function") || !call["function"].is_object()) {
          return InvalidArgumentError(where + ".tool_calls: each call needs a \"function\" object");
        }
        const json& function = call["function"];
        ToolCall c;
        c.id = call.value("id", "");
        c.name = function.value("name", "");
        if (function.contains("arguments")) {
          c.arguments = function["arguments"].is_string() ? function["arguments"].get<std::string>()
                                                          : function["arguments"].dump();
        }
        message.tool_calls.push_back(std::move(c));
      }
    }
    status = context->AppendAssistant(std::move(message)).status();
  } else if (role == "tool") {
    ToolResult result;
    result.tool_call_id = m.value("tool_call_id", "");
    result.content = std::move(content);
    status = context->AppendToolResult(std::move(result)).status();
  } else {
    return InvalidArgumentError(where + ": unknown role \"" + role +
                                "\" (system, developer, user, assistant, tool)");
  }
  if (!status.ok()) return Status(status.code(), where + ": " + status.message());
  return Status::Ok();
}

}  // namespace

StatusOr<TrimResult> TrimMessages(std::string_view messages_json, const Budget& budget,
                                  const TrimOptions& options) {
  json messages = json::parse(messages_json.begin(), messages_json.end(), nullptr, false);
  if (!messages.is_array()) {
    return InvalidArgumentError("TrimMessages: expected a JSON array of chat messages, got " +
                                internal::Utf8Prefix(messages_json, 60));
  }
  STRATA_RETURN_IF_ERROR(budget.Validate());
  STRATA_ASSIGN_OR_RETURN(std::unique_ptr<Tokenizer> tokenizer, MakeTokenizer(options.tokenizer));
  std::unique_ptr<ChatTemplate> chat_template;
  if (!options.chat_template.empty()) {
    StatusOr<std::unique_ptr<ChatTemplate>> made = MakeChatTemplate(options.chat_template);
    if (!made.ok()) {
      return InvalidArgumentError("TrimOptions::chat_template: " + made.status().message() +
                                  " (or \"\" for none)");
    }
    chat_template = std::move(made).value();
  }
  std::unique_ptr<RequestTokenCounter> counter;
  if (chat_template) counter = MakeRequestTokenCounter(*chat_template, *tokenizer);
  STRATA_ASSIGN_OR_RETURN(std::unique_ptr<CompactionPolicy> policy,
                          MakePolicyByName(options.policy));
  if (options.policy == "strata") {
    // One stateless call: a list that fits is returned unchanged, so no masking after use (a cache
    // optimization for a session that goes on).
    StrataPolicyOptions strata_options;
    strata_options.mask_after_use = false;
    policy = MakeStrataPolicy(strata_options);
  }

  ContextOptions context_options;
  context_options.agent.id = "trim";
  context_options.tokenizer = tokenizer.get();
  context_options.budget = budget;
  context_options.compaction = policy.get();
  context_options.request_counter = counter.get();
  context_options.keep_originals = false;
  context_options.render.reasoning_field = "reasoning_content";
  if (!options.hygiene) {
    context_options.hygiene.max_segment_tokens = 0;
    context_options.hygiene.deduplicate = false;
    context_options.hygiene.fold_error_logs = false;
  }
  STRATA_ASSIGN_OR_RETURN(std::unique_ptr<Context> context, Context::Create(context_options));

  std::vector<std::string> system;
  for (size_t i = 0; i < messages.size(); ++i) {
    STRATA_RETURN_IF_ERROR(AppendMessage(messages[i], i, context.get(), &system));
  }
  if (!system.empty()) STRATA_RETURN_IF_ERROR(context->SetSystemPrompts(std::move(system)));
  STRATA_ASSIGN_OR_RETURN(BuiltRequest built, context->Build());
  json body = json::parse(built.body, nullptr, false);
  TrimResult result;
  result.messages_json =
      body.is_object() && body.contains("messages") ? body["messages"].dump() : "[]";
  result.input_tokens = static_cast<int64_t>(built.input_tokens);
  result.report = built.compaction;
  return result;
}

}  // namespace strata
