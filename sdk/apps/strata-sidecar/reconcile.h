// reconcile.h — keeping an agent's stored history in step with the message list an OpenAI client
// sends on every call.
//
// An OpenAI-compatible client keeps the conversation itself and sends all of it with every request.
// The sidecar keeps the agent's context (compacted, cache-stable), which after a compaction no
// longer looks like what the client sends: old tool results are masked, spans are summarized. So
// the proxy never compares the client's messages with the stored context. It compares them with
// what the same client sent before: a per-agent ClientView holds a digest of every message the
// client sent (and of every reply it was given), and the id of the history segment each one became.
// The view is persisted with the agent (Store::PutAgentState, key kClientViewKey).
//
// The rule, applied by Reconcile():
//  - The client's history starts with every message of the view: the messages after them are new
//    and are appended (user messages, assistant messages with tool calls, tool results).
//  - Otherwise the client edited or truncated its history. The history is replaced from the first
//    difference: every rendered history segment from the one the first differing message became
//    is evicted (originals kept for recall, policy kReconcilePolicy), and the client's messages
//    from there on are appended. When the difference falls inside a tool-call group, the
//    replacement starts at the assistant message that made the calls, so tool calls stay paired.
//    A "history_replaced" event is written to the store; the next request's prefix break is
//    reported with the reason.
//  - History segments the client does not know (after the last one of its view: appended through
//    another API, or left by a crash between an append and the view's save) are replaced the same
//    way: the client's list is the conversation.
//  - Leading system (and developer) messages are the agent's system prompts, replaced when they
//    differ.
//
// Thread safety: none of its own; callers hold the agent's lease (one request per agent at a time).
#ifndef STRATA_APPS_STRATA_SIDECAR_RECONCILE_H_
#define STRATA_APPS_STRATA_SIDECAR_RECONCILE_H_

#include <cstddef>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "chat_message.h"
#include "client_view.h"
#include "strata/agent.h"
#include "strata/segment.h"
#include "strata/status.h"

namespace strata::sidecar {

// The policy name recorded on segments the proxy evicted when it replaced a history.
inline constexpr char kReconcilePolicy[] = "proxy-reconcile@1";

struct ParsedChat {
  std::vector<ChatEntry> system;   // the leading system / developer messages, in order
  std::vector<ChatEntry> history;  // everything after them, each with its digest

  std::vector<std::string> SystemPrompts() const;  // the system messages' contents
};

// Parses a request's "messages" array. INVALID_ARGUMENT, naming messages[i] and what to do, for: a
// non-array or empty list, a message that is not an object, an unknown role, a system message after
// the conversation started, a content part that is not text, malformed tool calls, a tool message
// without tool_call_id, a tool result that answers no open call, a message while tool calls are
// unanswered, no message after the system ones, or an assistant message last (the proxy answers a
// user message or tool results).
StatusOr<ParsedChat> ParseChatMessages(const nlohmann::json& messages);
// The same for the array's elements, in order (ParseChatBody keeps them apart and reads each
// distinct message once). A message's own errors (ReadChatMessage) are reported before those of
// its place in the list.
StatusOr<ParsedChat> ParseChatMessages(
    const std::vector<std::shared_ptr<const ChatElement>>& messages);

// What one reconciliation did.
struct ReconcileOutcome {
  size_t kept = 0;              // client messages that matched the view
  size_t appended = 0;          // messages appended to the agent
  bool replaced = false;        // the history was replaced from `first_difference`
  size_t first_difference = 0;  // index into ParsedChat::history where the replacement started
  size_t evicted_segments = 0;
  bool system_changed = false;
  std::string reason;  // why the history was replaced, e.g. "messages[3] (user) edited"
};

// Brings `agent` and `*view` in line with `chat` by the rule of the file comment. The agent's
// context is changed under the caller's lease. On error (a message the context refuses, e.g.
// invalid UTF-8) the messages before the failing one stay appended and `*view` says exactly what
// the agent holds, so the caller saves it either way and a retry continues from there. The agent
// is changed through its context only (no Agent method: Reconcile may run inside the agent's turn,
// TurnOptions::before_build). A replacement's "history_replaced" event goes into *events when
// `events` is given (the caller stores it, e.g. with the turn), else straight into the store.
StatusOr<ReconcileOutcome> Reconcile(const ParsedChat& chat, Agent& agent, ClientView* view,
                                     std::vector<StoredEvent>* events = nullptr);

// Adds the assistant reply Agent::Complete() appended to the view.
void RecordReply(const Turn& turn, ClientView* view);

}  // namespace strata::sidecar

#endif  // STRATA_APPS_STRATA_SIDECAR_RECONCILE_H_
