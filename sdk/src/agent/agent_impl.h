// Agent::Impl, the state behind strata/agent.h, and what its parts share. Private to
// strata::agent. The members are defined by job, one file each:
//   agent.cc          the public Agent methods: locking, then forwarding to the Impl
//   agent_init.cc     construction: the configuration checked and turned into a tokenizer,
//                     template, policy, budget, transport and store (Init), the journal attached
//   agent_open.cc     Agent::Create and Agent::Open, and the state the agent keeps in the store
//                     beside its context (configuration, prefix-cache state, recall protections,
//                     joined originals)
//   agent_turn.cc     one turn (Complete, over transport/turn.h), and Run's loop
//   agent_tools.cc    the tools array, RegisterTool, dispatching tool calls, context_recall and
//                     its pages and protections
//   agent_predict.cc  what the next request would be, without sending it (PredictCachedTokens,
//                     PreviewRequest, InputTokens)
//   agent_fork.cc     Fork and Join
//   agent_summary.cc  the last request a cache-keeping summary continues, and the sink of the
//                     summary request's record
// The writes of a turn are collected and committed by agent/turn_batch.h. Every Impl member is
// used with mu_ held by the public method that called it.
#ifndef STRATA_AGENT_AGENT_IMPL_H_
#define STRATA_AGENT_AGENT_IMPL_H_

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "agent/cache_state.h"
#include "agent/degradation.h"
#include "agent/policy_config.h"
#include "agent/prompt_tokens.h"
#include "agent/turn_batch.h"
#include "agent/turn_rollback.h"
#include "core/growing_text.h"
#include "strata/agent.h"
#include "strata/chat_template.h"
#include "strata/prefix_cache.h"
#include "transport/turn.h"

namespace strata {

class Agent::Impl {
 public:
  // Keys of the agent's state in the store (Store::PutAgentState).
  static constexpr char kConfigKey[] = "config";
  static constexpr char kCacheKey[] = "prefix_cache";
  static constexpr char kTokenizerNameKey[] = "tokenizer_name";  // Tokenizer::Name() of the counts
  static constexpr char kProtectKey[] = "recall_protections";
  static constexpr char kJoinedKey[] = "joined_recall_ids";
  static constexpr char kOriginalPrefix[] = "original:";  // + recall id: a joined child's original

  // Pieces shared by an agent and its forks, owned by whoever created them. shared_ptr: a forked
  // child may outlive its parent (e.g. a sidecar closes the parent first) and keeps using the
  // store and transport the parent opened.
  struct Shared {
    std::shared_ptr<Store> store_owner;
    std::shared_ptr<Transport> transport_owner;
    std::shared_ptr<const Tokenizer> tokenizer_owner;  // null: tokenizer injected (or none yet)
    Store* store = nullptr;
    Transport* transport = nullptr;
    Summarizer* summarizer = nullptr;
    CompactionPolicy* policy = nullptr;  // injected, used instead of the configured one
    const Tokenizer* tokenizer = nullptr;
    Clock* clock = nullptr;  // never null: AgentServices::clock, else SystemClock()
  };

  struct Tool {
    std::string schema;  // canonical OpenAI tool object
    ToolHandler handler;
  };

  struct Protection {
    std::string segment_id;
    int64_t until_turn = 0;
  };

  // The prompts of this agent's requests for the turn (transport/turn.h): rendered by the chat
  // template through prompt_tokens_ (whose render the budget count shares), counted and hashed
  // incrementally.
  class Prompts final : public turn_internal::PromptModel {
   public:
    explicit Prompts(const Impl* impl) : impl_(impl) {}
    StatusOr<turn_internal::SharedPrompt> Render(std::string_view body) override;
    void BeginBuild() override;
    StatusOr<turn_internal::SharedPrompt> RenderBuilt(std::string_view body) override;
    size_t Count(std::string_view text) override;
    std::shared_ptr<const PromptBlocks> Hash(std::string_view text, std::string_view salt) override;
    bool exact() const override;
    size_t bytes_per_token() const override;

   private:
    const Impl* impl_;
  };

  // The request the next Complete() would send (a due compaction computed on a copy) and its
  // prediction: what PredictCachedTokens and PreviewRequest report.
  struct NextRequest {
    BuiltRequest built;
    CachePrediction prediction;
  };

  // ---------------------------------------------------------------------------- construction
  // (agent_init.cc)

  // The services an agent was given; a null clock becomes SystemClock().
  static Shared SharedFrom(const AgentServices& services);
  // An Impl for `config` over `shared`, initialized (Init); *options gets its context's options.
  static StatusOr<std::unique_ptr<Impl>> New(AgentConfig config, Shared shared,
                                             ContextOptions* options);
  // Checks the configuration and makes what it names (tokenizer, template, policy, budget,
  // transport, store) unless injected; fills the context's options.
  Status Init(ContextOptions* options);
  // With a store: the context's journal, wrapped so that a turn's changes are committed together.
  void AttachJournal(ContextOptions* options);

