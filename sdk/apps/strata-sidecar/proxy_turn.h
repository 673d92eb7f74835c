// proxy_turn.h — the turn of one proxied chat completion (Proxy::ChatCompletions): the agent
// leased and its tools set, then one Agent::Complete per upstream call. The first one's
// TurnOptions::before_build reconciles the client's messages into the agent's context (a
// context_recall round's answers the sidecar's recall calls instead), and its before_commit adds
// the client's view and the reconciliation's event, so that the turn's changes, record, growth,
// cache state and view are one Store::CommitTurn, durable before the answer goes out. A failed
// turn (the upstream, a recall round, a refused write, an oversized message refused) is undone
// whole: the agent's context as it was, nothing of it stored but the failed request's record.
//
// Thread safety: a job is used by one thread at a time, under the agent's lease.
#ifndef STRATA_APPS_STRATA_SIDECAR_PROXY_TURN_H_
#define STRATA_APPS_STRATA_SIDECAR_PROXY_TURN_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "proxy.h"
#include "proxy_notes.h"
#include "reconcile.h"
#include "registry.h"
#include "strata/agent.h"
#include "strata/status.h"

namespace strata::sidecar {

// Everything a proxied turn needs, also after the handler returned (a stream; the lease keeps the
// agent).
struct StreamJob {
  AgentLease lease;
  CompletionSlot slot;
  ParsedChat chat;  // the client's messages, reconciled inside the turn
  // The client's view as stored, then as the turn makes it; given to KeepClientView once the
  // turn succeeded.
  ClientView view;
  // With context_recall rounds (each stores the view), the view as loaded: what a failed turn
  // stores again.
  std::optional<ClientView> loaded_view;
  // The reconciliation's events, stored with the turn.
  std::vector<StoredEvent> events;
  TurnNotes notes;  // what the sidecar did besides sending (proxy_notes.h), known once it ran
  std::string tenant;
  std::string agent_id;
  std::string completion_id;
  std::string model;
  int64_t created = 0;
  bool include_usage = false;
  // The client's other request fields, sent upstream unchanged (TurnOptions::extra_fields).
  std::vector<std::pair<std::string, std::string>> forwarded;
  // The context before the request changed the agent's tools (only then: that change is stored
  // before the turn): a failed turn goes back to it.
  std::optional<ContextSnapshot> before;
  // The turn failed before anything was sent: the error is the request's, not the upstream's.
  bool refused_before_send = false;
  // The turn was refused for an oversized message (ProxyOptions::reject_oversized).
  bool rejected_oversized = false;
  // context_recall rounds committed before the last one (each stored the client's view).
  int rounds_committed = 0;
};

// Leases agent `agent_id` for the request (creating it on first use), brings its tools in line
// with the request's (a change is stored at once, and the agent reopened) and loads the client's
// view: the job of the turn to answer. The messages are reconciled by CompleteJob, in the turn.
StatusOr<std::shared_ptr<StreamJob>> PrepareJob(AgentRegistry& registry, const TenantConfig& tenant,
                                                const std::string& agent_id, ChatRequest& request,
                                                bool recall_tool);

// Runs the job's turn (with `turn_options`; the client's other fields forwarded) and its
// context_recall rounds (ProxyOptions::recall_tool), each one Store::CommitTurn; a failure undoes
// every round. Reports the turn and refused writes to `options`' hooks.
StatusOr<Turn> CompleteJob(const ProxyOptions& options, StreamJob& job,
                           const TurnOptions& turn_options);

// The 413 of a request with an oversized message (ProxyOptions::reject_oversized), whose turn
// CompleteJob refused (nothing changed).
HttpReply RejectOversized(const ProxyOptions& options, const StreamJob& job);

}  // namespace strata::sidecar

#endif  // STRATA_APPS_STRATA_SIDECAR_PROXY_TURN_H_
