// chat_message.h — one chat message of an OpenAI client's request as the proxy reads it, and the
// digest that identifies it when the client sends it again.
//
// A message is read on its own (ReadChatMessage): what it says does not depend on its neighbours,
// so a message the client sends again byte for byte is read once (chat_body.h keeps it). What
// depends on the order (system messages first, tool results answering open calls, an assistant
// message split in two by the Agents SDK) is checked by ParseChatMessages (reconcile.h).
//
// Thread safety: the functions are pure; a ChatMessage is a value.
#ifndef STRATA_APPS_STRATA_SIDECAR_CHAT_MESSAGE_H_
#define STRATA_APPS_STRATA_SIDECAR_CHAT_MESSAGE_H_

#include <cstddef>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "strata/segment.h"
#include "strata/status.h"
#include "strata/transport.h"

namespace strata::sidecar {

// One chat message as an OpenAI client sends it, reduced to what an agent stores.
struct ChatMessage {
  std::string role;       // "system", "developer", "user", "assistant" or "tool"
  std::string content;    // text; null is ""; an array of text parts is their concatenation
  std::string reasoning;  // assistant: "reasoning_content" or "reasoning" when the client sends it
  std::vector<ToolCall> tool_calls;  // assistant
  std::string tool_call_id;          // tool
  std::string digest;                // MessageDigest of the above ("" for system and developer)
};

// "messages[index]", as errors name a message.
std::string MessagePath(size_t index);

// `message`, the element `index` of "messages", read on its own, its digest computed.
// INVALID_ARGUMENT, naming messages[index] and what to do, for: not an object, no "role" string, a
// role other than system, developer, user, assistant and tool, content that is not a string, null
// or an array of text parts, a tool message without "tool_call_id", malformed tool calls.
StatusOr<ChatMessage> ReadChatMessage(const nlohmann::json& message, size_t index);

// One element of a request's "messages": read, or, when ReadChatMessage refused it, its JSON (for
// ParseChatMessages to say why, naming its index).
struct ChatElement {
  std::shared_ptr<const ChatMessage> read;
  nlohmann::json value;  // null when `read`
};

// A message of a request's list: what was read of it (shared, so that a message sent again is
// not copied) and where it is in the list.
struct ChatEntry {
  size_t index = 0;  // its index in the request's "messages" array (for error messages)
  std::shared_ptr<const ChatMessage> message;

  const ChatMessage& operator*() const { return *message; }
  const ChatMessage* operator->() const { return message.get(); }
};

// Hex digest (32 digits of SHA-256) of what identifies a message: role, content, tool calls (id,
// name, arguments) and tool_call_id, after the normalizations clients are known to apply when they
// send a message back (docs/sidecar.md, "How reconciliation works"): fields clients fill
// differently (null, absent or "" content, text parts, "name", "refusal", echoed reasoning) do not
// count, and tool-call arguments are compared as JSON values (CanonicalArguments).
std::string MessageDigest(const ChatMessage& message);
// The digest of earlier versions, with the arguments' bytes as sent: a view saved by them still
// matches.
std::string LegacyMessageDigest(const ChatMessage& message);

// Tool-call arguments in canonical form, so that a client that parsed them and wrote them again
// (LangChain.js, the Agents SDK) sends the same value: JSON re-serialized with sorted keys, no
// whitespace, escapes resolved and integral numbers as integers; empty or blank text is "{}";
// text that is not JSON is kept as it is (compared byte for byte).
std::string CanonicalArguments(std::string_view arguments);

// The digest of the assistant reply `response` as the client will send it back.
std::string ReplyDigest(const Response& response);

}  // namespace strata::sidecar

#endif  // STRATA_APPS_STRATA_SIDECAR_CHAT_MESSAGE_H_
