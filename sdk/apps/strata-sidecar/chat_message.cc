// A chat message as the proxy reads it, and its digest (chat_message.h).
#include "chat_message.h"

#include <cctype>
#include <cmath>
#include <utility>

#include "core/json_text.h"
#include "core/text_util.h"
#include "core/utf8.h"

namespace strata::sidecar {
namespace {

using json = nlohmann::json;

// The first 16 bytes of the SHA-256 of `data`, as 32 hex digits.
std::string Sha256Hex32(std::string_view data) { return internal::Sha256Hex(data).substr(0, 32); }

// A JSON value in the one form every client's re-serialization of it comes back to: object keys
// sorted (nlohmann's objects are ordered maps), no insignificant whitespace, strings with their
// escapes resolved, numbers with an integral value written as integers (JavaScript writes 2.0 as
// 2). Recursion is bounded: a request body is checked to be at most 512 levels deep.
json CanonicalValue(json value) {
  if (value.is_object() || value.is_array()) {
    for (json& member : value) member = CanonicalValue(std::move(member));
  } else if (value.is_number_float()) {
    const double d = value.get<double>();
    if (std::isfinite(d) && d == std::floor(d) && std::fabs(d) < 9.0e15) {
      value = static_cast<int64_t>(d);
    }
  }
  return value;
}

std::string DigestOf(std::string_view role, std::string_view content,
                     const std::vector<ToolCall>& calls, std::string_view tool_call_id,
                     bool canonical) {
  // Length-prefixed fields: no separator inside a field can make two messages collide.
  std::string text;
  auto field = [&text](std::string_view value) {
    text += std::to_string(value.size());
    text += ':';
    text.append(value.data(), value.size());
  };
  field(role);
  field(content);
  field(std::to_string(calls.size()));
  for (const ToolCall& c : calls) {
    field(c.id);
    field(c.name);
    field(canonical ? CanonicalArguments(c.arguments) : c.arguments);
  }
  field(tool_call_id);
  return Sha256Hex32(text);
}

StatusOr<std::string> ContentText(const json& message, const std::string& where) {
  auto it = message.find("content");
  if (it == message.end() || it->is_null()) return std::string();
  if (it->is_string()) return it->get<std::string>();
  if (!it->is_array()) {
    return InvalidArgumentError(where +
                                ".content must be a string, null or an array of text parts, got " +
                                std::string(it->type_name()));
  }
  std::string text;
  for (size_t p = 0; p < it->size(); ++p) {
    const json& part = (*it)[p];
    const std::string at = where + ".content[" + std::to_string(p) + "]";
    if (!part.is_object() || !part.contains("type") || !part["type"].is_string()) {
      return InvalidArgumentError(at + " must be an object with a \"type\"");
    }
    const std::string type = part["type"].get<std::string>();
    if (type != "text") {
      return InvalidArgumentError(at + ": content part type \"" + type +
                                  "\" is not supported by the proxy (text parts only)");
    }
    if (!part.contains("text") || !part["text"].is_string()) {
      return InvalidArgumentError(at + ".text must be a string");
    }
    text += part["text"].get<std::string>();
  }
  return text;
}

StatusOr<std::vector<ToolCall>> ToolCallsOf(const json& message, const std::string& where) {
  std::vector<ToolCall> calls;
  auto it = message.find("tool_calls");
  if (it == message.end() || it->is_null()) return calls;
  if (!it->is_array()) return InvalidArgumentError(where + ".tool_calls must be an array");
  for (size_t k = 0; k < it->size(); ++k) {
    const json& c = (*it)[k];
    const std::string at = where + ".tool_calls[" + std::to_string(k) + "]";
    if (!c.is_object()) return InvalidArgumentError(at + " must be an object");
    if (c.contains("type") && !(c["type"].is_string() && c["type"] == "function")) {
      return InvalidArgumentError(at + ".type must be \"function\"");
    }
    if (!c.contains("id") || !c["id"].is_string() || c["id"].get<std::string>().empty()) {
      return InvalidArgumentError(at + ".id must be a non-empty string");
    }
    if (!c.contains("function") || !c["function"].is_object()) {
      return InvalidArgumentError(at + ".function must be an object with name and arguments");
    }
    const json& f = c["function"];
    if (!f.contains("name") || !f["name"].is_string() || f["name"].get<std::string>().empty()) {
      return InvalidArgumentError(at + ".function.name must be a non-empty string");
    }
    ToolCall call;
    call.id = c["id"].get<std::string>();
    call.name = f["name"].get<std::string>();
    if (f.contains("arguments") && !f["arguments"].is_null()) {
      if (!f["arguments"].is_string()) {
        return InvalidArgumentError(
            at + ".function.arguments must be a string (the JSON text the model produced)");
      }
      call.arguments = f["arguments"].get<std::string>();
    }
    calls.push_back(std::move(call));
  }
  return calls;
}

}  // namespace

std::string MessagePath(size_t index) { return "messages[" + std::to_string(index) + "]"; }

StatusOr<ChatMessage> ReadChatMessage(const json& m, size_t index) {
  const std::string where = MessagePath(index);
  if (!m.is_object()) return InvalidArgumentError(where + " must be an object");
  auto role = m.find("role");
  if (role == m.end() || !role->is_string()) {
    return InvalidArgumentError(where + " has no \"role\" string");
  }
  ChatMessage out;
  out.role = role->get<std::string>();
  STRATA_ASSIGN_OR_RETURN(out.content, ContentText(m, where));
  if (out.role == "system" || out.role == "developer") return out;
  if (out.role == "tool") {
    auto id = m.find("tool_call_id");
    if (id == m.end() || !id->is_string()) {
      return InvalidArgumentError(where + " (tool) has no \"tool_call_id\" string");
    }
    out.tool_call_id = id->get<std::string>();
  } else if (out.role == "assistant") {
    STRATA_ASSIGN_OR_RETURN(out.tool_calls, ToolCallsOf(m, where));
    for (const char* key : {"reasoning_content", "reasoning"}) {
      auto it = m.find(key);
      if (it != m.end() && it->is_string()) {
        out.reasoning = it->get<std::string>();
        break;
      }
    }
  } else if (out.role != "user") {
    return InvalidArgumentError(
        where + " has role \"" + out.role +
        "\"; the proxy accepts system, developer, user, assistant and tool");
  }
  out.digest = MessageDigest(out);
  return out;
}

std::string CanonicalArguments(std::string_view arguments) {
  size_t begin = 0;
  size_t end = arguments.size();
  while (begin < end && std::isspace(static_cast<unsigned char>(arguments[begin]))) ++begin;
  while (end > begin && std::isspace(static_cast<unsigned char>(arguments[end - 1]))) --end;
  if (begin == end) return "{}";  // no arguments: clients send "" and "{}" alike
  // A depth above the request's own limit cannot come from a request; kept as it is.
  if (!internal::CheckJsonDepth(arguments, "arguments").ok()) return std::string(arguments);
  json value = json::parse(arguments.begin(), arguments.end(), nullptr, false);
  if (value.is_discarded()) return std::string(arguments);  // not JSON: compared byte for byte
  return internal::DumpOutsideJson(CanonicalValue(std::move(value)));
}

std::string MessageDigest(const ChatMessage& message) {
  return DigestOf(message.role, message.content, message.tool_calls, message.tool_call_id, true);
}

std::string LegacyMessageDigest(const ChatMessage& message) {
  return DigestOf(message.role, message.content, message.tool_calls, message.tool_call_id, false);
}

std::string ReplyDigest(const Response& response) {
  return DigestOf("assistant", response.content, response.tool_calls, "", true);
}

}  // namespace strata::sidecar
