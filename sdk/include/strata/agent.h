// strata/agent.h — the one object an application holds: an agent's context, its configuration,
// its endpoint, its store, its tools and its loop.
//
// An Agent owns what the lower layers need wired together (tokenizer, chat template, request
// counter, compaction policy, transport, client, store, record sink): it is created from one
// AgentConfig value, which round-trips through JSON so that the CLI, the Python bindings and the
// sidecar create agents from the same document. With a store, the configuration is persisted with
// the context and with the prefix-cache model's state, so Agent::Open() after a restart renders
// byte-identically and predicts what the server still holds.
//
//   strata::AgentConfig config;
//   config.identity.id = "agent-1";
//   config.endpoint.base_url = "http://127.0.0.1:8000/v1";
//   config.store_path = "agents.db";
//   STRATA_ASSIGN_OR_RETURN(std::unique_ptr<strata::Agent> agent, strata::Agent::Create(config));
//   STRATA_RETURN_IF_ERROR(agent->SetSystemPrompt("You are a coding agent."));
//   STRATA_RETURN_IF_ERROR(agent->RegisterTool("read_file", schema, ReadFile));
//   STRATA_ASSIGN_OR_RETURN(strata::RunResult run, agent->Run("Fix the failing test."));
//   // ... after a restart:
//   STRATA_ASSIGN_OR_RETURN(auto again, strata::Agent::Open("agents.db", "agent-1"));
//
// Errors: Status codes as in strata/status.h; an operation that fails changes nothing. A Run() or
// Complete() that fails (unreachable endpoint, an error answer after the retries, the deadline, a
// cancellation, a reply that cannot be appended) is undone whole, in memory and in the store: the
// user message, the replies and tool results it appended, a compaction it applied and the recall
// pins it set are rolled back, so that the context renders the request it rendered before the call
// and a retry with the same text leaves one user message. What the server was sent stays recorded
// (request records, the failed one with its error, events, growth points, the prefix-cache model).
//
// Thread safety: an Agent is internally serialized: every public method takes the agent's mutex,
// so one Agent may be called from several threads (calls run one after the other). Tool handlers
// and the streaming callback run on the calling thread under that mutex and must not call the
// same Agent. Distinct Agents (a parent and its forks included) may run concurrently.
#ifndef STRATA_AGENT_H_
#define STRATA_AGENT_H_

#include <array>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "strata/budget.h"
#include "strata/builtin_policies.h"
#include "strata/client.h"
#include "strata/clock.h"
#include "strata/compaction_policy.h"
#include "strata/context.h"
#include "strata/record.h"
#include "strata/status.h"
#include "strata/store.h"
#include "strata/tokenizer.h"
#include "strata/transport.h"

