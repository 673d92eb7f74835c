// TrimMessages: a stateless, one-call trimmer for callers who keep their own message list. The
// Python binding's trim_messages is this function too.
#include <algorithm>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "core/utf8.h"
#include "strata/agent.h"
#include "strata/builtin_policies.h"
#include "strata/chat_template.h"
#include "strata/tokenizer_spec.h"

namespace strata {
namespace {

using json = nlohmann::json;

std::string Where(size_t index) { return "messages[" + std::to_string(index) + "]"; }

// The text a message's `key` is counted as: a string as is; a content-part list's text parts
// joined, and each other part (an image, audio) as its JSON text, which is what a template that
// cannot render it would be sent.
StatusOr<std::string> TextOf(const json& message, size_t index, const char* key) {
  auto it = message.find(key);
  if (it == message.end() || it->is_null()) return std::string();
  if (it->is_string()) return it->get<std::string>();
  if (!it->is_array()) {
    return InvalidArgumentError(Where(index) + "." + key +
                                ": expected a string or a list of content parts, got " +
                                internal::Utf8Prefix(it->dump(), 60));
  }
  std::string text;
  for (const json& part : *it) {
    if (part.is_object() && part.value("type", "") == "text" && part.contains("text") &&
        part["text"].is_string()) {
      text += part["text"].get<std::string>();
    } else if (part.is_object() && part.contains("type")) {
      text += part.dump();
    } else {
      return InvalidArgumentError(Where(index) + "." + key +
                                  ": a content part must be an object with a \"type\" (" +
                                  internal::Utf8Prefix(part.dump(), 60) + ")");
    }
  }
  return text;
}

StatusOr<AssistantMessage> Assistant(const json& m, size_t index) {
  AssistantMessage message;
  STRATA_ASSIGN_OR_RETURN(message.content, TextOf(m, index, "content"));
  STRATA_ASSIGN_OR_RETURN(message.reasoning, TextOf(m, index, "reasoning_content"));
  if (m.contains("tool_calls") && m["tool_calls"].is_array()) {
    for (const json& call : m["tool_calls"]) {
      if (!call.is_object() || !call.contains("function") || !call["function"].is_object()) {
        return InvalidArgumentError(Where(index) +
                                    ".tool_calls: each call needs a \"function\" object");
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
  return message;
}

// Appends messages[index] (`m`) to the context and returns its segment id; a system or developer
// message goes to *system instead (they are set together, first) and returns "".
// INVALID_ARGUMENT naming the message.
StatusOr<std::string> AppendMessage(const json& m, size_t index, Context* context,
                                    std::vector<std::string>* system) {
  if (!m.is_object() || !m.contains("role") || !m["role"].is_string()) {
    return InvalidArgumentError(Where(index) + ": expected an object with a \"role\" string");
  }
  const std::string role = m["role"].get<std::string>();
  StatusOr<std::string> id = std::string();
  if (role == "system" || role == "developer") {
    STRATA_ASSIGN_OR_RETURN(std::string content, TextOf(m, index, "content"));
    system->push_back(std::move(content));  // system messages go first, in their order
    return std::string();
  } else if (role == "user") {
    STRATA_ASSIGN_OR_RETURN(std::string content, TextOf(m, index, "content"));
    id = context->AppendUser(std::move(content));
  } else if (role == "assistant") {
    STRATA_ASSIGN_OR_RETURN(AssistantMessage message, Assistant(m, index));
    id = context->AppendAssistant(std::move(message));
  } else if (role == "tool") {
    ToolResult result;
    result.tool_call_id = m.value("tool_call_id", "");
    STRATA_ASSIGN_OR_RETURN(result.content, TextOf(m, index, "content"));
    id = context->AppendToolResult(std::move(result));
  } else {
    return InvalidArgumentError(Where(index) + ": unknown role \"" + role +
                                "\" (system, developer, user, assistant, tool)");
  }
  if (!id.ok()) return Status(id.status().code(), Where(index) + ": " + id.status().message());
  return id;
}

StatusOr<std::unique_ptr<CompactionPolicy>> Policy(const std::string& name) {
  if (name == "strata") {
    // One stateless call: a list that fits is returned unchanged, so no masking after use (a cache
    // optimization for a session that goes on).
    StrataPolicyOptions options;
    options.mask_after_use = false;
    return MakeStrataPolicy(options);
  }
  return MakePolicyByName(name);
}

// Which input message each rendered message is: the system messages first, then each history
// segment still rendered, paired with its message of the built body (the body's last messages are
// the history's, in order).
std::vector<TrimmedMessage> KeptMessages(const Context& context, const json& body_messages,
                                         const std::unordered_map<std::string, size_t>& index_of,
                                         const json& messages,
                                         const std::vector<size_t>& system_indices) {
  std::vector<TrimmedMessage> kept;
  for (size_t i : system_indices) kept.push_back({static_cast<int64_t>(i), std::nullopt, false, ""});
  std::vector<Segment> rendered;
  for (Segment& s : context.Segments()) {
    if (s.layer == Layer::kHistory &&
        (s.state == SegmentState::kLive || s.state == SegmentState::kMasked)) {
      rendered.push_back(std::move(s));
    }
  }
  const size_t first = body_messages.size() - std::min(body_messages.size(), rendered.size());
  for (size_t k = 0; k < rendered.size(); ++k) {
    const Segment& s = rendered[k];
    const json& body_message = body_messages[first + k];
    TrimmedMessage entry;
    auto found = index_of.find(s.id);
    if (found == index_of.end()) {  // a summary: strata's own message
      entry.message_json = body_message.dump();
      kept.push_back(std::move(entry));
      continue;
    }
    entry.input_index = static_cast<int64_t>(found->second);
    const json& original = messages[found->second];
    if (s.state == SegmentState::kMasked) entry.masked_content = body_message.value("content", "");
    entry.reasoning_dropped = s.reasoning.empty() && original.contains("reasoning_content") &&
                              !original["reasoning_content"].is_null();
    kept.push_back(std::move(entry));
  }
  return kept;
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
  std::unique_ptr<Tokenizer> own_tokenizer;
  const Tokenizer* tokenizer = options.counting_tokenizer;
  if (tokenizer == nullptr) {
    STRATA_ASSIGN_OR_RETURN(own_tokenizer, MakeTokenizer(options.tokenizer));
    tokenizer = own_tokenizer.get();
  }
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
  STRATA_ASSIGN_OR_RETURN(std::unique_ptr<CompactionPolicy> policy, Policy(options.policy));

  ContextOptions context_options;
  context_options.agent.id = "trim";
  context_options.tokenizer = tokenizer;
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
  std::vector<size_t> system_indices;
  std::unordered_map<std::string, size_t> index_of;
  for (size_t i = 0; i < messages.size(); ++i) {
    STRATA_ASSIGN_OR_RETURN(std::string id, AppendMessage(messages[i], i, context.get(), &system));
    if (id.empty()) {
      system_indices.push_back(i);
    } else {
      index_of.emplace(std::move(id), i);
    }
  }
  if (!system.empty()) STRATA_RETURN_IF_ERROR(context->SetSystemPrompts(std::move(system)));
  STRATA_ASSIGN_OR_RETURN(BuiltRequest built, context->Build());
  json body = json::parse(built.body, nullptr, false);
  const json body_messages =
      body.is_object() && body.contains("messages") ? body["messages"] : json::array();
  TrimResult result;
  result.messages_json = body_messages.dump();
  result.input_tokens = static_cast<int64_t>(built.input_tokens);
  result.report = built.compaction;
  result.kept = KeptMessages(*context, body_messages, index_of, messages, system_indices);
  return result;
}

}  // namespace strata
