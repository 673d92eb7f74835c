#include "strata/budget.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace strata {
namespace {

int64_t LimitTokens(const BudgetLimit& limit, int64_t usable) {
  if (usable <= 0) return 0;
  int64_t tokens =
      limit.kind == BudgetLimit::Kind::kFraction
          ? static_cast<int64_t>(std::floor(limit.fraction * static_cast<double>(usable)))
          : limit.tokens;
  return std::clamp<int64_t>(tokens, 0, usable);
}

Status ValidateLimit(const char* field, const BudgetLimit& limit, int64_t usable) {
  if (limit.kind == BudgetLimit::Kind::kFraction) {
    if (!(limit.fraction > 0.0 && limit.fraction <= 1.0))
      return InvalidArgumentError(std::string("budget ") + field + " fraction " + limit.ToString() +
                                  " is outside (0, 1]; give a fraction of the usable input such as "
                                  "0.85, or an absolute token count");
    return Status::Ok();
  }
  if (limit.tokens <= 0)
    return InvalidArgumentError(std::string("budget ") + field + " of " + limit.ToString() +
                                " must be positive");
  if (limit.tokens > usable)
    return InvalidArgumentError(std::string("budget ") + field + " of " + limit.ToString() +
                                " exceeds the usable input of " + std::to_string(usable) +
                                " tokens (window minus reserves); lower it or use a fraction");
  return Status::Ok();
}

}  // namespace

std::string BudgetLimit::ToString() const {
  if (kind == Kind::kTokens) return std::to_string(tokens) + " tokens";
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", fraction);
  return buf;
}

int64_t UsableInputTokens(const Budget& b) {
  return b.window - b.reserve_output - b.reserve_reasoning - b.reserve_headroom;
}

int64_t TriggerTokens(const Budget& b) { return LimitTokens(b.trigger, UsableInputTokens(b)); }

int64_t TargetTokens(const Budget& b) { return LimitTokens(b.target, UsableInputTokens(b)); }

Status Budget::Validate() const {
  if (window <= 0)
    return InvalidArgumentError("budget window " + std::to_string(window) +
                                " must be positive (the model's context length, e.g. 1048576)");
  const std::pair<const char*, int64_t> reserves[] = {{"reserve_output", reserve_output},
                                                      {"reserve_reasoning", reserve_reasoning},
                                                      {"reserve_headroom", reserve_headroom}};
  for (const auto& [name, value] : reserves)
    if (value < 0)
      return InvalidArgumentError(std::string("budget ") + name + " " + std::to_string(value) +
                                  " is negative; use 0 for no reserve");
  int64_t usable = UsableInputTokens(*this);
  if (usable <= 0)
    return InvalidArgumentError(
        "budget reserves (reserve_output " + std::to_string(reserve_output) +
        " + reserve_reasoning " + std::to_string(reserve_reasoning) + " + reserve_headroom " +
        std::to_string(reserve_headroom) + " = " +
        std::to_string(reserve_output + reserve_reasoning + reserve_headroom) +
        ") leave no input in the window of " + std::to_string(window) +
        " tokens; lower the reserves");
  STRATA_RETURN_IF_ERROR(ValidateLimit("trigger", trigger, usable));
  STRATA_RETURN_IF_ERROR(ValidateLimit("target", target, usable));
  int64_t trigger_tokens = TriggerTokens(*this), target_tokens = TargetTokens(*this);
  if (target_tokens > trigger_tokens)
    return InvalidArgumentError(
        "budget target " + target.ToString() + " (" + std::to_string(target_tokens) +
        " tokens) is above trigger " + trigger.ToString() + " (" + std::to_string(trigger_tokens) +
        " tokens); compaction would never reach its target: make target <= trigger");
  if (target_tokens <= 0)
    return InvalidArgumentError("budget target " + target.ToString() +
                                " is 0 tokens of a usable input of " + std::to_string(usable) +
                                "; raise it");
  return Status::Ok();
}

StatusOr<Budget> ApplyOverride(const Budget& base, const BudgetOverride& o) {
  Budget b = base;
  if (o.window) b.window = *o.window;
  if (o.reserve_output) b.reserve_output = *o.reserve_output;
  if (o.reserve_reasoning) b.reserve_reasoning = *o.reserve_reasoning;
  if (o.reserve_headroom) b.reserve_headroom = *o.reserve_headroom;
  if (o.trigger) b.trigger = *o.trigger;
  if (o.target) b.target = *o.target;
  Status st = b.Validate();
  if (!st.ok()) return Status(st.code(), "budget after per-agent override: " + st.message());
  return b;
}

}  // namespace strata