namespace strata {

// The budget of an agent. Reserves left unset are scaled to the window (see ResolveBudget), so
// that the defaults work for an 8K window as well as for 1M.
struct AgentBudgetConfig {
  int64_t window = 1048576;  // the model's context window. Default 1048576 (1M)
  // Unset: min(32,768, window / 8), min(16,384, window / 16), min(16,384, window / 16).
  std::optional<int64_t> reserve_output;
  std::optional<int64_t> reserve_reasoning;  // unset: min(16,384, window / 16)
  std::optional<int64_t> reserve_headroom;   // unset: min(16,384, window / 16)
  // Compact above this. Default 85% of the budget.
  BudgetLimit trigger = BudgetLimit::Fraction(0.85);
  BudgetLimit target = BudgetLimit::Fraction(0.60);  // compact down to this. Default 60%
  bool enforce = true;  // false: no budget (the context grows without limit). Default true
};

// The compaction policy by name and its knobs: every field of StrataPolicyOptions
// (strata/builtin_policies.h, which documents each; docs/compaction.md explains them), with the
// same defaults, used by "strata" only, and last_n for "last-n". AgentServices::policy replaces
// the policy this names.
struct AgentPolicyConfig {
  // A MakePolicyByName name (strata/builtin_policies.h): "strata", "none", "sliding", "last-n",
  // "clear-tool-uses", "observation-masking". Default "strata".
  std::string name = "strata";
  size_t keep_turns = 2;         // the last turns never altered. Default 2
  size_t keep_tool_results = 3;  // the last tool results never masked. Default 3
  // Keep the first user message (the task) when summarizing. Default true.
  bool keep_first_user = true;
  // Tool names whose results are never altered. Default none.
  std::vector<std::string> exclude_tools;
  // Tool names whose results are stale once their turn is over: masked first. Default none.
  std::vector<std::string> ephemeral_tools;
  // A masked result's placeholder lists one identifier per `tokens_per_identifier` tokens of the
  // output, between 8 and `placeholder_identifiers`. Defaults 64 and 32 (must be > 0).
  size_t placeholder_identifiers = 64;
  size_t tokens_per_identifier = 32;  // see placeholder_identifiers. Default 32
  size_t max_summary_tokens = 1536;  // tokens of one summary at most. Default 1536
  // --- The cost model (StrataPolicyOptions, "Cost model"). Decide by expected cost (false: the
  // hysteresis-only policy). Default true.
  bool cost_model = true;
  // Prices of an uncached and of a cached input token; only their ratio matters. Defaults 1.0 and
  // 0.1 (uncached must be > 0, cached >= 0).
  double uncached_price = 1.0;
  double cached_price = 0.1;  // see uncached_price. Default 0.1
  // The remaining-turn estimate's prior and its weight. Defaults 5 and 1 (>= 0).
  double prior_remaining_turns = 5;
  double prior_weight = 1;  // see prior_remaining_turns. Default 1
  // Below the trigger, a batch must save this many times its re-prefill cost. Default 1 (>= 0).
  double below_trigger_margin = 1;
  // Results sharing names with the assistant messages of this many last turns are in use. Default 3.
  size_t use_window_turns = 3;
  // Below the trigger, mask results seen once and not used, when that pays. Default true.
  bool mask_after_use = true;
  size_t last_n = 5;  // "last-n" only: the messages kept. Default 5
};

// Where requests go. The API key is never stored: only the NAME of the environment variable that
// holds it.
struct AgentEndpointConfig {
  // "openai", "vllm", "sglang", "zai" (strata/client.h Backend). Default "vllm".
  std::string backend = "vllm";
  std::string base_url;          // e.g. "http://127.0.0.1:8000/v1"; "" needs an injected transport
  std::string api_key_env;       // e.g. "OPENAI_API_KEY"; read at Create/Open; "" none
  std::string deployment_secret_env;  // cache_salt secret's variable; "" none
  bool stream = true;                 // ask for a streamed (SSE) answer. Default true
  int64_t max_output_tokens = 4096;   // the request's output token limit; 0: not sent. Default 4096
  std::optional<bool> thinking;      // the model's thinking mode; unset: the server's default
  std::string reasoning_effort;  // keep fixed per agent (GLM puts it first)
  // Send the cache_salt derived from the agent's isolation key (backends that take one). Default
  // true.
  bool send_cache_salt = true;
  int64_t deadline_ms = 0;  // per call, 0: the transport's total timeout. Default 0
  // The HTTP transport's timeouts in milliseconds (strata/transport.h Timeouts), used only when no
  // transport is injected.
  int64_t connect_timeout_ms = 10000;  // TCP and TLS connect. Default 10000 (10 s)
  // Request sent -> first body byte (floor). Default 300000.
  int64_t first_byte_timeout_ms = 300000;
  int64_t idle_timeout_ms = 60000;    // gap between two body bytes. Default 60000
  int64_t total_timeout_ms = 900000;  // one attempt. Default 900000 (15 min)
  // Attempts in total, retries included (strata/transport.h RetryPolicy); only without an
  // injected transport. Default 4.
  int max_attempts = 4;
};

// Recall of what compaction and hygiene altered (the agent answers `context_recall` itself).
struct AgentRecallConfig {
  bool expose_tool = true;  // add the context_recall tool to the request's tools. Default true
  // One answer holds at most this share of the budget's target tokens. Default 0.25.
  double max_share_of_target = 0.25;
  // A recalled result is pinned (protected from compaction) for this many turns. Default 3.
  int64_t protect_turns = 3;
};

// Everything an Agent is made from; a plain value that round-trips through AgentConfigToJson and
// AgentConfigFromJson. Create() validates it; stored with the agent, Open() reads it back.
struct AgentConfig {
  AgentIdentity identity;  // id (required), tenant, scope, model_version, template_version
  // Tokenizer spec (strata/tokenizer_spec.h): "hf:PATH", "spm:PATH", "estimate", "estimate:3.5"...
  // Default "estimate".
  std::string tokenizer = "estimate";
  // The server's chat template by name (strata/chat_template.h MakeChatTemplate: "glm-5.3" and its
  // alias "glm5", "glm-4.7", "generic") or "" (the context's own count: content plus
  // message_overhead_tokens per message). With a template, budgets use exact request counts.
  // Default "glm5".
  std::string chat_template = "glm5";
  AgentBudgetConfig budget;    // the token budget (AgentBudgetConfig); defaults as there
  AgentPolicyConfig policy;    // the compaction policy (AgentPolicyConfig); defaults as there
  HygieneOptions hygiene;      // hygiene of what is appended (strata/context.h); defaults as there
  RenderOptions render;        // how requests are rendered (strata/context.h); defaults as there
  bool keep_originals = true;  // keep originals of altered segments for recall. Default true
  size_t message_overhead_tokens = 6;  // per-message tokens without a chat template. Default 6
  AgentEndpointConfig endpoint;        // where and how requests are sent (AgentEndpointConfig)
  PrefixCacheOptions cache;  // block size of the server's prefix cache
  AgentRecallConfig recall;  // the context_recall tool and its answers
  // SQLite store (strata/store.h); "" keeps the agent in memory only.
  std::string store_path;
};

// The JSON document of a configuration: every field, nested as above (identity, budget, policy,
// hygiene, render, endpoint, cache, recall objects). Trigger and target are {"fraction": f} or
// {"tokens": n}; unset reserves are omitted.
std::string AgentConfigToJson(const AgentConfig& config);
// Strict inverse: every key optional (defaults as above) but unknown keys and wrong types are
// refused with INVALID_ARGUMENT naming the key path ("budget.trigger.fraction: expected a number").
StatusOr<AgentConfig> AgentConfigFromJson(std::string_view json);

// The ranges of AgentConfig's numbers (CheckAgentConfigRanges). budget.window, its reserves and
// token limits, max_output_tokens, max_summary_tokens, max_segment_tokens: at most 2^30 tokens.
inline constexpr int64_t kMaxAgentWindowTokens = int64_t{1} << 30;
// endpoint.*_timeout_ms: 1 to 24 h; endpoint.deadline_ms: 0 (none) to 24 h. Far below where a
// deadline computed in microseconds could overflow.
inline constexpr int64_t kMaxAgentTimeoutMs = 24 * 3600 * 1000;
// policy.keep_turns, keep_tool_results, last_n, hygiene.min_repeat_run, recall.protect_turns.
inline constexpr size_t kMaxAgentCount = 1000000;
// message_overhead_tokens: 0 to 1024.
inline constexpr size_t kMaxMessageOverheadTokens = 1024;

// INVALID_ARGUMENT naming the key, the value and its range for a number of `config` outside the
// ranges above and: endpoint.max_attempts 1 to kMaxRetryAttempts (strata/transport.h);
// cache.block_tokens 1 to 65536, cache.bytes_per_token 1 to 64, cache.capacity_blocks 0 to 2^32;
// fractions (trigger, target, head_share, max_share_of_target) 0 to 1; budget reserves and token
// limits 0 to budget.window. AgentConfigFromJson refuses what this refuses.
Status CheckAgentConfigRanges(const AgentConfig& config);

// The budget `config` gives: unset reserves scaled to the window, then Budget::Validate(). A set
// reserve that leaves no usable input is refused naming the reserve and how much to lower it.
StatusOr<Budget> ResolveBudget(const AgentBudgetConfig& config);

// What a tool handler returns.
struct ToolOutput {
  std::string content;    // the tool result the model reads
  bool is_error = false;  // appended as an error result, counted in RunResult::tool_errors
};
// Called with the call's arguments (the JSON string the model produced). May throw: an exception
// becomes an error result ("tool X failed: what()"), never a crash.
using ToolHandler = std::function<ToolOutput(const std::string& arguments_json)>;

// One streamed fragment of the answer (strata/transport.h StreamDelta).
using DeltaCallback = std::function<void(const StreamDelta&)>;

// Objects an application injects instead of those the configuration would make. Not owned: each
// must outlive the Agent and every agent Fork() makes from it (forks use the same ones). One
// object may serve many agents at once when it is thread-safe (the store, the transports and the
// tokenizers strata makes are; a CompactionPolicy is called by each agent under that agent's own
// mutex, so a policy shared by agents running concurrently must be thread-safe too, as strata's
// built-in policies are: they are stateless).
struct AgentServices {
  Transport* transport = nullptr;    // nullptr: an HTTP transport to config.endpoint.base_url
  Store* store = nullptr;            // nullptr: config.store_path ("" none)
  Summarizer* summarizer = nullptr;  // nullptr: the extractive summarizer
  // Used instead of the policy config.policy names (which is still validated and stored). Its
  // Name() ("name@version") is recorded on what it alters and in every CompactionReport, as the
  // built-in policies' names are. nullptr: the configured policy.
  CompactionPolicy* policy = nullptr;
  // Counts instead of a tokenizer loaded from config.tokenizer (loading a large tokenizer.json
  // once for many agents). It must be the tokenizer that spec makes: its Name() is checked against
  // the spec's (for "hf:" and "spm:" the file's hash, read without building the tokenizer) and a
  // mismatch is FAILED_PRECONDITION naming both. nullptr: loaded from config.tokenizer.
  const Tokenizer* tokenizer = nullptr;
  // Time and randomness (strata/clock.h) for the agent's records, durations and ids, and for the
  // transport and store it opens itself. Not owned; nullptr: SystemClock().
  Clock* clock = nullptr;
};

// How Agent::Open() reopens a stored agent.
struct OpenOptions {
  AgentServices services;  // injected objects, as for Create()
  // Refuse (default) or accept a tokenizer / chat template other than the stored one. When
  // accepted, every segment's tokens are recounted and stored, and the stored configuration names
  // the new ones. "" keeps the stored spec.
  std::string tokenizer;
  std::string chat_template;  // the chat template to open with; "" keeps the stored one
  bool retokenize = false;    // accept another tokenizer or template (see above). Default false
  // Replaces the whole stored endpoint, every field of it (backend, base_url, api_key_env,
  // deployment_secret_env, stream, max_output_tokens, thinking, reasoning_effort, send_cache_salt,
  // deadline and timeouts, max_attempts), not only the base URL: start from the stored one
  // (Agent::config().endpoint of an earlier Open) to change a few fields. Stored with the agent, so
  // the next Open without it keeps it. std::nullopt: the stored endpoint.
  std::optional<AgentEndpointConfig> endpoint;
};

struct Turn;

// Per-call options of Complete() (and of each call Run() makes).
struct TurnOptions {
  // Cancels the call when set; not owned. Default nullptr.
  const CancellationToken* cancel = nullptr;
  std::vector<std::pair<std::string, std::string>> headers;  // extra request headers
  DeltaCallback on_delta;  // content, reasoning and tool-call-argument deltas as they arrive
  // Called once per request the call sends, just before it is sent, with its request id (the one
  // its RequestRecord gets), e.g. to tell a client the id before the answer streams. Default
  // empty: not called.
  std::function<void(const std::string& request_id)> on_send;
  /// Top-level request fields of this call only, (name, JSON value text), e.g. {"temperature",
  /// "0.2"}: rendered after the messages (they never change the cached prefix), after the agent's
  /// own fields. A name the backend profile renders too replaces its value; "max_tokens" and
  /// "max_completion_tokens" replace the profile's output cap under either name. INVALID_ARGUMENT
  /// (nothing sent or recorded) for the fields the agent owns: model, messages, tools, stream,
  /// stream_options, cache_salt, request_id, rid.
  std::vector<std::pair<std::string, std::string>> extra_fields;
  // Called inside the turn, first (before its build), once the turn collects its writes: what it
  // changes in the context (through context(): this Agent's own methods take the mutex the turn
  // holds) is stored in the turn's one Store::CommitTurn and undone with the turn when the turn
  // fails. An error fails the turn before anything is sent or recorded. Default empty: not called.
  std::function<Status()> before_build;
  // Called just before the turn's writes are committed, with the turn as far as it is known
  // (response, assistant_segment_id, compactions, growth) and those writes: it may add entries to
  // writes->state and writes->events (this agent's id), which are committed with the turn, in
  // the same Store::CommitTurn (without a store they go nowhere). An error fails the turn whole
  // (undone, nothing of it stored but its record). Default empty: not called.
  std::function<Status(const Turn& turn, TurnWrites* writes)> before_commit;
  // false (default): the turn marks the context (Context::Mark) itself, and a failed turn goes
  // back to that mark. true: it uses the mark the caller set with context().Mark() before it
  // (FAILED_PRECONDITION, nothing done, without one): a failed turn rewinds the context to that
  // mark, undoing what the caller changed since and earlier turns with this option, and a turn
  // that succeeds keeps the mark, so that several steps are undone together; the caller drops it
  // with context().ClearMark(). Run() undoes its whole call and ignores it. Default false.
  bool undo_to_caller_mark = false;
};

// What one Complete() did.
struct Turn {
  Response response;     // the parsed answer
  RequestRecord record;  // the request's record, as written to the store and the record sink
  std::string assistant_segment_id;  // the segment the answer was appended as
  // The compaction of this build: at most one report (the rounds of one Build() are merged).
  std::vector<CompactionReport> compactions;
  // The requests its summarizer sent for that compaction (RequestRecord::purpose "compaction";
  // MakeLlmSummarizer's cache-keeping mode), stored with the turn's record: what the turn cost is
  // their tokens and the record's. Empty when no such request was sent.
  std::vector<RequestRecord> compaction_requests;
  // The request reused less than the previous one: every cause, e.g. "doc version change (v1 ->
  // v2)" and "compaction", joined in prefix_break->reason and listed in break_causes.
  std::optional<PrefixBreakEvent> prefix_break;
  std::vector<std::string> break_causes;  // each cause of prefix_break; empty when none
  GrowthPoint growth;  // recorded in the store automatically
  std::string body;    // the request body that was sent
  // The render of the agent's context `body` is (BuiltRequest::render_serial), for
  // Agent::RecycleUnchanged; 0 when the body sent was not this context's render (a fork's).
  uint64_t render_serial = 0;
  // What went wrong without failing the turn, one line each (e.g. a write refused); also counted
  // by Agent::record_write_failures(). Empty normally.
  std::vector<std::string> warnings;
};

// Options of Run().
struct RunOptions {
  int max_turns = 16;  // model calls at most. Default 16
  TurnOptions turn;    // passed to each Complete()
};

// What one Run() did.
struct RunResult {
  std::string answer;  // the last answer's content
  // "answer" (the model answered without tool calls) or "max_turns".
  std::string stopped;
  std::vector<Turn> turns;  // every model call of the run, in order
  int tool_calls = 0;       // tool calls the run answered
  int tool_errors = 0;  // unknown tools, throwing handlers, handlers that returned is_error
};

// The request the next Complete() would send, computed without changing anything.
struct CachePrediction {
  int64_t input_tokens = 0;  // exact with a chat template and an exact tokenizer
  bool input_tokens_exact = false;  // input_tokens is a chat-template count, not an estimate
  // Prompt tokens the server's prefix cache should still hold (the prefix-cache model's lookup).
  int64_t predicted_cached_tokens = 0;
  bool compaction_due = false;  // the next Complete() compacts first (counts are after it)
  std::optional<CompactionReport> compaction;  // what that compaction would do, when due
};

// The request the next Complete() would send, with the figures a Turn reports of its request
// (Agent::PreviewRequest).
struct RequestPreview {
  // The request body: the agent's fields (stream, output cap, cache_salt, ...) with request id
  // "preview" where the backend sends one. When a compaction is due, the body after it (computed
  // on a copy: nothing is applied).
  std::string body;
  // Input tokens as Turn::record.input_tokens counts them before the server answers: exact with a
  // chat template and an exact tokenizer (input_tokens_exact), else estimated.
  int64_t input_tokens = 0;
  bool input_tokens_exact = false;  // whether input_tokens is exact (see above)
  // Prompt tokens the server's prefix cache should still hold
  // (Turn::record.cached_tokens_predicted).
  int64_t predicted_cached_tokens = 0;
  // Content tokens per layer, indexed by Layer (Turn::growth.layer_tokens counts the same after the
  // call); the volatile layer included.
  std::array<int64_t, kLayerCount> layer_tokens{};
  size_t message_count = 0;  // messages of the body
  bool compaction_due = false;  // the next Complete() compacts first (body and counts are after it)
  std::optional<CompactionReport> compaction;  // what that compaction would do, when due
};

// Options of Agent::Fork().
struct ForkOptions {
  // The child's id. "": "<parent id>.fork-<n>", n the first number not taken in the store (with
  // max_id_length set, the parent id is cut on a UTF-8 character boundary so that the whole id
  // fits; a cut parent id may meet another parent's, and the store's uniqueness check then
  // moves on to the next number).
  std::string id;
  // Longest id, in bytes, the child may get (the id rules of where it is served, e.g.
  // strata-sidecar's 128 characters after its tenant prefix); 0: no limit. Default 0. An `id`
  // longer than this is refused with INVALID_ARGUMENT, and so is a limit too short for
  // ".fork-<n>" plus one character of the parent id.
  size_t max_id_length = 0;
  // The child's budget; unset: the parent's.
  std::optional<AgentBudgetConfig> budget;
};

// Options of Agent::Join().
struct JoinOptions {
  // Tokens the folded message may take at most (the child's answer or summary is cut to it).
  // Default 2048.
  size_t max_tokens = 2048;
};

// An agent: context, configuration, endpoint, store, tools and loop (see the file comment for
// the thread contract). Made by Create(), Open() or Fork(); owned by the caller's unique_ptr.
class Agent {
 public:
  // Creates an agent from `config` (validated first: INVALID_ARGUMENT names the field). With a
  // store, registers it there (ALREADY_EXISTS if the id is taken: use Open) with its configuration.
  static StatusOr<std::unique_ptr<Agent>> Create(AgentConfig config, AgentServices services = {});
  // Reopens a stored agent with its configuration, context and prefix-cache state. NOT_FOUND for
  // an unknown id; FAILED_PRECONDITION when the stored agent has no configuration (made with
  // CreateContext) or when options name another tokenizer/template without retokenize.
  static StatusOr<std::unique_ptr<Agent>> Open(const std::string& store_path, std::string_view id,
                                               OpenOptions options = {});
  // The same from an open store, which the agent uses and does not own (it must outlive it).
  static StatusOr<std::unique_ptr<Agent>> Open(Store& store, std::string_view id,
                                               OpenOptions options = {});
  ~Agent();
  Agent(const Agent&) = delete;
  Agent& operator=(const Agent&) = delete;

