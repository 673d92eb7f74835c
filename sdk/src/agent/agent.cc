// strata::Agent: one object owning the context, its configuration, endpoint, store and tools.
#include "strata/agent.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <set>
#include <utility>

#include "agent/agent_services.h"
#include "agent/cache_state.h"
#include "agent/degradation.h"
#include "agent/fork_id.h"
#include "agent/policy_config.h"
#include "agent/prompt_tokens.h"
#include "agent/tool_arguments.h"
#include "agent/turn_fields.h"
#include "agent/turn_rollback.h"
#include "core/utf8.h"
#include "strata/builtin_policies.h"
#include "strata/chat_template.h"
#include "strata/isolation.h"
#include "strata/transport.h"
#include "strata/prefix_cache.h"
#include "strata/tokenizer_spec.h"
#include "transport/turn.h"

namespace strata {
namespace {

using agent_internal::CheckTurnFields;
using agent_internal::MergeTurnFields;
using turn_internal::PrefixReference;
using turn_internal::TurnRun;
using json = nlohmann::json;

constexpr char kConfigKey[] = "config";
constexpr char kCacheKey[] = "prefix_cache";
constexpr char kTokenizerNameKey[] = "tokenizer_name";  // Tokenizer::Name() of the stored counts
constexpr char kProtectKey[] = "recall_protections";
constexpr char kOriginalPrefix[] = "original:";
// Role markers of the GLM-5 template: the places a prompt may be cut for incremental encoding.
const char* const kGlmMarkers[] = {"<|system|>", "<|user|>", "<|assistant|>", "<|observation|>"};

std::string RecallSchema() {
  return R"json({"type":"function","function":{"name":"context_recall","description":"Get back the original of content that was shortened to keep the context small (a masked, truncated, folded, summarized or evicted tool result, or a joined subtask), by the recall id its placeholder names. Long originals come in pages: the answer says how many bytes remain and the offset to continue from.","parameters":{"type":"object","properties":{"recall_id":{"type":"string","description":"The recall id, e.g. r-0123456789abcdef"},"offset":{"type":"integer","description":"Byte offset in the original to start from (default 0)"},"max_tokens":{"type":"integer","description":"At most this many tokens (default and upper bound: the agent's recall share)"}},"required":["recall_id"]}}})json";
}

// Text is cut for pages, summaries and messages at a UTF-8 character boundary.
using internal::Utf8Floor;
using internal::Utf8Prefix;

// Wraps the store's journal: changes go through unchanged except that a compaction's report is
// left out, because the agent records one event per build with the exact counts the request had.
// During a turn (Collect) the changes are kept instead, for the turn's one Store::CommitTurn; a
// turn that fails keeps them out of the store, and its rollback's change (Context::Rewind) then
// rewrites rows as they are already stored.
class AgentJournal final : public ContextJournal {
 public:
  explicit AgentJournal(ContextJournal* inner) : inner_(inner) {}
  Status Record(const ContextChange& change) override {
    if (collect_ == nullptr && !change.compaction) return inner_->Record(change);
    ContextChange copy = change;
    copy.compaction.reset();
    if (collect_ == nullptr) return inner_->Record(copy);
    collect_->push_back(std::move(copy));
    return Status::Ok();
  }
  // Keeps the changes in *changes from now on; nullptr writes them through again.
  void Collect(std::vector<ContextChange>* changes) { collect_ = changes; }

 private:
  ContextJournal* inner_;
  std::vector<ContextChange>* collect_ = nullptr;
};

// The writes of one Agent turn, committed in one Store::CommitTurn (nothing collected without a
// store). The journal collects into it while it lives.
class TurnBatch {
 public:
  TurnBatch(Store* store, AgentJournal* journal, std::string agent_id)
      : store_(store), journal_(store != nullptr ? journal : nullptr) {
    writes_.agent_id = std::move(agent_id);
    if (journal_ != nullptr) journal_->Collect(&writes_.changes);
  }
  ~TurnBatch() { Release(); }
  TurnBatch(const TurnBatch&) = delete;
  TurnBatch& operator=(const TurnBatch&) = delete;

  bool active() const { return store_ != nullptr; }
  TurnWrites& writes() { return writes_; }
  // Commits what was collected (journal writes through again); the store's error when refused.
  Status Commit() {
    Release();
    if (store_ == nullptr) return Status::Ok();
    Status committed = store_->CommitTurn(writes_);
    writes_ = TurnWrites{writes_.agent_id, {}, {}, {}, {}, std::nullopt};
    return committed;
  }
  // Drops what was collected (a failed turn); the journal writes through again.
  void Discard() {
    Release();
    writes_ = TurnWrites{writes_.agent_id, {}, {}, {}, {}, std::nullopt};
  }

 private:
  void Release() {
    if (journal_ != nullptr) journal_->Collect(nullptr);
    journal_ = nullptr;
  }
  Store* store_;
  AgentJournal* journal_;
  TurnWrites writes_;
};

// A RecordSink over a TurnBatch: the turn's record and prefix-break event join its writes.
class BatchSink final : public RecordSink {
 public:
  BatchSink(TurnBatch* batch, int64_t turn) : batch_(batch), turn_(turn) {}
  Status Write(const RequestRecord& record) override {
    batch_->writes().records.push_back(record);
    return Status::Ok();
  }
  Status WriteEvent(const PrefixBreakEvent& event) override {
    StoredEvent e;
    e.agent_id = event.agent_id;
    e.turn = turn_;
    e.type = "prefix_break";
    e.payload_json = PrefixBreakToJson(event);
    batch_->writes().events.push_back(std::move(e));
    return Status::Ok();
  }

 private:
  TurnBatch* batch_;
  int64_t turn_;
};

StatusOr<std::unique_ptr<ChatTemplate>> MakeTemplate(const std::string& name) {
  if (name.empty()) return std::unique_ptr<ChatTemplate>();
  StatusOr<std::unique_ptr<ChatTemplate>> made = MakeChatTemplate(name);
  if (!made.ok()) {
    return InvalidArgumentError("chat_template: " + made.status().message() + " (or \"\" for none)");
  }
  return made;
}

// The GLM templates (glm-5.3, its alias glm5, glm-4.7) open every turn with a role marker.
bool IsGlmTemplate(const std::string& name) {
  return name == "glm5" || name == "glm-5.3" || name == "glm-4.7";
}

std::string EnvOrEmpty(const std::string& name) {
  if (name.empty()) return "";
  const char* value = std::getenv(name.c_str());
  return value == nullptr ? "" : value;
}

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

}  // namespace

// ------------------------------------------------------------------------------------------------

class Agent::Impl {
 public:
  AgentConfig config_;
  Shared shared_;
  const Tokenizer* tokenizer_ = nullptr;  // shared_.tokenizer
  std::unique_ptr<ChatTemplate> template_;
  std::unique_ptr<agent_internal::PromptTokens> prompt_tokens_;
  std::unique_ptr<RequestTokenCounter> counter_;
  std::unique_ptr<Summarizer> own_summarizer_;
  std::unique_ptr<CompactionPolicy> policy_;
  agent_internal::GoalPolicy* goal_policy_ = nullptr;  // policy_, wrapped for pool degradation
  std::unique_ptr<AgentJournal> journal_;
  std::optional<Budget> budget_;
  Backend backend_ = Backend::kVllm;
  std::string api_key_;
  std::string salt_;
  std::unique_ptr<PrefixCacheModel> model_;
  std::unique_ptr<Context> context_;

  struct Tool {
    std::string schema;  // canonical OpenAI tool object
    ToolHandler handler;
  };
  std::vector<std::string> tool_order_;
  std::map<std::string, Tool> tools_;

  struct Protection {
    std::string segment_id;
    int64_t until_turn = 0;
  };
  std::vector<Protection> protections_;
  std::map<std::string, std::string> joined_originals_;  // recall id -> original (joined children)

