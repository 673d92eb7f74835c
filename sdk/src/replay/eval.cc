#include "strata/replay/eval.h"

#include <algorithm>
#include <unordered_map>
#include <unordered_set>

#include "core/identifiers.h"
#include "replay/pairing.h"
#include "strata/builtin_policies.h"
#include "strata/chat_template.h"
#include "strata/prefix_cache.h"
#include "strata/tokenizer_spec.h"

namespace strata {

using internal::ExtractIdentifiers;

namespace {

constexpr size_t kAllIdentifiers = 1 << 20;

}  // namespace

void EvalSummary::Add(const EvalSummary& o) {
  requests += o.requests;
  violations += o.violations;
  pairing_errors += o.pairing_errors;
  failed_builds += o.failed_builds;
  peak_tokens = std::max(peak_tokens, o.peak_tokens);
  input_tokens += o.input_tokens;
  reused_tokens += o.reused_tokens;
  uncached_tokens += o.uncached_tokens;
  compactions += o.compactions;
  invalidated_tokens += o.invalidated_tokens;
  old_identifiers += o.old_identifiers;
  old_identifiers_kept += o.old_identifiers_kept;
}

void EvalSummary::Finish(double cached_price) {
  mean_tokens = requests ? static_cast<double>(input_tokens) / requests : 0;
  reuse_share = input_tokens ? static_cast<double>(reused_tokens) / input_tokens : 0;
  cost = static_cast<double>(uncached_tokens) + cached_price * static_cast<double>(reused_tokens);
  retention = old_identifiers ? static_cast<double>(old_identifiers_kept) / old_identifiers : 1.0;
}

namespace {

// What one evaluation replays into: the policy, the exact request counter and the context using them.
struct EvalContext {
  std::unique_ptr<ChatTemplate> owned_template;
  const ChatTemplate* chat_template = nullptr;
  std::unique_ptr<CompactionPolicy> policy;
  std::unique_ptr<RequestTokenCounter> counter;
  std::unique_ptr<Context> context;
};

StatusOr<std::unique_ptr<EvalContext>> MakeEvalContext(const EvalOptions& options) {
  auto eval = std::make_unique<EvalContext>();
  eval->chat_template = options.chat_template;
  if (eval->chat_template == nullptr) {
    eval->owned_template = MakeGlm5ChatTemplate();
    eval->chat_template = eval->owned_template.get();
  }
  if (options.policy == "strata") {
    eval->policy = MakeStrataPolicy(options.strata);
  } else {
    STRATA_ASSIGN_OR_RETURN(eval->policy, MakePolicyByName(options.policy));
  }
  eval->counter = MakeRequestTokenCounter(*eval->chat_template, *options.tokenizer);
  const bool is_strata = options.policy == "strata";

  ContextOptions context_options;
  context_options.agent.id = "eval";
  context_options.tokenizer = options.tokenizer;
  // Budget decisions on exact counts (template + tokenizer), as the server counts.
  context_options.request_counter = eval->counter.get();
  context_options.hygiene = options.hygiene;
  if (context_options.hygiene.max_segment_tokens == 0) {
    context_options.hygiene.max_segment_tokens =
        options.budget_tokens ? std::clamp<size_t>(options.budget_tokens / 4, 64, 8192) : 8192;
  }
  if (!is_strata) {
    context_options.hygiene.deduplicate = false;
    context_options.hygiene.fold_error_logs = false;
  }
  if (options.budget_tokens && options.policy != "none") {
    Budget budget;
    budget.window = static_cast<int64_t>(options.budget_tokens);
    budget.reserve_output = budget.reserve_reasoning = budget.reserve_headroom = 0;
    budget.trigger = BudgetLimit::Fraction(is_strata ? options.trigger : 1.0);
    budget.target = BudgetLimit::Fraction(is_strata ? options.target : 1.0);
    context_options.budget = budget;
    context_options.compaction = eval->policy.get();
  }
  STRATA_ASSIGN_OR_RETURN(eval->context, Context::Create(context_options));
  return eval;
}

// Identifiers: those the user or system gave (known), and those first seen in a tool output, with
// the turn they appeared in (learned).
struct IdentifierLedger {
  std::unordered_map<std::string, int64_t> learned;
  std::unordered_set<std::string> known;
};

// The block chains of successive prompts, each as HashPrompt(prompt, "", tokenizer, options)
// gives it. With an exact tokenizer a prompt is encoded from where it differs from the previous
// one (IncrementalEncoder) and only the blocks after the ids carried over are hashed again: a
// request costs what it adds instead of an encoding of the whole prompt.
class PromptHasher {
 public:
  PromptHasher(const Tokenizer& tokenizer, const PrefixCacheOptions& options)
      : tokenizer_(tokenizer), options_(options), encoder_(tokenizer) {}

  const PromptBlocks& Hash(const std::string& prompt) {
    if (!tokenizer_.IsEstimate()) {
      const std::vector<int32_t>& ids = encoder_.Encode(prompt);
      if (!ids.empty() || prompt.empty()) {
        ContinuePromptIds(ids, chained_ids_ ? encoder_.unchanged() : 0, options_, &blocks_);
        chained_ids_ = true;
        return blocks_;
      }
    }
    blocks_ = HashPrompt(prompt, "", &tokenizer_, options_);  // byte blocks
    chained_ids_ = false;
    return blocks_;
  }

