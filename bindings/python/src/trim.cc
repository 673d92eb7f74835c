// strata.trim_messages: an OpenAI messages list trimmed into a budget by a compaction policy, run
// through a Context like strata::TrimMessages (sdk/src/agent/trim.cc), with what Python callers
// need on top: a tokenizer loaded once (passed in), content-part lists, and the kept messages
// returned as the caller gave them. This returns, instead of the rendered messages, which input
// message each kept one is (so the Python side returns the caller's own dict, every key kept), and
// what a compaction changed in it (a masked content, a dropped reasoning), or a message of its own
// (a summary).
#include <algorithm>
#include <memory>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "common.h"

#include "strata/builtin_policies.h"
#include "strata/chat_template.h"
#include "strata/context.h"
#include "strata/status.h"
#include "strata/tokenizer.h"

namespace strata_py {
namespace {

std::string Where(size_t i) { return "messages[" + std::to_string(i) + "]"; }

// The text a message's `key` is counted as: a string as is; a content-part list's text parts
// joined, and each other part (an image, audio) as its JSON text, which is what a template that
// cannot render it would be sent.
strata::StatusOr<std::string> TextOf(const json& message, size_t i, const char* key) {
  auto it = message.find(key);
  if (it == message.end() || it->is_null()) return std::string();
  if (it->is_string()) return it->get<std::string>();
  if (it->is_array()) {
    std::string text;
    for (const json& part : *it) {
      if (part.is_object() && part.value("type", "") == "text" && part.contains("text") &&
          part["text"].is_string()) {
        text += part["text"].get<std::string>();
      } else if (part.is_object() && part.contains("type")) {
        text += part.dump();
      } else {
        return strata::InvalidArgumentError(
            Where(i) + "." + key + ": a content part must be an object with a \"type\" (" +
            part.dump().substr(0, 60) + ")");
      }
    }
    return text;
  }
  return strata::InvalidArgumentError(Where(i) + "." + key +
                                      ": expected a string or a list of content parts, got " +
                                      it->dump().substr(0, 60));
}

strata::StatusOr<strata::AssistantMessage> Assistant(const json& m, size_t i) {
  strata::AssistantMessage message;
  STRATA_ASSIGN_OR_RETURN(message.content, TextOf(m, i, "content"));
  STRATA_ASSIGN_OR_RETURN(message.reasoning, TextOf(m, i, "reasoning_content"));
  if (m.contains("tool_calls") && m["tool_calls"].is_array()) {
    for (const json& call : m["tool_calls"]) {
      if (!call.is_object() || !call.contains("function") || !call["function"].is_object()) {
        return strata::InvalidArgumentError(Where(i) +
                                            ".tool_calls: each call needs a \"function\" object");
      }
      const json& function = call["function"];
      strata::ToolCall c;
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

// Appends messages[i] to the context and returns its segment id ("" for a system message, which
// goes to *system: they are set together, first).
strata::StatusOr<std::string> Append(const json& m, size_t i, strata::Context* context,
                                     std::vector<std::string>* system) {
  if (!m.is_object() || !m.contains("role") || !m["role"].is_string()) {
    return strata::InvalidArgumentError(Where(i) + ": expected an object with a \"role\" string");
  }
  const std::string role = m["role"].get<std::string>();
  strata::StatusOr<std::string> id = std::string();
  if (role == "system" || role == "developer") {
    STRATA_ASSIGN_OR_RETURN(std::string content, TextOf(m, i, "content"));
    system->push_back(std::move(content));
    return std::string();
  } else if (role == "user") {
    STRATA_ASSIGN_OR_RETURN(std::string content, TextOf(m, i, "content"));
    id = context->AppendUser(std::move(content));
  } else if (role == "assistant") {
    STRATA_ASSIGN_OR_RETURN(strata::AssistantMessage message, Assistant(m, i));
    id = context->AppendAssistant(std::move(message));
  } else if (role == "tool") {
    strata::ToolResult result;
    result.tool_call_id = m.value("tool_call_id", "");
    STRATA_ASSIGN_OR_RETURN(result.content, TextOf(m, i, "content"));
    id = context->AppendToolResult(std::move(result));
  } else {
    return strata::InvalidArgumentError(Where(i) + ": unknown role \"" + role +
                                        "\" (system, developer, user, assistant, tool)");
  }
  if (!id.ok()) return strata::Status(id.status().code(), Where(i) + ": " + id.status().message());
  return id;
}

strata::StatusOr<std::unique_ptr<strata::CompactionPolicy>> Policy(const std::string& name) {
  if (name == "strata") {
    // One stateless call: a list that fits is returned unchanged, so no masking after use (a
    // cache optimization for a session that goes on).
    strata::StrataPolicyOptions options;
    options.mask_after_use = false;
    return strata::MakeStrataPolicy(options);
  }
  return strata::MakePolicyByName(name);
}

// Each rendered history segment paired with its message of the built body (the body's last
// messages are the history's, in order), as the "kept" entries the Python side assembles.
json KeptEntries(const strata::Context& context, const json& body_messages,
                 const std::unordered_map<std::string, size_t>& index_of, const json& messages,
                 const std::vector<size_t>& system_indices) {
  json kept = json::array();
  for (size_t i : system_indices) kept.push_back({{"i", i}});
  std::vector<strata::Segment> rendered;
  for (strata::Segment& s : context.Segments()) {
    if (s.layer == strata::Layer::kHistory && (s.state == strata::SegmentState::kLive ||
                                               s.state == strata::SegmentState::kMasked)) {
      rendered.push_back(std::move(s));
    }
  }
  const size_t first = body_messages.size() - std::min(body_messages.size(), rendered.size());
  for (size_t k = 0; k < rendered.size(); ++k) {
    const strata::Segment& s = rendered[k];
    const json& body_message = body_messages[first + k];
    auto found = index_of.find(s.id);
    if (found == index_of.end()) {  // a summary: strata's own message
      kept.push_back({{"message", body_message}});
      continue;
    }
    json entry = {{"i", found->second}};
    const json& original = messages[found->second];
    if (s.state == strata::SegmentState::kMasked) entry["content"] = body_message.value("content", "");
    if (s.reasoning.empty() && original.contains("reasoning_content") &&
        !original["reasoning_content"].is_null()) {
      entry["drop"] = json::array({"reasoning_content"});
    }
    kept.push_back(std::move(entry));
  }
  return kept;
}

}  // namespace

strata::StatusOr<std::string> TrimMessagesJson(const std::string& messages_json,
                                               const std::string& budget_json,
                                               const std::string& policy_name,
                                               const strata::Tokenizer& tokenizer,
                                               const std::string& chat_template_name, bool hygiene) {
  json messages = json::parse(messages_json, nullptr, false);
  if (!messages.is_array()) {
    return strata::InvalidArgumentError("trim_messages: expected a list of chat messages");
  }
  STRATA_ASSIGN_OR_RETURN(strata::AgentConfig config, ConfigWith("budget", budget_json));
  STRATA_ASSIGN_OR_RETURN(strata::Budget budget, strata::ResolveBudget(config.budget));
  std::unique_ptr<strata::ChatTemplate> chat_template;
  if (!chat_template_name.empty()) {
    strata::StatusOr<std::unique_ptr<strata::ChatTemplate>> made =
        strata::MakeChatTemplate(chat_template_name);
    if (!made.ok()) {
      return strata::InvalidArgumentError("trim_messages: chat_template: " +
                                          made.status().message() + " (or \"\" for none)");
    }
    chat_template = std::move(made).value();
  }
  std::unique_ptr<strata::RequestTokenCounter> counter;
  if (chat_template) counter = strata::MakeRequestTokenCounter(*chat_template, tokenizer);
  STRATA_ASSIGN_OR_RETURN(std::unique_ptr<strata::CompactionPolicy> policy, Policy(policy_name));

  strata::ContextOptions options;
  options.agent.id = "trim";
  options.tokenizer = &tokenizer;
  options.budget = budget;
  options.compaction = policy.get();
  options.request_counter = counter.get();
  options.keep_originals = false;
  options.render.reasoning_field = "reasoning_content";
  if (!hygiene) {
    options.hygiene.max_segment_tokens = 0;
    options.hygiene.deduplicate = false;
    options.hygiene.fold_error_logs = false;
  }
  STRATA_ASSIGN_OR_RETURN(std::unique_ptr<strata::Context> context,
                          strata::Context::Create(options));
  std::vector<std::string> system;
  std::vector<size_t> system_indices;
  std::unordered_map<std::string, size_t> index_of;
  for (size_t i = 0; i < messages.size(); ++i) {
    STRATA_ASSIGN_OR_RETURN(std::string id, Append(messages[i], i, context.get(), &system));
    if (id.empty()) system_indices.push_back(i);
    else index_of.emplace(std::move(id), i);
  }
  if (!system.empty()) STRATA_RETURN_IF_ERROR(context->SetSystemPrompts(std::move(system)));
  STRATA_ASSIGN_OR_RETURN(strata::BuiltRequest built, context->Build());
  json body = json::parse(built.body, nullptr, false);
  const json body_messages = body.is_object() && body.contains("messages") ? body["messages"]
                                                                            : json::array();
  return json{{"kept", KeptEntries(*context, body_messages, index_of, messages, system_indices)},
              {"input_tokens", built.input_tokens},
              {"report", built.compaction ? ReportJson(*built.compaction) : json()}}
      .dump();
}

}  // namespace strata_py
