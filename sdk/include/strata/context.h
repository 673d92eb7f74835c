// strata/context.h — one agent's layered context and its byte-stable rendering.
//
// A Context holds an agent's segments in six layers (strata/segment.h) and renders them into an
// OpenAI Chat Completions request body. Rendering follows the prefix contract of docs/concepts.md:
// the same segments give the same bytes on every call, in every process; stable layers come first;
// history only grows at its end; the volatile layer is the last message. So a model server's prefix
// (KV) cache is reused from one request to the next.
//
//   strata::ContextOptions options;
//   options.agent.id = "agent-1";
//   auto context = strata::Context::Create(options).value();
//   STRATA_RETURN_IF_ERROR(context->SetSystemPrompt("You are a coding agent."));
//   STRATA_RETURN_IF_ERROR(context->SetTools(R"([{"type":"function","function":{"name":"bash"}}])"));
//   STRATA_RETURN_IF_ERROR(context->AppendUser("Fix the failing test.").status());
//   STRATA_ASSIGN_OR_RETURN(strata::BuiltRequest request, context->Build());
//   send(request.body);
//
// Errors: every operation validates its input first and refuses bad input whole: on a non-OK
// Status the context is exactly as it was before the call.
//
// Thread safety: a Context is not thread-safe. Use it from one thread at a time (const methods
// included); distinct Contexts may be used concurrently. The Tokenizer it is given must outlive it.
#ifndef STRATA_CONTEXT_H_
#define STRATA_CONTEXT_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "strata/budget.h"
#include "strata/compaction_policy.h"
#include "strata/segment.h"
#include "strata/status.h"
#include "strata/tokenizer.h"

