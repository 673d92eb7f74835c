// strata-sidecar's checks of a whole Chat Completions body (ParseChatRequest, the first step of
// Proxy::ChatCompletions: the field checks, the split into handled, forwarded and agent-owned
// fields, the messages) and the turn the proxy then runs for an accepted body: its tools set on a
// new agent, its messages reconciled into it, and one completion sent with its forwarded fields
// (to a scripted transport that records the body instead of a network).
// Invariants:
//  - nothing throws (an exception would escape a connection thread);
//  - a refusal is INVALID_ARGUMENT with a message in valid UTF-8, and its HTTP answer is a 400 whose OpenAI error
//    body parses and carries that message;
//  - an accepted body is a JSON object nested at most 512 levels; every one of its fields is
//    handled (model, messages, tools, stream, stream_options, n), forwarded with its value's JSON
//    text, or dropped as agent-owned (cache_salt, request_id, rid), exactly once; include_usage
//    only with stream; the tools are the body's array;
//  - its messages: the leading system/developer ones are the system prompts; the history is not
//    empty, keeps the body's order, has only user, assistant and tool messages, does not end with
//    an assistant message, and every tool call of an assistant message is answered by exactly one
//    tool message before the next user or assistant message (ids non-empty, distinct);
//  - the conversation written back as a body (messages, model, tools, forwarded fields) is
//    accepted and gives the same message digests, fields and derived agent id;
//  - the derived agent id passes the proxy's own agent-id check;
//  - the turn: the tools are set or refused with a reason; reconciling the history into a new agent
//    keeps nothing and appends every message; the completion is sent with every forwarded field
//    (no agent refuses a field the proxy forwarded; a refusal's message is valid UTF-8), and the
//    body sent upstream is JSON carrying each forwarded value and none of the client's
//    agent-owned fields' values.
#include <algorithm>
#include <memory>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <vector>

#include "core/json_text.h"
#include "core/utf8.h"
#include "fuzz_util.h"
#include "proxy.h"
#include "reconcile.h"
#include "registry.h"
#include "strata/agent.h"
#include "testing/scripted_transport.h"

