// strata/compaction_policy.h — the compaction policy interface: planned edits of an agent's
// history that keep it inside a token budget, and the report of applying one (core).
//
// A CompactionPolicy looks at a context's history and returns a HistoryEdit: tool results to mask
// (replace by a one-line placeholder), reasoning to drop, spans to replace by a summary, segments
// to evict. The Context validates and applies the edit (Context::ApplyEdit) and reports what it
// cost: everything before the edit's *boundary* (its earliest touched segment) renders
// byte-identically afterwards, so the server's prefix cache keeps serving it.
//
// Policies ship in strata::compact (strata/builtin_policies.h): the strata policy (stale first,
// observation masking, summarization, eviction; trigger/target hysteresis; latest boundary) and the
// baselines none, sliding, last-n, clear-tool-uses and observation-masking. Attach one with
// ContextOptions::compaction and a ContextOptions::budget; Context::Build() then compacts before
// rendering whenever the policy says so, and never returns a request above the budget.
//
//   strata::ContextOptions options;
//   options.budget = budget;                        // strata/budget.h
//   options.compaction = policy.get();              // e.g. strata::MakeStrataPolicy()
//   auto context = strata::Context::Create(options).value();
//   ...
//   auto request = context->Build();                // compacts first when needed
//   if (request->compaction) log(request->compaction->invalidated_tokens);
//
// Thread safety: policies are called on the context's thread; a policy instance may be shared by
// contexts only if its implementation says so (the built-in ones are stateless and may).
#ifndef STRATA_COMPACTION_POLICY_H_
#define STRATA_COMPACTION_POLICY_H_

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "strata/record.h"
#include "strata/segment.h"
#include "strata/status.h"
#include "strata/tokenizer.h"

