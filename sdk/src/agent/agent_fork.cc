// Agent::Fork and Agent::Join (agent_impl.h): a child agent with byte-identical stable layers, and
// its result folded back into the parent with the recall ids of what it shortened.
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <utility>

#include "agent/agent_impl.h"
#include "agent/fork_id.h"
#include "strata/builtin_policies.h"
#include "strata/store.h"
#include "core/utf8.h"

namespace strata {
namespace {

using json = nlohmann::json;
using internal::Utf8Floor;

}  // namespace

StatusOr<std::unique_ptr<Agent>> Agent::Impl::ForkLocked(std::string task,
                                                         const ForkOptions& options) {
  Impl& parent = *this;
  AgentConfig config = parent.config_;
  const int first_number = parent.forks_ + 1;
  STRATA_ASSIGN_OR_RETURN(config.identity.id,
                          agent_internal::ForkChildId(config.identity.id, options, first_number));
  if (options.budget) config.budget = *options.budget;
  Shared shared = parent.shared_;  // same endpoint, store and summarizer (shared ownership)
  if (parent.own_summarizer_ != nullptr && shared.summarizer == parent.own_summarizer_.get()) {
    shared.summarizer = nullptr;  // the child makes its own: the parent's dies with the parent
  }
  ContextOptions context_options;
  STRATA_ASSIGN_OR_RETURN(std::unique_ptr<Impl> impl,
                          Impl::New(std::move(config), std::move(shared), &context_options));
  Store* store = impl->shared_.store;
  if (store != nullptr) {
    Status created = store->CreateAgent(context_options);
    // A default id taken by a fork of an earlier process: take the next number.
    for (int n = parent.forks_ + 2;
         options.id.empty() && created.code() == StatusCode::kAlreadyExists &&
         n < parent.forks_ + 1000;
         ++n) {
      STRATA_ASSIGN_OR_RETURN(impl->config_.identity.id,
                              agent_internal::ForkChildId(parent.config_.identity.id, options, n));
      context_options.agent.id = impl->config_.identity.id;
      created = store->CreateAgent(context_options);
    }
    if (created.code() == StatusCode::kAlreadyExists && !options.id.empty()) {
      return AlreadyExistsError("Fork: ForkOptions::id \"" + options.id + "\" is taken in " +
                                store->path() +
                                "; choose another id, or leave it empty for the next free \"" +
                                parent.config_.identity.id + ".fork-<n>\"");
    }
    STRATA_RETURN_IF_ERROR(created);
  }
  const std::string id = impl->config_.identity.id;
  if (store != nullptr) {
    STRATA_RETURN_IF_ERROR(
        store->PutAgentState(id, Impl::kConfigKey, AgentConfigToJson(impl->config_)));
    STRATA_RETURN_IF_ERROR(
        store->PutAgentState(id, Impl::kTokenizerNameKey, impl->tokenizer_->Name()));
    impl->AttachJournal(&context_options);
  }
  auto undo = [&](Status status) {
    if (store != nullptr) store->DeleteAgent(id).IgnoreError();
    return status;
  };
  StatusOr<std::unique_ptr<Context>> context = Context::Create(context_options);
  if (!context.ok()) return undo(context.status());
  impl->context_ = std::move(context).value();
  // Byte-identical stable layers: the same system prompts, tools and documents, in the same order.
  std::vector<std::string> prompts;
  std::string tools = "[";
  std::vector<std::pair<Layer, Document>> documents;
  for (const Segment& s : parent.context_->Segments()) {
    if (s.layer == Layer::kSystem) prompts.push_back(s.content);
    if (s.layer == Layer::kTools) tools += (tools.size() > 1 ? "," : "") + s.content;
    if (s.layer == Layer::kIndex || s.layer == Layer::kDocs) {
      documents.push_back({s.layer, Document{s.name, s.content, s.version, s.order}});
    }
  }
  tools += "]";
  Status status = impl->context_->SetSystemPrompts(std::move(prompts));
  if (status.ok() && tools != "[]") status = impl->context_->SetTools(tools);
  for (auto& [layer, document] : documents) {
    if (!status.ok()) break;
    status = impl->context_->AddDocument(layer, std::move(document)).status();
  }
  if (status.ok()) status = impl->context_->AppendUser(std::move(task)).status();
  if (!status.ok()) return undo(status);
  impl->tools_ = parent.tools_;
  impl->tool_order_ = parent.tool_order_;
  // The child starts from the parent's view of the server's cache (same salt, same endpoint).
  if (!parent.reference_.hashes.empty()) {
    PromptBlocks blocks;
    blocks.salt = parent.salt_;
    blocks.block_tokens = parent.config_.cache.block_tokens;
    blocks.hashes = parent.reference_.hashes;
    impl->model_->Insert(blocks);
  }
  ++parent.forks_;
  return std::unique_ptr<Agent>(new Agent(std::move(impl)));
}

StatusOr<std::string> Agent::Join(Agent& child, const JoinOptions& options) {
  if (&child == this) return InvalidArgumentError("Join: an agent cannot join itself");
  std::scoped_lock lock(impl_->mu_, child.impl_->mu_);
  Impl& parent = *impl_;
  Impl& kid = *child.impl_;
  if (!parent.context_->OpenToolCalls().empty()) {
    return FailedPreconditionError("Join: agent \"" + parent.config_.identity.id +
                                   "\" has unanswered tool calls; answer them before joining \"" +
                                   kid.config_.identity.id + "\"");
  }
  std::vector<Segment> segments = kid.context_->Segments();
  std::string task;
  std::vector<const Segment*> history;
  for (const Segment& s : segments) {
    if (s.layer != Layer::kHistory) continue;
    if (task.empty() && s.kind == SegmentKind::kUser) task = s.content;
    if (s.state != SegmentState::kEvicted && s.state != SegmentState::kSummarized)
      history.push_back(&s);
  }
  std::string body;
  const char* what = "final answer";
  if (!history.empty() && history.back()->kind == SegmentKind::kAssistant &&
      !history.back()->content.empty()) {
    body = history.back()->content;
  } else {
    what = "summary (it ended without a final answer)";
    // The summary request continues the child's current request, which starts with its last
    // request (cached on the server) and holds every message since; its records go to the child's
    // store.
    std::unique_ptr<RecordSink> records;
    if (kid.shared_.store != nullptr) records = MakeStoreRecordSink(*kid.shared_.store);
    BuiltRequest current;
    const SummaryRequestContext previous =
        kid.CurrentRequest(kid.ids_->Next(kid.config_.identity.id), records.get(), &current);
    STRATA_ASSIGN_OR_RETURN(SummaryResult summary,
                            kid.shared_.summarizer->SummarizeFor(history, options.max_tokens,
                                                                 *kid.tokenizer_, &previous));
    body = std::move(summary.text);
  }
  // Validated: non-empty, within max_tokens (cut at a line end when longer).
  if (body.empty())
    return FailedPreconditionError("Join: agent \"" + kid.config_.identity.id +
                                   "\" has nothing to fold back");
  if (parent.tokenizer_->Count(body) > options.max_tokens) {
    size_t keep = Utf8Floor(body, options.max_tokens * 3);
    while (keep > 0 &&
           parent.tokenizer_->Count(std::string_view(body).substr(0, keep)) > options.max_tokens) {
      keep = Utf8Floor(body, keep * 9 / 10);
    }
    body = body.substr(0, keep) + "\n[cut to " + std::to_string(options.max_tokens) + " tokens]";
  }
  std::vector<std::string> recall_ids;
  std::map<std::string, std::string> originals;
  for (const Segment& s : segments) {
    if (s.recall_id.empty() || originals.count(s.recall_id)) continue;
    StatusOr<std::string> original = kid.OriginalOf(s.recall_id);
    if (!original.ok()) continue;
    recall_ids.push_back(s.recall_id);
    originals[s.recall_id] = *original;
  }
  for (const auto& [rid, original] : kid.joined_originals_) {
    if (originals.emplace(rid, original).second) recall_ids.push_back(rid);
  }
  if (task.size() > 200) task = task.substr(0, Utf8Floor(task, 200)) + "...";
  std::string message = "Result of the subtask \"" + task + "\" (agent " + kid.config_.identity.id +
                        ", " + what + "):\n" + body;
  if (!recall_ids.empty()) {
    message += "\n[recall ids of the subtask's shortened content:";
    for (const std::string& rid : recall_ids) message += " " + rid;
    message += "]";
  }
  // Persist the originals first: a message naming recall ids must be answerable after a restart.
  if (parent.shared_.store != nullptr && !originals.empty()) {
    json ids = json::array();
    for (const auto& [rid, original] : parent.joined_originals_) ids.push_back(rid);
    for (const auto& [rid, original] : originals) {
      if (!parent.joined_originals_.count(rid)) ids.push_back(rid);
      STRATA_RETURN_IF_ERROR(parent.SaveState(Impl::kOriginalPrefix + rid, original));
    }
    STRATA_RETURN_IF_ERROR(parent.SaveState(Impl::kJoinedKey, ids.dump()));
  }
  STRATA_ASSIGN_OR_RETURN(std::string segment_id, parent.context_->AppendUser(std::move(message)));
  for (auto& [rid, original] : originals) parent.joined_originals_[rid] = std::move(original);
  return segment_id;
}

}  // namespace strata
