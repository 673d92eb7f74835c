// Helpers shared by the context tests: building contexts, checking request invariants.
#ifndef STRATA_TESTS_TESTING_CONTEXT_TESTING_H_
#define STRATA_TESTS_TESTING_CONTEXT_TESTING_H_

#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "strata/context.h"

namespace strata::testing {

inline std::unique_ptr<Context> NewContext(ContextOptions options = {}) {
  if (options.agent.id.empty()) options.agent.id = "test-agent";
  auto created = Context::Create(std::move(options));
  if (!created.ok()) throw std::runtime_error(created.status().ToString());
  return std::move(created).value();
}

// Builds through Build(), which compacts when a budget and policy are set.
inline BuiltRequest MustBuild(Context& context, const BuildOptions& options = {}) {
  auto built = context.Build(options);
  if (!built.ok()) throw std::runtime_error(built.status().ToString());
  return std::move(built).value();
}

// Renders through Preview(), which never changes the context.
inline BuiltRequest MustPreview(const Context& context, const BuildOptions& options = {}) {
  auto built = context.Preview(options);
  if (!built.ok()) throw std::runtime_error(built.status().ToString());
  return std::move(built).value();
}

// "" when the request's messages pair tool calls and results correctly: every
// tool message answers a call of the closest preceding assistant message, answers it once, and
// every call is answered before the next non-tool message. Otherwise a description of the fault.
inline std::string PairingError(const std::string& body) {
  nlohmann::json request = nlohmann::json::parse(body);
  std::vector<std::string> open;
  bool in_tool_block = false;
  for (const auto& message : request.at("messages")) {
    const std::string role = message.at("role");
    if (role == "tool") {
      const std::string id = message.at("tool_call_id");
      auto it = std::find(open.begin(), open.end(), id);
      if (!in_tool_block || it == open.end()) return "orphan tool message for " + id;
      open.erase(it);
      continue;
    }
    if (!open.empty()) return "unanswered tool call " + open.front() + " before a " + role + " message";
    in_tool_block = false;
    if (role == "assistant" && message.contains("tool_calls")) {
      for (const auto& call : message["tool_calls"]) open.push_back(call.at("id"));
      in_tool_block = true;
    }
  }
  if (!open.empty()) return "unanswered tool call " + open.front() + " at the end";
  return "";
}

}  // namespace strata::testing

#endif  // STRATA_TESTS_TESTING_CONTEXT_TESTING_H_
