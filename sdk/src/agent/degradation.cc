// The Agent's DegradationHandler: compaction to a pool's length and task forks (degradation.h).
#include "agent/degradation.h"

#include <algorithm>
#include <utility>

namespace strata::agent_internal {
namespace {

std::string Quoted(const std::string& s) { return "\"" + s + "\""; }

// Rendered history: what a request holds of it (live, masked and summary segments).
bool Rendered(const Segment& s) {
  return s.layer == Layer::kHistory && s.state != SegmentState::kEvicted &&
         s.state != SegmentState::kSummarized;
}

}  // namespace

// ------------------------------------------------------------------------------ GoalPolicy

GoalPolicy::GoalPolicy(std::unique_ptr<CompactionPolicy> inner) : inner_(std::move(inner)) {}

std::string GoalPolicy::Name() const { return inner_->Name(); }

CompactionInput GoalPolicy::Adjusted(const CompactionInput& input) const {
  CompactionInput in = input;
  if (goal_) {
    in.limit_tokens = goal_->limit;
    in.trigger_tokens = goal_->limit;
    in.target_tokens = goal_->target;
    in.round = goal_->round;
    if (in.summary_request == nullptr) in.summary_request = goal_->summary_request;
  }
  return in;
}

// Without a goal the input goes on as it is: an adjusted copy would copy its history's lists.
bool GoalPolicy::ShouldCompact(const CompactionInput& input) const {
  return goal_ ? inner_->ShouldCompact(Adjusted(input)) : inner_->ShouldCompact(input);
}

StatusOr<HistoryEdit> GoalPolicy::Plan(const CompactionInput& input) {
  if (!goal_) return inner_->Plan(input);
  StatusOr<HistoryEdit> edit = inner_->Plan(Adjusted(input));
  if (edit.ok() && goal_) {
    edit->reason = goal_->reason + (edit->reason.empty() ? "" : ": " + edit->reason);
  }
  return edit;
}

void GoalPolicy::SetGoal(size_t limit, size_t target, size_t round, std::string reason,
                         const SummaryRequestContext* summary_request) {
  goal_ = Goal{limit, std::min(limit, target), round, std::move(reason), summary_request};
}

void GoalPolicy::ClearGoal() { goal_.reset(); }

// ------------------------------------------------------------------------------ AgentDegradation

AgentDegradation::AgentDegradation(DegradationHost host) : host_(std::move(host)) {}

AgentDegradation::~AgentDegradation() = default;

StatusOr<DegradedRequest> AgentDegradation::Compact(std::string_view body, int64_t input_tokens,
                                                    int64_t target_tokens,
                                                    const std::string& target_pool) {
  (void)body;
  if (target_tokens < 1) {
    return InvalidArgumentError("pool " + Quoted(target_pool) + " admits " +
                                std::to_string(target_tokens) + " tokens");
  }
  // The agent's hysteresis, applied to the pool: compact to target/limit of the pool's length, so
  // that the next turns fit the smaller pool too instead of compacting again at once.
  double share = 1.0;
  if (host_.budget) {
    const int64_t usable = UsableInputTokens(*host_.budget);
    if (usable > 0) share = static_cast<double>(TargetTokens(*host_.budget)) / usable;
  }
  share = std::clamp(share, 0.05, 1.0);
  const std::string reason =
      "to fit pool " + Quoted(target_pool) + " (" + std::to_string(target_tokens) + " tokens)";
  // The policy plans with the context's own count; `input_tokens` is the exact one. Plan against
  // the exact count by their ratio.
  const size_t own = host_.context->InputTokens();
  const double ratio =
      own > 0 ? std::clamp(static_cast<double>(input_tokens) / own, 0.5, 4.0) : 1.0;
  int64_t goal = std::max<int64_t>(1, static_cast<int64_t>(target_tokens / ratio));
  int64_t tokens = input_tokens;
  for (size_t round = 0; round < kMaxRounds; ++round) {
    host_.policy->SetGoal(static_cast<size_t>(goal), static_cast<size_t>(goal * share), round,
                          reason, host_.summary_request);
    StatusOr<std::optional<CompactionReport>> report = host_.context->Compact(/*force=*/false);
    host_.policy->ClearGoal();
    if (!report.ok()) {
      return Status(report.status().code(),
                    "compacting the history of agent " + Quoted(host_.agent_id) + " for pool " +
                        Quoted(target_pool) + ": " + report.status().message());
    }
    if (!report->has_value()) break;  // the policy has nothing more to remove
    compactions_.push_back(**report);
    // Rendered without compacting again: the agent's own budget is larger than the pool.
    StatusOr<BuiltRequest> built = host_.context->Preview(host_.fields);
    if (!built.ok()) return built.status();
    STRATA_ASSIGN_OR_RETURN(tokens, host_.count(built->body));
    if (tokens <= target_tokens) {
      notes_.push_back("history compacted from " + std::to_string(input_tokens) + " to " +
                       std::to_string(tokens) + " tokens in " + std::to_string(round + 1) +
                       " round(s) for pool " + Quoted(target_pool));
      compacted_ = std::move(built).value();
      return DegradedRequest{compacted_->body, tokens};
    }
    // Still above: lower the goal by how far the exact count missed.
    goal = std::max<int64_t>(1, goal * target_tokens / std::max<int64_t>(tokens, 1) - 1);
  }
  return ResourceExhaustedError(
      "compacting the history of agent " + Quoted(host_.agent_id) + " left " +
      std::to_string(tokens) + " tokens; pool " + Quoted(target_pool) + " admits " +
      std::to_string(target_tokens) +
      " (what remains is the stable layers, the pinned and the most recent turns)");
}

AgentBudgetConfig AgentDegradation::ChildBudget(int64_t target_tokens) const {
  AgentBudgetConfig c = host_.budget_config;
  if (!c.enforce || !host_.budget) return c;
  const Budget& b = *host_.budget;
  c.reserve_output = b.reserve_output;
  c.reserve_reasoning = b.reserve_reasoning;
  c.reserve_headroom = b.reserve_headroom;
  c.window = std::min(b.window,
                      target_tokens + b.reserve_output + b.reserve_reasoning + b.reserve_headroom);
  // Absolute limits become shares of the parent's usable input, so that they fit the child's.
  const double usable = static_cast<double>(std::max<int64_t>(1, UsableInputTokens(b)));
  auto share = [&](const BudgetLimit& limit) {
    if (limit.kind == BudgetLimit::Kind::kFraction) return limit;
    return BudgetLimit::Fraction(std::clamp(limit.tokens / usable, 0.01, 1.0));
  };
  c.trigger = share(c.trigger);
  c.target = share(c.target);
  if (c.target.fraction > c.trigger.fraction) c.target = c.trigger;
  return c;
}

void AgentDegradation::Discard(std::unique_ptr<Agent> child) {
  if (child == nullptr) return;
  const std::string id = child->id();
  child.reset();
  if (host_.store != nullptr) host_.store->DeleteAgent(id).IgnoreError();
}

StatusOr<DegradedRequest> AgentDegradation::Fork(std::string_view body, int64_t input_tokens,
                                                 int64_t target_tokens,
                                                 const std::string& target_pool) {
  (void)body;
  const std::vector<Segment> segments = host_.context->Segments();
  const Segment* task = nullptr;
  std::vector<const Segment*> rest;
  int64_t history_tokens = 0;
  for (const Segment& s : segments) {
    if (!Rendered(s)) continue;
    history_tokens += static_cast<int64_t>(s.tokens);
    if (s.kind == SegmentKind::kUser) task = &s;
  }
  if (task == nullptr) {
    return FailedPreconditionError("agent " + Quoted(host_.agent_id) +
                                   " has no user message to fork a task from");
  }
  for (const Segment& s : segments) {
    if (Rendered(s) && &s != task) rest.push_back(&s);
  }
  // The task alone, and first, when there is room, with a summary of the rest of the history.
  std::vector<std::string> tasks;
  std::string asked;  // how the summary was asked for (SummaryResult::request)
  const int64_t stable_tokens = std::max<int64_t>(0, input_tokens - history_tokens);
  const int64_t room = target_tokens - stable_tokens -
                       static_cast<int64_t>(host_.tokenizer->Count(task->content)) - 256;
  if (!rest.empty() && room >= 128 && host_.summarizer != nullptr) {
    StatusOr<SummaryResult> summary = host_.summarizer->SummarizeFor(
        rest, static_cast<size_t>(room), *host_.tokenizer, host_.summary_request);
    if (summary.ok() && !summary->text.empty()) {
      tasks.push_back("Context so far (a summary of " + std::to_string(rest.size()) +
                      " earlier messages):\n" + summary->text + "\n\nTask:\n" + task->content);
      asked = summary->request;
    }
  }
  tasks.push_back(task->content);
  ForkOptions options;
  options.budget = ChildBudget(target_tokens);
  int64_t tokens = 0;
  Status last = Status::Ok();
  for (size_t i = 0; i < tasks.size(); ++i) {
    StatusOr<std::unique_ptr<Agent>> child = host_.fork(tasks[i], options);
    if (!child.ok()) {
      last = child.status();
      continue;
    }
    StatusOr<BuiltRequest> built = (*child)->context().Build(host_.fields);
    if (built.ok()) {
      StatusOr<int64_t> counted = host_.count(built->body);
      if (!counted.ok()) {
        Discard(std::move(child).value());
        return counted.status();
      }
      tokens = *counted;
      if (tokens <= target_tokens) {
        child_ = std::move(child).value();
        notes_.push_back("task forked into agent " + Quoted(child_->id()) + " (" +
                         std::to_string(tokens) + " tokens" +
                         (i + 1 < tasks.size()
                              ? ", with a summary of the history" +
                                    (asked.empty() ? std::string() : " (" + asked + ")")
                              : "") +
                         ") for pool " + Quoted(target_pool));
        forked_ = std::move(built).value();
        return DegradedRequest{forked_->body, tokens};
      }
      last = ResourceExhaustedError("the forked task needs " + std::to_string(tokens) +
                                    " tokens; pool " + Quoted(target_pool) + " admits " +
                                    std::to_string(target_tokens));
    } else {
      last = built.status();
    }
    Discard(std::move(child).value());
  }
  return Status(last.code(),
                "forking the task of agent " + Quoted(host_.agent_id) + ": " + last.message());
}

void AgentDegradation::OnDecision(const RequestRecord& decision) {
  decided_ = true;
  decision_ = decision;
  if (decision.degradation == "compact" && compacted_) {
    sent_ = compacted_;
  } else if (decision.degradation == "fork" && forked_) {
    sent_ = forked_;
  }
  if (decision.degradation != "fork" && child_ != nullptr) {
    notes_.push_back("fork " + Quoted(child_->id()) + " unused and deleted");
    Discard(std::move(child_));
  }
}

void AgentDegradation::Apply(RequestRecord* record) const {
  if (!decided_) return;
  record->pool = decision_.pool;
  if (!decision_.endpoint.empty()) record->endpoint = decision_.endpoint;
  record->queue_wait_ms = decision_.queue_wait_ms;
  record->degradation = decision_.degradation;
  std::string notes = decision_.degradation_notes;
  for (const std::string& n : notes_) notes += (notes.empty() ? "" : "; ") + n;
  record->degradation_notes = std::move(notes);
}

}  // namespace strata::agent_internal