  // The agent's id (config().identity.id).
  const std::string& id() const;
  // The configuration it was created or opened with (fixed for the agent's life).
  const AgentConfig& config() const;
  // config() as AgentConfigToJson writes it.
  std::string ConfigJson() const;

  // --- Content --------------------------------------------------------------------------------
  Status SetSystemPrompt(std::string prompt);  // one system prompt (Context::SetSystemPrompt)
  Status SetSystemPrompts(std::vector<std::string> prompts);  // several (Context::SetSystemPrompts)
  StatusOr<std::string> PutDocument(Layer layer, Document document);  // adds or updates; segment id
  Status RemoveDocument(Layer layer, std::string_view name);          // Context::RemoveDocument
  StatusOr<std::string> AppendUser(std::string content);  // a user message; its segment id
  // For callers running their own loop (Complete + tool results).
  StatusOr<std::string> AppendToolResult(ToolResult result);
  Status SetVolatile(std::string key, std::string value);  // Context::SetVolatile

  // --- Tools ----------------------------------------------------------------------------------
  // Registers a tool. `schema_json` is the function object without its name
  // ({"description":...,"parameters":{...}}) or a whole OpenAI tool object with the same name.
  // INVALID_ARGUMENT for a bad schema, a taken name or "context_recall" (the agent's own).
  Status RegisterTool(std::string name, std::string_view schema_json, ToolHandler handler);

