// strata/budget.h — how many input tokens a context may use, and when compaction starts and stops.
//
// usable input = window - reserve_output - reserve_reasoning - reserve_headroom
// Compaction starts when the context's input tokens exceed TriggerTokens() and brings them down to
// TargetTokens() (hysteresis: it happens rarely, so its prefix-cache cost is amortized). Trigger
// and target are each a fraction of the usable input or an absolute number of tokens.
//
//   strata::Budget budget;                              // 1,048,576 window, defaults below
//   budget.reserve_output = 32768;
//   budget.trigger = strata::BudgetLimit::Fraction(0.85);
//   budget.target = strata::BudgetLimit::Tokens(600000);
//   STRATA_RETURN_IF_ERROR(budget.Validate());
//   if (input_tokens > TriggerTokens(budget)) { /* compact down to TargetTokens(budget) */ }
//
//   // Per-agent overrides: only the fields set replace the base.
//   strata::BudgetOverride small;
//   small.window = 131072;
//   STRATA_ASSIGN_OR_RETURN(strata::Budget agent_budget, strata::ApplyOverride(budget, small));
//
// Thread safety: value types and pure functions; safe to use from any thread.
#ifndef STRATA_BUDGET_H_
#define STRATA_BUDGET_H_

#include <cstdint>
#include <optional>
#include <string>

#include "strata/status.h"

namespace strata {

// A trigger or target: a fraction of the usable input (0 < f <= 1) or an absolute token count.
struct BudgetLimit {
  // Which of fraction or tokens applies.
  enum class Kind { kFraction, kTokens };
  Kind kind = Kind::kFraction;  // kFraction or kTokens
  double fraction = 1.0;  // used when kind == kFraction
  int64_t tokens = 0;     // used when kind == kTokens

  // A fraction of the usable input, 0 < f <= 1.
  static BudgetLimit Fraction(double f) { return BudgetLimit{Kind::kFraction, f, 0}; }
  // An absolute token count.
  static BudgetLimit Tokens(int64_t n) { return BudgetLimit{Kind::kTokens, 0.0, n}; }
  // "0.85" or "600000 tokens".
  std::string ToString() const;

  friend bool operator==(const BudgetLimit& a, const BudgetLimit& b) {
    return a.kind == b.kind &&
           (a.kind == Kind::kFraction ? a.fraction == b.fraction : a.tokens == b.tokens);
  }
};

// The token budget of a context: the window, what is kept free, and when and how far to compact.
struct Budget {
  // The model's context window in tokens (input + output). Default: GLM-5.3-Flash, 1,048,576.
  int64_t window = 1048576;
  // Tokens kept free for the answer (the request's max_completion_tokens). Default 32,768.
  int64_t reserve_output = 32768;
  // Tokens kept free for thinking, on reasoning models. Default 16,384; 0 when thinking is off.
  int64_t reserve_reasoning = 16384;
  // Tokens kept free for the next tool result, so that appending one does not overflow. Default
  // 16,384.
  int64_t reserve_headroom = 16384;
  // Compaction starts when input tokens exceed this. Default: 0.85 of the usable input.
  BudgetLimit trigger = BudgetLimit::Fraction(0.85);
  // Compaction brings input tokens down to at most this. Default: 0.60 of the usable input. Must
  // not exceed the trigger (a lower target means rarer compactions, each dropping more).
  BudgetLimit target = BudgetLimit::Fraction(0.60);

  // OK, or INVALID_ARGUMENT naming the field and value: window <= 0, a negative reserve, reserves
  // that leave no usable input, a fraction outside (0, 1], an absolute limit <= 0 or above the
  // usable input, target above trigger.
  Status Validate() const;
};

// window - reserve_output - reserve_reasoning - reserve_headroom (may be <= 0 for an invalid
// budget).
int64_t UsableInputTokens(const Budget& budget);
// The trigger in tokens: floor(fraction * usable) or the absolute value, capped at the usable
// input.
int64_t TriggerTokens(const Budget& budget);
// The target in tokens, computed like the trigger.
int64_t TargetTokens(const Budget& budget);

// Per-agent changes to a base budget: each field that is set replaces the base's.
struct BudgetOverride {
  std::optional<int64_t> window;  // replaces Budget::window
  std::optional<int64_t> reserve_output;  // replaces Budget::reserve_output
  std::optional<int64_t> reserve_reasoning;  // replaces Budget::reserve_reasoning
  std::optional<int64_t> reserve_headroom;  // replaces Budget::reserve_headroom
  std::optional<BudgetLimit> trigger;  // replaces Budget::trigger
  std::optional<BudgetLimit> target;  // replaces Budget::target
};

// `base` with the fields of `override` applied, validated. Errors: INVALID_ARGUMENT from
// Validate(), the message saying the budget came from an override.
StatusOr<Budget> ApplyOverride(const Budget& base, const BudgetOverride& override);

}  // namespace strata

#endif  // STRATA_BUDGET_H_