namespace strata {

// Who the agent is. (tenant, model_version, template_version, scope) is the isolation key: prefix
// caches are never shared across different keys.
struct AgentIdentity {
  std::string id;                // required, non-empty; unique per store
  std::string tenant;            // default "": single-tenant deployment
  std::string scope;             // permission scope, default ""
  std::string model_version;     // default "": the model's own name is used
  std::string template_version;  // prompt-template version of the application, default ""
};

// Append-time hygiene of tool results (docs/concepts.md). Each step only touches the
// bytes being appended, so it never invalidates any cached prefix. Originals are kept for Recall.
struct HygieneOptions {
  // Tool outputs above this many tokens keep a head and a tail around a marker that says how much
  // was cut and the recall id. 0 turns truncation off. Default 8192 tokens: large enough for a
  // whole source file, small enough that one `cat` of a log cannot take a 32K budget.
  size_t max_segment_tokens = 8192;
  // Share of the kept tokens taken from the head (the rest from the tail). Default 0.5.
  double head_share = 0.5;
  // Outputs identical to an earlier output of the same tool with the same arguments are rendered
  // as a one-line reference to the earlier call. Default on.
  bool deduplicate = true;
  // Tool results that look like error logs (a traceback, or many repeated lines) are folded:
  // runs of identical lines collapse into one line with a count; stack traces keep the error line
  // and the first and last frames. Default on.
  bool fold_error_logs = true;
  // Runs of at least this many identical consecutive lines are collapsed. Default 3.
  size_t min_repeat_run = 3;
  // Outputs shorter than this many bytes are never deduplicated or folded (a reference would not
  // be much shorter). Default 256.
  size_t min_bytes = 256;
};

// How the stable layers become system messages.
enum class SystemLayout : int {
  // All stable layers (system, index, docs) in one leading system message, joined by fixed
  // separators. Default.
  kSingleMessage = 0,
  // One system message per stable segment.
  kMessagePerSegment = 1,
};

// How a context renders its requests.
struct RenderOptions {
  // The request's "model" field. Default "glm-5.3-flash".
  std::string model = "glm-5.3-flash";
  // How the stable layers become system messages. Default kSingleMessage.
  SystemLayout system_layout = SystemLayout::kSingleMessage;
  // Name of the assistant message field that replays past reasoning; "" drops past reasoning from
  // requests. Default "reasoning_content" (GLM, SGLang, vLLM chat templates read it).
  std::string reasoning_field = "reasoning_content";
  // Role of the volatile message. Default "user": every chat template accepts a trailing user
  // message; some reject a system message after the first.
  std::string volatile_role = "user";
};

// One change to a context, as handed to a ContextJournal: segments created or altered (their full new
// value), segments removed, and originals newly kept for recall. Volatile items never appear here.
struct ContextChange {
  std::vector<Segment> upserted;  // segments created or altered, with their full new value
  std::vector<std::string> removed_ids;  // ids of segments removed
  // (recall_id, original content) pairs kept by this change.
  std::vector<std::pair<std::string, std::string>> originals;
  // Recall ids whose originals this change drops (a rewind to an earlier snapshot, Context::Rewind).
  std::vector<std::string> removed_originals;
  int64_t turn = 0;  // the context's turn counter after the change
  // Set when the change is a compaction: what it did and cost.
  std::optional<CompactionReport> compaction;
};

// Receives every change before the mutating call returns (the durable store implements it). If
// Record fails, the context rolls the change back and the mutating call returns that status.
// Called on the context's thread; must not call back into the context.
class ContextJournal {
 public:
  virtual ~ContextJournal() = default;
  // Records `change` durably; a non-OK status makes the context roll the change back.
  virtual Status Record(const ContextChange& change) = 0;
};

// Everything needed to recreate a context exactly (Context::Restore), e.g. from a store.
struct ContextSnapshot {
  std::vector<Segment> segments;  // non-volatile segments, any order (they carry their ordering)
  std::vector<std::pair<std::string, std::string>> originals;  // (recall_id, content)
  int64_t turn = 0;  // the context's turn counter
};

// Everything a Context is created with (Context::Create).
struct ContextOptions {
  AgentIdentity agent;  // who the agent is; agent.id must be non-empty
  RenderOptions render;  // how requests render
  HygieneOptions hygiene;  // append-time hygiene of tool results
  // Counts segment tokens. Not owned; must outlive the context. Default nullptr: a built-in
  // estimator (4 bytes per token), flagged as an estimate in every count.
  const Tokenizer* tokenizer = nullptr;
  // Keep originals of altered segments for Recall. Default true. When false, hygiene still
  // applies but the originals are dropped (the agent opted out of recall).
  bool keep_originals = true;
  // Receives every change (see ContextJournal). Not owned; must outlive the context. Default
  // nullptr: none.
  ContextJournal* journal = nullptr;
  // The token budget. std::nullopt (default): no limit is enforced.
  std::optional<Budget> budget;
  // Plans compactions when the budget requires (strata/compaction_policy.h). Not owned; must
  // outlive the context. Default nullptr: Build() fails with RESOURCE_EXHAUSTED instead of
  // compacting.
  CompactionPolicy* compaction = nullptr;
  // Counts whole requests exactly (chat template + tokenizer) for budget decisions. Not owned; must
  // outlive the context. Default nullptr: the budget is enforced on the context's own incremental
  // count (content tokens plus message_overhead_tokens per message), which is cheaper but
  // approximate.
  const RequestTokenCounter* request_counter = nullptr;
  // Tokens each rendered message costs beyond its content (role markers, separators), counted into
  // input tokens. Default 6: GLM's `<|role|>` plus newlines; the tools block counts the same per tool.
  size_t message_overhead_tokens = 6;
};

// A document in the index or docs layer.
struct Document {
  std::string name;     // required; unique within its layer
  std::string content;  // valid UTF-8
  std::string version;  // the application's version label, e.g. a commit or a date; may be empty
  // Declared order within the layer, ascending; documents with equal order keep insertion order.
  // Put rarely-changing documents first, so that an update invalidates only itself and what follows.
  int64_t order = 0;
};

// An assistant message to append (Context::AppendAssistant).
struct AssistantMessage {
  std::string content;  // the visible answer
  std::string reasoning;  // the reasoning, replayed under RenderOptions::reasoning_field
  std::vector<ToolCall> tool_calls;  // tool calls; each must be answered before the next message
};

// A tool's output, answering a call of the last assistant message (Context::AppendToolResult).
struct ToolResult {
  std::string tool_call_id;  // must name an open call of the last assistant message
  std::string content;  // the output; hygiene may shorten what renders (the original is kept)
  // Force classification as an error log (e.g. non-zero exit status). Otherwise it is detected.
  bool is_error = false;
};

// A volatile-looking value found in a stable layer (rendering rule 8).
struct LintWarning {
  std::string segment_id;  // the segment that holds it
  Layer layer = Layer::kSystem;  // that segment's layer
  std::string what;     // "timestamp", "uuid" or "date phrase"
  size_t offset = 0;    // byte offset in the segment content
  std::string excerpt;  // the matched text
  // One line naming the segment, the finding and how to fix it.
  std::string ToString() const;
};

// What identifies the bytes one rendered segment puts in a request (Context::Fingerprints), to
// tell which segments changed between two requests without comparing their text.
struct SegmentFingerprint {
  std::string id;                            // the segment's id
  Layer layer = Layer::kHistory;             // its layer
  SegmentKind kind = SegmentKind::kUser;     // its kind
  SegmentState state = SegmentState::kLive;  // live or masked (the states that render)
  std::string version;                       // a document's version label ("" otherwise)
  // FNV-1a (64-bit) of the content; continued, from that value XOR 0x1f, over the reasoning; then
  // over each tool call's id, the byte 0x1f, name, 0x1f and arguments in turn. Computed once, when
  // the segment is added or changed.
  uint64_t hash = 0;
};

// Per-call options of Build() and Preview().
struct BuildOptions {
  // Extra top-level request fields, each a (name, JSON value text) pair, rendered after "messages"
  // in the given order, canonicalized. E.g. {"max_completion_tokens", "4096"}, {"stream", "true"}.
  // Names must not be "model", "tools" or "messages".
  std::vector<std::pair<std::string, std::string>> extra_fields;
  // The previous request of the agent building, handed to its policy's summarizer if this build
  // compacts (CompactionInput::summary_request). Not owned; must outlive Build(). Default nullptr
  // (none).
  const SummaryRequestContext* summary_request = nullptr;
};

// The size of one layer.
struct LayerUsage {
  size_t segments = 0;  // rendered segments
  size_t bytes = 0;   // rendered content bytes
  size_t tokens = 0;  // content tokens counted by the context's tokenizer
};

// A rendered request and what it holds (Context::Build, Context::Preview).
struct BuiltRequest {
  std::string body;  // the Chat Completions request body (canonical JSON)
  // body[0, stable_prefix_bytes) holds the model, the tools and the stable system message(s).
  size_t stable_prefix_bytes = 0;
  // body[0, history_end_bytes) ends with the last history message: a later Build() after appends
  // starts with exactly these bytes. What follows is the volatile message and extra fields.
  size_t history_end_bytes = 0;
  // SHA-256 (hex) of body[0, stable_prefix_bytes), for prefix-affinity routing.
  std::string stable_prefix_hash;
  size_t message_count = 0;        // messages in the request
  LayerUsage layers[kLayerCount];  // indexed by Layer
  size_t total_tokens = 0;      // sum of layers[].tokens (content only; templates add overhead)
  // Input tokens: counted by the request counter when one is set, else the context's own count
  // (content plus message_overhead_tokens per message).
  size_t input_tokens = 0;
  bool input_tokens_exact = false;  // input_tokens came from the request counter
  // The budget's usable input (0 when no budget is set); input_tokens never exceeds it.
  size_t limit_tokens = 0;
  bool tokens_estimated = true;  // counts came from an estimator
  std::vector<LintWarning> warnings;  // volatile-looking values in stable layers (Context::Lint)
  // Set when Build() compacted the history before rendering this request.
  std::optional<CompactionReport> compaction;
  // Which render of its context this body is: a serial unique in the process, never 0.
  uint64_t render_serial = 0;
  // The serial of the context's render before this one (0: none, e.g. the first, or the first
  // after a Rewind). A Build() that compacts renders once more after each round and returns its
  // last render: that one is compared with the render before the Build(), not with the renders it
  // made on the way, which no caller sees.
  uint64_t previous_render_serial = 0;
  // How many leading bytes of `body` are known to be those of that earlier render's body too: the
  // stable prefix when no stable layer changed since, and the history up to where it was first
  // edited since (0 when nothing is known). A copy of the earlier body continued from here gives
  // this one without comparing the two.
  size_t unchanged_bytes = 0;
};

// Counters of what the context did, for observability.
struct ContextStats {
  size_t segments = 0;  // segments in the context (all layers but volatile)
  size_t turns = 0;  // assistant turns so far
  size_t truncated = 0;  // tool results shortened to head and tail
  size_t deduplicated = 0;  // tool results rendered as a reference to an identical earlier output
  size_t folded = 0;  // error logs folded
  size_t bytes_saved_by_hygiene = 0;  // bytes hygiene kept out of the requests
  LayerUsage layers[kLayerCount];  // per layer, indexed by Layer
};

// One page of a recalled original (Context::AnswerRecall, Agent::Recall): the context_recall
// contract (RecallToolSchema()) answers a call with pages of at most its max_tokens.
struct RecallPage {
  std::string recall_id;       // the id asked for
  std::string content;         // the page
  size_t offset = 0;           // byte offset of the page in the original
  size_t total_bytes = 0;      // size of the whole original
  size_t remaining_bytes = 0;  // after this page
  size_t tokens = 0;           // tokens of the page
};

// An agent's context: layered segments rendered into byte-stable Chat Completions requests
// (see the file comment). Not thread-safe: one thread at a time.
class Context {
 public:
  // Validates `options` (agent.id non-empty, valid UTF-8 names, head_share in [0,1], known
  // volatile role) and returns an empty context.
  static StatusOr<std::unique_ptr<Context>> Create(ContextOptions options);
  // Recreates a context from a snapshot; it renders byte-identically to the context that produced
  // the snapshot's segments. INVALID_ARGUMENT for an inconsistent snapshot (duplicate ids, a tool
  // result without its call, ...). The journal is not called for the restored segments.
  static StatusOr<std::unique_ptr<Context>> Restore(ContextOptions options, ContextSnapshot snapshot);

