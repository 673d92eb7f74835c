// strata/builtin_policies.h — the compaction policies and summarizers strata ships (component
// strata::compact). The interface they implement, the edits they return and the report of applying
// one are in strata/compaction_policy.h (core), which a Context needs without linking them.
//
// The strata policy keeps an agent inside its budget at the lowest cache cost:
//   - above the budget's trigger it brings the input down to the target (hysteresis), so each
//     invalidation of the server's prefix cache is amortized over many turns;
//   - it decides by expected cost (StrataPolicyOptions::cost_model): each edit removes tokens from
//     every remaining turn (saving cached-price x tokens x turns) and invalidates what the server
//     cached after its boundary (costing (uncached - cached price) x those tokens); it picks the
//     batch with the best net saving, and below the trigger applies a batch of stale or superseded
//     outputs, or of outputs the agent saw and did not use (mask_after_use), only when it pays for
//     its re-prefill;
//   - within what it must re-render, it alters the least useful content first: stale outputs
//     (superseded error logs, ephemeral tools, old reasoning), then observation masking of old tool
//     results with informative placeholders (tool, arguments, size, exit status, identifiers the
//     output mentioned, recall id), and only when masking cannot reach the target, a summary of
//     the oldest turns (the task's first user message is kept).
// Never touched: pinned segments, the last `keep_turns` turns, the last `keep_tool_results` tool
// results (unless the hard limit requires), results of `exclude_tools`.
//
// Baselines for comparison (what peers do): none (full history), sliding (drop the oldest turns
// until the request fits), last-n (mask all but the last n tool results every turn, then slide),
// clear-tool-uses (Anthropic's context editing: above the trigger, clear the oldest tool results
// but the last 3 until well below it) and observation-masking (SWE-agent / "The Complexity Trap":
// every tool result but the last 10 replaced by a placeholder on every request).
//
//   std::unique_ptr<strata::CompactionPolicy> policy = strata::MakeStrataPolicy();
//   options.compaction = policy.get();
//
// Thread safety: the built-in policies and the extractive summarizer hold no mutable state and may
// be shared by contexts on different threads. The LLM summarizer is as thread-safe as its Transport.
#ifndef STRATA_BUILTIN_POLICIES_H_
#define STRATA_BUILTIN_POLICIES_H_

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "strata/compaction_policy.h"
#include "strata/segment.h"
#include "strata/status.h"
#include "strata/tokenizer.h"