namespace strata {

// One change to one history segment.
struct SegmentEdit {
  // What the edit does.
  enum class Action {
    kMask,           // tool results only: render `placeholder` instead of the content
    kEvict,          // stop rendering the segment
    kDropReasoning,  // assistant messages only: stop replaying the reasoning
  };
  std::string segment_id;  // the history segment to change
  Action action = Action::kMask;  // what to do with it
  std::string placeholder;  // kMask: the text rendered instead (non-empty)
};

// Replaces a contiguous run of rendered history segments by one summary segment, rendered where the
// first of them was.
struct SummaryEdit {
  std::vector<std::string> replaces;  // segment ids, in render order, contiguous
  std::string content;                // the summary text (non-empty)
  // "name@version" of the Summarizer that wrote `content` (Summarizer::Name()); recorded as the
  // summary segment's `name` and in the report. "" when the policy wrote it itself. (Initialized
  // so that {replaces, content} stays a complete aggregate initializer under -Wextra.)
  std::string summarizer = {};
  // How the summarizer asked for it (SummaryResult::request): "cache-keeping" (the agent's last
  // request plus one instruction), "transcript (...)" or "extractive (...)" with why the
  // cache-keeping request was not used; "" when the summarizer does not say.
  std::string summary_request = {};
};

// One edit a cost-aware policy considered, with what it would save and cost (see
// CompactionExplanation). Tokens are the context's own counts.
struct CompactionCandidate {
  std::string segment_id;  // the segment the edit would change
  std::string action;           // "mask", "drop-reasoning", "summarize", "evict"
  size_t tokens_removed = 0;    // input tokens the edit removes from every later request
  size_t invalidated_tokens = 0;  // history tokens from this segment on: re-prefilled if it is the boundary
  double expected_saving = 0;   // cached price x tokens_removed x turns it pays for
  double invalidation_cost = 0;  // (uncached - cached price) x tokens re-prefilled if it is the boundary
  std::string value;            // "stale", "superseded", "unused", "in use"
  bool chosen = false;  // in the planned edit
  // "summarize": the price of the requests its summarizer sent (uncached price x the prompt
  // tokens not predicted cached + cached price x those predicted cached; SummaryResult's tokens).
  // 0 otherwise, and for a summarizer that sends none.
  double request_cost = 0;
};

// Why a policy planned what it planned: the candidates it considered, its estimate of the remaining
// turns, the chosen set's expected saving and its re-prefill cost. Filled by the strata policy;
// format it with strata::ExplainCompaction (strata/builtin_policies.h).
struct CompactionExplanation {
  std::string mode;  // "limit", "trigger", "forced", "below-trigger" (the cost model alone)
  double remaining_turns = 0;   // estimated turns the context is still sent
  double horizon_turns = 0;     // turns a saving is counted over (at most remaining_turns)
  double uncached_price = 1.0;  // price of an uncached input token (the unit)
  double cached_price = 0.1;  // price of a cached input token, relative to uncached
  size_t need_tokens = 0;       // tokens that had to go (0 below the trigger)
  std::vector<CompactionCandidate> candidates;  // in history order
  std::string boundary_segment_id;               // the chosen set's earliest segment
  size_t tokens_removed = 0;                     // of the chosen set
  size_t invalidated_tokens = 0;                 // of the chosen set: history tokens from the boundary on
  double expected_saving = 0;                    // of the chosen set
  double invalidation_cost = 0;                  // of the chosen set
  double request_cost = 0;  // of the chosen set: its summary requests' (CompactionCandidate::request_cost)
  // True when no policy filled it.
  bool empty() const { return mode.empty(); }
};

// A policy's plan: segment edits and summaries, applied together (Context::ApplyEdit).
struct HistoryEdit {
  std::vector<SegmentEdit> edits;  // masks, evictions, dropped reasoning
  std::vector<SummaryEdit> summaries;  // summaries replacing runs of segments
  // Optional: why the policy planned it, copied into the CompactionReport ("" and empty: the
  // context describes the trigger itself).
  std::string reason;
  CompactionExplanation explanation;  // the figures the policy decided by
  bool empty() const { return edits.empty() && summaries.empty(); }  // nothing to apply
};

// What one compaction did and cost.
struct CompactionReport {
  std::string policy;  // "name@version" of the policy that planned it
  std::string reason;  // why it ran, e.g. "input 30,112 tokens above trigger 27,200"
  int64_t turn = 0;  // the context's turn when it ran
  size_t tokens_before = 0;  // input tokens of the request before the edit
  size_t tokens_after = 0;  // input tokens of the request after the edit
  std::string boundary_segment_id;  // earliest segment the edit touched
  size_t boundary_index = 0;        // its index among the history's segments
  // Tokens the previous request sent from the boundary on (the rendered history of the turns
  // before the current one, as it stood before the edit): what the server has cached and must now
  // compute again. Messages appended since that request (the current turn's assistant message and
  // tool results) are not counted: the server never saw them. The cost model counts the same
  // (CompactionExplanation::invalidated_tokens).
  size_t invalidated_tokens = 0;
  size_t masked = 0;  // tool results masked
  size_t evicted = 0;  // segments evicted
  size_t summarized = 0;  // segments folded into summaries
  size_t reasoning_dropped = 0;  // assistant messages whose reasoning was dropped
  // "name@version" of the Summarizer that wrote its summaries (SummaryEdit::summarizer; several
  // distinct ones joined by ", "); "" when it wrote none.
  std::string summarizer;
  // How its summaries were asked for (SummaryEdit::summary_request; several distinct ones joined
  // by "; "); "" when none says.
  std::string summary_request;
  // Compaction rounds Context::Build() needed for this request (1 usually; see docs/compaction.md
  // for the bound).
  size_t rounds = 1;
  // The policy's explanation of its choice (empty for policies that give none; with several rounds,
  // the first round's).
  CompactionExplanation explanation;  // the figures the policy decided by
};

// The report as a compact JSON object (keys: policy, reason, turn, tokens_before, tokens_after,
// boundary, invalidated_tokens, masked, evicted, summarized, reasoning_dropped, rounds, summarizer
// when a summarizer wrote a summary, summary_request when it said how it asked for it, and when the policy explained its choice, expected_saving and
// invalidation_cost): the payload of the store's "compaction" events and of `strata replay` stats.
std::string CompactionReportJson(const CompactionReport& report);

// The request an agent last sent, for a summarizer that asks the same server for a summary as a
// continuation of it: that request's bytes, then one instruction message, so that the server
// serves the whole request from its prefix cache (MakeLlmSummarizer's cache-keeping mode,
// strata/builtin_policies.h). strata::Agent passes one with each turn's build
// (BuildOptions::summary_request); nothing else does. Every field describes the previous request.
struct SummaryRequestContext {
  std::string_view body;  // its body as sent (canonical JSON); "" when there was none
  std::string endpoint;   // Transport::Endpoint() it was sent to
  // Its call headers (e.g. the prefix-hash header a PoolSet routes by), sent again.
  std::vector<std::pair<std::string, std::string>> headers;
  std::string agent_id;    // the agent it was sent for
  std::string request_id;  // the id to send the summary request with
  // Prompt tokens the server holds cached from it (full blocks): the summary request's predicted
  // cached tokens.
  int64_t cached_tokens_predicted = 0;
  // Where the summary request's RequestRecord (purpose "compaction") goes; not owned; nullptr:
  // nowhere.
  RecordSink* records = nullptr;
};

// What a policy sees. Token figures are the context's own counts (its tokenizer plus
// message_overhead_tokens per message).
struct CompactionInput {
  std::vector<const Segment*> history;  // rendered history segments (live or masked), in order
  size_t stable_tokens = 0;             // system, tools, index, docs
  size_t volatile_tokens = 0;  // the volatile layer
  size_t history_tokens = 0;  // the rendered history
  size_t total_tokens = 0;  // everything the request holds, overheads included
  size_t limit_tokens = 0;  // the budget's usable input: a request must not exceed it
  size_t trigger_tokens = 0;  // the budget's trigger: compact above it
  size_t target_tokens = 0;  // the budget's target: compact down to it
  size_t message_overhead_tokens = 0;  // counted per rendered message
  int64_t turn = 0;                    // the context's current turn
  bool forced = false;                 // Context::Compact(force=true)
  // 0 for a build's first planning; k when k compactions were already applied in this build (a
  // policy then only acts when the request is still above the limit, see docs/compaction.md).
  size_t round = 0;
  // True when the plan is for a prediction (Context::PreviewBuild): nothing is applied to this
  // context, and a Build() of it may follow and ask again with the same input. A policy whose plan
  // is costly may keep it for that input (the strata policy does).
  bool prediction = false;
  const Tokenizer* tokenizer = nullptr;  // the context's tokenizer; not owned
  // The previous request of the agent building (BuildOptions::summary_request), for the
  // summarizer; not owned; nullptr when there is none.
  const SummaryRequestContext* summary_request = nullptr;
  // Bytes of each history segment's original (parallel to `history`): what the tool returned before
  // append-time hygiene truncated, folded or deduplicated it, when the context keeps originals
  // (ContextOptions::keep_originals). Empty, or 0 for an entry: its rendered content is all there is.
  std::vector<size_t> original_bytes;
  // SegmentFingerprint::hash (strata/context.h) of each history segment (parallel to `history`),
  // as the context keeps them: a policy may key what it derives from a segment's bytes on it
  // instead of reading them again. Empty when the input was not made by a Context.
  std::vector<uint64_t> history_fingerprints;
  // Set by a Context (0 otherwise): a number naming this input's history, unique in the process.
  uint64_t history_serial = 0;
  // Set by a Context: the history_serial of the input the same context made before this one (0:
  // none, or not known since a copy, a move or an insertion into its history).
  uint64_t previous_history_serial = 0;
  // Set by a Context: how many leading entries of `history` are the segments of that earlier
  // input, unchanged in every field since (an append leaves them all; an edit, a pin or an unpin
  // leaves those before it). A policy that keeps what it derives from each segment between plans
  // may trust those entries without comparing them.
  size_t history_unchanged = 0;
  // Set by a Context: the recall id of one of its history segments, computed once per segment and
  // kept by the context, which gives it again to the edit that masks, evicts or summarizes that
  // segment (its content is hashed once, not by the policy and then by the context). Empty when
  // the input was not made by a Context. Use RecallId(), which falls back on RecallIdFor().
  std::function<std::string(const Segment&)> recall_id_of;
  // The recall id `s` stands under: the one it carries, else the one its content gives
  // (RecallIdFor), through recall_id_of when it is set.
  std::string RecallId(const Segment& s) const {
    if (!s.recall_id.empty()) return s.recall_id;
    return recall_id_of ? recall_id_of(s) : RecallIdFor(s.content);
  }
  // The original's bytes of history[i] (OriginalBytes falls back on the rendered content's size).
  size_t OriginalBytes(size_t i) const {
    return i < original_bytes.size() && original_bytes[i] > 0 ? original_bytes[i]
                                                               : history[i]->content.size();
  }
  // Tokens `text` would count as a message's content.
  size_t Count(const std::string& text) const { return tokenizer ? tokenizer->Count(text) : text.size() / 4; }
};

// Plans compactions of a context's history (strata/builtin_policies.h has the built-in policies).
class CompactionPolicy {
 public:
  virtual ~CompactionPolicy() = default;
  // "name@version", persisted with every segment the policy altered or produced.
  virtual std::string Name() const = 0;
  // Whether to compact before this build. Usually: above the trigger (or forced).
  virtual bool ShouldCompact(const CompactionInput& input) const = 0;
  // The edit to apply; an empty edit when nothing can be done. It must leave tool calls paired
  // (Context::ApplyEdit refuses edits that would not).
  virtual StatusOr<HistoryEdit> Plan(const CompactionInput& input) = 0;
};

// The `context_recall` tool an application may expose so the model can get back the original of a
// masked, truncated, summarized or evicted segment by its recall id, in pages: its arguments are
// `recall_id` (required), `offset` (bytes, default 0) and `max_tokens` (default and upper bound:
// the recall share, which an Agent sets from its budget and Context::AnswerRecall takes as its
// max_tokens). Canonical JSON of one OpenAI tool object, the one an Agent offers; answer its calls
// with Context::AnswerRecall (an Agent answers them itself).
std::string RecallToolSchema();
inline constexpr char kRecallToolName[] = "context_recall";  // RecallToolSchema()'s tool

}  // namespace strata

#endif  // STRATA_COMPACTION_POLICY_H_