  // ---------------------------------------------------------------------------- persistence
  // (agent_open.cc)

  // Stores `value` under `key`; during a turn, with the turn's writes.
  Status SaveState(const std::string& key, const std::string& value);
  Status SaveProtections();
  // The prefix-cache state, recall protections and joined originals of a reopened agent.
  Status LoadPersistentState();

  // ---------------------------------------------------------------------------- a turn
  // (agent_turn.cc)

  // The request fields of this agent's endpoint, with `request_id`.
  BuildOptions Fields(const std::string& request_id) const;
  // The prompt text the server sees for `body` (the chat template's, else the generic one),
  // shared with the render memo.
  StatusOr<std::shared_ptr<const std::string>> PromptOf(std::string_view body) const;
  // What the degradation handler of one request (its `fields`) may do with this agent
  // (degradation.h).
  agent_internal::DegradationHost DegradationHostFor(const BuildOptions& fields);
  // What a turn works with (transport/turn.h).
  turn_internal::TurnEnv TurnEnv();
  // The call of a turn: deadline, cancellation, headers and deltas from `options`; for a
  // PoolSet, the stable layers' hash it routes by.
  CallOptions CallFor(const TurnOptions& options, const turn_internal::TurnRun& run) const;
  // After a pool's degradation step, what the server was sent instead becomes the request
  // analysed: a fork's request (its blocks are what the server now holds; this agent's own
  // history was not sent, so its previous request stays the reference for prefix breaks), or
  // this history compacted to fit a smaller pool.
  Status AdoptDegraded(const agent_internal::AgentDegradation& degrade, bool forked, bool compacted,
                       turn_internal::TurnRun* run);
  // A compaction of this turn: into the Turn, and its event into the turn's writes.
  void AddCompaction(const CompactionReport& report, Turn* turn);
  // A failed turn: what it collected is dropped (the caller undoes its changes) and its record
  // alone is stored. A record the store refuses too is said in the returned status and counted.
  Status FailTurn(turn_internal::TurnRun& run, agent_internal::TurnBatch& batch, Status status);
  // Sends the turn's request (a PoolSet may ask this agent to compact or fork on the way) and
  // adopts what was sent instead. *forked: a fork's request went instead of this agent's.
  Status SendTurn(const TurnOptions& options, const BuildOptions& fields,
                  turn_internal::TurnRun& run, Turn* turn, bool* forked);
  // One turn (transport/turn.h): build, predict, send, append the reply, explain a prefix break;
  // then everything it changed and recorded is stored in one Store::CommitTurn.
  StatusOr<Turn> Complete(const TurnOptions& options);
  // Agent::Run's loop, with max_turns checked.
  StatusOr<RunResult> RunLocked(std::string user_message, const RunOptions& options);

  // ---------------------------------------------------------------------------- summaries
  // (agent_summary.cc)

  // The request this agent's own turn sent last: what MakeLlmSummarizer's cache-keeping mode
  // continues (SummaryRequestContext). Empty after Create and Open.
  struct LastRequest {
    // As sent. It grows by remapping its pages (a std::string grown by half again copied the
    // whole body into fresh memory each time, faulting every page of it in).
    internal::GrowingText body;
    std::string prefix_hash;  // its stable prefix's hash (the PoolSet affinity header)
    int64_t cached_tokens = 0;  // tokens of its full blocks: what the server holds cached
    uint64_t render_serial = 0;  // BuiltRequest::render_serial of `body`
  };
  // Takes a summary request's record (purpose "compaction") into the turn and its writes. Used on
  // the turn's thread only.
  class CompactionRecords final : public RecordSink {
   public:
    CompactionRecords(agent_internal::TurnBatch* batch, Turn* turn) : batch_(batch), turn_(turn) {}
    Status Write(const RequestRecord& record) override;

   private:
    agent_internal::TurnBatch* batch_;
    Turn* turn_;
  };
  // The previous request for this turn's build, a summary request id made from the turn's, and
  // where its records go.
  SummaryRequestContext PreviousRequest(const std::string& turn_request_id,
                                        RecordSink* records) const;
  // For a summary of the whole history outside a turn (Join): the request this agent would send
  // now, rendered into *current (it starts with the last request's bytes, which the server holds
  // cached, and holds every message since), with the last request's cached tokens predicted. Its
  // body is "" when it cannot be rendered (the summarizer then says there is no previous request).
  SummaryRequestContext CurrentRequest(const std::string& request_id, RecordSink* records,
                                       BuiltRequest* current) const;
  // After a turn sent its own request (`body`): keeps it as the last request.
  void KeepLastRequest(const turn_internal::TurnRun& run, const std::string& body);

  // ---------------------------------------------------------------------------- tools and recall
  // (agent_tools.cc)