  // The previous request, to explain a prefix break.
  PrefixReference reference_;
  // The prompts of this agent's requests for the turn (transport/turn.h): rendered by the chat
  // template through prompt_tokens_ (whose render the budget count shares), counted and hashed
  // incrementally.
  class Prompts final : public turn_internal::PromptModel {
   public:
    explicit Prompts(const Impl* impl) : impl_(impl) {}
    StatusOr<PromptText> Render(std::string_view body) override {
      PromptText prompt;
      STRATA_ASSIGN_OR_RETURN(prompt.text, impl_->PromptOf(body));
      return prompt;
    }
    size_t Count(std::string_view text) override { return impl_->tokenizer_->Count(text); }
    PromptBlocks Hash(std::string_view text, std::string_view salt) override {
      return impl_->prompt_tokens_->Hash(text, salt, impl_->config_.cache);
    }
    bool exact() const override { return impl_->prompt_tokens_->exact(); }
    size_t bytes_per_token() const override { return impl_->config_.cache.bytes_per_token; }

   private:
    const Impl* impl_;
  };
  std::unique_ptr<Prompts> prompts_;
  std::unique_ptr<turn_internal::RequestIds> ids_;
  std::atomic<int64_t> write_failures_{0};  // writes the store refused (Agent::record_write_failures)
  TurnBatch* batch_ = nullptr;  // the turn being committed, while Complete() runs

  std::string last_assistant_id_;  // the reply Complete() appended last
  int forks_ = 0;
  mutable std::mutex mu_;

  // Agent::Fork with mu_ held by the caller (also the degradation handler's fork step).
  StatusOr<std::unique_ptr<Agent>> ForkLocked(std::string task, const ForkOptions& options);
  // Agent::Run's loop, with mu_ held and max_turns checked.
  StatusOr<RunResult> RunLocked(std::string user_message, const RunOptions& options);

  // Runs `call` (Run or Complete); when it fails, undoes what it did: the context as it was
  // (turn_rollback.h), the recall protections and the last reply's id. What the server was sent
  // stays known (prefix-cache model, request records and events).
  template <typename T, typename F>
  StatusOr<T> Undoable(F&& call) {
    agent_internal::TurnRollback rollback(*context_);
    std::vector<Protection> protections = protections_;
    std::string last_assistant = last_assistant_id_;
    StatusOr<T> out = call();
    if (out.ok()) return out;
    const bool pins_changed = protections.size() != protections_.size() ||
                              !std::equal(protections.begin(), protections.end(),
                                          protections_.begin(), [](const auto& a, const auto& b) {
                                            return a.segment_id == b.segment_id &&
                                                   a.until_turn == b.until_turn;
                                          });
    protections_ = std::move(protections);
    last_assistant_id_ = std::move(last_assistant);
    if (pins_changed) SaveProtections().IgnoreError();  // stale pins are dropped on expiry
    return rollback.Undo(*context_, out.status());
  }

  // ---------------------------------------------------------------------------- construction

  Status Init(ContextOptions* options) {
    const AgentConfig& c = config_;
    if (c.identity.id.empty())
      return InvalidArgumentError("identity.id is required (the agent's id)");
    if (shared_.tokenizer == nullptr) {
      STRATA_ASSIGN_OR_RETURN(std::unique_ptr<Tokenizer> made, MakeTokenizer(c.tokenizer));
      shared_.tokenizer_owner = std::move(made);  // shared with forks, which need no reload
      shared_.tokenizer = shared_.tokenizer_owner.get();
    } else if (shared_.tokenizer_owner == nullptr) {  // injected: it must be the configured one
      STRATA_RETURN_IF_ERROR(agent_internal::CheckSharedTokenizer(*shared_.tokenizer, c.tokenizer));
    }
    tokenizer_ = shared_.tokenizer;
    STRATA_ASSIGN_OR_RETURN(template_, MakeTemplate(c.chat_template));
    std::vector<std::string> markers;
    if (IsGlmTemplate(c.chat_template)) markers.assign(std::begin(kGlmMarkers), std::end(kGlmMarkers));
    prompt_tokens_ = std::make_unique<agent_internal::PromptTokens>(tokenizer_, markers);
    if (template_) {
      counter_ = std::make_unique<agent_internal::IncrementalRequestCounter>(
          template_.get(), tokenizer_, prompt_tokens_.get());
    }
    if (shared_.summarizer == nullptr) {
      own_summarizer_ = MakeExtractiveSummarizer();
      shared_.summarizer = own_summarizer_.get();
    }
    STRATA_ASSIGN_OR_RETURN(std::unique_ptr<CompactionPolicy> policy,
                            agent_internal::MakeConfiguredPolicy(c.policy, shared_.summarizer));
    if (shared_.policy != nullptr) policy = agent_internal::BorrowPolicy(shared_.policy);
    auto goal_policy = std::make_unique<agent_internal::GoalPolicy>(std::move(policy));
    goal_policy_ = goal_policy.get();
    policy_ = std::move(goal_policy);
    if (c.budget.enforce) {
      StatusOr<Budget> budget = ResolveBudget(c.budget);
      if (!budget.ok()) return budget.status();
      budget_ = *budget;
    }
    STRATA_ASSIGN_OR_RETURN(backend_, ParseBackend(c.endpoint.backend));
    if (c.cache.block_tokens == 0 || c.cache.bytes_per_token == 0) {
      return InvalidArgumentError("cache.block_tokens and cache.bytes_per_token must be > 0");
    }
    if (c.recall.max_share_of_target <= 0 || c.recall.max_share_of_target > 1) {
      return InvalidArgumentError("recall.max_share_of_target " +
                                  std::to_string(c.recall.max_share_of_target) +
                                  " is outside (0, 1]");
    }
    if (c.endpoint.max_output_tokens < 0) {
      return InvalidArgumentError("endpoint.max_output_tokens must not be negative");
    }
    if (shared_.transport == nullptr && !c.endpoint.base_url.empty()) {
      HttpTransportOptions http;
      http.base_url = c.endpoint.base_url;
      if (!c.endpoint.api_key_env.empty()) {
        http.api_key = EnvOrEmpty(c.endpoint.api_key_env);
        if (http.api_key.empty()) {
          return FailedPreconditionError(
              "endpoint.api_key_env names " + c.endpoint.api_key_env +
              ", which is not set in the environment; export it or clear api_key_env");
        }
      }
      http.timeouts.connect = std::chrono::milliseconds(c.endpoint.connect_timeout_ms);
      http.timeouts.first_byte = std::chrono::milliseconds(c.endpoint.first_byte_timeout_ms);
      http.timeouts.idle = std::chrono::milliseconds(c.endpoint.idle_timeout_ms);
      http.timeouts.total = std::chrono::milliseconds(c.endpoint.total_timeout_ms);
      http.retry.max_attempts = c.endpoint.max_attempts;
      http.clock = shared_.clock;
      STRATA_ASSIGN_OR_RETURN(std::unique_ptr<Transport> transport,
                              MakeHttpTransport(std::move(http)));
      shared_.transport_owner = std::move(transport);
      shared_.transport = shared_.transport_owner.get();
    }
    if (shared_.store == nullptr && !c.store_path.empty()) {
      StoreOptions store_options;
      store_options.clock = shared_.clock;
      STRATA_ASSIGN_OR_RETURN(std::unique_ptr<Store> store, OpenStore(c.store_path, store_options));
      shared_.store_owner = std::move(store);
      shared_.store = shared_.store_owner.get();
    }
    salt_ =
        DeriveCacheSalt(EnvOrEmpty(c.endpoint.deployment_secret_env), IsolationKeyOf(c.identity));
    model_ = std::make_unique<PrefixCacheModel>(c.cache);
    prompts_ = std::make_unique<Prompts>(this);
    ids_ = std::make_unique<turn_internal::RequestIds>(shared_.clock);

    options->agent = c.identity;
    options->render = c.render;
    options->hygiene = c.hygiene;
    options->tokenizer = tokenizer_;
    options->keep_originals = c.keep_originals;
    options->budget = budget_;
    options->compaction = policy_.get();
    options->request_counter = counter_.get();
    options->message_overhead_tokens = c.message_overhead_tokens;
    return Status::Ok();
  }

