// The Agent's side of a PoolSet's degradation ladder (private to strata::agent).
//
// A PoolSet (strata/pools.h) whose fitting pool is full, or that no pool fits, asks the request's
// DegradationHandler for a smaller request: `compact` compacts the agent's history, through its
// own compaction policy and Context::Compact(), against the smaller pool's length instead of the
// agent's budget; `fork` forks the task (Agent::Fork) into a child agent whose first request holds
// the stable layers, a summary of the history when it fits, and the latest user message. The
// Agent makes one AgentDegradation per request (Agent::Impl::Complete) and passes it in
// CallOptions::degradation; after Send() it reads what was applied and what the pool decided.
//
// Thread safety: used on the sending thread only, inside the Agent's lock.
#ifndef STRATA_SRC_AGENT_DEGRADATION_H_
#define STRATA_SRC_AGENT_DEGRADATION_H_

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "strata/agent.h"
#include "strata/compaction_policy.h"
#include "strata/context.h"
#include "strata/pool_call.h"
#include "strata/record.h"
#include "strata/transport.h"

namespace strata::agent_internal {

// The agent's compaction policy, wrapped. It passes everything through, except while a goal is
// set: then the policy sees the goal as the budget's limit and trigger and `goal_target` as its
// target, so that one Context::Compact() plans the history down to a pool's length.
class GoalPolicy final : public CompactionPolicy {
 public:
  explicit GoalPolicy(std::unique_ptr<CompactionPolicy> inner);
  std::string Name() const override;
  bool ShouldCompact(const CompactionInput& input) const override;
  StatusOr<HistoryEdit> Plan(const CompactionInput& input) override;

  // `reason` prefixes the report's reason, e.g. "to fit pool \"short\" (8,000 tokens)".
  // `summary_request` (nullable, not owned; must outlive the goal) is the agent's previous request,
  // which the policy's summarizer may continue (CompactionInput::summary_request).
  void SetGoal(size_t limit, size_t target, size_t round, std::string reason,
               const SummaryRequestContext* summary_request = nullptr);
  void ClearGoal();

 private:
  struct Goal {
    size_t limit = 0;
    size_t target = 0;
    size_t round = 0;
    std::string reason;
    const SummaryRequestContext* summary_request = nullptr;
  };
  CompactionInput Adjusted(const CompactionInput& input) const;

  std::unique_ptr<CompactionPolicy> inner_;
  std::optional<Goal> goal_;
};

// What the handler needs from its agent for one request.
struct DegradationHost {
  std::string agent_id;
  Context* context = nullptr;
  GoalPolicy* policy = nullptr;
  Summarizer* summarizer = nullptr;
  const Tokenizer* tokenizer = nullptr;
  std::optional<Budget> budget;     // the agent's resolved budget; nullopt when none is enforced
  AgentBudgetConfig budget_config;  // the agent's budget configuration (a fork's starts from it)
  BuildOptions fields;              // the request's extra fields (same request id)
  // The agent's previous request, which a summary of the history continues to keep the server's
  // cache (MakeLlmSummarizer's cache-keeping mode): nullptr when there is none. Not owned.
  const SummaryRequestContext* summary_request = nullptr;
  Store* store = nullptr;           // where a discarded fork is deleted from; may be nullptr
  // The prompt tokens of `body` as the agent counts them for CallOptions::prompt_tokens (what the
  // PoolSet admits by).
  std::function<StatusOr<int64_t>(const std::string& body)> count;
  // Agent::Fork without taking the agent's lock (the handler runs inside Complete()).
  std::function<StatusOr<std::unique_ptr<Agent>>(std::string task, const ForkOptions& options)>
      fork;
};

class AgentDegradation final : public DegradationHandler {
 public:
  // Rounds of compaction one Compact() may apply: the first plans with the context's own count; a
  // later round runs only when the exact count is still above the pool, with the goal lowered by
  // the ratio of the two (the same bound as Context::Build's rounds).
  static constexpr size_t kMaxRounds = 4;

  explicit AgentDegradation(DegradationHost host);
  ~AgentDegradation() override;

  StatusOr<DegradedRequest> Compact(std::string_view body, int64_t input_tokens,
                                    int64_t target_tokens, const std::string& target_pool) override;
  StatusOr<DegradedRequest> Fork(std::string_view body, int64_t input_tokens, int64_t target_tokens,
                                 const std::string& target_pool) override;
  void OnDecision(const RequestRecord& decision) override;

  // After Send(). Whether the pool decided (always, for a PoolSet) and what.
  bool decided() const { return decided_; }
  const RequestRecord& decision() const { return decision_; }
  // Compactions applied to the agent's history while degrading (they stay even when the pool
  // then took another step: the history is smaller either way).
  const std::vector<CompactionReport>& compactions() const { return compactions_; }
  // The request sent in place of the agent's when the pool's step was "compact" or "fork".
  const std::optional<BuiltRequest>& sent() const { return sent_; }
  // The forked child when the step was "fork" (nullptr otherwise). A fork the pool did not use
  // is deleted again (from the store too).
  Agent* child() const { return child_.get(); }
  // The pool's decision into *record (pool, endpoint, queue wait, degradation) with the notes of
  // the pool and of this handler.
  void Apply(RequestRecord* record) const;

 private:
  AgentBudgetConfig ChildBudget(int64_t target_tokens) const;
  void Discard(std::unique_ptr<Agent> child);

  DegradationHost host_;
  bool decided_ = false;
  RequestRecord decision_;
  std::vector<CompactionReport> compactions_;
  std::optional<BuiltRequest> compacted_;  // the last compaction's request
  std::optional<BuiltRequest> forked_;     // the child's first request
  std::unique_ptr<Agent> child_;
  std::optional<BuiltRequest> sent_;
  std::vector<std::string> notes_;
};

}  // namespace strata::agent_internal

#endif  // STRATA_SRC_AGENT_DEGRADATION_H_