  // The tools array: the registered tools in registration order, context_recall first.
  std::string ToolsJson() const;
  // Reads the tools of the stored tools layer back into tools_ (schemas only, no handlers).
  void LoadToolsFromContext();
  // Unpins recalled results whose protection ran out.
  Status ExpireProtections();
  // The most tokens one recall page may hold.
  size_t RecallShareTokens() const;
  // The original kept under `recall_id` (in the context, or of a joined child).
  StatusOr<std::string> OriginalOf(std::string_view recall_id) const;
  StatusOr<RecallPage> Recall(std::string_view recall_id, size_t offset, size_t max_tokens) const;
  // Answers a context_recall call with a page of the original, pinned for recall.protect_turns.
  StatusOr<std::string> AnswerRecall(const ToolCall& call);
  // Answers the open tool calls of the last assistant message with the registered handlers.
  Status Dispatch(RunResult* stats);

  // ---------------------------------------------------------------------------- predictions
  // (agent_predict.cc)

  StatusOr<NextRequest> Next(const BuildOptions& fields) const;
  StatusOr<CachePrediction> Predict() const;
  StatusOr<RequestPreview> PreviewRequest() const;
  StatusOr<int64_t> InputTokens() const;

  // ---------------------------------------------------------------------------- forks
  // (agent_fork.cc; Join is Agent's own, as it locks two agents)

  // Agent::Fork (also the degradation handler's fork step).
  StatusOr<std::unique_ptr<Agent>> ForkLocked(std::string task, const ForkOptions& options);

  // Runs `call` (Run or Complete); when it fails, undoes what it did: the context as it was
  // (turn_rollback.h), the recall protections and the last reply's id. What the server was sent
  // stays known (prefix-cache model, request records and events).
  // `caller_mark`: the mark the caller set instead of one of its own
  // (TurnOptions::undo_to_caller_mark). When none of the context's changes since the mark reached
  // the store (everything the call changed was in its discarded turn), the undo writes nothing.
  template <typename T, typename F>
  StatusOr<T> Undoable(F&& call, bool caller_mark = false) {
    if (caller_mark && !context_->HasMark()) {
      return FailedPreconditionError(
          "TurnOptions::undo_to_caller_mark is set but the context has no mark: call "
          "context().Mark() before the turn");
    }
    const bool clean = !caller_mark || !context_->ChangedSinceMark();
    const int64_t stored = journal_ != nullptr ? journal_->stored() : 0;
    agent_internal::TurnRollback rollback(*context_, !caller_mark);
    std::vector<Protection> protections = protections_;
    std::string last_assistant = last_assistant_id_;
    StatusOr<T> out = call();
    if (out.ok()) return out;
    const bool pins_changed =
        protections.size() != protections_.size() ||
        !std::equal(protections.begin(), protections.end(), protections_.begin(),
                    [](const auto& a, const auto& b) {
                      return a.segment_id == b.segment_id && a.until_turn == b.until_turn;
                    });
    protections_ = std::move(protections);
    last_assistant_id_ = std::move(last_assistant);
    const bool unstored = clean && (journal_ == nullptr || journal_->stored() == stored);
    // Stale pins are dropped on expiry; unstored, the stored pins are the restored ones already.
    if (pins_changed && !unstored) SaveProtections().IgnoreError();
    return rollback.Undo(out.status(), unstored ? journal_.get() : nullptr);
  }

  AgentConfig config_;
  Shared shared_;
  const Tokenizer* tokenizer_ = nullptr;  // shared_.tokenizer
  std::unique_ptr<ChatTemplate> template_;
  std::unique_ptr<agent_internal::PromptTokens> prompt_tokens_;
  std::unique_ptr<agent_internal::IncrementalRequestCounter> counter_;
  std::unique_ptr<Summarizer> own_summarizer_;
  std::unique_ptr<CompactionPolicy> policy_;
  agent_internal::GoalPolicy* goal_policy_ = nullptr;  // policy_, wrapped for pool degradation
  std::unique_ptr<agent_internal::AgentJournal> journal_;
  std::optional<Budget> budget_;
  Backend backend_ = Backend::kVllm;
  std::string salt_;
  std::unique_ptr<PrefixCacheModel> model_;
  std::unique_ptr<Context> context_;

  std::vector<std::string> tool_order_;
  std::map<std::string, Tool> tools_;
  std::vector<Protection> protections_;
  std::map<std::string, std::string> joined_originals_;  // recall id -> original (joined children)

  // The previous request, to explain a prefix break.
  turn_internal::PrefixReference reference_;
  // What is stored of reference_ and the cache's blocks under kCacheKey (the chunks a turn writes).
  agent_internal::CacheStateWriter cache_writer_{kCacheKey};
  LastRequest last_request_;  // the previous request, for a cache-keeping summary
  std::unique_ptr<Prompts> prompts_;
  std::unique_ptr<turn_internal::RequestIds> ids_;
  std::atomic<int64_t> write_failures_{
      0};  // writes the store refused (Agent::record_write_failures)
  agent_internal::TurnBatch* batch_ = nullptr;  // the turn being committed, while Complete() runs

  std::string last_assistant_id_;  // the reply Complete() appended last
  int forks_ = 0;
  mutable std::mutex mu_;
};

}  // namespace strata

#endif  // STRATA_AGENT_AGENT_IMPL_H_