namespace {

using json = nlohmann::json;
using strata::sidecar::ChatMessage;
using strata::sidecar::ChatRequest;

const std::set<std::string> kHandled = {"model",  "messages",       "tools",
                                        "stream", "stream_options", "n"};
const std::set<std::string> kAgentOwned = {"cache_salt", "request_id", "rid"};

void CheckRefusal(const strata::Status& status) {
  STRATA_FUZZ_CHECK(status.code() == strata::StatusCode::kInvalidArgument,
                    "a body refused with " + status.ToString());
  STRATA_FUZZ_CHECK(!status.message().empty(), "a body refused without a reason");
  STRATA_FUZZ_CHECK(strata::internal::IsValidUtf8(status.message()),
                    "a refusal that is not valid UTF-8: " + status.message());
  const strata::sidecar::HttpReply reply = strata::sidecar::ErrorReply(status);
  STRATA_FUZZ_CHECK(reply.status == 400,
                    "a refused body answered with HTTP " + std::to_string(reply.status));
  const json error = json::parse(reply.body, nullptr, false);
  STRATA_FUZZ_CHECK(error.is_object() && error.contains("error") && error["error"].is_object() &&
                        error["error"].value("message", "") == status.message() &&
                        error["error"].value("type", "") == "invalid_request_error",
                    "the error body of a refusal: " + reply.body);
}

// The tool calls of the history are paired with tool results (see the file comment).
void CheckPairing(const strata::sidecar::ParsedChat& chat, const json& messages) {
  STRATA_FUZZ_CHECK(!chat.history.empty(), "an accepted body without a history message");
  STRATA_FUZZ_CHECK(chat.history.back()->role != "assistant",
                    "an accepted body ends with an answer");
  STRATA_FUZZ_CHECK(chat.history.front().index == chat.system.size(),
                    "the history does not start after the system messages");
  for (size_t i = 0; i < chat.system.size(); ++i) {
    const std::string role = messages[i]["role"].get<std::string>();
    STRATA_FUZZ_CHECK(role == "system" || role == "developer",
                      "messages[" + std::to_string(i) + "] (" + role + ") became a system prompt");
  }
  std::vector<std::string> open;
  for (size_t i = 0; i < chat.history.size(); ++i) {
    const ChatMessage& m = *chat.history[i];
    const size_t index = chat.history[i].index;
    const std::string at = "history[" + std::to_string(i) + "] (" + m.role + ")";
    STRATA_FUZZ_CHECK(i == 0 || index > chat.history[i - 1].index, at + " out of order");
    STRATA_FUZZ_CHECK(index < messages.size() && messages[index]["role"] == m.role,
                      at + " is not the body's message " + std::to_string(index));
    STRATA_FUZZ_CHECK(m.digest == strata::sidecar::MessageDigest(m), at + ": a stale digest");
    if (m.role == "tool") {
      auto it = std::find(open.begin(), open.end(), m.tool_call_id);
      STRATA_FUZZ_CHECK(it != open.end(), at + " answers no open call: " + m.tool_call_id);
      open.erase(it);
      continue;
    }
    STRATA_FUZZ_CHECK(m.role == "user" || m.role == "assistant", at + ": unknown role");
    STRATA_FUZZ_CHECK(open.empty(), at + " follows unanswered tool calls");
    STRATA_FUZZ_CHECK(m.tool_call_id.empty(), at + " carries a tool_call_id");
    STRATA_FUZZ_CHECK(m.role == "assistant" || m.tool_calls.empty(), at + " carries tool calls");
    for (const strata::ToolCall& c : m.tool_calls) {
      STRATA_FUZZ_CHECK(!c.id.empty() && !c.name.empty(), at + ": a tool call without id or name");
      STRATA_FUZZ_CHECK(std::find(open.begin(), open.end(), c.id) == open.end(),
                        at + ": duplicate tool call id " + c.id);
      open.push_back(c.id);
    }
  }
  STRATA_FUZZ_CHECK(open.empty(), "an accepted body leaves tool calls unanswered");
}

// Every field of the body is handled, forwarded or dropped, exactly once.
void CheckFields(const ChatRequest& request, const json& body) {
  size_t handled = 0;
  for (auto it = body.begin(); it != body.end(); ++it) {
    if (kHandled.count(it.key())) ++handled;
  }
  STRATA_FUZZ_CHECK(handled + request.forwarded.size() + request.ignored.size() == body.size(),
                    "fields lost or counted twice");
  for (const std::string& name : request.ignored) {
    STRATA_FUZZ_CHECK(kAgentOwned.count(name) && body.contains(name),
                      "dropped a field that is not agent-owned: " + name);
  }
  std::set<std::string> names;
  for (const auto& [name, text] : request.forwarded) {
    STRATA_FUZZ_CHECK(names.insert(name).second, "forwarded twice: " + name);
    STRATA_FUZZ_CHECK(!kHandled.count(name) && !kAgentOwned.count(name) && body.contains(name),
                      "forwarded a field it should not: " + name);
    STRATA_FUZZ_CHECK(json::parse(text, nullptr, false) == body[name],
                      "forwarded \"" + name + "\" changed: " + text);
  }
  STRATA_FUZZ_CHECK(
      request.model == (body.contains("model") ? body["model"].get<std::string>() : ""),
      "the model is not the body's");
  const bool has_tools = body.contains("tools") && !body["tools"].is_null();
  STRATA_FUZZ_CHECK(request.tools->value == (has_tools ? body["tools"] : json::array()),
                    "the tools are not the body's");
  STRATA_FUZZ_CHECK(!request.include_usage || request.stream, "include_usage without a stream");
  STRATA_FUZZ_CHECK(request.stream == (body.contains("stream") && body["stream"] == true),
                    "stream is not the body's");
}

// The request written back as a body, the way a client resends its conversation.
std::string Rewrite(const ChatRequest& request) {
  json messages = json::array();
  for (const std::string& s : request.chat.SystemPrompts()) {
    messages.push_back({{"role", "system"}, {"content", s}});
  }
  for (const strata::sidecar::ChatEntry& entry : request.chat.history) {
    const ChatMessage& m = *entry;
    json message = {{"role", m.role}, {"content", m.content}};
    if (!m.reasoning.empty()) message["reasoning_content"] = m.reasoning;
    if (!m.tool_call_id.empty() || m.role == "tool") message["tool_call_id"] = m.tool_call_id;
    if (!m.tool_calls.empty()) {
      json calls = json::array();
      for (const strata::ToolCall& c : m.tool_calls) {
        calls.push_back({{"id", c.id},
                         {"type", "function"},
                         {"function", {{"name", c.name}, {"arguments", c.arguments}}}});
      }
      message["tool_calls"] = std::move(calls);
    }
    messages.push_back(std::move(message));
  }
  json body = {{"messages", std::move(messages)}, {"tools", request.tools->value}};
  if (!request.model.empty()) body["model"] = request.model;
  for (const auto& [name, text] : request.forwarded) body[name] = json::parse(text);
  return body.dump();
}

void CheckRewrite(const ChatRequest& request) {
  const std::string again_body = Rewrite(request);
  strata::StatusOr<ChatRequest> again = strata::sidecar::ParseChatRequest(again_body);
  STRATA_FUZZ_CHECK(again.ok(), "the conversation written back is refused: " +
                                    again.status().ToString() + "\n" + again_body);
  STRATA_FUZZ_CHECK(again->chat.SystemPrompts() == request.chat.SystemPrompts() &&
                        again->chat.history.size() == request.chat.history.size(),
                    "the conversation written back has other messages");
  for (size_t i = 0; i < request.chat.history.size(); ++i) {
    STRATA_FUZZ_CHECK(again->chat.history[i]->digest == request.chat.history[i]->digest,
                      "history[" + std::to_string(i) + "] has another digest written back");
  }
  STRATA_FUZZ_CHECK(again->forwarded == request.forwarded && again->model == request.model &&
                        again->tools->value == request.tools->value,
                    "the fields written back differ");
  STRATA_FUZZ_CHECK(strata::sidecar::Proxy::DerivedAgentId(again->chat) ==
                        strata::sidecar::Proxy::DerivedAgentId(request.chat),
                    "the conversation written back lands on another agent");
}

// The turn Proxy::ChatCompletions runs for an accepted body, on a new agent.
void RunTurn(const ChatRequest& request, const std::string& agent_id, const json& body) {
  strata::testing::ScriptedTransport transport;
  transport.Reply("ok");
  strata::AgentConfig config;
  config.identity.id = agent_id;
  config.tokenizer = "estimate";
  config.budget.enforce = false;
  config.recall.expose_tool = false;
  if (!request.model.empty()) config.render.model = request.model;
  strata::AgentServices services;
  services.transport = &transport;
  strata::StatusOr<std::unique_ptr<strata::Agent>> agent = strata::Agent::Create(config, services);
  STRATA_FUZZ_CHECK(agent.ok(), "an agent for an accepted body: " + agent.status().ToString());
  strata::Agent& a = **agent;
  if (request.tools->value != json::array()) {
    strata::Status set = a.context().SetTools(request.tools->value.dump());
    if (!set.ok()) {
      STRATA_FUZZ_CHECK(!set.message().empty(), "tools refused without a reason");
      return;  // the proxy answers the refusal ("tools": ...) before touching the history
    }
  }
  strata::sidecar::ClientView view;
  strata::StatusOr<strata::sidecar::ReconcileOutcome> outcome =
      strata::sidecar::Reconcile(request.chat, a, &view);
  if (!outcome.ok()) {
    STRATA_FUZZ_CHECK(!outcome.status().message().empty(), "a reconcile refused without a reason");
    return;
  }
  STRATA_FUZZ_CHECK(
      outcome->kept == 0 && !outcome->replaced && outcome->appended == request.chat.history.size(),
      "a new agent did not take every message: " + outcome->reason);
  strata::TurnOptions options;
  options.extra_fields = request.forwarded;
  strata::StatusOr<strata::Turn> turn = a.Complete(options);
  if (!turn.ok()) {
    // The agent may refuse what it cannot render (e.g. invalid tool-call arguments), never a field
    // the proxy chose to forward.
    STRATA_FUZZ_CHECK(turn.status().message().find("extra_fields") == std::string::npos &&
                          turn.status().message().find("extra field") == std::string::npos,
                      "the agent refused a forwarded field: " + turn.status().ToString());
    STRATA_FUZZ_CHECK(!turn.status().message().empty(), "a turn refused without a reason");
    STRATA_FUZZ_CHECK(strata::internal::IsValidUtf8(turn.status().message()),
                      "a turn refused with a message that is not valid UTF-8: " +
                          turn.status().message());
    return;
  }
  const std::vector<std::string> sent = transport.bodies();
  STRATA_FUZZ_CHECK(sent.size() == 1, "the turn sent " + std::to_string(sent.size()) + " requests");
  const json upstream = json::parse(sent[0], nullptr, false);
  STRATA_FUZZ_CHECK(upstream.is_object(), "the upstream body is not a JSON object:\n" + sent[0]);
  const bool both_caps = body.contains("max_tokens") && body.contains("max_completion_tokens");
  for (const auto& [name, text] : request.forwarded) {
    if (both_caps && name == "max_completion_tokens") continue;  // max_tokens replaces it
    STRATA_FUZZ_CHECK(
        upstream.contains(name) && upstream[name] == json::parse(text),
        "forwarded \"" + name + "\" is not in the upstream body as sent:\n" + sent[0]);
  }
  for (const std::string& name : request.ignored) {
    STRATA_FUZZ_CHECK(!upstream.contains(name) || upstream[name] != body[name],
                      "the client's \"" + name + "\" reached the upstream body");
  }
}

}  // namespace

