// An approximation of GLM's chat template, used to place block boundaries the way a server would
// until the exact template (strata::tokenize) is configured. Deterministic: the same body fields
// give the same text.
#include <nlohmann/json.hpp>

#include <string>

#include "strata/prefix_cache.h"

namespace strata {
namespace {

using nlohmann::json;

// Text of a message "content": a string, null, or an array of {type:"text", text} parts.
std::string ContentText(const json& message) {
  auto it = message.find("content");
  if (it == message.end() || it->is_null()) return "";
  if (it->is_string()) return it->get<std::string>();
  if (it->is_array()) {
    std::string text;
    for (const json& part : *it) {
      if (part.is_object()) {
        auto t = part.find("text");
        if (t != part.end() && t->is_string()) text += t->get<std::string>();
      } else if (part.is_string()) {
        text += part.get<std::string>();
      }
    }
    return text;
  }
  return it->dump();
}

std::string StringField(const json& object, const char* name) {
  auto it = object.find(name);
  if (it == object.end() || !it->is_string()) return "";
  return it->get<std::string>();
}

}  // namespace

StatusOr<PromptText> RenderPromptText(std::string_view request_body) {
  json body = json::parse(request_body.begin(), request_body.end(), nullptr, false);
  if (body.is_discarded() || !body.is_object()) {
    return InvalidArgumentError("request body is not a JSON object");
  }
  auto messages = body.find("messages");
  if (messages == body.end() || !messages->is_array()) {
    return InvalidArgumentError("request body has no \"messages\" array");
  }
  PromptText prompt;
  std::string& out = prompt.text;
  out = "[gMASK]<sop>";
  auto tools = body.find("tools");
  if (tools != body.end() && tools->is_array() && !tools->empty()) {
    out += "<|system|>\n# Tools\n";
    for (const json& tool : *tools) {
      out += tool.dump();  // std::map-backed: sorted keys, compact
      out += '\n';
    }
  }
  prompt.tools_bytes = out.size();
  for (const json& message : *messages) {
    prompt.message_offsets.push_back(out.size());
    if (!message.is_object()) continue;
    const std::string role = StringField(message, "role");
    if (role == "system" || role == "developer") {
      out += "<|system|>\n";
      out += ContentText(message);
    } else if (role == "user") {
      out += "<|user|>\n";
      out += ContentText(message);
    } else if (role == "assistant") {
      out += "<|assistant|>";
      std::string reasoning = StringField(message, "reasoning_content");
      if (reasoning.empty()) reasoning = StringField(message, "reasoning");
      out += "<think>";
      out += reasoning;
      out += "</think>\n";
      out += ContentText(message);
      auto calls = message.find("tool_calls");
      if (calls != message.end() && calls->is_array()) {
        for (const json& call : *calls) {
          const json* function = call.contains("function") ? &call["function"] : nullptr;
          out += "<tool_call>";
          if (function != nullptr) {
            out += StringField(*function, "name");
            out += '\n';
            auto args = function->find("arguments");
            if (args != function->end()) out += args->is_string() ? args->get<std::string>() : args->dump();
          }
          out += "</tool_call>";
        }
      }
    } else if (role == "tool") {
      out += "<|observation|><tool_response>";
      out += ContentText(message);
      out += "</tool_response>";
    } else {
      out += "<|" + role + "|>\n";
      out += ContentText(message);
    }
  }
  out += "<|assistant|>";
  return prompt;
}

}  // namespace strata