  ~Context();
  Context(const Context&) = delete;
  Context& operator=(const Context&) = delete;

  // The options the context was created with.
  const ContextOptions& options() const;

  // --- Stable layers ------------------------------------------------------------------------

  // Replaces the system prompt(s) with `prompts` (each one pinned segment, in order). An empty
  // list removes the system layer.
  Status SetSystemPrompts(std::vector<std::string> prompts);
  // One system prompt: SetSystemPrompts({prompt}).
  Status SetSystemPrompt(std::string prompt) { return SetSystemPrompts({std::move(prompt)}); }

  // Replaces the tool schemas. `tools_json` is a JSON array of OpenAI tool objects
  // ({"type":"function","function":{"name":...,"description":...,"parameters":{...}}}); it is
  // canonicalized once here (sorted keys, compact), so re-ordered keys give the same bytes.
  // Errors: INVALID_ARGUMENT for malformed JSON, a non-array, a tool without a function name, or
  // duplicate names.
  Status SetTools(std::string_view tools_json);

  // Adds a document to the index or docs layer. ALREADY_EXISTS if the name is taken (use
  // UpdateDocument); INVALID_ARGUMENT for another layer, an empty name or invalid UTF-8.
  StatusOr<std::string> AddDocument(Layer layer, Document document);
  // Replaces a document's content and version, keeping its id; its order may change.
  // NOT_FOUND for an unknown name (the message lists the known ones).
  Status UpdateDocument(Layer layer, Document document);
  // Adds or updates.
  StatusOr<std::string> PutDocument(Layer layer, Document document);
  Status RemoveDocument(Layer layer, std::string_view name);  // the document `name` of `layer`

