// Agent::Create and Agent::Open, and the state an agent keeps in the store beside its context
// (agent_impl.h).
#include <nlohmann/json.hpp>
#include <utility>

#include "agent/agent_impl.h"
#include "agent/agent_services.h"
#include "agent/cache_state.h"

namespace strata {

using json = nlohmann::json;

Status Agent::Impl::SaveState(const std::string& key, const std::string& value) {
  if (shared_.store == nullptr) return Status::Ok();
  if (batch_ != nullptr && batch_->active()) {
    batch_->writes().state.emplace_back(key, value);
    return Status::Ok();
  }
  return shared_.store->PutAgentState(config_.identity.id, key, value);
}

Status Agent::Impl::SaveProtections() {
  json list = json::array();
  for (const Protection& p : protections_) list.push_back({p.segment_id, p.until_turn});
  return SaveState(Impl::kProtectKey, list.dump());
}

Status Agent::Impl::LoadPersistentState() {
  Store* store = shared_.store;
  const std::string& id = config_.identity.id;
  STRATA_ASSIGN_OR_RETURN(std::optional<std::string> cache,
                          store->GetAgentState(id, Impl::kCacheKey));
  PromptBlocks blocks;
  bool chunked = false;
  const auto read_chunk = [&](char what, size_t index) {
    return store->GetAgentState(id, agent_internal::ChunkKey(Impl::kCacheKey, what, index));
  };
  if (cache) {
    STRATA_ASSIGN_OR_RETURN(
        bool decoded, agent_internal::DecodeCacheState(*cache, salt_, config_.cache.block_tokens,
                                                       &blocks, &reference_, read_chunk, &chunked));
    if (decoded) {
      model_->Insert(blocks);
      // What the chunks hold now: the next turn writes from the first entry that changes.
      if (chunked) cache_writer_.Loaded(blocks.hashes, reference_.signatures);
    }
  }
  STRATA_ASSIGN_OR_RETURN(std::optional<std::string> protections,
                          store->GetAgentState(id, Impl::kProtectKey));
  if (protections) {
    json list = json::parse(*protections, nullptr, false);
    if (list.is_array()) {
      for (const json& p : list) {
        if (p.is_array() && p.size() == 2)
          protections_.push_back({p[0].get<std::string>(), p[1].get<int64_t>()});
      }
    }
  }
  STRATA_ASSIGN_OR_RETURN(std::optional<std::string> joined,
                          store->GetAgentState(id, Impl::kJoinedKey));
  if (joined) {
    json ids = json::parse(*joined, nullptr, false);
    if (ids.is_array()) {
      for (const json& rid : ids) {
        std::string key = Impl::kOriginalPrefix + rid.get<std::string>();
        STRATA_ASSIGN_OR_RETURN(std::optional<std::string> original, store->GetAgentState(id, key));
        if (original) joined_originals_[rid.get<std::string>()] = *original;
      }
    }
  }
  return Status::Ok();
}

StatusOr<std::unique_ptr<Agent>> Agent::Create(AgentConfig config, AgentServices services) {
  // A configuration built in code gets the ranges a parsed one gets (AgentConfigFromJson).
  STRATA_RETURN_IF_ERROR(CheckAgentConfigRanges(config));
  Impl::Shared shared = Impl::SharedFrom(services);
  ContextOptions options;
  STRATA_ASSIGN_OR_RETURN(std::unique_ptr<Impl> impl,
                          Impl::New(std::move(config), std::move(shared), &options));
  // Validate the context options before anything is written.
  STRATA_ASSIGN_OR_RETURN(std::unique_ptr<Context> probe, Context::Create(options));
  probe.reset();
  Store* store = impl->shared_.store;
  const std::string& id = impl->config_.identity.id;
  if (store != nullptr) {
    if (Status created = store->CreateAgent(options); !created.ok()) {
      if (created.code() != StatusCode::kAlreadyExists) return created;
      return AlreadyExistsError("agent \"" + id + "\" already exists in " + store->path() +
                                ": continue it with Agent::Open, or choose another "
                                "identity.id (Store::DeleteAgent removes the stored one)");
    }
    Status saved = store->PutAgentState(id, Impl::kConfigKey, AgentConfigToJson(impl->config_));
    if (saved.ok())
      saved = store->PutAgentState(id, Impl::kTokenizerNameKey, impl->tokenizer_->Name());
    if (!saved.ok()) {
      store->DeleteAgent(id).IgnoreError();
      return saved;
    }
    impl->AttachJournal(&options);
  }
  StatusOr<std::unique_ptr<Context>> context = Context::Create(options);
  if (!context.ok()) {
    if (store != nullptr) store->DeleteAgent(id).IgnoreError();
    return context.status();
  }
  impl->context_ = std::move(context).value();
  if (impl->config_.recall.expose_tool) {
    STRATA_RETURN_IF_ERROR(impl->context_->SetTools(impl->ToolsJson()));
  }
  return std::unique_ptr<Agent>(new Agent(std::move(impl)));
}

StatusOr<std::unique_ptr<Agent>> Agent::Open(const std::string& store_path, std::string_view id,
                                             OpenOptions options) {
  StoreOptions store_options;
  store_options.create_if_missing = false;
  store_options.clock = options.services.clock;
  StatusOr<std::unique_ptr<Store>> store = OpenStore(store_path, store_options);
  if (store.status().code() == StatusCode::kNotFound) {
    return NotFoundError("Agent::Open: no store at " + store_path +
                         "; give the store_path of an agent made with Agent::Create");
  }
  if (!store.ok()) return store.status();
  std::shared_ptr<Store> owner = std::move(store).value();
  options.services.store = owner.get();
  STRATA_ASSIGN_OR_RETURN(std::unique_ptr<Agent> agent, Open(*owner, id, std::move(options)));
  agent->impl_->shared_.store_owner = std::move(owner);
  return agent;
}

StatusOr<std::unique_ptr<Agent>> Agent::Open(Store& store, std::string_view id,
                                             OpenOptions options) {
  // One writer per agent of a shared store: the lease is taken before anything is read, so what
  // is read is the last acknowledged state (a read-only store goes on without).
  if (StatusOr<AgentLease> lease = store.shared() ? store.AcquireLease(id) : AgentLease{};
      !lease.ok() && (lease.status().code() == StatusCode::kUnavailable ||
                      lease.status().code() == StatusCode::kAborted)) {
    return lease.status();
  }
  STRATA_ASSIGN_OR_RETURN(StoredAgent stored, store.GetAgent(id));
  STRATA_ASSIGN_OR_RETURN(std::optional<std::string> config_json,
                          store.GetAgentState(id, Impl::kConfigKey));
  if (!config_json) {
    return FailedPreconditionError(
        "agent \"" + std::string(id) + "\" in " + store.path() +
        " has no stored agent configuration (it was made with CreateContext, not "
        "Agent::Create); reopen it with OpenContext");
  }
  StatusOr<AgentConfig> parsed = AgentConfigFromJson(*config_json);
  if (!parsed.ok()) {
    return DataLossError("stored configuration of agent \"" + std::string(id) +
                         "\" does not parse: " + parsed.status().message());
  }
  AgentConfig config = std::move(parsed).value();
  bool retokenized = false;
  if (!options.tokenizer.empty() && options.tokenizer != config.tokenizer) {
    if (!options.retokenize) {
      return FailedPreconditionError(
          "agent \"" + std::string(id) + "\" was stored with tokenizer \"" + config.tokenizer +
          "\", not \"" + options.tokenizer +
          "\"; open it without a tokenizer to keep the stored one, or set "
          "OpenOptions::retokenize to recount every segment with the new one");
    }
    config.tokenizer = options.tokenizer;
    retokenized = true;
  }
  if (!options.chat_template.empty() && options.chat_template != config.chat_template) {
    if (!options.retokenize) {
      return FailedPreconditionError(
          "agent \"" + std::string(id) + "\" was stored with chat template \"" +
          config.chat_template + "\", not \"" + options.chat_template +
          "\"; open it without a template to keep the stored one, or set "
          "OpenOptions::retokenize");
    }
    config.chat_template = options.chat_template;
    retokenized = true;
  }
  if (options.endpoint) config.endpoint = *options.endpoint;
  config.store_path = store.path();
  Impl::Shared shared = Impl::SharedFrom(options.services);
  shared.store = &store;
  ContextOptions context_options;
  STRATA_ASSIGN_OR_RETURN(std::unique_ptr<Impl> impl,
                          Impl::New(std::move(config), std::move(shared), &context_options));
  // The tokenizer must be the one that counted the stored segments, unless recounting.
  STRATA_ASSIGN_OR_RETURN(std::optional<std::string> counted_with,
                          store.GetAgentState(id, Impl::kTokenizerNameKey));
  const std::string counted = counted_with ? *counted_with : stored.tokenizer_name;
  if (!retokenized && !counted.empty() && counted != impl->tokenizer_->Name()) {
    return FailedPreconditionError(
        "agent \"" + std::string(id) + "\" was counted with tokenizer " + counted +
        " but its configured tokenizer \"" + impl->config_.tokenizer + "\" is now " +
        impl->tokenizer_->Name() + " (the file changed?); set OpenOptions::retokenize to recount");
  }
  STRATA_ASSIGN_OR_RETURN(ContextSnapshot snapshot, store.LoadSnapshot(id));
  if (retokenized) {
    const Tokenizer& tok = *impl->tokenizer_;
    for (Segment& s : snapshot.segments) {
      size_t tokens = tok.Count(s.content) + tok.Count(s.reasoning);
      for (const ToolCall& call : s.tool_calls)
        tokens += tok.Count(call.name) + tok.Count(call.arguments);
      s.tokens = tokens;
    }
    ContextChange change;
    change.upserted = snapshot.segments;
    change.turn = snapshot.turn;
    STRATA_RETURN_IF_ERROR(store.ApplyChange(id, change));
    STRATA_RETURN_IF_ERROR(
        store.PutAgentState(id, Impl::kConfigKey, AgentConfigToJson(impl->config_)));
    STRATA_RETURN_IF_ERROR(
        store.PutAgentState(id, Impl::kTokenizerNameKey, impl->tokenizer_->Name()));
  } else if (options.endpoint) {
    STRATA_RETURN_IF_ERROR(
        store.PutAgentState(id, Impl::kConfigKey, AgentConfigToJson(impl->config_)));
  }
  impl->AttachJournal(&context_options);
  StatusOr<std::unique_ptr<Context>> context =
      Context::Restore(std::move(context_options), std::move(snapshot));
  if (!context.ok()) {
    return DataLossError("stored context of agent \"" + std::string(id) + "\" in " + store.path() +
                         " does not restore: " + context.status().message());
  }
  impl->context_ = std::move(context).value();
  impl->LoadToolsFromContext();
  STRATA_RETURN_IF_ERROR(impl->LoadPersistentState());
  return std::unique_ptr<Agent>(new Agent(std::move(impl)));
}

}  // namespace strata