 private:
  const Tokenizer& tokenizer_;
  const PrefixCacheOptions options_;
  IncrementalEncoder encoder_;
  PromptBlocks blocks_;
  bool chained_ids_ = false;  // blocks_ is the chain of the encoder's last ids
};

// Measures the request built before assistant message `m`: its prompt tokens and reuse through the
// server's template, budget and pairing, and the retention of old identifiers `m` uses.
void MeasureRequest(const BuiltRequest& built, const std::string& prompt, const TraceMessage& m,
                    const IdentifierLedger& ids, int64_t turn, const EvalOptions& options,
                    PromptHasher& hasher, replay_internal::PairingChecker& pairing,
                    PrefixCacheModel& cache, EvalTurn& stats) {
  const PromptBlocks& blocks = hasher.Hash(prompt);
  stats.input_tokens = static_cast<size_t>(blocks.prompt_tokens);
  stats.counted_tokens = built.input_tokens;
  stats.reused_tokens = static_cast<size_t>(cache.LookupAndInsert(blocks));
  stats.violation = options.budget_tokens && stats.input_tokens > options.budget_tokens;
  stats.pairing_error = !pairing.Check(built);
  stats.compaction = built.compaction;
  // Retention: identifiers this message uses that were learned from old tool outputs.
  std::string used_text = m.content;
  for (const ToolCall& call : m.tool_calls) used_text += "\n" + call.arguments;
  for (const std::string& id : ExtractIdentifiers(used_text, kAllIdentifiers)) {
    auto it = ids.learned.find(id);
    if (it == ids.learned.end() || ids.known.count(id) || it->second > turn - options.retention_age) continue;
    ++stats.old_identifiers;
    if (built.body.find(id) != std::string::npos) {
      ++stats.old_identifiers_kept;
    } else {
      stats.lost_identifiers.push_back(id);
    }
  }
}

void AddTurn(const EvalTurn& stats, EvalSummary& sum) {
  ++sum.requests;
  sum.violations += stats.violation;
  sum.pairing_errors += stats.pairing_error;
  sum.peak_tokens = std::max(sum.peak_tokens, stats.input_tokens);
  sum.input_tokens += stats.input_tokens;
  sum.reused_tokens += stats.reused_tokens;
  sum.uncached_tokens += stats.input_tokens - std::min(stats.input_tokens, stats.reused_tokens);
  if (stats.compaction) {
    ++sum.compactions;
    sum.invalidated_tokens += stats.compaction->invalidated_tokens;
  }
  sum.old_identifiers += stats.old_identifiers;
  sum.old_identifiers_kept += stats.old_identifiers_kept;
}

}  // namespace

StatusOr<EvalResult> EvaluateTrace(const std::vector<TraceMessage>& messages, const EvalOptions& options) {
  if (options.tokenizer == nullptr) return InvalidArgumentError("EvalOptions.tokenizer is required");
  STRATA_ASSIGN_OR_RETURN(std::unique_ptr<EvalContext> eval, MakeEvalContext(options));
  Context* context = eval->context.get();

  PrefixCacheOptions cache_options;
  cache_options.block_tokens = options.block_tokens;
  cache_options.capacity_blocks = static_cast<size_t>(-1) / 2;
  PrefixCacheModel cache(cache_options);
  PromptHasher hasher(*options.tokenizer, cache_options);
  replay_internal::PairingChecker pairing;

  IdentifierLedger ids;
  EvalResult result;
  std::vector<std::string> system_prompts;
  bool started = false;
  int64_t turn = 0;

  for (const TraceMessage& m : messages) {
    auto at = [&](const Status& s) {
      return Status(s.code(), "line " + std::to_string(m.line) + ": " + s.message());
    };
    if (m.role == TraceRole::kSystem && !started) {
      system_prompts.push_back(m.content);
      for (const std::string& id : ExtractIdentifiers(m.content, kAllIdentifiers)) ids.known.insert(id);
      continue;
    }
    if (!started) {
      started = true;
      if (!system_prompts.empty()) {
        Status s = context->SetSystemPrompts(system_prompts);
        if (!s.ok()) return at(s);
      }
    }
    switch (m.role) {
      case TraceRole::kSystem:
        return at(InvalidArgumentError("system message after the conversation started"));
      case TraceRole::kUser: {
        for (const std::string& id : ExtractIdentifiers(m.content, kAllIdentifiers)) {
          if (!ids.learned.count(id)) ids.known.insert(id);
        }
        Status s = context->AppendUser(m.content).status();
        if (!s.ok()) return at(s);
        break;
      }
      case TraceRole::kAssistant: {
        EvalTurn stats;
        stats.turn = result.turns.size();
        StatusOr<BuiltRequest> built = context->Build();
        if (!built.ok()) {
          if (built.status().code() != StatusCode::kResourceExhausted) return at(built.status());
          stats.violation = true;
          ++result.summary.failed_builds;
          stats.error = built.status().message();
        } else {
          STRATA_ASSIGN_OR_RETURN(std::string prompt, eval->chat_template->Render(built->body));
          MeasureRequest(*built, prompt, m, ids, turn, options, hasher, pairing, cache, stats);
          if (options.on_turn) options.on_turn(stats, built->body);
        }
        AddTurn(stats, result.summary);
        result.turns.push_back(std::move(stats));
        ++turn;
        Status s = context->AppendAssistant(AssistantMessage{m.content, m.reasoning, m.tool_calls}).status();
        if (!s.ok()) return at(s);
        break;
      }
      case TraceRole::kTool: {
        for (const std::string& id : ExtractIdentifiers(m.content, kAllIdentifiers)) {
          if (!ids.known.count(id)) ids.learned.emplace(id, turn - 1);
        }
        Status s = context->AppendToolResult(ToolResult{m.tool_call_id, m.content, false}).status();
        if (!s.ok()) return at(s);
        break;
      }
    }
  }
  result.summary.Finish(options.cached_price);
  return result;
}

}  // namespace strata