  // --- The loop -------------------------------------------------------------------------------
  // Builds (compacting first when due), predicts, sends, appends the reply, records (store:
  // request record, prefix-break and compaction events, growth point, prefix-cache state). On
  // error the context is as before the call (a compaction it applied is undone; the next call
  // compacts again); the request record is written with the error.
  StatusOr<Turn> Complete(const TurnOptions& options = {});
  // Hands back a turn the caller is done with: the next request's body is written into the memory
  // of its body instead of memory the allocator maps anew (Context::Recycle). For a loop that
  // keeps nothing of a Turn, at 1M tokens this takes about a third off each turn's CPU.
  void Recycle(Turn turn);
  // The same for a turn whose body is handed back exactly as Complete() returned it, not changed
  // since: when no render of the context came between, the next request keeps the bytes the two
  // share and writes only the rest (Context::Recycle with Turn::render_serial), so a turn that
  // appends writes what it appends instead of the whole body. The bytes are trusted, not
  // compared: a body changed in place would be sent as changed; hand such a body to Recycle().
  void RecycleUnchanged(Turn turn);
  // Appends `user_message` ("" appends nothing) and loops: Complete(), answer each tool call
  // (registered handler, context_recall, or an error result for an unknown tool), until the model
  // answers without tool calls or after max_turns calls. On error (any Complete() of the loop
  // failing, including after a tool handler threw or returned an error) the whole call is undone:
  // the user message, every reply and tool result it appended (see the file comment). Costs one
  // copy of the context's segments per call, to undo with.
  StatusOr<RunResult> Run(std::string user_message, const RunOptions& options = {});
  // Answers every open tool call of the last reply (what Run() does between two calls).
  Status DispatchToolCalls(RunResult* stats = nullptr);

