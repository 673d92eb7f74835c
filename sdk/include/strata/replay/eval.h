// strata/replay/eval.h — replaying trajectories under a token budget with a compaction policy,
// and measuring what it costs (component strata::replay, the tooling beside the API; used by
// `strata replay --budget` and bench/bench_compaction).
//
// For each assistant message of a trace, the context (managed by the policy) is built into the
// request that would be sent; the request is rendered through the chat template and tokenized with
// the given tokenizer, which gives its exact input tokens; a prefix-cache model fed with every request
// sent so far gives the tokens a server would reuse (block granularity).
//
//   strata::EvalOptions options;
//   options.policy = "strata";
//   options.budget_tokens = 32000;
//   options.tokenizer = tokenizer.get();
//   STRATA_ASSIGN_OR_RETURN(strata::EvalResult result, strata::EvaluateTrace(messages, options));
//   std::cout << result.summary.cost << "\n";
//
// Thread safety: EvaluateTrace may run concurrently on different traces with shared tokenizer and
// template (they are thread-safe).
#ifndef STRATA_REPLAY_EVAL_H_
#define STRATA_REPLAY_EVAL_H_

#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "strata/builtin_policies.h"
#include "strata/compaction_policy.h"
#include "strata/context.h"
#include "strata/replay/trace.h"
#include "strata/status.h"
#include "strata/tokenizer.h"

namespace strata {

// What EvaluateTrace replays with: the policy and its budget, the tokenizer and chat template that
// count each request exactly, and the parameters of its measurements.
struct EvalOptions {
  // strata, none, sliding, last-n, clear-tool-uses, observation-masking (MakePolicyByName).
  // Default "strata".
  std::string policy = "strata";
  // Input tokens a request may hold (exact count through the template). Default 0: no budget.
  size_t budget_tokens = 0;
  // Trigger and target of the strata policy, as fractions of the budget. Defaults 0.95 and 0.7:
  // compact rarely, and keep most of the budget in use after a compaction.
  double trigger = 0.95;
  double target = 0.7;                          // see trigger. Default 0.7
  // Counts every request exactly. Required: the default, nullptr, is refused.
  const Tokenizer* tokenizer = nullptr;
  const ChatTemplate* chat_template = nullptr;  // default nullptr: the GLM-5 template
  size_t block_tokens = 16;                     // prefix-cache block size. Default 16
  // Price of a cached input token relative to an uncached one. Default 0.1.
  double cached_price = 0.1;
  // Turns after which an identifier learned from a tool output counts as "old" for retention.
  // Default 5.
  int64_t retention_age = 5;
  // Append-time hygiene for the strata policy; baselines get the same truncation but no
  // deduplication or folding (what peers do). max_segment_tokens 0: a quarter of the budget, at most
  // 8192.
  HygieneOptions hygiene;
  // Options of the strata policy (when policy == "strata").
  StrataPolicyOptions strata;
  // Called with each turn's stats and request body (e.g. to write `--out`); may be empty.
  std::function<void(const struct EvalTurn&, const std::string& body)> on_turn;
};

// One request of an evaluated trace.
struct EvalTurn {
  size_t turn = 0;  // index of the request in the trace
  size_t input_tokens = 0;     // exact: tokenizer(template(request))
  size_t counted_tokens = 0;   // the context's own count
  size_t reused_tokens = 0;    // served from the prefix-cache model
  bool violation = false;      // input_tokens > budget
  bool pairing_error = false;  // a tool message without its call or the reverse
  size_t old_identifiers = 0;       // identifiers the next message uses, learned > age turns ago
  size_t old_identifiers_kept = 0;  // of those, still present in the request
  std::vector<std::string> lost_identifiers;  // the old identifiers the request no longer holds
  std::optional<CompactionReport> compaction;  // the compaction its build applied, if any
  std::string error;  // why the request could not be built (RESOURCE_EXHAUSTED), if it could not
};

// Totals over the requests of one trace (or several, with Add).
struct EvalSummary {
  size_t requests = 0;  // requests built or refused
  size_t violations = 0;  // requests above the budget
  size_t pairing_errors = 0;  // requests with unpaired tool calls
  size_t failed_builds = 0;  // requests the context refused to build (RESOURCE_EXHAUSTED)
  size_t peak_tokens = 0;  // largest input_tokens
  double mean_tokens = 0;  // input tokens per request
  uint64_t input_tokens = 0;  // sum of input_tokens
  uint64_t reused_tokens = 0;  // sum of reused_tokens
  uint64_t uncached_tokens = 0;  // input tokens not served from cache
  double reuse_share = 0;  // reused / input
  double cost = 0;         // uncached + cached_price * reused
  size_t compactions = 0;  // requests whose build compacted
  uint64_t invalidated_tokens = 0;  // history tokens those compactions invalidated
  size_t old_identifiers = 0;  // old identifiers the messages used
  size_t old_identifiers_kept = 0;  // of those, still in the request
  double retention = 1;  // kept / old (1 when none)
  // Adds `other` (another trace's summary) into this one and recomputes the ratios.
  void Add(const EvalSummary& other);
  // Computes the ratios (mean, reuse share, cost at `cached_price`, retention).
  void Finish(double cached_price);
};

// The evaluation of one trace.
struct EvalResult {
  EvalSummary summary;  // totals
  std::vector<EvalTurn> turns;  // one per request
};

// Replays `messages` through a context under `options` (policy, budget, tokenizer and chat
// template) and measures each request. INVALID_ARGUMENT without a tokenizer or for an unknown
// policy; a message that cannot be appended fails with its line number.
StatusOr<EvalResult> EvaluateTrace(const std::vector<TraceMessage>& messages, const EvalOptions& options);

}  // namespace strata

#endif  // STRATA_REPLAY_EVAL_H_
