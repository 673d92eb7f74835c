// The turn of one proxied chat completion (proxy_turn.h).
#include "proxy_turn.h"

#include <algorithm>
#include <nlohmann/json.hpp>

#include "proxy_recall.h"

namespace strata::sidecar {
namespace {

using json = nlohmann::json;

// When the client's history was replaced, the prefix break the agent reports says so.
void ExplainBreak(const ReconcileOutcome& outcome, Turn* turn) {
  if (!outcome.replaced || !turn->prefix_break) return;
  const std::string cause = "client history replaced (" + outcome.reason + ")";
  turn->break_causes.insert(turn->break_causes.begin(), cause);
  turn->prefix_break->reason = cause + "; " + turn->prefix_break->reason;
}

// The first round's TurnOptions::before_build: the client's messages reconciled into the agent's
// context (collected into the turn's commit), the notes of what that did, and the refusal of an
// oversized message (ProxyOptions::reject_oversized). Then the completion counts as begun
// (*in_flight, the metrics' hook), with the reconciled context's input tokens.
Status ReconcileInTurn(const ProxyOptions& options, StreamJob& job,
                       std::shared_ptr<void>* in_flight) {
  Agent& agent = job.lease.agent();
  StatusOr<ReconcileOutcome> outcome = Reconcile(job.chat, agent, &job.view, &job.events);
  if (!outcome.ok()) {
    job.refused_before_send = true;
    return outcome.status();
  }
  job.notes.outcome = *outcome;
  job.notes.hygiene = HygieneNotes(agent, job.chat, job.view, outcome->appended);
  job.notes.oversized = OversizedNote(agent, job.chat, job.view, outcome->appended);
  if (!job.notes.oversized.empty() && options.reject_oversized) {
    job.refused_before_send = true;
    job.rejected_oversized = true;
    return InvalidArgumentError(job.notes.oversized + " (oversized: reject)");
  }
  if (options.on_complete_begin) {
    // The context's count (kept as it changes): no request is rendered for the metrics.
    *in_flight =
        options.on_complete_begin(job.tenant, static_cast<int64_t>(agent.context().InputTokens()),
                                  agent.config().endpoint.max_output_tokens);
  }
  return Status::Ok();
}

// Whether the sidecar answers `turn`'s calls and sends again (its context_recall calls, before
// the last round), after `rounds` such rounds.
bool AnotherRound(const ProxyOptions& options, const Turn& turn, int rounds) {
  return options.recall_tool && OnlyRecallCalls(turn.response) && rounds < kMaxRecallRounds;
}

// The turn and its context_recall rounds, each one Agent::Complete (one Store::CommitTurn) that
// undoes to the caller's mark: a failed round undoes the earlier ones too.
StatusOr<Turn> RunRounds(const ProxyOptions& options, StreamJob& job, TurnOptions with,
                         std::shared_ptr<void>* in_flight) {
  Agent& agent = job.lease.agent();
  int rounds = 0;
  Response answered;  // the previous round's answer, whose recall calls the next round answers
  with.undo_to_caller_mark = true;
  // Every round stores the client's view as it is then: with the reconciled messages, and the
  // reply the client is given once the last round answered (recorded into job.view here). The
  // first stores the reconciliation's events too.
  with.before_commit = [&](const Turn& turn, TurnWrites* writes) -> Status {
    if (!AnotherRound(options, turn, rounds)) RecordReply(turn, &job.view);
    // The header and the chunks from the first entry the turn changed.
    for (auto& write : job.view.Writes()) writes->state.push_back(std::move(write));
    if (rounds == 0)
      writes->events.insert(writes->events.end(), job.events.begin(), job.events.end());
    return Status::Ok();
  };
  with.before_build = [&] { return ReconcileInTurn(options, job, in_flight); };
  StatusOr<Turn> turn = agent.Complete(with);
  // context_recall calls are the sidecar's to answer (recall_tool): answered, and sent again.
  while (turn.ok() && AnotherRound(options, *turn, rounds)) {
    job.rounds_committed = ++rounds;
    if (options.on_turn) options.on_turn(job.tenant, *turn);
    answered = std::move(turn->response);
    with.before_build = [&] { return AnswerRecallCalls(agent, answered); };
    turn = agent.Complete(with);
  }
  return turn;
}

}  // namespace

StatusOr<std::shared_ptr<StreamJob>> PrepareJob(AgentRegistry& registry, const TenantConfig& tenant,
                                                const std::string& agent_id, ChatRequest& request,
                                                bool recall_tool) {
  STRATA_ASSIGN_OR_RETURN(CompletionSlot slot, registry.BeginCompletion(tenant));
  AgentConfig config = registry.DefaultConfig(tenant, agent_id);
  // The client runs its own tools: the agent's context_recall is offered to the model only with
  // recall_tool, and then answered here.
  config.recall.expose_tool = recall_tool;
  if (!request.model.empty()) config.render.model = request.model;
  STRATA_ASSIGN_OR_RETURN(AgentLease lease, registry.AcquireOrCreate(tenant, agent_id, &config));

  auto job = std::make_shared<StreamJob>();
  // Tools first (a change is stored at once and re-opens the agent; the snapshot taken then lets a
  // failed turn undo it), then the history, in the turn.
  if (!HasWantedTools(lease.agent(), *request.tools, recall_tool)) {
    const json wanted = WantedTools(request.tools->value, recall_tool);
    job->before = lease.agent().context().Snapshot();
    Status set = lease.agent().context().SetTools(wanted.dump());
    if (!set.ok()) return Status(set.code(), "\"tools\": " + set.message());
    STRATA_RETURN_IF_ERROR(registry.Reopen(lease));
  }
  Agent& agent = lease.agent();
  STRATA_ASSIGN_OR_RETURN(job->view, LoadClientView(agent));
  if (recall_tool) job->loaded_view = job->view;
  job->notes.ignored = request.ignored;
  if (!request.model.empty() && request.model != agent.config().render.model) {
    // The agent keeps its model (its prefix, tokenizer and records are the model's): said so.
    job->notes.ignored.push_back("model");
    std::sort(job->notes.ignored.begin(), job->notes.ignored.end());
  }
  job->model = agent.config().render.model;
  job->lease = std::move(lease);
  job->slot = std::move(slot);
  job->chat = std::move(request.chat);
  job->tenant = tenant.name;
  job->agent_id = agent_id;
  job->include_usage = request.include_usage;
  job->forwarded = std::move(request.forwarded);
  return job;
}

StatusOr<Turn> CompleteJob(const ProxyOptions& options, StreamJob& job,
                           const TurnOptions& turn_options) {
  Agent& agent = job.lease.agent();
  std::shared_ptr<void> in_flight;  // ProxyOptions::on_complete_begin, once reconciled
  const int64_t failures_before = agent.record_write_failures();
  TurnOptions with_fields = turn_options;
  with_fields.extra_fields = job.forwarded;
  agent.context().Mark();  // every round undoes to here
  StatusOr<Turn> turn = RunRounds(options, job, std::move(with_fields), &in_flight);
  agent.context().ClearMark();
  const int64_t refused = agent.record_write_failures() - failures_before;
  if (refused > 0 && options.on_record_write_failures) {
    options.on_record_write_failures(job.tenant, refused);
  }
  if (!turn.ok()) {
    // A failed turn changes nothing: the rounds undid themselves; the view a committed round
    // stored and a change of tools are undone here (a lost write is repaired by the next
    // reconcile; the client's retry sets the tools again).
    if (job.rounds_committed > 0 && job.loaded_view) {
      SaveClientView(agent, std::move(*job.loaded_view)).IgnoreError();
    }
    if (job.before) agent.context().Rewind(std::move(*job.before)).IgnoreError();
    job.before.reset();
    return turn;
  }
  // The view is stored: the next request of this conversation takes it without reading it back.
  job.view.Stored();
  KeepClientView(agent.id(), std::move(job.view));
  ExplainBreak(job.notes.outcome, &*turn);
  if (options.on_turn) options.on_turn(job.tenant, *turn);
  return turn;
}

HttpReply RejectOversized(const ProxyOptions& options, const StreamJob& job) {
  if (options.on_error) options.on_error(job.tenant, StatusCode::kInvalidArgument);
  HttpReply reply;
  reply.status = 413;
  reply.body = OpenAiErrorJson(job.notes.oversized +
                                   " (oversized: reject): split it, or send less of it; with "
                                   "oversized: summarize the sidecar compacts it to fit",
                               "invalid_request_error", "context_length_exceeded");
  reply.headers.push_back({"X-Strata-Agent", job.agent_id});
  reply.headers.push_back({"X-Strata-Oversized", job.notes.oversized + ": refused"});
  return reply;
}

}  // namespace strata::sidecar
