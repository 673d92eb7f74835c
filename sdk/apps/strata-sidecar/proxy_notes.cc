// What the proxy tells a client it did (proxy_notes.h).
#include "proxy_notes.h"

#include "strata/budget.h"
#include "strata/context.h"

namespace strata::sidecar {
namespace {

using json = nlohmann::json;

// The segments of the last `appended` view entries, with the client message each came from.
template <typename Fn>
void ForEachAppended(const Agent& agent, const ParsedChat& chat, const ClientView& view,
                     size_t appended, Fn&& fn) {
  const size_t n = view.entries().size();
  const size_t m = chat.history.size();
  for (size_t i = 0; i < appended && i < n && i < m; ++i) {
    const Segment* s = agent.context().Find(view.entries()[n - appended + i].segment_id);
    if (s != nullptr) fn(chat.history[m - appended + i], *s);
  }
}

}  // namespace

json ReconcileJson(const ReconcileOutcome& o) {
  json j = {{"kept", o.kept}, {"appended", o.appended}, {"replaced", o.replaced}};
  if (o.replaced) {
    j["first_difference"] = o.first_difference;
    j["evicted_segments"] = o.evicted_segments;
    j["reason"] = o.reason;
  }
  if (o.system_changed) j["system_changed"] = true;
  return j;
}

std::string ReconcileHeader(const ReconcileOutcome& o) {
  if (!o.replaced) return "appended " + std::to_string(o.appended);
  return "replaced from message " + std::to_string(o.first_difference) + ": " + o.reason;
}

json HygieneNotes(const Agent& agent, const ParsedChat& chat, const ClientView& view,
                  size_t appended) {
  json notes = json::array();
  ForEachAppended(agent, chat, view, appended, [&](const ChatEntry& m, const Segment& s) {
    if (s.hygiene == HygieneAction::kNone) return;
    json note = {{"message", m.index}, {"action", std::string(HygieneActionName(s.hygiene))}};
    if (!s.duplicate_of.empty()) note["duplicate_of"] = s.duplicate_of;
    if (!s.recall_id.empty()) note["recall_id"] = s.recall_id;
    notes.push_back(std::move(note));
  });
  return notes;
}

std::string HygieneHeader(const json& hygiene) {
  std::string out;
  for (const json& n : hygiene) {
    out += (out.empty() ? "" : "; ") + MessagePath(n["message"].get<size_t>()) + " " +
           n["action"].get<std::string>();
    if (n.contains("duplicate_of")) {
      out += " (same output as " + n["duplicate_of"].get<std::string>() + ")";
    } else if (n.contains("recall_id")) {
      out += " (recall " + n["recall_id"].get<std::string>() + ")";
    }
  }
  return out;
}

std::string OversizedNote(const Agent& agent, const ParsedChat& chat, const ClientView& view,
                          size_t appended) {
  const std::optional<Budget>& budget = agent.context().options().budget;
  if (!budget) return "";
  const int64_t usable = UsableInputTokens(*budget);
  std::string note;
  ForEachAppended(agent, chat, view, appended, [&](const ChatEntry& m, const Segment& s) {
    if (note.empty() && static_cast<int64_t>(s.tokens) > usable) {
      note = MessagePath(m.index) + " has " + std::to_string(s.tokens) + " tokens, above the " +
             std::to_string(usable) + " the budget leaves for input";
    }
  });
  return note;
}

json CompactionJson(const CompactionReport& c) {
  return {{"policy", c.policy},
          {"reason", c.reason},
          {"tokens_before", c.tokens_before},
          {"tokens_after", c.tokens_after},
          {"invalidated_tokens", c.invalidated_tokens},
          {"masked", c.masked},
          {"evicted", c.evicted},
          {"summarized", c.summarized}};
}

std::string CompactionHeader(const std::vector<CompactionReport>& compactions) {
  std::string out;
  for (const CompactionReport& c : compactions) {
    out += (out.empty() ? "" : "; ") + std::string("policy ") + c.policy + ": " +
           std::to_string(c.tokens_before) + " -> " + std::to_string(c.tokens_after) +
           " tokens (masked " + std::to_string(c.masked) + ", evicted " +
           std::to_string(c.evicted) + ", summarized " + std::to_string(c.summarized) + ")";
  }
  return out;
}

json StrataJson(const std::string& agent_id, const TurnNotes& notes, const Turn& turn) {
  json j = {{"agent", agent_id},
            {"request_id", turn.record.request_id},
            {"reconcile", ReconcileJson(notes.outcome)},
            {"hygiene", notes.hygiene},
            {"ignored_fields", notes.ignored},
            {"oversized", notes.oversized.empty() ? json(nullptr) : json(notes.oversized)},
            {"input_tokens", turn.record.input_tokens},
            {"cached_tokens_predicted", turn.record.cached_tokens_predicted},
            {"prefix_break", nullptr},
            {"compaction", nullptr}};
  if (turn.prefix_break) j["prefix_break"] = turn.prefix_break->reason;
  if (!turn.compactions.empty()) j["compaction"] = CompactionJson(turn.compactions.front());
  return j;
}

std::vector<std::pair<std::string, std::string>> NoteHeaders(const TurnNotes& notes) {
  std::vector<std::pair<std::string, std::string>> headers;
  headers.push_back({"X-Strata-Reconcile", ReconcileHeader(notes.outcome)});
  if (std::string h = HygieneHeader(notes.hygiene); !h.empty()) {
    headers.push_back({"X-Strata-Hygiene", h});
  }
  if (!notes.oversized.empty()) {
    headers.push_back({"X-Strata-Oversized", notes.oversized + ": compacted to fit (oversized: summarize)"});
  }
  std::string ignored;
  for (const std::string& field : notes.ignored) ignored += (ignored.empty() ? "" : ",") + field;
  if (!ignored.empty()) headers.push_back({"X-Strata-Ignored-Fields", ignored});
  return headers;
}

}  // namespace strata::sidecar
