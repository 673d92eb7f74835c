// Reconciliation of an OpenAI client's message list with an agent's history (reconcile.h).
#include "reconcile.h"

#include <algorithm>
#include <utility>

#include "strata/compaction_policy.h"
#include "strata/context.h"
#include "strata/store.h"

namespace strata::sidecar {
namespace {

using json = nlohmann::json;

std::string JoinIds(const std::vector<std::string>& ids) {
  std::string out;
  for (const std::string& id : ids) out += (out.empty() ? "" : ", ") + id;
  return out.empty() ? "none" : out;
}

// Whether the agent's system prompts are `prompts`, in order (compared in place: a system prompt
// may be megabytes, sent again on every request).
bool SystemPromptsAre(const Agent& agent, const std::vector<ChatEntry>& prompts) {
  const std::vector<const Segment*> system = agent.context().LayerSegments(Layer::kSystem);
  if (system.size() != prompts.size()) return false;
  for (size_t i = 0; i < system.size(); ++i) {
    if (system[i]->content != prompts[i]->content) return false;
  }
  return true;
}

bool Rendered(const Segment& s) {
  return s.state == SegmentState::kLive || s.state == SegmentState::kMasked;
}

// Whether assistant message `m` (at index `i`, tool calls and no content) continues the assistant
// message right before it (text and no tool calls).
bool MergesIntoPrevious(const ParsedChat& chat, const ChatMessage& m, size_t i) {
  if (m.tool_calls.empty() || !m.content.empty() || chat.history.empty()) return false;
  const ChatEntry& previous = chat.history.back();
  return previous.index + 1 == i && previous->role == "assistant" && previous->tool_calls.empty() &&
         !previous->content.empty();
}

}  // namespace

std::vector<std::string> ParsedChat::SystemPrompts() const {
  std::vector<std::string> prompts;
  prompts.reserve(system.size());
  for (const ChatEntry& s : system) prompts.push_back(s->content);
  return prompts;
}

namespace {

// The `count` messages of a request, each given by `read_at(i)` (read already, or read
// now), checked in their order.
template <typename ReadAt>
StatusOr<ParsedChat> ParseInOrder(size_t count, const ReadAt& read_at) {
  ParsedChat chat;
  chat.history.reserve(count);
  std::vector<std::string> open;  // tool calls of the last assistant message without a result
  size_t open_from = 0;
  for (size_t i = 0; i < count; ++i) {
    STRATA_ASSIGN_OR_RETURN(std::shared_ptr<const ChatMessage> read, read_at(i));
    const ChatMessage& out = *read;
    const std::string& role = out.role;
    if (role == "system" || role == "developer") {
      if (!chat.history.empty()) {
        return InvalidArgumentError(MessagePath(i) + " is a " + role +
                                    " message after the conversation started; the proxy keeps "
                                    "system messages as the agent's system prompt: put them first");
      }
      chat.system.push_back({i, std::move(read)});
      continue;
    }
    if (role == "tool") {
      auto it = std::find(open.begin(), open.end(), out.tool_call_id);
      if (it == open.end()) {
        return InvalidArgumentError(MessagePath(i) + ": tool result for tool_call_id \"" +
                                    out.tool_call_id +
                                    "\", which is not an unanswered call of the last assistant "
                                    "message (unanswered: " +
                                    JoinIds(open) + ")");
      }
      open.erase(it);
    } else {  // user or assistant (ReadChatMessage refuses any other role)
      if (!open.empty()) {
        return InvalidArgumentError(MessagePath(i) + " (" + role + ") follows " +
                                    MessagePath(open_from) + " whose tool calls " + JoinIds(open) +
                                    " have no result; send a tool message for each call first");
      }
      if (role == "assistant") {
        for (const ToolCall& c : out.tool_calls) {
          if (std::find(open.begin(), open.end(), c.id) != open.end()) {
            return InvalidArgumentError(MessagePath(i) + ": duplicate tool call id \"" + c.id +
                                        "\"");
          }
          open.push_back(c.id);
        }
        open_from = i;
        if (MergesIntoPrevious(chat, out, i)) {
          // The Agents SDK sends one reply with text and tool calls as two assistant messages,
          // the text, then the calls without content: read as the one message it was.
          ChatEntry& previous = chat.history.back();
          auto merged = std::make_shared<ChatMessage>(*previous);
          merged->tool_calls = out.tool_calls;
          if (merged->reasoning.empty()) merged->reasoning = out.reasoning;
          merged->digest = MessageDigest(*merged);
          previous.message = std::move(merged);
          open_from = previous.index;
          continue;
        }
      }
    }
    chat.history.push_back({i, std::move(read)});
  }
  if (chat.history.empty()) {
    return InvalidArgumentError("\"messages\" holds no user message (only " +
                                std::to_string(chat.system.size()) + " system messages)");
  }
  if (!open.empty()) {
    return InvalidArgumentError(MessagePath(open_from) + " made tool calls " + JoinIds(open) +
                                " that have no result; send a tool message for each call");
  }
  if (chat.history.back()->role == "assistant") {
    return InvalidArgumentError(MessagePath(chat.history.back().index) +
                                " is an assistant message; the last message must be a user "
                                "message or tool results for the proxy to answer");
  }
  return chat;
}

// What ReadChatMessage reads of `message`, shared.
StatusOr<std::shared_ptr<const ChatMessage>> ReadShared(const json& message, size_t index) {
  STRATA_ASSIGN_OR_RETURN(ChatMessage read, ReadChatMessage(message, index));
  return std::make_shared<const ChatMessage>(std::move(read));
}

}  // namespace

StatusOr<ParsedChat> ParseChatMessages(const json& messages) {
  if (!messages.is_array()) {
    return InvalidArgumentError("\"messages\" must be an array of chat messages");
  }
  return ParseInOrder(messages.size(), [&](size_t i) { return ReadShared(messages[i], i); });
}

StatusOr<ParsedChat> ParseChatMessages(
    const std::vector<std::shared_ptr<const ChatElement>>& messages) {
  return ParseInOrder(messages.size(),
                      [&](size_t i) -> StatusOr<std::shared_ptr<const ChatMessage>> {
                        if (messages[i]->read != nullptr) return messages[i]->read;
                        return ReadShared(messages[i]->value, i);
                      });
}

namespace {

// The view is trusted only as far as the agent still holds what it names: a segment that is gone,
// or that an earlier replacement evicted (its view was not saved), ends it. `history` is the
// agent's history (LayerSegments): the view names its segments in the history's order, so they
// are found walking it along with the view; one not found further on is looked up by id.
void TrimViewToAgent(const Context& context, const std::vector<const Segment*>& history,
                     ClientView* view) {
  size_t h = 0;
  for (size_t i = 0; i < view->entries().size(); ++i) {
    const std::string& id = view->entries()[i].segment_id;
    while (h < history.size() && history[h]->id != id) ++h;
    const Segment* s = h < history.size() ? history[h] : context.Find(id);
    if (s == nullptr || s->layer != Layer::kHistory ||
        (s->state == SegmentState::kEvicted && s->policy == kReconcilePolicy)) {
      view->Truncate(i);
      break;
    }
  }
}

// The index of segment `id` in `history`; history.size() when it is not there.
size_t IndexOf(const std::vector<const Segment*>& history, const std::string& id) {
  for (size_t i = 0; i < history.size(); ++i) {
    if (history[i]->id == id) return i;
  }
  return history.size();
}

// The client's history differs from its view at message `*kept` (before the view's end): sets
// `*reason`, moves `*kept` back to the first client message to append again, and returns the
// index in `history` from which every rendered segment is evicted.
size_t StartOfClientEdit(const ParsedChat& chat, const ClientView& view,
                         const std::vector<const Segment*>& history, size_t* kept,
                         std::string* reason) {
  const size_t n = view.entries().size();
  const size_t m = chat.history.size();
  size_t& k = *kept;
  *reason = k == m ? "history truncated from " + std::to_string(n) + " to " + std::to_string(m) +
                         " messages"
                   : MessagePath(chat.history[k].index) + " (" + chat.history[k]->role +
                         ") differs from what the client sent before";
  // Inside a tool-call group, start at the assistant message that made the calls.
  while (k > 0 && ((k < n && view.entries()[k].role == "tool") ||
                   (k < m && chat.history[k]->role == "tool"))) {
    --k;
  }
  size_t start = IndexOf(history, view.entries()[k].segment_id);
  if (start < history.size() && history[start]->state == SegmentState::kSummarized) {
    // Summarized: its summary (the last rendered one before it) holds it; replace that too.
    for (size_t i = start; i-- > 0;) {
      if (history[i]->kind == SegmentKind::kSummary && Rendered(*history[i])) {
        start = i;
        break;
      }
    }
    // The client messages the summary also holds are appended again (summaries replace whole
    // tool-call groups, so this starts at a group's beginning).
    for (size_t j = 0; j < k; ++j) {
      if (IndexOf(history, view.entries()[j].segment_id) >= start) {
        k = j;
        break;
      }
    }
  }
  return start;
}

// The client sent every message of its view: the index in `history` of the first rendered segment
// after the view's last one, which the client never saw (history.size() when there is none); sets
// `*reason` when there is one.
size_t StartOfUnknownSegments(const ClientView& view, const std::vector<const Segment*>& history,
                              std::string* reason) {
  const size_t n = view.entries().size();
  size_t after = 0;
  if (n > 0) after = IndexOf(history, view.entries()[n - 1].segment_id) + 1;
  size_t start = history.size();
  size_t unknown = 0;
  for (size_t i = after; i < history.size(); ++i) {
    if (Rendered(*history[i])) {
      if (start == history.size()) start = i;
      ++unknown;
    }
  }
  if (unknown > 0) {
    *reason = std::to_string(unknown) + " history message" + (unknown == 1 ? "" : "s") +
              " the client did not send";
  }
  return start;
}

// The agent's last reply may hold tool calls the client answers no more (it replaced them): a
// context edits no history while calls are open, so they get a placeholder result, evicted with
// the rest (the open calls belong to the last reply, which is inside the replaced range). Returns
// whether there were any (the context's segments changed).
StatusOr<bool> AnswerOpenToolCalls(Context& context) {
  const std::vector<std::string> open = context.OpenToolCalls();
  for (const std::string& call_id : open) {
    StatusOr<std::string> answered = context.AppendToolResult(
        {call_id, "[strata: the client replaced the history before answering this call]", false});
    if (!answered.ok()) return answered.status();
  }
  return !open.empty();
}

// The "history_replaced" event of a replacement: into *events when given, else into the agent's
// store (when it has one).
void RecordReplacement(Agent& agent, const ReconcileOutcome& outcome, size_t client_messages,
                       size_t view_messages, std::vector<StoredEvent>* events) {
  Store* store = agent.store();
  if (store == nullptr && events == nullptr) return;
  StoredEvent event;
  event.agent_id = agent.id();
  event.turn = static_cast<int64_t>(agent.context().Stats().turns);
  event.type = "history_replaced";
  const json payload = {{"reason", outcome.reason},
                        {"first_difference", outcome.first_difference},
                        {"evicted_segments", outcome.evicted_segments},
                        {"client_messages", client_messages},
                        {"view_messages", view_messages}};
  event.payload_json = payload.dump();
  if (events != nullptr) {
    events->push_back(std::move(event));
    return;
  }
  store->AppendEvent(event).status().IgnoreError();
}

// Appends one client message to the agent; the id of the segment it became.
StatusOr<std::string> AppendClientMessage(Agent& agent, const ChatEntry& entry) {
  const ChatMessage& message = *entry;
  StatusOr<std::string> id = InternalError("unreachable");
  if (message.role == "user") {
    id = agent.context().AppendUser(message.content);
  } else if (message.role == "assistant") {
    AssistantMessage a;
    a.content = message.content;
    a.reasoning = message.reasoning;
    a.tool_calls = message.tool_calls;
    id = agent.context().AppendAssistant(std::move(a));
  } else {
    id = agent.context().AppendToolResult({message.tool_call_id, message.content, false});
  }
  if (!id.ok()) {
    return Status(id.status().code(), MessagePath(entry.index) + " (" + message.role +
                                          ") could not be added: " + id.status().message());
  }
  return id;
}

}  // namespace

StatusOr<ReconcileOutcome> Reconcile(const ParsedChat& chat, Agent& agent, ClientView* view,
                                     std::vector<StoredEvent>* events) {
  ReconcileOutcome outcome;
  Context& context = agent.context();
  // Pointers into the context (Segments() would copy every segment's content on every turn),
  // valid until it changes.
  std::vector<const Segment*> history = context.LayerSegments(Layer::kHistory);
  TrimViewToAgent(context, history, view);
  if (!SystemPromptsAre(agent, chat.system)) {
    STRATA_RETURN_IF_ERROR(context.SetSystemPrompts(chat.SystemPrompts()));
    outcome.system_changed = true;
    history = context.LayerSegments(Layer::kHistory);
  }

  const size_t n = view->entries().size();
  const size_t m = chat.history.size();
  size_t k = 0;
  // A view saved before digests were canonical holds the byte digest of what the client sent.
  while (k < n && k < m &&
         (view->entries()[k].digest == chat.history[k]->digest ||
          (!chat.history[k]->tool_calls.empty() &&
           view->entries()[k].digest == LegacyMessageDigest(*chat.history[k])))) {
    ++k;
  }

  // Every rendered history segment from history[start] on is evicted.
  const size_t start = k < n ? StartOfClientEdit(chat, *view, history, &k, &outcome.reason)
                             : StartOfUnknownSegments(*view, history, &outcome.reason);
  outcome.kept = k;
  if (start < history.size()) {
    STRATA_ASSIGN_OR_RETURN(bool answered, AnswerOpenToolCalls(context));
    if (answered) history = context.LayerSegments(Layer::kHistory);
  }

  HistoryEdit edit;
  for (size_t i = start; i < history.size(); ++i) {
    if (Rendered(*history[i])) {
      edit.edits.push_back({history[i]->id, SegmentEdit::Action::kEvict, ""});
    }
  }
  if (k < n || !edit.empty()) {
    outcome.replaced = true;
    outcome.first_difference = k;
    outcome.evicted_segments = edit.edits.size();
    if (!edit.empty()) {
      StatusOr<CompactionReport> applied =
          context.ApplyEdit(edit, kReconcilePolicy, "client history replaced: " + outcome.reason);
      if (!applied.ok()) {
        return Status(
            applied.status().code(),
            "cannot replace the agent's history from the client's " +
                (k < m ? MessagePath(chat.history[k].index) : std::string("last message")) +
                " on: " + applied.status().message());
      }
    }
    view->Truncate(k);
    RecordReplacement(agent, outcome, m, n, events);
  }

  for (size_t i = k; i < m; ++i) {
    STRATA_ASSIGN_OR_RETURN(std::string id, AppendClientMessage(agent, chat.history[i]));
    view->Append({chat.history[i]->digest, chat.history[i]->role, std::move(id)});
    ++outcome.appended;
  }
  return outcome;
}

void RecordReply(const Turn& turn, ClientView* view) {
  view->Append({ReplyDigest(turn.response), "assistant", turn.assistant_segment_id});
}

}  // namespace strata::sidecar