  // --- History --------------------------------------------------------------------------------

  // Appends a user message; returns its segment id. FAILED_PRECONDITION while the last assistant
  // message has unanswered tool calls.
  StatusOr<std::string> AppendUser(std::string content);
  // Appends an assistant message (content, reasoning, tool calls with their exact arguments).
  // Starts a new turn. INVALID_ARGUMENT for empty or duplicate call ids or an empty function name;
  // FAILED_PRECONDITION while earlier tool calls are unanswered.
  StatusOr<std::string> AppendAssistant(AssistantMessage message);
  // Appends the result of an open tool call, after append-time hygiene. INVALID_ARGUMENT when the
  // id matches no open call (the message lists the open ones).
  StatusOr<std::string> AppendToolResult(ToolResult result);

  // Pins (or unpins) a history segment: compaction never alters a pinned segment. Stable-layer
  // segments are always pinned. NOT_FOUND for an unknown id; INVALID_ARGUMENT for a segment outside
  // the history.
  Status SetPinned(std::string_view segment_id, bool pinned);

  // Ids of the last assistant message's tool calls that have no result yet, in call order.
  std::vector<std::string> OpenToolCalls() const;

  // --- Volatile layer -------------------------------------------------------------------------

  // Sets (or replaces) a volatile item; items render as "key: value" lines, in insertion order, in
  // one final message. Not part of history, not kept across restarts.
  Status SetVolatile(std::string key, std::string value);
  Status RemoveVolatile(std::string_view key);  // removes the item `key`
  void ClearVolatile();                         // removes every volatile item