  void AttachJournal(ContextOptions* options) {
    if (shared_.store == nullptr) return;
    journal_ = std::make_unique<AgentJournal>(shared_.store->Journal(config_.identity.id));
    options->journal = journal_.get();
  }

  // The tools array: the registered tools in registration order, context_recall first.
  std::string ToolsJson() const {
    std::string out = "[";
    bool first = true;
    if (config_.recall.expose_tool) {
      out += RecallSchema();
      first = false;
    }
    for (const std::string& name : tool_order_) {
      if (!first) out += ",";
      out += tools_.at(name).schema;
      first = false;
    }
    return out + "]";
  }

  // Reads the tools of the stored tools layer back into tools_ (schemas only, no handlers).
  void LoadToolsFromContext() {
    for (const Segment& s : context_->Segments()) {
      if (s.layer != Layer::kTools) continue;
      json tool = json::parse(s.content, nullptr, false);
      if (!tool.is_object() || !tool.contains("function")) continue;
      std::string name = tool["function"].value("name", "");
      if (name.empty() || name == kRecallToolName) continue;
      tools_[name] = Tool{s.content, nullptr};
      tool_order_.push_back(name);
    }
  }

  // ---------------------------------------------------------------------------- persistence

  // Stores `value` under `key`; during a turn, with the turn's writes.
  Status SaveState(const std::string& key, const std::string& value) {
    if (shared_.store == nullptr) return Status::Ok();
    if (batch_ != nullptr && batch_->active()) {
      batch_->writes().state.emplace_back(key, value);
      return Status::Ok();
    }
    return shared_.store->PutAgentState(config_.identity.id, key, value);
  }

  Status SaveProtections() {
    json list = json::array();
    for (const Protection& p : protections_) list.push_back({p.segment_id, p.until_turn});
    return SaveState(kProtectKey, list.dump());
  }


  Status LoadPersistentState() {
    Store* store = shared_.store;
    const std::string& id = config_.identity.id;
    STRATA_ASSIGN_OR_RETURN(std::optional<std::string> cache, store->GetAgentState(id, kCacheKey));
    PromptBlocks blocks;
    if (cache && agent_internal::DecodeCacheState(*cache, salt_, config_.cache.block_tokens,
                                                   &blocks, &reference_)) {
      model_->Insert(blocks);
    }
    STRATA_ASSIGN_OR_RETURN(std::optional<std::string> protections,
                            store->GetAgentState(id, kProtectKey));
    if (protections) {
      json list = json::parse(*protections, nullptr, false);
      if (list.is_array()) {
        for (const json& p : list) {
          if (p.is_array() && p.size() == 2)
            protections_.push_back({p[0].get<std::string>(), p[1].get<int64_t>()});
        }
      }
    }
    STRATA_ASSIGN_OR_RETURN(std::optional<std::string> joined,
                            store->GetAgentState(id, "joined_recall_ids"));
    if (joined) {
      json ids = json::parse(*joined, nullptr, false);
      if (ids.is_array()) {
        for (const json& rid : ids) {
          std::string key = kOriginalPrefix + rid.get<std::string>();
          STRATA_ASSIGN_OR_RETURN(std::optional<std::string> original,
                                  store->GetAgentState(id, key));
          if (original) joined_originals_[rid.get<std::string>()] = *original;
        }
      }
    }
    return Status::Ok();
  }

  // ---------------------------------------------------------------------------- requests