// The body read again from the base another body of the conversation left (itself, the request
// written back, the body without its last message as json writes it): the same request.
void CheckContinued(std::string_view text, const json& body, const ChatRequest& request) {
  json shorter = body;
  shorter["messages"].erase(shorter["messages"].size() - 1);
  for (const std::string& previous : {std::string(text), Rewrite(request), shorter.dump()}) {
    std::shared_ptr<const strata::sidecar::ChatBodyBase> base;
    (void)strata::sidecar::ParseChatRequest(previous, nullptr, &base);
    if (base == nullptr) continue;
    strata::StatusOr<ChatRequest> again = strata::sidecar::ParseChatRequest(text, base);
    STRATA_FUZZ_CHECK(again.ok(),
                      "a body read from another's base is refused: " + again.status().ToString());
    STRATA_FUZZ_CHECK(again->chat.SystemPrompts() == request.chat.SystemPrompts() &&
                          again->chat.history.size() == request.chat.history.size(),
                      "a body read from another's base has other messages");
    for (size_t i = 0; i < request.chat.history.size(); ++i) {
      STRATA_FUZZ_CHECK(again->chat.history[i]->digest == request.chat.history[i]->digest &&
                            again->chat.history[i].index == request.chat.history[i].index,
                        "history[" + std::to_string(i) + "] differs when read from a base");
    }
    STRATA_FUZZ_CHECK(again->forwarded == request.forwarded && again->model == request.model &&
                          again->tools->value == request.tools->value,
                      "the fields differ when read from a base");
  }
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text = strata::fuzz::AsText(data, size);
  strata::StatusOr<ChatRequest> request = strata::sidecar::ParseChatRequest(text);
  if (!request.ok()) {
    CheckRefusal(request.status());
    return 0;
  }
  STRATA_FUZZ_CHECK(strata::internal::CheckJsonDepth(text, "body").ok(),
                    "an accepted body nests deeper than the limit");
  const json body = json::parse(text, nullptr, false);
  STRATA_FUZZ_CHECK(body.is_object() && body.contains("messages") && body["messages"].is_array(),
                    "an accepted body that is not an object with a messages array");
  CheckFields(*request, body);
  CheckPairing(request->chat, body["messages"]);
  CheckRewrite(*request);
  CheckContinued(text, body, *request);
  const std::string agent_id = strata::sidecar::Proxy::DerivedAgentId(request->chat);
  strata::Status valid = strata::sidecar::CheckAgentId(agent_id, "X-Strata-Agent");
  STRATA_FUZZ_CHECK(valid.ok(), "a derived agent id is refused: " + valid.ToString());
  RunTurn(*request, agent_id, body);
  return 0;
}