  // --- Rendering ------------------------------------------------------------------------------

  // Renders the request body, compacting the history first when a budget and a compaction policy
  // are set and the policy says so (above the trigger, or above the limit). Never returns a request
  // above the budget: RESOURCE_EXHAUSTED names the layers and their sizes when what cannot be
  // compacted (stable layers, volatile layer, pinned and protected history) does not fit.
  // FAILED_PRECONDITION when there is nothing to send (no message) or tool calls are unanswered;
  // INVALID_ARGUMENT for bad extra fields. With a request counter a build that compacts renders
  // (to count), applies the policy's edit and renders again, into the first render's memory and
  // writing only the bytes from the edit on; without one it plans on InputTokens() and renders
  // once.
  StatusOr<BuiltRequest> Build(const BuildOptions& options = {});
  // Renders the request the context holds now and never changes the context (for inspection, and
  // for predictions that must not compact). The same checks and body as Build() when Build() would
  // not compact; RESOURCE_EXHAUSTED when the request is above the budget's limit, where Build()
  // would have to compact first. A policy's early trigger below the limit does not make it fail.
  StatusOr<BuiltRequest> Preview(const BuildOptions& options = {}) const;
  // The request Build() would return now, its compaction included, without changing the context
  // (for predictions of the next request). The policy plans on this context, as Build()'s first
  // round would; when it plans nothing, this is Preview()'s request (and Preview()'s
  // RESOURCE_EXHAUSTED above the limit), with no copy made. A plan that compacts is applied, with
  // the rounds Build() would add, to a copy of the context (segments, volatile items, render
  // buffers), and the request and report are the copy's (its render serial names no render of
  // this context).
  // The policy is asked once: the built-in strata policy answers the Build() that follows with the
  // same plan from its memo when nothing changed. The copy is kept, and the next compacting
  // PreviewBuild() copies into its memory: a context that predicted a compaction holds about its
  // own size again in memory, until it is destroyed.
  StatusOr<BuiltRequest> PreviewBuild(const BuildOptions& options = {}) const;
  // Input tokens of the request Build() would render now, before any compaction, counted as
  // Build() counts them (exact with a request counter) and also above the budget's limit, where
  // Preview() fails: the volatile items included, the context unchanged.
  StatusOr<size_t> CountRequest(const BuildOptions& options = {}) const;
  // Hands back the memory of a body the caller is done with (a BuiltRequest's, a Turn's): the next
  // render writes its body there instead of into memory the allocator maps and faults in anew (a
  // 1M-token body is over 4 MB, and a fresh mapping costs more than the copy). Only the memory is
  // reused: the contents are not read. One is kept; one too small for the next body is let go.
  void Recycle(std::string body);
  // The same for a body handed back exactly as it was returned: BuiltRequest::body of the render
  // `render_serial` (BuiltRequest::render_serial), not changed since. When that is still the
  // context's last render, the next render keeps the bytes the two share
  // (BuiltRequest::unchanged_bytes) and writes only the rest, instead of the whole body: a turn
  // that appends writes what it appends. The bytes are trusted, not compared: a body changed in
  // place would be sent as changed, so hand a changed body back with Recycle(body). One of another
  // size than that render's, or of an earlier render, only lends its memory.
  void Recycle(std::string body, uint64_t render_serial);

