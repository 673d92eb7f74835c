// strata-sim's request validation (sim_impl.h): the bodies vLLM's OpenAI server and SGLang refuse
// (pydantic's types plus their own checks), refused with the same words and "param".
#include <algorithm>
#include <cstdint>
#include <set>
#include <utility>

#include "sim_impl.h"

namespace strata::sim::sim_internal {
namespace {

std::string TypeName(const json& v) {
  switch (v.type()) {
    case json::value_t::null: return "null";
    case json::value_t::boolean: return "a boolean";
    case json::value_t::string: return "a string";
    case json::value_t::array: return "an array";
    case json::value_t::object: return "an object";
    case json::value_t::number_float: return "a float";
    default: return "an integer";
  }
}

bool IsInteger(const json& v) {
  if (v.is_number_integer() || v.is_number_unsigned()) return true;
  if (!v.is_number_float()) return false;
  double d = v.get<double>();
  return d == static_cast<double>(static_cast<int64_t>(d)) && d > -9e18 && d < 9e18;  // 5.0 like pydantic
}

// Request bodies may nest at most this deep: the prompt renderers and chat templates walk JSON
// recursively, and a 100 KB body of nested arrays would overflow their stack.
constexpr size_t kMaxRequestDepth = 256;

size_t Depth(const json& root) {
  size_t deepest = 0;
  std::vector<std::pair<const json*, size_t>> stack{{&root, 1}};
  while (!stack.empty()) {
    auto [value, depth] = stack.back();
    stack.pop_back();
    deepest = std::max(deepest, depth);
    if (value->is_structured()) {
      for (const json& child : *value) stack.emplace_back(&child, depth + 1);
    }
  }
  return deepest;
}

// Why messages[`i`] (`m`) is refused, as vLLM/SGLang would refuse it; nullopt when it is not.
std::optional<Invalid> ValidateMessage(const json& m, size_t i) {
  static const std::set<std::string> kRoles = {"system", "developer", "user", "assistant", "tool", "function"};
  std::string where = "messages[" + std::to_string(i) + "]";
  if (!m.is_object()) return Invalid{where + " must be an object, got " + TypeName(m), where};
  if (!m.contains("role") || !m["role"].is_string()) {
    return Invalid{where + ".role must be a string, got " + (m.contains("role") ? TypeName(m["role"]) : "nothing"),
                   where + ".role"};
  }
  std::string role = m["role"].get<std::string>();
  if (kRoles.count(role) == 0) {
    return Invalid{where + ".role \"" + role +
                       "\" is not one of system, developer, user, assistant, tool, function",
                   where + ".role"};
  }
  if (m.contains("content") && !m["content"].is_null() && !m["content"].is_string()) {
    if (!m["content"].is_array()) {
      return Invalid{where + ".content must be a string, an array of parts or null, got " + TypeName(m["content"]),
                     where + ".content"};
    }
    for (const json& part : m["content"]) {
      if (!part.is_object() || !part.contains("type") || !part["type"].is_string()) {
        return Invalid{where + ".content parts must be objects with a \"type\"", where + ".content"};
      }
    }
  }
  for (const char* name : {"name", "tool_call_id", "reasoning_content", "reasoning"}) {
    if (m.contains(name) && !m[name].is_null() && !m[name].is_string()) {
      return Invalid{where + "." + name + " must be a string, got " + TypeName(m[name]), where + "." + name};
    }
  }
  if (m.contains("tool_calls") && !m["tool_calls"].is_null()) {
    if (!m["tool_calls"].is_array()) {
      return Invalid{where + ".tool_calls must be an array, got " + TypeName(m["tool_calls"]), where + ".tool_calls"};
    }
    for (const json& call : m["tool_calls"]) {
      if (!call.is_object() || !call.contains("function") || !call["function"].is_object() ||
          !call["function"].contains("name") || !call["function"]["name"].is_string()) {
        return Invalid{where + ".tool_calls entries must be {\"function\":{\"name\":...,\"arguments\":...}}",
                       where + ".tool_calls"};
      }
    }
  }
  return std::nullopt;
}

}  // namespace

std::optional<Invalid> ValidateRequest(const json& request) {
  if (!request.is_object()) return Invalid{"the request body must be a JSON object", ""};
  if (Depth(request) > kMaxRequestDepth) {
    return Invalid{"the request body nests deeper than " + std::to_string(kMaxRequestDepth) + " levels", ""};
  }
  auto expect = [&](const char* name, bool ok, const char* what) -> std::optional<Invalid> {
    if (ok) return std::nullopt;
    return Invalid{std::string("\"") + name + "\" must be " + what + ", got " + TypeName(request[name]), name};
  };
  auto has = [&](const char* name) { return request.contains(name) && !request[name].is_null(); };
  std::optional<Invalid> bad;
  if (has("model") && (bad = expect("model", request["model"].is_string(), "a string"))) return bad;
  if (has("stream") && (bad = expect("stream", request["stream"].is_boolean(), "a boolean"))) return bad;
  for (const char* name : {"cache_salt", "rid", "request_id", "reasoning_effort"}) {
    if (has(name) && (bad = expect(name, request[name].is_string(), "a string"))) return bad;
  }
  for (const char* name : {"chat_template_kwargs", "stream_options"}) {
    if (has(name) && (bad = expect(name, request[name].is_object(), "an object"))) return bad;
  }
  if (has("stream_options") && !(has("stream") && request["stream"].get<bool>())) {
    return Invalid{"Stream options can only be defined when `stream=True`.", "stream_options"};
  }
  for (const char* name : {"max_tokens", "max_completion_tokens", "n", "seed", "priority"}) {
    if (!has(name)) continue;
    const json& v = request[name];
    if (!IsInteger(v)) {
      return Invalid{std::string("\"") + name + "\" must be an integer, got " +
                         (v.is_number() ? v.dump() : TypeName(v)),
                     name};
    }
  }
  for (const char* name : {"max_tokens", "max_completion_tokens", "n"}) {
    if (has(name) && request[name].get<double>() < 1) {
      return Invalid{std::string(name) + " must be at least 1, got " + request[name].dump() + ".", name};
    }
  }
  for (const char* name : {"temperature", "top_p", "presence_penalty", "frequency_penalty"}) {
    if (has(name) && (bad = expect(name, request[name].is_number(), "a number"))) return bad;
  }
  if (has("temperature") && request["temperature"].get<double>() < 0) {
    return Invalid{"temperature must be non-negative, got " + request["temperature"].dump() + ".", "temperature"};
  }
  if (has("top_p") && (request["top_p"].get<double>() <= 0 || request["top_p"].get<double>() > 1)) {
    return Invalid{"top_p must be in (0, 1], got " + request["top_p"].dump() + ".", "top_p"};
  }
  if (has("tools")) {
    if ((bad = expect("tools", request["tools"].is_array(), "an array"))) return bad;
    for (size_t i = 0; i < request["tools"].size(); ++i) {
      const json& tool = request["tools"][i];
      std::string where = "tools[" + std::to_string(i) + "]";
      if (!tool.is_object() || !tool.contains("function") || !tool["function"].is_object() ||
          !tool["function"].contains("name") || !tool["function"]["name"].is_string()) {
        return Invalid{where + " must be {\"type\":\"function\",\"function\":{\"name\":...}}", where};
      }
    }
  }
  if (!request.contains("messages")) return Invalid{"\"messages\" is required", "messages"};
  if ((bad = expect("messages", request["messages"].is_array(), "an array"))) return bad;
  if (request["messages"].empty()) return Invalid{"\"messages\" must hold at least one message", "messages"};
  for (size_t i = 0; i < request["messages"].size(); ++i) {
    if ((bad = ValidateMessage(request["messages"][i], i))) return bad;
  }
  return std::nullopt;
}

}  // namespace strata::sim::sim_internal