  BuildOptions Fields(const std::string& request_id) const {
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

  StatusOr<std::string> PromptOf(std::string_view body) const {
    if (template_) {
      StatusOr<std::string> text = prompt_tokens_->Render(*template_, body);  // the count's render
      if (text.ok()) return text;
    }
    STRATA_ASSIGN_OR_RETURN(PromptText prompt, RenderPromptText(body));
    return std::move(prompt.text);
  }

  // Blocks of the prompt up to the end of its history (what the next request can reuse).
  int64_t HistoryBlocks(const BuiltRequest& built, const std::string& prompt,
                        const PromptBlocks& blocks) const {
    size_t end = prompt.size();
    // Without a volatile message the request's messages are its history: no second render.
    StatusOr<std::string> history = NotFoundError("no volatile message");
    if (built.layers[static_cast<int>(Layer::kVolatile)].segments > 0) {
      history = PromptOf(built.body.substr(0, built.history_end_bytes) + "]}");
    }
    if (history.ok()) {
      size_t n = std::min(prompt.size(), history->size());
      end = static_cast<size_t>(
          std::mismatch(prompt.begin(), prompt.begin() + n, history->begin()).first -
          prompt.begin());
    }
    size_t tail_tokens = prompt_tokens_->exact()
                             ? tokenizer_->Count(std::string_view(prompt).substr(end))
                             : (prompt.size() - end) / config_.cache.bytes_per_token;
    int64_t history_tokens =
        std::max<int64_t>(0, blocks.prompt_tokens - static_cast<int64_t>(tail_tokens));
    int64_t n = std::min<int64_t>(static_cast<int64_t>(blocks.cacheable_blocks),
                                  history_tokens / static_cast<int64_t>(blocks.block_tokens));
    // Tokens at the history end may merge with what follows: that block is not counted stable.
    if (prompt_tokens_->exact() && n > 0) --n;
    return n;
  }

  // Unpins recalled results whose protection ran out.
  Status ExpireProtections() {
    const int64_t turn = static_cast<int64_t>(context_->Stats().turns);
    bool changed = false;
    for (auto it = protections_.begin(); it != protections_.end();) {
      if (turn >= it->until_turn) {
        if (context_->Find(it->segment_id) != nullptr) {
          STRATA_RETURN_IF_ERROR(context_->SetPinned(it->segment_id, false));
        }
        it = protections_.erase(it);
        changed = true;
      } else {
        ++it;
      }
    }
    return changed ? SaveProtections() : Status::Ok();
  }

  // What the degradation handler of one request (its `fields`) may do with this agent
  // (degradation.h).
  agent_internal::DegradationHost DegradationHostFor(const BuildOptions& fields) {
    agent_internal::DegradationHost host;
    host.agent_id = config_.identity.id;
    host.context = context_.get();
    host.policy = goal_policy_;
    host.summarizer = shared_.summarizer;
    host.tokenizer = tokenizer_;
    host.budget = budget_;
    host.budget_config = config_.budget;
    host.fields = fields;
    host.store = shared_.store;
    host.count = [this](const std::string& body) -> StatusOr<int64_t> {
      STRATA_ASSIGN_OR_RETURN(std::string prompt, PromptOf(body));
      return static_cast<int64_t>(prompt_tokens_->Count(prompt));
    };
    host.fork = [this](std::string task, const ForkOptions& options) {
      return ForkLocked(std::move(task), options);
    };
    return host;
  }

  // What a turn works with (transport/turn.h).
  turn_internal::TurnEnv TurnEnv() {
    turn_internal::TurnEnv env;
    env.transport = shared_.transport;
    env.clock = shared_.clock;
    env.model = model_.get();
    env.prompt = prompts_.get();
    env.salt = salt_;
    env.write_failures = &write_failures_;
    return env;
  }

  // The call of a turn: deadline, cancellation, headers and deltas from `options`; for a
  // PoolSet, the stable layers' hash it routes by.
  CallOptions CallFor(const TurnOptions& options, const TurnRun& run) const {
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

  // After a pool's degradation step, what the server was sent instead becomes the request
  // analysed: a fork's request (its blocks are what the server now holds; this agent's own
  // history was not sent, so its previous request stays the reference for prefix breaks), or
  // this history compacted to fit a smaller pool.
  Status AdoptDegraded(const agent_internal::AgentDegradation& degrade, bool forked, bool compacted,
                       TurnRun* run) {
    if (forked) return run->AnalyzeInstead(*degrade.sent(), reference_);
    if (degrade.sent()) return run->Analyze(*context_, *degrade.sent(), reference_, compacted);
    if (!degrade.compactions().empty()) {
      // Compacted, but the pool then took another step and sent the request as built: the
      // context is smaller now, what the server got is not.
      run->signatures() = turn_internal::Signatures(*context_);
    }
    return Status::Ok();
  }

  // A compaction of this turn: into the Turn, and its event into the turn's writes.
  void AddCompaction(const CompactionReport& report, Turn* turn) {
    turn->compactions.push_back(report);
    if (batch_ == nullptr || !batch_->active()) return;
    StoredEvent e;
    e.agent_id = config_.identity.id;
    e.turn = static_cast<int64_t>(context_->Stats().turns);
    e.type = "compaction";
    e.payload_json = CompactionReportJson(report);
    batch_->writes().events.push_back(std::move(e));
  }

  // A failed turn: what it collected is dropped (the caller undoes its changes) and its record
  // alone is stored. A record the store refuses too is said in the returned status and counted.
  Status FailTurn(TurnRun& run, TurnBatch& batch, Status status) {
    run.Fail(status);
    batch.Discard();
    if (shared_.store == nullptr) return status;
    Status written = shared_.store->AppendRequest(run.record());
    if (written.ok()) return status;
    write_failures_.fetch_add(1);
    return Status(status.code(), status.message() + " (its request record was not stored either: " +
                                     written.message() + ")");
  }

  // Sends the turn's request (a PoolSet may ask this agent to compact or fork on the way) and
  // adopts what was sent instead. *forked: a fork's request went instead of this agent's.
  Status SendTurn(const TurnOptions& options, const BuildOptions& fields, TurnRun& run, Turn* turn,
                  bool* forked) {
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

  // One turn (transport/turn.h): build, predict, send, append the reply, explain a prefix break;
  // then everything it changed and recorded is stored in one Store::CommitTurn.
  StatusOr<Turn> Complete(const TurnOptions& options) {
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
    STRATA_RETURN_IF_ERROR(ExpireProtections());
    TurnRun run(TurnEnv(), *context_, ids_->Next(config_.identity.id));
    BuildOptions fields = Fields(run.record().request_id);
    MergeTurnFields(options.extra_fields, &fields);

    Turn turn;
    if (Status built = run.Build(*context_, fields, reference_); !built.ok()) {
      return FailTurn(run, batch, built);
    }
    if (run.built().compaction) AddCompaction(*run.built().compaction, &turn);
    bool forked = false;
    if (Status sent = SendTurn(options, fields, run, &turn, &forked); !sent.ok()) {
      return FailTurn(run, batch, sent);
    }
    const Response& resp = turn.response;
    PrefixReference next;
    if (forked) next.hashes = reference_.hashes;  // this agent's own last request stays the reference
    run.Finish(resp, &next, /*keep_reference=*/forked);
    AssistantMessage message;
    message.content = resp.content;
    message.reasoning = resp.reasoning;
    message.tool_calls = agent_internal::KeepableToolCalls(resp.tool_calls);
    StatusOr<std::string> appended = context_->AppendAssistant(std::move(message));
    if (!appended.ok()) {
      return FailTurn(run, batch, Status(appended.status().code(),
                                         "the server's reply could not be appended: " +
                                             appended.status().message()));
    }
    turn.assistant_segment_id = *appended;
    last_assistant_id_ = *appended;
    turn.prefix_break = run.prefix_break();
    turn.break_causes = run.break_causes();
    // The reference of the next request, and what the server's cache now holds, for a reopen.
    PromptBlocks saved = run.blocks();
    if (forked) saved.hashes = next.hashes;
    reference_ = std::move(next);
    STRATA_RETURN_IF_ERROR(SaveState(kCacheKey, agent_internal::EncodeCacheState(saved, reference_)));
    int64_t invalidated = 0;
    for (const CompactionReport& c : turn.compactions) invalidated += static_cast<int64_t>(c.invalidated_tokens);
    turn.growth = GrowthPointOf(*context_, static_cast<int64_t>(turn.compactions.size()), invalidated);
    BatchSink sink(&batch, static_cast<int64_t>(context_->Stats().turns));
    run.Emit(batch.active() ? &sink : nullptr);
    if (batch.active()) batch.writes().growth = turn.growth;
    if (Status committed = batch.Commit(); !committed.ok()) {
      write_failures_.fetch_add(1);
      return FailTurn(run, batch, committed);
    }
    turn.record = run.record();
    turn.warnings = run.warnings();
    turn.body = std::move(run.mutable_built().body);
    return turn;
  }

  // ---------------------------------------------------------------------------- tools and recall

  size_t RecallShareTokens() const {
    int64_t base = budget_ ? TargetTokens(*budget_) : config_.budget.window;
    size_t share =
        static_cast<size_t>(static_cast<double>(base) * config_.recall.max_share_of_target);
    // A page, with its header and footer lines (48 tokens at most), must pass append-time
    // truncation untouched.
    const size_t max_segment = config_.hygiene.max_segment_tokens;
    if (max_segment > 0)
      share = std::min(share, max_segment > 96 ? max_segment - 48 : max_segment / 2);
    return std::max<size_t>(share, 16);
  }

  StatusOr<std::string> OriginalOf(std::string_view recall_id) const {
    StatusOr<std::string> original = context_->Recall(recall_id);
    if (original.ok()) return original;
    auto it = joined_originals_.find(std::string(recall_id));
    if (it != joined_originals_.end()) return it->second;
    return NotFoundError("no original is kept under recall id \"" + std::string(recall_id) +
                         "\" for agent \"" + config_.identity.id + "\"");
  }

  StatusOr<RecallPage> Recall(std::string_view recall_id, size_t offset, size_t max_tokens) const {
    STRATA_ASSIGN_OR_RETURN(std::string original, OriginalOf(recall_id));
    if (offset > original.size()) {
      return OutOfRangeError("offset " + std::to_string(offset) + " is past the end of " +
                             std::string(recall_id) + " (" + std::to_string(original.size()) +
                             " bytes)");
    }
    const size_t cap = RecallShareTokens();
    const size_t limit = max_tokens == 0 ? cap : std::min(max_tokens, cap);
    std::string_view rest = std::string_view(original).substr(Utf8Floor(original, offset));
    RecallPage page;
    page.recall_id = std::string(recall_id);
    page.offset = original.size() - rest.size();
    page.total_bytes = original.size();
    size_t take = rest.size();
    if (tokenizer_->Count(rest) > limit) {
      // The longest prefix within the limit (binary search on bytes), preferably ending a line.
      size_t lo = 0, hi = rest.size();  // rest[0, lo) fits; rest[0, hi) does not
      while (hi - lo > 1) {
        const size_t mid = lo + (hi - lo) / 2;
        if (tokenizer_->Count(rest.substr(0, mid)) <= limit) {
          lo = mid;
        } else {
          hi = mid;
        }
      }
      take = Utf8Floor(rest, lo);
      size_t nl = rest.substr(0, take).rfind('\n');
      if (nl != std::string_view::npos && nl + 1 >= take * 4 / 5) take = nl + 1;
    }
    page.content = std::string(rest.substr(0, take));
    page.remaining_bytes = rest.size() - take;
    page.tokens = tokenizer_->Count(page.content);
    return page;
  }

  StatusOr<std::string> AnswerRecall(const ToolCall& call) {
    json args = json::parse(call.arguments, nullptr, false);
    std::string text;
    if (!args.is_object() || !args.contains("recall_id") || !args["recall_id"].is_string()) {
      const std::optional<std::string> unparsed = agent_internal::UnparsedArguments(call.arguments);
      text = "context_recall needs {\"recall_id\": \"r-...\"} (optional offset, max_tokens); got " +
             Utf8Prefix(unparsed ? *unparsed : call.arguments, 200);
      return context_->AppendToolResult({call.id, text, true});
    }
    std::string recall_id = args["recall_id"].get<std::string>();
    size_t offset = args.contains("offset") && args["offset"].is_number_unsigned()
                        ? args["offset"].get<size_t>()
                        : 0;
    size_t max_tokens = args.contains("max_tokens") && args["max_tokens"].is_number_unsigned()
                            ? args["max_tokens"].get<size_t>()
                            : 0;
    StatusOr<RecallPage> page = Recall(recall_id, offset, max_tokens);
    if (!page.ok()) {
      return context_->AppendToolResult({call.id, page.status().message(), true});
    }
    const size_t end = page->offset + page->content.size();
    text = "[" + recall_id + ": bytes " + std::to_string(page->offset) + "-" + std::to_string(end) +
           " of " + std::to_string(page->total_bytes) + "]\n" + page->content;
    if (page->remaining_bytes > 0) {
      text += "\n[" + std::to_string(page->remaining_bytes) +
              " bytes remain: call context_recall with recall_id \"" + recall_id +
              "\" and offset " + std::to_string(end) + "]";
    } else {
      text += "\n[end of " + recall_id + "]";
    }
    STRATA_ASSIGN_OR_RETURN(std::string segment_id,
                            context_->AppendToolResult({call.id, text, false}));
    if (config_.recall.protect_turns > 0) {
      STRATA_RETURN_IF_ERROR(context_->SetPinned(segment_id, true));
      protections_.push_back({segment_id, static_cast<int64_t>(context_->Stats().turns) +
                                              config_.recall.protect_turns});
      STRATA_RETURN_IF_ERROR(SaveProtections());
    }
    return segment_id;
  }

  Status Dispatch(RunResult* stats) {
    const std::vector<std::string> open = context_->OpenToolCalls();
    if (open.empty()) return Status::Ok();
    const Segment* last = last_assistant_id_.empty() ? nullptr : context_->Find(last_assistant_id_);
    if (last == nullptr || last->kind != SegmentKind::kToolCall) {
      last = nullptr;
      for (const Segment& s : context_->Segments()) {
        if (s.layer == Layer::kHistory && s.kind == SegmentKind::kToolCall)
          last = context_->Find(s.id);
      }
    }
    if (last == nullptr) return InternalError("open tool calls without an assistant message");
    const std::vector<ToolCall> calls = last->tool_calls;
    for (const ToolCall& call : calls) {
      if (std::find(open.begin(), open.end(), call.id) == open.end()) continue;
      if (stats != nullptr) ++stats->tool_calls;
      if (call.name == kRecallToolName) {
        STRATA_RETURN_IF_ERROR(AnswerRecall(call).status());
        continue;
      }
      ToolOutput output;
      auto it = tools_.find(call.name);
      if (it == tools_.end()) {
        std::string known;
        for (const std::string& n : tool_order_) known += (known.empty() ? "" : ", ") + n;
        output = {"unknown tool \"" + call.name + "\" (tools: " + (known.empty() ? "none" : known) +
                      (config_.recall.expose_tool ? ", context_recall" : "") + ")",
                  true};
      } else if (!it->second.handler) {
        output = {"tool \"" + call.name + "\" has no handler registered in this process", true};
      } else {
        try {
          output = it->second.handler(call.arguments);
        } catch (const std::exception& e) {
          output = {"tool \"" + call.name + "\" failed: " + e.what(), true};
        } catch (...) {
          output = {"tool \"" + call.name + "\" failed with an unknown exception", true};
        }
      }
      if (output.is_error && stats != nullptr) ++stats->tool_errors;
      STRATA_RETURN_IF_ERROR(
          context_->AppendToolResult({call.id, std::move(output.content), output.is_error})
              .status());
    }
    return Status::Ok();
  }

  // ---------------------------------------------------------------------------- predictions

  // A copy of the context (no journal), for computing what a build would do without doing it.
  StatusOr<std::unique_ptr<Context>> Scratch(bool with_budget) const {
    ContextOptions options = context_->options();
    options.journal = nullptr;
    if (!with_budget) {
      options.budget.reset();
      options.compaction = nullptr;
    }
    return Context::Restore(std::move(options), context_->Snapshot());
  }

  // The request the next Complete() would send (a due compaction computed on a copy) and its
  // prediction: what PredictCachedTokens and PreviewRequest report.
  struct NextRequest {
    BuiltRequest built;
    CachePrediction prediction;
  };
  StatusOr<NextRequest> Next(const BuildOptions& fields) const {
    NextRequest out;
    StatusOr<BuiltRequest> built = context_->Preview(fields);
    bool due = !built.ok() && built.status().code() == StatusCode::kResourceExhausted;
    if (!built.ok() && !due) return built.status();
    if (built.ok() && budget_) {
      // last-n, observation-masking, strata (masking after use, below the trigger) and an
      // injected policy may compact at any build.
      due = built->input_tokens >
                static_cast<size_t>(std::max<int64_t>(0, TriggerTokens(*budget_))) ||
            config_.policy.name == "last-n" || config_.policy.name == "strata" ||
            config_.policy.name == "observation-masking" || shared_.policy != nullptr;
    }
    std::unique_ptr<Context> scratch;
    if (due) {
      STRATA_ASSIGN_OR_RETURN(scratch, Scratch(true));
      StatusOr<BuiltRequest> compacted = scratch->Build(fields);
      if (!compacted.ok()) return compacted.status();
      // A build that did not compact predicts from the context as it is (the scratch copy is
      // only for a compaction that Complete() would apply).
      if (compacted->compaction.has_value() || !built.ok()) {
        built = std::move(compacted);
        out.prediction.compaction = built->compaction;
        out.prediction.compaction_due = built->compaction.has_value();
      }
    }
    STRATA_ASSIGN_OR_RETURN(std::string prompt, PromptOf(built->body));
    PromptBlocks blocks = prompt_tokens_->Hash(prompt, salt_, config_.cache);
    out.prediction.input_tokens = built->input_tokens_exact
                                      ? static_cast<int64_t>(built->input_tokens)
                                      : blocks.prompt_tokens;
    out.prediction.input_tokens_exact = built->input_tokens_exact;
    out.prediction.predicted_cached_tokens = model_->Lookup(blocks);
    out.built = std::move(built).value();
    return out;
  }

  StatusOr<CachePrediction> Predict() const {
    STRATA_ASSIGN_OR_RETURN(NextRequest next, Next(Fields("predict")));
    return next.prediction;
  }

  StatusOr<RequestPreview> PreviewRequest() const {
    STRATA_ASSIGN_OR_RETURN(NextRequest next, Next(Fields("preview")));
    RequestPreview out;
    out.input_tokens = next.prediction.input_tokens;
    out.input_tokens_exact = next.prediction.input_tokens_exact;
    out.predicted_cached_tokens = next.prediction.predicted_cached_tokens;
    out.compaction_due = next.prediction.compaction_due;
    out.compaction = std::move(next.prediction.compaction);
    for (int i = 0; i < kLayerCount; ++i)
      out.layer_tokens[i] = static_cast<int64_t>(next.built.layers[i].tokens);
    out.message_count = next.built.message_count;
    out.body = std::move(next.built.body);
    return out;
  }

  StatusOr<int64_t> InputTokens() const {
    StatusOr<BuiltRequest> built = context_->Preview(Fields("count"));
    if (built.ok()) return static_cast<int64_t>(built->input_tokens);
    if (built.status().code() != StatusCode::kResourceExhausted) return built.status();
    STRATA_ASSIGN_OR_RETURN(std::unique_ptr<Context> scratch, Scratch(false));
    STRATA_ASSIGN_OR_RETURN(BuiltRequest unlimited,
                            scratch->Preview(Fields("count")));
    return static_cast<int64_t>(unlimited.input_tokens);
  }
};

// ------------------------------------------------------------------------------------------------

namespace {

StatusOr<std::unique_ptr<Agent::Impl>> NewImpl(AgentConfig config, Shared shared,
                                               ContextOptions* options) {
  auto impl = std::make_unique<Agent::Impl>();
  impl->config_ = std::move(config);
  impl->shared_ = std::move(shared);
  STRATA_RETURN_IF_ERROR(impl->Init(options));
  return impl;
}

Shared SharedFrom(const AgentServices& services) {
  Shared shared;
  shared.transport = services.transport;
  shared.store = services.store;
  shared.summarizer = services.summarizer;
  shared.policy = services.policy;
  shared.tokenizer = services.tokenizer;
  shared.clock = services.clock != nullptr ? services.clock : SystemClock();
  return shared;
}

}  // namespace

Agent::Agent(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Agent::~Agent() = default;

StatusOr<std::unique_ptr<Agent>> Agent::Create(AgentConfig config, AgentServices services) {
  // A configuration built in code gets the ranges a parsed one gets (AgentConfigFromJson).
  STRATA_RETURN_IF_ERROR(CheckAgentConfigRanges(config));
  Shared shared = SharedFrom(services);
  ContextOptions options;
  STRATA_ASSIGN_OR_RETURN(std::unique_ptr<Impl> impl,
                          NewImpl(std::move(config), std::move(shared), &options));
  // Validate the context options before anything is written.
  STRATA_ASSIGN_OR_RETURN(std::unique_ptr<Context> probe, Context::Create(options));
  probe.reset();
  Store* store = impl->shared_.store;
  const std::string& id = impl->config_.identity.id;
  if (store != nullptr) {
    if (Status created = store->CreateAgent(options); !created.ok()) {
      if (created.code() != StatusCode::kAlreadyExists) return created;
      return AlreadyExistsError("agent \"" + id + "\" already exists in " + store->path() +
                                ": continue it with Agent::Open, or choose another "
                                "identity.id (Store::DeleteAgent removes the stored one)");
    }
    Status saved = store->PutAgentState(id, kConfigKey, AgentConfigToJson(impl->config_));
    if (saved.ok()) saved = store->PutAgentState(id, kTokenizerNameKey, impl->tokenizer_->Name());
    if (!saved.ok()) {
      store->DeleteAgent(id).IgnoreError();
      return saved;
    }
    impl->AttachJournal(&options);
  }
  StatusOr<std::unique_ptr<Context>> context = Context::Create(options);
  if (!context.ok()) {
    if (store != nullptr) store->DeleteAgent(id).IgnoreError();
    return context.status();
  }
  impl->context_ = std::move(context).value();
  if (impl->config_.recall.expose_tool) {
    STRATA_RETURN_IF_ERROR(impl->context_->SetTools(impl->ToolsJson()));
  }
  return std::unique_ptr<Agent>(new Agent(std::move(impl)));
}

StatusOr<std::unique_ptr<Agent>> Agent::Open(const std::string& store_path, std::string_view id,
                                             OpenOptions options) {
  StoreOptions store_options;
  store_options.create_if_missing = false;
  store_options.clock = options.services.clock;
  StatusOr<std::unique_ptr<Store>> store = OpenStore(store_path, store_options);
  if (store.status().code() == StatusCode::kNotFound) {
    return NotFoundError("Agent::Open: no store at " + store_path +
                         "; give the store_path of an agent made with Agent::Create");
  }
  if (!store.ok()) return store.status();
  std::shared_ptr<Store> owner = std::move(store).value();
  options.services.store = owner.get();
  STRATA_ASSIGN_OR_RETURN(std::unique_ptr<Agent> agent, Open(*owner, id, std::move(options)));
  agent->impl_->shared_.store_owner = std::move(owner);
  return agent;
}

StatusOr<std::unique_ptr<Agent>> Agent::Open(Store& store, std::string_view id,
                                             OpenOptions options) {
  // One writer per agent of a shared store: the lease is taken before anything is read, so what
  // is read is the last acknowledged state (a read-only store goes on without).
  if (StatusOr<AgentLease> lease = store.shared() ? store.AcquireLease(id) : AgentLease{};
      !lease.ok() && (lease.status().code() == StatusCode::kUnavailable ||
                      lease.status().code() == StatusCode::kAborted)) {
    return lease.status();
  }
  STRATA_ASSIGN_OR_RETURN(StoredAgent stored, store.GetAgent(id));
  STRATA_ASSIGN_OR_RETURN(std::optional<std::string> config_json,
                          store.GetAgentState(id, kConfigKey));
  if (!config_json) {
    return FailedPreconditionError(
        "agent \"" + std::string(id) + "\" in " + store.path() +
        " has no stored agent configuration (it was made with CreateContext, not "
        "Agent::Create); reopen it with OpenContext");
  }
  StatusOr<AgentConfig> parsed = AgentConfigFromJson(*config_json);
  if (!parsed.ok()) {
    return DataLossError("stored configuration of agent \"" + std::string(id) +
                         "\" does not parse: " + parsed.status().message());
  }
  AgentConfig config = std::move(parsed).value();
  bool retokenized = false;
  if (!options.tokenizer.empty() && options.tokenizer != config.tokenizer) {
    if (!options.retokenize) {
      return FailedPreconditionError(
          "agent \"" + std::string(id) + "\" was stored with tokenizer \"" + config.tokenizer +
          "\", not \"" + options.tokenizer +
          "\"; open it without a tokenizer to keep the stored one, or set "
          "OpenOptions::retokenize to recount every segment with the new one");
    }
    config.tokenizer = options.tokenizer;
    retokenized = true;
  }
  if (!options.chat_template.empty() && options.chat_template != config.chat_template) {
    if (!options.retokenize) {
      return FailedPreconditionError(
          "agent \"" + std::string(id) + "\" was stored with chat template \"" +
          config.chat_template + "\", not \"" + options.chat_template +
          "\"; open it without a template to keep the stored one, or set "
          "OpenOptions::retokenize");
    }
    config.chat_template = options.chat_template;
    retokenized = true;
  }
  if (options.endpoint) config.endpoint = *options.endpoint;
  config.store_path = store.path();
  Shared shared = SharedFrom(options.services);
  shared.store = &store;
  ContextOptions context_options;
  STRATA_ASSIGN_OR_RETURN(std::unique_ptr<Impl> impl,
                          NewImpl(std::move(config), std::move(shared), &context_options));
  // The tokenizer must be the one that counted the stored segments, unless recounting.
  STRATA_ASSIGN_OR_RETURN(std::optional<std::string> counted_with,
                          store.GetAgentState(id, kTokenizerNameKey));
  const std::string counted = counted_with ? *counted_with : stored.tokenizer_name;
  if (!retokenized && !counted.empty() && counted != impl->tokenizer_->Name()) {
    return FailedPreconditionError(
        "agent \"" + std::string(id) + "\" was counted with tokenizer " + counted +
        " but its configured tokenizer \"" + impl->config_.tokenizer + "\" is now " +
        impl->tokenizer_->Name() + " (the file changed?); set OpenOptions::retokenize to recount");
  }
  STRATA_ASSIGN_OR_RETURN(ContextSnapshot snapshot, store.LoadSnapshot(id));
  if (retokenized) {
    const Tokenizer& tok = *impl->tokenizer_;
    for (Segment& s : snapshot.segments) {
      size_t tokens = tok.Count(s.content) + tok.Count(s.reasoning);
      for (const ToolCall& call : s.tool_calls)
        tokens += tok.Count(call.name) + tok.Count(call.arguments);
      s.tokens = tokens;
    }
    ContextChange change;
    change.upserted = snapshot.segments;
    change.turn = snapshot.turn;
    STRATA_RETURN_IF_ERROR(store.ApplyChange(id, change));
    STRATA_RETURN_IF_ERROR(store.PutAgentState(id, kConfigKey, AgentConfigToJson(impl->config_)));
    STRATA_RETURN_IF_ERROR(store.PutAgentState(id, kTokenizerNameKey, impl->tokenizer_->Name()));
  } else if (options.endpoint) {
    STRATA_RETURN_IF_ERROR(store.PutAgentState(id, kConfigKey, AgentConfigToJson(impl->config_)));
  }
  impl->AttachJournal(&context_options);
  StatusOr<std::unique_ptr<Context>> context =
      Context::Restore(std::move(context_options), std::move(snapshot));
  if (!context.ok()) {
    return DataLossError("stored context of agent \"" + std::string(id) + "\" in " + store.path() +
                         " does not restore: " + context.status().message());
  }
  impl->context_ = std::move(context).value();
  impl->LoadToolsFromContext();
  STRATA_RETURN_IF_ERROR(impl->LoadPersistentState());
  return std::unique_ptr<Agent>(new Agent(std::move(impl)));
}

const std::string& Agent::id() const { return impl_->config_.identity.id; }
const AgentConfig& Agent::config() const { return impl_->config_; }
std::string Agent::ConfigJson() const {
  std::lock_guard<std::mutex> lock(impl_->mu_);
  return AgentConfigToJson(impl_->config_);
}

Status Agent::SetSystemPrompt(std::string prompt) { return SetSystemPrompts({std::move(prompt)}); }
Status Agent::SetSystemPrompts(std::vector<std::string> prompts) {
  std::lock_guard<std::mutex> lock(impl_->mu_);
  return impl_->context_->SetSystemPrompts(std::move(prompts));
}
StatusOr<std::string> Agent::PutDocument(Layer layer, Document document) {
  std::lock_guard<std::mutex> lock(impl_->mu_);
  return impl_->context_->PutDocument(layer, std::move(document));
}
Status Agent::RemoveDocument(Layer layer, std::string_view name) {
  std::lock_guard<std::mutex> lock(impl_->mu_);
  return impl_->context_->RemoveDocument(layer, name);
}
StatusOr<std::string> Agent::AppendUser(std::string content) {
  std::lock_guard<std::mutex> lock(impl_->mu_);
  return impl_->context_->AppendUser(std::move(content));
}
StatusOr<std::string> Agent::AppendToolResult(ToolResult result) {
  std::lock_guard<std::mutex> lock(impl_->mu_);
  return impl_->context_->AppendToolResult(std::move(result));
}
Status Agent::SetVolatile(std::string key, std::string value) {
  std::lock_guard<std::mutex> lock(impl_->mu_);
  return impl_->context_->SetVolatile(std::move(key), std::move(value));
}

Status Agent::RegisterTool(std::string name, std::string_view schema_json, ToolHandler handler) {
  std::lock_guard<std::mutex> lock(impl_->mu_);
  if (name.empty()) return InvalidArgumentError("RegisterTool: the tool name must not be empty");
  if (name == kRecallToolName) {
    return InvalidArgumentError(
        "RegisterTool: \"context_recall\" is the agent's own tool (AgentRecallConfig)");
  }
  json schema = json::parse(schema_json.begin(), schema_json.end(), nullptr, false);
  if (!schema.is_object()) {
    return InvalidArgumentError(
        "RegisterTool(\"" + name +
        "\"): the schema is not a JSON object: " + std::string(schema_json.substr(0, 80)));
  }
  json function = schema.contains("function") ? schema["function"] : schema;
  if (!function.is_object()) {
    return InvalidArgumentError("RegisterTool(\"" + name + "\"): \"function\" must be an object");
  }
  if (function.contains("name") && function["name"] != name) {
    return InvalidArgumentError("RegisterTool(\"" + name + "\"): the schema names another tool, " +
                                function["name"].dump());
  }
  if (function.contains("parameters") && !function["parameters"].is_object()) {
    return InvalidArgumentError("RegisterTool(\"" + name +
                                "\"): \"parameters\" must be a JSON Schema object");
  }
  function["name"] = name;
  json tool = {{"type", "function"}, {"function", function}};
  std::string canonical = tool.dump();  // nlohmann sorts object keys: canonical
  auto& tools = impl_->tools_;
  auto it = tools.find(name);
  if (it != tools.end() && it->second.handler) {
    return InvalidArgumentError("RegisterTool: a tool named \"" + name +
                                "\" is already registered");
  }
  const bool same_schema = it != tools.end() && it->second.schema == canonical;
  Impl::Tool before = it != tools.end() ? it->second : Impl::Tool{};
  const bool existed = it != tools.end();
  tools[name] = Impl::Tool{canonical, std::move(handler)};
  if (!existed) impl_->tool_order_.push_back(name);
  if (same_schema)
    return Status::Ok();  // reattaching a handler after Open: no change to the prefix
  Status set = impl_->context_->SetTools(impl_->ToolsJson());
  if (!set.ok()) {
    if (existed) {
      tools[name] = before;
    } else {
      tools.erase(name);
      impl_->tool_order_.pop_back();
    }
  }
  return set;
}

StatusOr<Turn> Agent::Complete(const TurnOptions& options) {
  std::lock_guard<std::mutex> lock(impl_->mu_);
  return impl_->Undoable<Turn>([&] { return impl_->Complete(options); });
}

Status Agent::DispatchToolCalls(RunResult* stats) {
  std::lock_guard<std::mutex> lock(impl_->mu_);
  return impl_->Dispatch(stats);
}

StatusOr<RunResult> Agent::Run(std::string user_message, const RunOptions& options) {
  std::lock_guard<std::mutex> lock(impl_->mu_);
  if (options.max_turns <= 0) {
    return InvalidArgumentError("RunOptions::max_turns must be positive, got " +
                                std::to_string(options.max_turns));
  }
  return impl_->Undoable<RunResult>(
      [&] { return impl_->RunLocked(std::move(user_message), options); });
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

StatusOr<CachePrediction> Agent::PredictCachedTokens() const {
  std::lock_guard<std::mutex> lock(impl_->mu_);
  return impl_->Predict();
}

StatusOr<RequestPreview> Agent::PreviewRequest() const {
  std::lock_guard<std::mutex> lock(impl_->mu_);
  return impl_->PreviewRequest();
}

StatusOr<int64_t> Agent::InputTokens() const {
  std::lock_guard<std::mutex> lock(impl_->mu_);
  return impl_->InputTokens();
}

StatusOr<RecallPage> Agent::Recall(std::string_view recall_id, size_t offset,
                                   size_t max_tokens) const {
  std::lock_guard<std::mutex> lock(impl_->mu_);
  return impl_->Recall(recall_id, offset, max_tokens);
}

StatusOr<std::unique_ptr<Agent>> Agent::Fork(std::string task, const ForkOptions& options) {
  std::lock_guard<std::mutex> lock(impl_->mu_);
  return impl_->ForkLocked(std::move(task), options);
}

StatusOr<std::unique_ptr<Agent>> Agent::Impl::ForkLocked(std::string task,
                                                         const ForkOptions& options) {
  Impl& parent = *this;
  AgentConfig config = parent.config_;
  const int first_number = parent.forks_ + 1;
  STRATA_ASSIGN_OR_RETURN(config.identity.id,
                          agent_internal::ForkChildId(config.identity.id, options, first_number));
  if (options.budget) config.budget = *options.budget;
  Shared shared = parent.shared_;  // same endpoint, store and summarizer (shared ownership)
  if (parent.own_summarizer_ != nullptr && shared.summarizer == parent.own_summarizer_.get()) {
    shared.summarizer = nullptr;  // the child makes its own: the parent's dies with the parent
  }
  ContextOptions context_options;
  STRATA_ASSIGN_OR_RETURN(std::unique_ptr<Impl> impl,
                          NewImpl(std::move(config), std::move(shared), &context_options));
  Store* store = impl->shared_.store;
  if (store != nullptr) {
    Status created = store->CreateAgent(context_options);
    // A default id taken by a fork of an earlier process: take the next number.
    for (int n = parent.forks_ + 2;
         options.id.empty() && created.code() == StatusCode::kAlreadyExists &&
         n < parent.forks_ + 1000;
         ++n) {
      STRATA_ASSIGN_OR_RETURN(impl->config_.identity.id,
                              agent_internal::ForkChildId(parent.config_.identity.id, options, n));
      context_options.agent.id = impl->config_.identity.id;
      created = store->CreateAgent(context_options);
    }
    if (created.code() == StatusCode::kAlreadyExists && !options.id.empty()) {
      return AlreadyExistsError("Fork: ForkOptions::id \"" + options.id + "\" is taken in " +
                                store->path() +
                                "; choose another id, or leave it empty for the next free \"" +
                                parent.config_.identity.id + ".fork-<n>\"");
    }
    STRATA_RETURN_IF_ERROR(created);
  }
  const std::string id = impl->config_.identity.id;
  if (store != nullptr) {
    STRATA_RETURN_IF_ERROR(store->PutAgentState(id, kConfigKey, AgentConfigToJson(impl->config_)));
    STRATA_RETURN_IF_ERROR(store->PutAgentState(id, kTokenizerNameKey, impl->tokenizer_->Name()));
    impl->AttachJournal(&context_options);
  }
  auto undo = [&](Status status) {
    if (store != nullptr) store->DeleteAgent(id).IgnoreError();
    return status;
  };
  StatusOr<std::unique_ptr<Context>> context = Context::Create(context_options);
  if (!context.ok()) return undo(context.status());
  impl->context_ = std::move(context).value();
  // Byte-identical stable layers: the same system prompts, tools and documents, in the same order.
  std::vector<std::string> prompts;
  std::string tools = "[";
  std::vector<std::pair<Layer, Document>> documents;
  for (const Segment& s : parent.context_->Segments()) {
    if (s.layer == Layer::kSystem) prompts.push_back(s.content);
    if (s.layer == Layer::kTools) tools += (tools.size() > 1 ? "," : "") + s.content;
    if (s.layer == Layer::kIndex || s.layer == Layer::kDocs) {
      documents.push_back({s.layer, Document{s.name, s.content, s.version, s.order}});
    }
  }
  tools += "]";
  Status status = impl->context_->SetSystemPrompts(std::move(prompts));
  if (status.ok() && tools != "[]") status = impl->context_->SetTools(tools);
  for (auto& [layer, document] : documents) {
    if (!status.ok()) break;
    status = impl->context_->AddDocument(layer, std::move(document)).status();
  }
  if (status.ok()) status = impl->context_->AppendUser(std::move(task)).status();
  if (!status.ok()) return undo(status);
  impl->tools_ = parent.tools_;
  impl->tool_order_ = parent.tool_order_;
  // The child starts from the parent's view of the server's cache (same salt, same endpoint).
  if (!parent.reference_.hashes.empty()) {
    PromptBlocks blocks;
    blocks.salt = parent.salt_;
    blocks.block_tokens = parent.config_.cache.block_tokens;
    blocks.hashes = parent.reference_.hashes;
    impl->model_->Insert(blocks);
  }
  ++parent.forks_;
  return std::unique_ptr<Agent>(new Agent(std::move(impl)));
}

StatusOr<std::string> Agent::Join(Agent& child, const JoinOptions& options) {
  if (&child == this) return InvalidArgumentError("Join: an agent cannot join itself");
  std::scoped_lock lock(impl_->mu_, child.impl_->mu_);
  Impl& parent = *impl_;
  Impl& kid = *child.impl_;
  if (!parent.context_->OpenToolCalls().empty()) {
    return FailedPreconditionError("Join: agent \"" + parent.config_.identity.id +
                                   "\" has unanswered tool calls; answer them before joining \"" +
                                   kid.config_.identity.id + "\"");
  }
  std::vector<Segment> segments = kid.context_->Segments();
  std::string task;
  std::vector<const Segment*> history;
  for (const Segment& s : segments) {
    if (s.layer != Layer::kHistory) continue;
    if (task.empty() && s.kind == SegmentKind::kUser) task = s.content;
    if (s.state != SegmentState::kEvicted && s.state != SegmentState::kSummarized)
      history.push_back(&s);
  }
  std::string body;
  const char* what = "final answer";
  if (!history.empty() && history.back()->kind == SegmentKind::kAssistant &&
      !history.back()->content.empty()) {
    body = history.back()->content;
  } else {
    what = "summary (it ended without a final answer)";
    STRATA_ASSIGN_OR_RETURN(
        body, kid.shared_.summarizer->Summarize(history, options.max_tokens, *kid.tokenizer_));
  }
  // Validated: non-empty, within max_tokens (cut at a line end when longer).
  if (body.empty())
    return FailedPreconditionError("Join: agent \"" + kid.config_.identity.id +
                                   "\" has nothing to fold back");
  if (parent.tokenizer_->Count(body) > options.max_tokens) {
    size_t keep = Utf8Floor(body, options.max_tokens * 3);
    while (keep > 0 &&
           parent.tokenizer_->Count(std::string_view(body).substr(0, keep)) > options.max_tokens) {
      keep = Utf8Floor(body, keep * 9 / 10);
    }
    body = body.substr(0, keep) + "\n[cut to " + std::to_string(options.max_tokens) + " tokens]";
  }
  std::vector<std::string> recall_ids;
  std::map<std::string, std::string> originals;
  for (const Segment& s : segments) {
    if (s.recall_id.empty() || originals.count(s.recall_id)) continue;
    StatusOr<std::string> original = kid.OriginalOf(s.recall_id);
    if (!original.ok()) continue;
    recall_ids.push_back(s.recall_id);
    originals[s.recall_id] = *original;
  }
  for (const auto& [rid, original] : kid.joined_originals_) {
    if (originals.emplace(rid, original).second) recall_ids.push_back(rid);
  }
  if (task.size() > 200) task = task.substr(0, Utf8Floor(task, 200)) + "...";
  std::string message = "Result of the subtask \"" + task + "\" (agent " + kid.config_.identity.id +
                        ", " + what + "):\n" + body;
  if (!recall_ids.empty()) {
    message += "\n[recall ids of the subtask's shortened content:";
    for (const std::string& rid : recall_ids) message += " " + rid;
    message += "]";
  }
  // Persist the originals first: a message naming recall ids must be answerable after a restart.
  if (parent.shared_.store != nullptr && !originals.empty()) {
    json ids = json::array();
    for (const auto& [rid, original] : parent.joined_originals_) ids.push_back(rid);
    for (const auto& [rid, original] : originals) {
      if (!parent.joined_originals_.count(rid)) ids.push_back(rid);
      STRATA_RETURN_IF_ERROR(parent.SaveState(kOriginalPrefix + rid, original));
    }
    STRATA_RETURN_IF_ERROR(parent.SaveState("joined_recall_ids", ids.dump()));
  }
  STRATA_ASSIGN_OR_RETURN(std::string segment_id, parent.context_->AppendUser(std::move(message)));
  for (auto& [rid, original] : originals) parent.joined_originals_[rid] = std::move(original);
  return segment_id;
}

Context& Agent::context() { return *impl_->context_; }
const Context& Agent::context() const { return *impl_->context_; }
Store* Agent::store() const { return impl_->shared_.store; }
int64_t Agent::record_write_failures() const { return impl_->write_failures_.load(); }

}  // namespace strata