  // --- Predictions and counts -----------------------------------------------------------------
  StatusOr<CachePrediction> PredictCachedTokens() const;  // the server's cache for the next request
  // The request the next Complete() would send and its profile (RequestPreview), changing nothing.
  // Synchronized like every method (unlike context().Preview()). FAILED_PRECONDITION when there is
  // nothing to send or tool calls are unanswered; RESOURCE_EXHAUSTED when even a compaction cannot
  // make the request fit.
  StatusOr<RequestPreview> PreviewRequest() const;
  // Input tokens of the request Build() would render now (before any compaction), counted like
  // the RequestRecord and the compaction reports (exact with a chat template).
  StatusOr<int64_t> InputTokens() const;

  // --- Recall ---------------------------------------------------------------------------------
  // A page of the original under `recall_id` starting at byte `offset`, of at most `max_tokens`
  // tokens (0: the configured share of the target). NOT_FOUND for an unknown id, OUT_OF_RANGE
  // for an offset past the end.
  StatusOr<RecallPage> Recall(std::string_view recall_id, size_t offset = 0,
                              size_t max_tokens = 0) const;

  // --- Task splitting -------------------------------------------------------------------------
  // A child agent with byte-identical stable layers (system, tools, index, docs) and the same
  // isolation key, so its first request is a cache hit on the parent's prefix; its history is
  // `task` as the first user message; own budget; same endpoint and store.
  StatusOr<std::unique_ptr<Agent>> Fork(std::string task, const ForkOptions& options = {});
  // Folds the child's final answer (or, when it ended without one, a summary of its history by
  // its summarizer, which continues the child's current request with MakeLlmSummarizer; the summary
  // requests' records go to the child's store) into this agent as one user message naming the
  // child's recall ids, which this agent's context_recall then answers. FAILED_PRECONDITION while
  // this agent has open tool calls.
  StatusOr<std::string> Join(Agent& child, const JoinOptions& options = {});