  // --- Compaction (strata/compaction_policy.h) -----------------------------------------------

  // Input tokens of the request Build() would render now (content plus message overheads).
  size_t InputTokens() const;
  // Asks the policy for an edit and applies it: when `force` is false only if the policy's
  // ShouldCompact says so. Returns the report, or std::nullopt when nothing was done.
  // FAILED_PRECONDITION without a policy.
  StatusOr<std::optional<CompactionReport>> Compact(bool force = false);
  // Validates and applies one edit (atomically: all of it or, on error, none of it). The edit is
  // refused with INVALID_ARGUMENT if it names unknown, non-history, pinned or non-rendered
  // segments, masks a segment that is not a tool result, replaces a non-contiguous run, or would
  // leave a tool call without its result or a result without its call. Originals of everything it
  // alters are kept for Recall unless keep_originals is false. `policy` ("name@version") and
  // `reason` are recorded in the report and on the altered segments.
  StatusOr<CompactionReport> ApplyEdit(const HistoryEdit& edit, std::string policy, std::string reason);
  // Every compaction applied so far, oldest first.
  const std::vector<CompactionReport>& Compactions() const;

  // Answers an open `context_recall` call (RecallToolSchema()) by appending, as its tool result,
  // a page of the original kept under the recall id named in the call's arguments
  // ({"recall_id": "r-...", "offset": bytes, "max_tokens": n}): from byte `offset` (default 0), of
  // at most the call's max_tokens tokens and at most `max_tokens` (0: no limit of the caller's;
  // a call without max_tokens then gets the whole rest), with a line naming the page's bytes and
  // one saying how to continue ("[N bytes remain: call context_recall with recall_id ... and
  // offset ...]" or "[end of r-...]"). A call without a recall id, naming an unknown one or an
  // offset past the end gets a short explanation instead. Recall never breaks the prefix: it
  // only appends. Returns the id of the appended segment; INVALID_ARGUMENT when `tool_call_id` is
  // not an open context_recall call.
  StatusOr<std::string> AnswerRecall(const std::string& tool_call_id, size_t max_tokens = 0);

  // --- Inspection -----------------------------------------------------------------------------