namespace strata {

class Transport;  // strata/transport.h

// A summary and how it was asked for (Summarizer::SummarizeFor).
struct SummaryResult {
  std::string text;  // the summary
  // How it was asked for, for the compaction report (SummaryEdit::summary_request): e.g.
  // "cache-keeping", or "transcript (cache-keeping not used: ...)" saying why; "" says nothing.
  std::string request;
  // The tokens of the requests a summarizer sent for it, every attempt's (the strata policy prices
  // them: CompactionCandidate::request_cost); all 0 for a summarizer that sends no request (the
  // extractive one). Prompt tokens as the server reported them:
  int64_t request_input_tokens = 0;
  // Of those, the ones strata's prefix-cache model predicted cached (the agent's previous
  // request's cached prefix for a cache-keeping request, none for a transcript request).
  int64_t request_cached_tokens = 0;
  int64_t request_output_tokens = 0;  // completion tokens as the server reported them
};

// Turns a span of history into one summary text.
class Summarizer {
 public:
  virtual ~Summarizer() = default;
  // "name@version", recorded with the summaries it writes.
  virtual std::string Name() const = 0;
  // A summary of `span` (rendered history segments, oldest first) of at most `max_tokens` tokens
  // counted with `tokenizer`.
  virtual StatusOr<std::string> Summarize(const std::vector<const Segment*>& span, size_t max_tokens,
                                          const Tokenizer& tokenizer) = 0;
  // The same, given the request the compacting agent sent last (`previous`, nullptr when there is
  // none: see SummaryRequestContext), and saying how the summary was asked for. The policies call
  // this one. Default: Summarize(), request "".
  virtual StatusOr<SummaryResult> SummarizeFor(const std::vector<const Segment*>& span,
                                               size_t max_tokens, const Tokenizer& tokenizer,
                                               const SummaryRequestContext* previous);
};

// Deterministic extractive summary: the user requests, the assistant's stated decisions, every
// tool call with its exit status and recall id, the file paths mentioned and the error lines.
std::unique_ptr<Summarizer> MakeExtractiveSummarizer();

// How MakeLlmSummarizer asks a model for a summary.
struct LlmSummarizerOptions {
  // The model the summary request names (may be a cheaper endpoint's). Default "glm-5.3-flash".
  std::string model = "glm-5.3-flash";
  // The summary's token bound sent as max_tokens (also bounded by the policy's summary limit).
  // Default 1024.
  size_t max_output_tokens = 1024;
  int attempts = 2;  // tries before falling back. Default 2
  // Per attempt. Default 60000 ms (one minute).
  std::chrono::milliseconds deadline{60000};
  // Instruction placed before the span. Default: keep decisions, file paths, errors and open tasks.
  std::string instruction;
  // Cache-keeping mode: when the compacting agent passes its last request (an Agent does on every
  // turn; SummaryRequestContext) and it went to this summarizer's endpoint, the summary request is
  // that request's bytes up to the end of its messages, then one user message naming the span (by
  // position and recall ids) and the budget, then its own fields (max_tokens, stream false): same
  // model, cached prefix, cache_salt and headers, so the server prefills only the instruction.
  // `model` is then not used (the server's cache is the agent's model's). Its RequestRecord has
  // purpose "compaction" and goes to SummaryRequestContext::records. Otherwise, or when its answer
  // fails validation, the transcript request below; the compaction report says which and why
  // (CompactionReport::summary_request). Default true.
  bool keep_cache = true;
};

// Summarizes through `transport` (not owned; must outlive the summarizer): with keep_cache (see
// LlmSummarizerOptions) as a continuation of the agent's last request, else as a new request (the
// instruction and a transcript of the span, to `model`). Each answer is validated (non-empty,
// within max_tokens, not cut off; a cache-keeping answer also keeps the recall ids of the span it
// does not mention, listed after it, within max_tokens); after `attempts` failures the extractive
// summary is used instead, so compaction never fails because the summarizer did.
std::unique_ptr<Summarizer> MakeLlmSummarizer(Transport* transport, LlmSummarizerOptions options = {});

// The knobs of the strata policy (MakeStrataPolicy): protections, placeholders, summaries and the
// cost model. The defaults suit a coding agent; docs/compaction.md explains each.
struct StrataPolicyOptions {
  // The last `keep_turns` turns are never altered. Default 2.
  size_t keep_turns = 2;
  // The last `keep_tool_results` tool results are never masked (unless the hard limit requires).
  // Default 3.
  size_t keep_tool_results = 3;
  // Keep the first user message (usually the task) when summarizing. Default true.
  bool keep_first_user = true;
  // Results of these tools are never altered.
  std::set<std::string> exclude_tools;
  // Results of these tools are stale once their turn is over: masked first.
  std::set<std::string> ephemeral_tools;
  // Identifiers (names the output defines, paths, frequent names) listed in a masked output's
  // placeholder: one per `tokens_per_identifier` tokens of the output, between 8 and
  // `placeholder_identifiers`, skipping those the request keeps elsewhere (assistant and user
  // messages, results that stay). Defaults 64 and 32: a placeholder costs at most about a sixth of
  // the output it replaces and keeps the names an agent most often goes back to.
  size_t placeholder_identifiers = 64;
  size_t tokens_per_identifier = 32;  // see placeholder_identifiers. Default 32
  // Summaries are at most this many tokens, and at most a quarter of the budget's target.
  // Default 1536.
  size_t max_summary_tokens = 1536;
  // Writes summaries. Not owned. Default nullptr: the built-in extractive summarizer.
  Summarizer* summarizer = nullptr;

