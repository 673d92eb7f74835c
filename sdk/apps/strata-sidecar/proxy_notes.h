// proxy_notes.h — what the proxy tells a client it did with its request, so that nothing is done
// silently: each action has a response header (X-Strata-*) and a field of the answer's "strata"
// object (docs/sidecar.md, "Answers and headers").
//
//   reconcile   X-Strata-Reconcile       "appended N" or "replaced from message K: why"
//   hygiene     X-Strata-Hygiene         what append-time hygiene did to the client's new messages
//                                        ("messages[5] truncated (recall r-...)"), "; "-separated
//   compaction  X-Strata-Compaction      "policy P: T1 -> T2 tokens (masked M, evicted E,
//                                        summarized S)" for each compaction before the request
//   oversized   X-Strata-Oversized       a new message above the usable input tokens, and what was
//                                        done (summarized, or refused with 413 when
//                                        oversized = "reject")
//   ignored     X-Strata-Ignored-Fields  request fields dropped (the agent owns them), and "model"
//                                        when it differs from the agent's model
//
// Thread safety: pure functions.
#ifndef STRATA_APPS_STRATA_SIDECAR_PROXY_NOTES_H_
#define STRATA_APPS_STRATA_SIDECAR_PROXY_NOTES_H_

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "reconcile.h"
#include "strata/agent.h"

namespace strata::sidecar {

// What the proxy did to one request besides sending it.
struct TurnNotes {
  ReconcileOutcome outcome;
  std::vector<std::string> ignored;                  // request fields ignored, sorted
  nlohmann::json hygiene = nlohmann::json::array();  // HygieneNotes()
  std::string oversized;                             // "" none; else OversizedNote()
};

nlohmann::json ReconcileJson(const ReconcileOutcome& o);
std::string ReconcileHeader(const ReconcileOutcome& o);

// Hygiene on the messages the request appended (the last `appended` entries of `view`, which are
// the last messages of `chat`): [{"message": i, "action": "truncated"|"deduplicated"|"folded",
// "recall_id": "r-..." (or "duplicate_of": "call_3")}], empty when none was altered.
nlohmann::json HygieneNotes(const Agent& agent, const ParsedChat& chat, const ClientView& view,
                            size_t appended);
// The X-Strata-Hygiene value of HygieneNotes() ("" when empty).
std::string HygieneHeader(const nlohmann::json& hygiene);

// The first message the request appended whose tokens are above the agent's usable input tokens
// (the budget's window less its reserves): "messages[1] has 750000 tokens, above the 114688 the
// budget leaves for input"; "" when none is (or the agent has no budget).
std::string OversizedNote(const Agent& agent, const ParsedChat& chat, const ClientView& view,
                          size_t appended);

nlohmann::json CompactionJson(const CompactionReport& c);
// The X-Strata-Compaction value of `compactions` ("" when none).
std::string CompactionHeader(const std::vector<CompactionReport>& compactions);

// The answer's "strata" object: agent, request_id, reconcile, hygiene, ignored_fields, oversized,
// input_tokens, cached_tokens_predicted, prefix_break, compaction.
nlohmann::json StrataJson(const std::string& agent_id, const TurnNotes& notes, const Turn& turn);

// The response headers of `notes` (X-Strata-Reconcile, and the others when they have something
// to say).
std::vector<std::pair<std::string, std::string>> NoteHeaders(const TurnNotes& notes);

}  // namespace strata::sidecar

#endif  // STRATA_APPS_STRATA_SIDECAR_PROXY_NOTES_H_