  // All segments in render order (volatile items last).
  std::vector<Segment> Segments() const;
  // The segments of `layer` in render order, as pointers into this context, valid until its next
  // change: a call costs the layer's number of segments, where Segments() copies every segment's
  // content. Layer::kVolatile gives none (volatile items are not kept as segments; Segments()
  // lists them).
  std::vector<const Segment*> LayerSegments(Layer layer) const;
  // The fingerprints of the segments a request renders, in render order: the stable layers', then
  // the live and masked history segments (volatile items, evicted and summarized segments left
  // out). The hashes are kept with the segments, so a call costs the number of segments, not their
  // bytes.
  std::vector<SegmentFingerprint> Fingerprints() const;
  // Fingerprints() after the leading entries `earlier` (e.g. a list kept from an earlier
  // Fingerprints() call) has unchanged: *kept is set to how many leading entries of `earlier`
  // equal this context's first fingerprints in id, layer, state, version and hash (kind is not
  // compared), and the fingerprints after those are returned. A caller that keeps its list and
  // replaces its entries from *kept on pays a comparison per segment and a copy of what changed.
  std::vector<SegmentFingerprint> FingerprintsAfter(const std::vector<SegmentFingerprint>& earlier,
                                                    size_t* kept) const;
  // The same for a caller that keeps, as `earlier`, the whole list an earlier call of this
  // overload described (the entries it kept, then those it returned) and the serial that call set
  // in *serial: the segments this context has not changed since that call are not compared, so a
  // call costs what changed, not the number of segments. *serial is set to the serial of the list
  // now described (unique in the process). With *serial 0, or one this context no longer tracks
  // (a later call of this overload replaced it, a Rewind() or Restore() happened), every entry is
  // compared.
  std::vector<SegmentFingerprint> FingerprintsAfter(const std::vector<SegmentFingerprint>& earlier,
                                                    size_t* kept, uint64_t* serial) const;
  // The segment with `id`, or nullptr. The pointer is valid until the next mutation.
  const Segment* Find(std::string_view id) const;
  // The original content kept under `recall_id`. NOT_FOUND if unknown or not kept.
  StatusOr<std::string> Recall(std::string_view recall_id) const;
  ContextStats Stats() const;  // counts of segments and tokens
  // The snapshot Restore() takes: every non-volatile segment and every kept original.
  ContextSnapshot Snapshot() const;
  // Returns the context, in place, to `snapshot` (one this context's Snapshot() took earlier): its
  // segments, kept originals and turn counter become the snapshot's, as Restore() would make them,
  // so that it renders byte-identically to the context the snapshot was taken of. The options, the
  // volatile layer and Compactions() are kept; segment ids given since are not reused. The journal
  // records one change that turns the stored context into the snapshot (segments added since
  // removed, altered ones written back, originals kept since dropped). INVALID_ARGUMENT for an
  // inconsistent snapshot; on any error (the journal's included) nothing changes. Pointers from
  // Find() are invalidated.
  Status Rewind(ContextSnapshot snapshot);
  // Remembers what the context holds now (its segments, kept originals and turn counter), so that
  // RewindToMark() can return to it, for the cost of what changes after the mark instead of a
  // Snapshot()'s copy of every segment: from here on, each change first keeps the previous value
  // of each segment and original it alters, the first time it alters it. One mark at a time:
  // Mark() again moves it, and Rewind(), RewindToMark() and ClearMark() drop it. strata::Agent
  // sets one for each Complete() and Run() (to undo a failed call) and drops it when the call
  // returns.
  void Mark();
  // Returns the context, in place, to what it held at Mark(): the same result as Rewind() of a
  // Snapshot() taken then, and a journal change with the same segments, ids and originals (in
  // another order, perhaps). Drops the mark. FAILED_PRECONDITION
  // when no mark is set; on any other error (Rewind()'s) nothing changes and the mark stays.
  Status RewindToMark();
  // Drops the mark, keeping what changed since.
  void ClearMark();
  // Whether a mark is set (Mark(), not dropped since).
  bool HasMark() const;
  // Whether the context changed since the mark was set (false without a mark).
  bool ChangedSinceMark() const;
  // Lint warnings of the stable layers (also reported by Build()).
  std::vector<LintWarning> Lint() const;

 private:
  class Impl;
  explicit Context(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace strata

#endif  // STRATA_CONTEXT_H_
