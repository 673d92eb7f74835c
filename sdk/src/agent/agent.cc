// strata::Agent: one object owning the context, its configuration, endpoint, store and tools. The
// public methods lock the agent and forward to Agent::Impl (agent_impl.h says which file does
// what).
#include "strata/agent.h"

#include <mutex>
#include <string>
#include <utility>

#include "agent/agent_impl.h"

namespace strata {

Agent::Agent(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Agent::~Agent() = default;

const std::string& Agent::id() const { return impl_->config_.identity.id; }
const AgentConfig& Agent::config() const { return impl_->config_; }
std::string Agent::ConfigJson() const {
  std::lock_guard<std::mutex> lock(impl_->mu_);
  return AgentConfigToJson(impl_->config_);
}

Status Agent::SetSystemPrompt(std::string prompt) { return SetSystemPrompts({std::move(prompt)}); }
Status Agent::SetSystemPrompts(std::vector<std::string> prompts) {
  std::lock_guard<std::mutex> lock(impl_->mu_);
  return impl_->context_->SetSystemPrompts(std::move(prompts));
}
StatusOr<std::string> Agent::PutDocument(Layer layer, Document document) {
  std::lock_guard<std::mutex> lock(impl_->mu_);
  return impl_->context_->PutDocument(layer, std::move(document));
}
Status Agent::RemoveDocument(Layer layer, std::string_view name) {
  std::lock_guard<std::mutex> lock(impl_->mu_);
  return impl_->context_->RemoveDocument(layer, name);
}
StatusOr<std::string> Agent::AppendUser(std::string content) {
  std::lock_guard<std::mutex> lock(impl_->mu_);
  return impl_->context_->AppendUser(std::move(content));
}
StatusOr<std::string> Agent::AppendToolResult(ToolResult result) {
  std::lock_guard<std::mutex> lock(impl_->mu_);
  return impl_->context_->AppendToolResult(std::move(result));
}
Status Agent::SetVolatile(std::string key, std::string value) {
  std::lock_guard<std::mutex> lock(impl_->mu_);
  return impl_->context_->SetVolatile(std::move(key), std::move(value));
}

StatusOr<Turn> Agent::Complete(const TurnOptions& options) {
  std::lock_guard<std::mutex> lock(impl_->mu_);
  return impl_->Undoable<Turn>([&] { return impl_->Complete(options); },
                               options.undo_to_caller_mark);
}

void Agent::Recycle(Turn turn) {
  std::lock_guard<std::mutex> lock(impl_->mu_);
  impl_->context_->Recycle(std::move(turn.body));
}

void Agent::RecycleUnchanged(Turn turn) {
  std::lock_guard<std::mutex> lock(impl_->mu_);
  impl_->context_->Recycle(std::move(turn.body), turn.render_serial);
}

Status Agent::DispatchToolCalls(RunResult* stats) {
  std::lock_guard<std::mutex> lock(impl_->mu_);
  return impl_->Dispatch(stats);
}

StatusOr<RunResult> Agent::Run(std::string user_message, const RunOptions& options) {
  std::lock_guard<std::mutex> lock(impl_->mu_);
  if (options.max_turns <= 0) {
    return InvalidArgumentError("RunOptions::max_turns must be positive, got " +
                                std::to_string(options.max_turns));
  }
  return impl_->Undoable<RunResult>(
      [&] { return impl_->RunLocked(std::move(user_message), options); });
}

StatusOr<CachePrediction> Agent::PredictCachedTokens() const {
  std::lock_guard<std::mutex> lock(impl_->mu_);
  return impl_->Predict();
}

StatusOr<RequestPreview> Agent::PreviewRequest() const {
  std::lock_guard<std::mutex> lock(impl_->mu_);
  return impl_->PreviewRequest();
}

StatusOr<int64_t> Agent::InputTokens() const {
  std::lock_guard<std::mutex> lock(impl_->mu_);
  return impl_->InputTokens();
}

StatusOr<RecallPage> Agent::Recall(std::string_view recall_id, size_t offset,
                                   size_t max_tokens) const {
  std::lock_guard<std::mutex> lock(impl_->mu_);
  return impl_->Recall(recall_id, offset, max_tokens);
}

StatusOr<std::unique_ptr<Agent>> Agent::Fork(std::string task, const ForkOptions& options) {
  std::lock_guard<std::mutex> lock(impl_->mu_);
  return impl_->ForkLocked(std::move(task), options);
}

Context& Agent::context() { return *impl_->context_; }
const Context& Agent::context() const { return *impl_->context_; }
Store* Agent::store() const { return impl_->shared_.store; }
int64_t Agent::record_write_failures() const { return impl_->write_failures_.load(); }

}  // namespace strata