  // --- Cost model (docs/compaction.md, "Deciding by expected cost").
  // Decide by expected cost: choose the set of edits whose expected saving over the remaining turns
  // best exceeds its re-prefill cost, and compact below the trigger too when that pays. false: the
  // hysteresis-only policy (act above the trigger, the latest boundary that reaches the target).
  // Default true.
  bool cost_model = true;
  // Price of an uncached (prefilled) and of a cached input token; only their ratio matters. Set them
  // from the backend's price list. Defaults 1.0 and 0.1.
  double uncached_price = 1.0;
  double cached_price = 0.1;  // see uncached_price. Default 0.1
  // Remaining-turn estimate: (prior_weight x prior_remaining_turns + turns so far) /
  // (prior_weight + 1), times the share of the agent's turns that called tools (an agent that
  // stopped calling tools is finishing). Defaults 5 and 1, chosen by cross-validation between two
  // agent frameworks (docs/compaction.md, "Why these defaults").
  double prior_remaining_turns = 5;
  double prior_weight = 1;  // see prior_remaining_turns. Default 1
  // Below the trigger, a batch is applied only when its expected saving exceeds its re-prefill cost
  // times this margin (raise it when the remaining-turn estimate is unreliable). Default 1, chosen
  // with the prior.
  double below_trigger_margin = 1;
  // Results the agent still uses are altered last: those sharing a path or two names with the
  // assistant messages of the last `use_window_turns` turns. Default 3.
  size_t use_window_turns = 3;
  // Below the trigger, also mask results the agent has seen once and did not use: those that share
  // no path and fewer than two names with the assistant messages after them (within
  // use_window_turns), from the next request on, when that pays. Such a result is still at the end
  // of what the server cached, so masking it re-prefills little; keep_turns and keep_tool_results
  // then protect only the current turn and the latest result. Default true, chosen by
  // cross-validation between two agent frameworks (docs/compaction.md, "Why these defaults").
  bool mask_after_use = true;
  // With mask_after_use, also mask an unused result that mentions more names than its placeholder
  // can list (placeholder_identifiers, the highest-ranked kept): saves the large outputs the agent
  // read and left, at the risk of names it goes back to later. Default false.
  bool mask_unused_beyond_placeholder = false;
  // Above the trigger, a compaction re-prefills everything after its boundary anyway: also mask
  // every result after the boundary that the agent does not use and whose placeholder lists every
  // name it mentions, so that the next compaction comes later. Default false.
  bool mask_unused_at_break = false;
  // When masking cannot reach the target and the oldest turns are summarized, the summarized span
  // is made long enough to bring the request down to this share of the target (the summary's size
  // still follows the target): one summary, and its re-prefill, then lasts more turns, at the cost
  // of more turns in the same summary. 1 summarizes only what the target needs. Default 1.
  double summary_depth = 1;
};

// The strata policy (see the file comment): cache-aware, with trigger/target hysteresis and the
// latest boundary that reaches the target. Stateless: one instance may serve many contexts.
std::unique_ptr<CompactionPolicy> MakeStrataPolicy(StrataPolicyOptions options = {});

// Baselines.
std::unique_ptr<CompactionPolicy> MakeNoCompactionPolicy();
std::unique_ptr<CompactionPolicy> MakeSlidingWindowPolicy();  // drops the oldest turns to fit
// Masks all but the last n results.
std::unique_ptr<CompactionPolicy> MakeLastNPolicy(size_t n = 5);

// The knobs of the clear-tool-uses baseline (MakeClearToolUsesPolicy), after Anthropic's
// clear_tool_uses_20250919 context edit.
struct ClearToolUsesOptions {
  // Clear when the request holds more input tokens than this. 0 (default): the budget's usable
  // input (CompactionInput::limit_tokens), i.e. only when the request would not fit.
  size_t trigger_tokens = 0;
  // The last `keep` tool results are never cleared. Default 3 (Anthropic's default).
  size_t keep = 3;
  // Once triggered, clear the oldest tool results until the request is at most clear_to x the
  // trigger (Anthropic's clear_at_least: clearing must pay for the cache it invalidates). Default
  // 0.7, the fraction the strata policy compacts down to in bench_compaction and `strata replay`.
  double clear_to = 0.7;
  // Results of these tools are never cleared.
  std::set<std::string> exclude_tools;
  // What a cleared result renders as. Default "[cleared]" (LangChain's ClearToolUsesEdit).
  std::string placeholder = "[cleared]";
};

// Clears the oldest tool results above the trigger (see ClearToolUsesOptions); when clearing every
// result it may still leaves the request above the hard limit, it evicts the oldest turns as the
// sliding baseline does (a server-side editor would refuse the request instead). Stateless.
std::unique_ptr<CompactionPolicy> MakeClearToolUsesPolicy(ClearToolUsesOptions options = {});

// Keeps the last `keep_observations` tool results verbatim and renders every older one as
// "Old environment output: (N lines omitted)" (SWE-agent's LastNObservations), on every request;
// above the hard limit it then evicts the oldest turns as the sliding baseline does. Default 10,
// the window "The Complexity Trap" (Lindenbauer et al., 2025) found best. Stateless.
std::unique_ptr<CompactionPolicy> MakeObservationMaskingPolicy(size_t keep_observations = 10);

// "strata", "none", "sliding", "last-n", "clear-tool-uses", "observation-masking" -> a policy with
// its defaults; INVALID_ARGUMENT naming the known ones.
StatusOr<std::unique_ptr<CompactionPolicy>> MakePolicyByName(const std::string& name);

// The explanation of one compaction as text, one candidate per line, for `strata replay --explain`:
//   turn 12: trigger; remaining turns ~9.5 (horizon 6.0); prices 1/0.1; need 1,204 tokens; 7,700 -> 5,300 tokens
//     chosen: boundary s31, removes 3,410 tokens, invalidates 5,122: saving 2,046 > cost 1,540
//     * mask     s31    removes  1,880  invalidates  5,122  saving  1,128  cost  2,917  superseded
//       mask     s40    ...
// ("*" marks the chosen candidates). Empty when the report carries no explanation.
std::string ExplainCompaction(const CompactionReport& report);

// The one-line placeholder the strata policy renders for a masked tool result: tool, arguments
// digest, the original's size (`original_bytes`, what the tool returned before hygiene truncated
// or folded it; 0: the size of result.content), exit status (when the output shows one), up to
// `max_identifiers` identifiers the output mentioned (those in `already_present`, which the request
// keeps elsewhere, are skipped), and the recall id.
std::string MaskPlaceholder(const Segment& result, const ToolCall* call, const std::string& recall_id,
                            size_t max_identifiers, const std::set<std::string>& already_present = {},
                            size_t original_bytes = 0);


}  // namespace strata

#endif  // STRATA_BUILTIN_POLICIES_H_