  // --- Lower layers ---------------------------------------------------------------------------
  // The context (not synchronized: use it only while no other thread calls this Agent). The same
  // object for the agent's life: a failed Run()/Complete() rewinds it in place (Context::Rewind),
  // which invalidates pointers Context::Find() returned, not the reference.
  Context& context();
  const Context& context() const;
  Store* store() const;  // nullptr without a store
  // Writes the store refused since the agent was created or opened: a turn whose writes (context
  // changes, record, events, growth, cache state: one Store::CommitTurn) were refused fails with
  // the store's error and counts one, and so does the record of a failed turn that could not be
  // stored (its Status then says so); a write that fails nothing (Turn::warnings) counts one too.
  // An exporter's counter.
  int64_t record_write_failures() const;

  class Impl;  // private to strata::agent

 private:
  explicit Agent(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// --- Stateless trimming (LangChain trim_messages style) -----------------------------------------

// Options of TrimMessages().
struct TrimOptions {
  // A MakePolicyByName name (strata/builtin_policies.h). Default "strata".
  std::string policy = "strata";
  // A MakeTokenizer spec (strata/tokenizer_spec.h). Default "estimate".
  std::string tokenizer = "estimate";
  // A tokenizer to count with instead of the `tokenizer` spec, for a caller that loads one once
  // and trims many lists (not owned; used only during the call). Default nullptr: the spec.
  const Tokenizer* counting_tokenizer = nullptr;
  // A MakeChatTemplate name; "": content + overhead per message. Default "glm5".
  std::string chat_template = "glm5";
  // Append-time hygiene is off by default: a trimmer returns the messages it keeps unchanged.
  bool hygiene = false;
};

// One message of TrimResult::kept: which input message it is and what trimming changed in it, so
// that a caller can return its own message objects rather than strata's rendering of them.
struct TrimmedMessage {
  // The index of the input message this is; -1 for a message strata wrote (a summary). Default -1.
  int64_t input_index = -1;
  // The placeholder a mask put in place of the content (a masked tool result); std::nullopt when
  // the content is the input's.
  std::optional<std::string> masked_content;
  // The input's reasoning_content was dropped (a policy cleared it). Default false.
  bool reasoning_dropped = false;
  // A message strata wrote (input_index -1), as a JSON object; "" otherwise.
  std::string message_json;
};

// What TrimMessages() returns.
struct TrimResult {
  std::string messages_json;  // the trimmed list (system first, tool calls paired)
  int64_t input_tokens = 0;   // of the trimmed list, counted as the options say
  std::optional<CompactionReport> report;  // when something was trimmed
  // The messages of messages_json in order, each naming the input message it is.
  std::vector<TrimmedMessage> kept;
};

// Trims an OpenAI messages array (JSON) into `budget` with the named policy: system messages
// first, every tool result after its call. A content may be a string or a list of content parts
// (text parts are joined; another part, an image say, counts as its JSON text). INVALID_ARGUMENT
// for malformed messages (the message index named); RESOURCE_EXHAUSTED when what cannot be
// trimmed does not fit.
StatusOr<TrimResult> TrimMessages(std::string_view messages_json, const Budget& budget,
                                  const TrimOptions& options = {});

}  // namespace strata

#endif  // STRATA_AGENT_H_
