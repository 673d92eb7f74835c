// One Agent turn (agent_impl.h): build, predict, send, append the reply, explain a prefix break,
// commit; and Agent::Run's loop over turns and tool calls.
#include <algorithm>
#include <chrono>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "agent/agent_impl.h"
#include "agent/cache_state.h"
#include "agent/tool_arguments.h"
#include "agent/turn_fields.h"
#include "strata/pool_call.h"
#include "strata/transport.h"

namespace strata {

using agent_internal::BatchSink;
using agent_internal::CheckTurnFields;
using agent_internal::MergeTurnFields;
using agent_internal::TurnBatch;
using turn_internal::PrefixReference;
using turn_internal::TurnRun;

namespace {

// Adds the tokens of a turn's summary requests (Turn::compaction_requests) to its growth point.
void AddSummaryTokens(const std::vector<RequestRecord>& requests, GrowthPoint* point) {
  for (const RequestRecord& r : requests) {
    point->summary_input_tokens += r.input_tokens;
    point->summary_cached_tokens +=
        std::min(r.cached_tokens_reported.value_or(r.cached_tokens_predicted), r.input_tokens);
    point->summary_output_tokens += r.output_tokens;
  }
}

}  // namespace

StatusOr<turn_internal::SharedPrompt> Agent::Impl::Prompts::Render(std::string_view body) {
  turn_internal::SharedPrompt prompt;
  STRATA_ASSIGN_OR_RETURN(prompt.text, impl_->PromptOf(body));
  return prompt;
}
void Agent::Impl::Prompts::BeginBuild() {
  if (impl_->counter_ != nullptr) impl_->counter_->Forget();
}
StatusOr<turn_internal::SharedPrompt> Agent::Impl::Prompts::RenderBuilt(std::string_view body) {
  // The context counts through counter_, whose render is PromptOf's (prompt_tokens_->Render).
  if (impl_->counter_ != nullptr) {
    if (std::shared_ptr<const std::string> text = impl_->counter_->TakeCounted(body.size())) {
      turn_internal::SharedPrompt prompt;
      prompt.text = std::move(text);
      return prompt;
    }
  }
  return Render(body);
}
size_t Agent::Impl::Prompts::Count(std::string_view text) { return impl_->tokenizer_->Count(text); }
std::shared_ptr<const PromptBlocks> Agent::Impl::Prompts::Hash(std::string_view text,
                                                               std::string_view salt) {
  return impl_->prompt_tokens_->Hash(text, salt, impl_->config_.cache);
}
bool Agent::Impl::Prompts::exact() const { return impl_->prompt_tokens_->exact(); }
size_t Agent::Impl::Prompts::bytes_per_token() const {
  return impl_->config_.cache.bytes_per_token;
}

BuildOptions Agent::Impl::Fields(const std::string& request_id) const {
  RequestFields fields;
  fields.stream = config_.endpoint.stream;
  fields.max_output_tokens = config_.endpoint.max_output_tokens;
  if (config_.endpoint.send_cache_salt) fields.cache_salt = salt_;
  fields.request_id = request_id;
  fields.thinking = config_.endpoint.thinking;
  fields.reasoning_effort = config_.endpoint.reasoning_effort;
  BuildOptions build;
  build.extra_fields = ProfileFields(backend_, fields);
  return build;
}

StatusOr<std::shared_ptr<const std::string>> Agent::Impl::PromptOf(std::string_view body) const {
  if (template_) {
    // The count's render, shared: no copy of the prompt.
    StatusOr<std::shared_ptr<const std::string>> text = prompt_tokens_->Render(*template_, body);
    if (text.ok()) return text;
  }
  STRATA_ASSIGN_OR_RETURN(PromptText prompt, RenderPromptText(body));
  return std::make_shared<const std::string>(std::move(prompt.text));
}

agent_internal::DegradationHost Agent::Impl::DegradationHostFor(const BuildOptions& fields) {
  agent_internal::DegradationHost host;
  host.agent_id = config_.identity.id;
  host.context = context_.get();
  host.policy = goal_policy_;
  host.summarizer = shared_.summarizer;
  host.tokenizer = tokenizer_;
  host.budget = budget_;
  host.budget_config = config_.budget;
  host.fields = fields;
  // The previous request is this agent's: a fork's build must not continue it.
  host.summary_request = fields.summary_request;
  host.fields.summary_request = nullptr;
  host.store = shared_.store;
  host.count = [this](const std::string& body) -> StatusOr<int64_t> {
    STRATA_ASSIGN_OR_RETURN(std::shared_ptr<const std::string> prompt, PromptOf(body));
    return static_cast<int64_t>(prompt_tokens_->Count(*prompt));
  };
  host.fork = [this](std::string task, const ForkOptions& options) {
    return ForkLocked(std::move(task), options);
  };
  return host;
}

turn_internal::TurnEnv Agent::Impl::TurnEnv() {
  turn_internal::TurnEnv env;
  env.transport = shared_.transport;
  env.clock = shared_.clock;
  env.model = model_.get();
  env.prompt = prompts_.get();
  env.salt = salt_;
  env.write_failures = &write_failures_;
  return env;
}

CallOptions Agent::Impl::CallFor(const TurnOptions& options, const TurnRun& run) const {
  CallOptions call;
  call.deadline = std::chrono::milliseconds(config_.endpoint.deadline_ms);
  call.cancel = options.cancel;
  call.headers = options.headers;
  call.on_delta = options.on_delta;
  if (shared_.transport->Name() == "pools") {
    call.headers.emplace_back(kPrefixHashHeader, run.built().stable_prefix_hash);
  }
  return run.CallFor(std::move(call));
}

Status Agent::Impl::AdoptDegraded(const agent_internal::AgentDegradation& degrade, bool forked,
                                  bool compacted, TurnRun* run) {
  if (forked) return run->AnalyzeInstead(*degrade.sent(), reference_);
  if (degrade.sent()) return run->Analyze(*context_, *degrade.sent(), reference_, compacted);
  if (!degrade.compactions().empty()) {
    // Compacted, but the pool then took another step and sent the request as built: the
    // context is smaller now, what the server got is not.
    run->Resign(*context_, reference_);
  }
  return Status::Ok();
}

void Agent::Impl::AddCompaction(const CompactionReport& report, Turn* turn) {
  turn->compactions.push_back(report);
  if (batch_ == nullptr || !batch_->active()) return;
  StoredEvent e;
  e.agent_id = config_.identity.id;
  e.turn = static_cast<int64_t>(context_->Stats().turns);
  e.type = "compaction";
  e.payload_json = CompactionReportJson(report);
  batch_->writes().events.push_back(std::move(e));
}

Status Agent::Impl::FailTurn(TurnRun& run, TurnBatch& batch, Status status) {
  run.Fail(status);
  batch.Discard();
  if (shared_.store == nullptr) return status;
  Status written = shared_.store->AppendRequest(run.record());
  if (written.ok()) return status;
  write_failures_.fetch_add(1);
  return Status(status.code(), status.message() + " (its request record was not stored either: " +
                                   written.message() + ")");
}

Status Agent::Impl::SendTurn(const TurnOptions& options, const BuildOptions& fields, TurnRun& run,
                             Turn* turn, bool* forked) {
  CallOptions call = CallFor(options, run);
  agent_internal::AgentDegradation degrade(DegradationHostFor(fields));
  call.degradation = &degrade;
  if (options.on_send) options.on_send(run.record().request_id);
  Status sent = run.Send(call, &turn->response);
  degrade.Apply(&run.record());
  *forked = degrade.child() != nullptr && degrade.sent().has_value();
  for (const CompactionReport& c : degrade.compactions()) AddCompaction(c, turn);
  STRATA_RETURN_IF_ERROR(AdoptDegraded(degrade, *forked, !turn->compactions.empty(), &run));
  STRATA_RETURN_IF_ERROR(sent);
  if (*forked) {
    const Response& resp = turn->response;
    AssistantMessage reply;
    reply.content = resp.content;
    reply.reasoning = resp.reasoning;
    reply.tool_calls = agent_internal::KeepableToolCalls(resp.tool_calls);
    Status kept = degrade.child()->context().AppendAssistant(std::move(reply)).status();
    if (!kept.ok()) run.Warn("the fork's reply was not kept in its context: " + kept.message());
  }
  return Status::Ok();
}

StatusOr<Turn> Agent::Impl::Complete(const TurnOptions& options) {
  if (shared_.transport == nullptr) {
    return FailedPreconditionError(
        "agent \"" + config_.identity.id +
        "\" has no endpoint: set endpoint.base_url in its configuration or "
        "inject AgentServices::transport");
  }
  STRATA_RETURN_IF_ERROR(CheckTurnFields(options.extra_fields));  // before any change
  TurnBatch batch(shared_.store, journal_.get(), config_.identity.id);
  batch_ = &batch;
  struct Unset {
    TurnBatch** batch;
    ~Unset() { *batch = nullptr; }
  } unset{&batch_};
  // The caller's changes first, collected with the turn's (its error: nothing sent or recorded).
  if (options.before_build) STRATA_RETURN_IF_ERROR(options.before_build());
  STRATA_RETURN_IF_ERROR(ExpireProtections());
  TurnRun run(TurnEnv(), *context_, ids_->Next(config_.identity.id));
  BuildOptions fields = Fields(run.record().request_id);
  MergeTurnFields(options.extra_fields, &fields);

  Turn turn;
  CompactionRecords compaction_records(&batch, &turn);
  const SummaryRequestContext previous =
      PreviousRequest(run.record().request_id, &compaction_records);
  fields.summary_request = &previous;
  Status built = run.Build(*context_, fields, reference_);
  if (!built.ok()) return FailTurn(run, batch, built);
  if (run.built().compaction) AddCompaction(*run.built().compaction, &turn);
  bool forked = false;
  // A pool's degradation may summarize too: it continues the same previous request.
  Status sent = SendTurn(options, fields, run, &turn, &forked);
  fields.summary_request = nullptr;
  if (!sent.ok()) return FailTurn(run, batch, sent);
  const Response& resp = turn.response;
  // The reference advances in place (a fork's request is not this agent's history: its hashes stay).
  run.Finish(resp, &reference_, /*keep_reference=*/forked);
  AssistantMessage message;
  message.content = resp.content;
  message.reasoning = resp.reasoning;
  message.tool_calls = agent_internal::KeepableToolCalls(resp.tool_calls);
  StatusOr<std::string> appended = context_->AppendAssistant(std::move(message));
  if (!appended.ok()) {
    return FailTurn(run, batch,
                    Status(appended.status().code(), "the server's reply could not be appended: " +
                                                         appended.status().message()));
  }
  turn.assistant_segment_id = *appended;
  last_assistant_id_ = *appended;
  turn.prefix_break = run.prefix_break();
  turn.break_causes = run.break_causes();
  // The reference of the next request, and what the server's cache now holds, for a reopen (kept
  // only where it is stored: its header, and its chunks from the first block or segment changed).
  if (shared_.store != nullptr) {
    const PromptBlocks& blocks = run.blocks();
    for (auto& [key, value] :
         cache_writer_.Writes(blocks.salt, blocks.block_tokens,
                              forked ? reference_.hashes : blocks.hashes, reference_)) {
      STRATA_RETURN_IF_ERROR(SaveState(key, value));
    }
  }
  int64_t invalidated = 0;
  for (const CompactionReport& c : turn.compactions)
    invalidated += static_cast<int64_t>(c.invalidated_tokens);
  turn.growth =
      GrowthPointOf(*context_, static_cast<int64_t>(turn.compactions.size()), invalidated);
  AddSummaryTokens(turn.compaction_requests, &turn.growth);
  BatchSink sink(&batch, static_cast<int64_t>(context_->Stats().turns));
  run.Emit(batch.active() ? &sink : nullptr);
  if (batch.active()) batch.writes().growth = turn.growth;
  if (options.before_commit) {
    TurnWrites unstored;  // without a store, what it adds goes nowhere
    Status added = options.before_commit(turn, batch.active() ? &batch.writes() : &unstored);
    if (!added.ok()) return FailTurn(run, batch, added);
  }
  if (Status committed = batch.Commit(); !committed.ok()) {
    write_failures_.fetch_add(1);
    return FailTurn(run, batch, committed);
  }
  cache_writer_.Stored();  // the chunks it wrote are stored: the next turn writes from its end
  turn.record = run.record();
  turn.warnings = run.warnings();
  turn.body = std::move(run.mutable_built().body);
  turn.render_serial = forked ? 0 : run.built().render_serial;
  if (!forked) KeepLastRequest(run, turn.body);
  return turn;
}

StatusOr<RunResult> Agent::Impl::RunLocked(std::string user_message, const RunOptions& options) {
  RunResult result;
  if (!user_message.empty())
    STRATA_RETURN_IF_ERROR(context_->AppendUser(std::move(user_message)).status());
  // Answer calls left open by an earlier Complete() first, so that the request is valid.
  STRATA_RETURN_IF_ERROR(Dispatch(&result));
  for (int i = 0; i < options.max_turns; ++i) {
    STRATA_ASSIGN_OR_RETURN(Turn turn, Complete(options.turn));
    const bool calls = !turn.response.tool_calls.empty();
    result.answer = turn.response.content;
    result.turns.push_back(std::move(turn));
    if (!calls) {
      result.stopped = "answer";
      return result;
    }
    STRATA_RETURN_IF_ERROR(Dispatch(&result));
  }
  result.stopped = "max_turns";
  return result;
}

}  // namespace strata
