// Agent::Impl construction (agent_impl.h): the configuration checked and turned into what it names.
#include <chrono>
#include <cstdlib>
#include <iterator>
#include <utility>

#include "agent/agent_impl.h"
#include "agent/agent_services.h"
#include "strata/builtin_policies.h"
#include "strata/http_transport.h"
#include "strata/isolation.h"
#include "strata/tokenizer_spec.h"
#include "strata/transport.h"

namespace strata {
namespace {

// Role markers of the GLM-5 template: the places a prompt may be cut for incremental encoding.
const char* const kGlmMarkers[] = {"<|system|>", "<|user|>", "<|assistant|>", "<|observation|>"};

StatusOr<std::unique_ptr<ChatTemplate>> MakeTemplate(const std::string& name) {
  if (name.empty()) return std::unique_ptr<ChatTemplate>();
  StatusOr<std::unique_ptr<ChatTemplate>> made = MakeChatTemplate(name);
  if (!made.ok()) {
    return InvalidArgumentError("chat_template: " + made.status().message() +
                                " (or \"\" for none)");
  }
  return made;
}

// The GLM templates (glm-5.3, its alias glm5, glm-4.7) open every turn with a role marker.
bool IsGlmTemplate(const std::string& name) {
  return name == "glm5" || name == "glm-5.3" || name == "glm-4.7";
}

std::string EnvOrEmpty(const std::string& name) {
  if (name.empty()) return "";
  const char* value = std::getenv(name.c_str());
  return value == nullptr ? "" : value;
}

// Pieces shared by an agent and its forks, owned by whoever created them. shared_ptr: a forked
// child may outlive its parent (e.g. a sidecar closes the parent first) and keeps using the

}  // namespace

Agent::Impl::Shared Agent::Impl::SharedFrom(const AgentServices& services) {
  Shared shared;
  shared.transport = services.transport;
  shared.store = services.store;
  shared.summarizer = services.summarizer;
  shared.policy = services.policy;
  shared.tokenizer = services.tokenizer;
  shared.clock = services.clock != nullptr ? services.clock : SystemClock();
  return shared;
}

StatusOr<std::unique_ptr<Agent::Impl>> Agent::Impl::New(AgentConfig config, Shared shared,
                                                        ContextOptions* options) {
  auto impl = std::make_unique<Impl>();
  impl->config_ = std::move(config);
  impl->shared_ = std::move(shared);
  STRATA_RETURN_IF_ERROR(impl->Init(options));
  return impl;
}

Status Agent::Impl::Init(ContextOptions* options) {
  const AgentConfig& c = config_;
  if (c.identity.id.empty())
    return InvalidArgumentError("identity.id is required (the agent's id)");
  if (shared_.tokenizer == nullptr) {
    STRATA_ASSIGN_OR_RETURN(std::unique_ptr<Tokenizer> made, MakeTokenizer(c.tokenizer));
    shared_.tokenizer_owner = std::move(made);  // shared with forks, which need no reload
    shared_.tokenizer = shared_.tokenizer_owner.get();
  } else if (shared_.tokenizer_owner == nullptr) {  // injected: it must be the configured one
    STRATA_RETURN_IF_ERROR(agent_internal::CheckSharedTokenizer(*shared_.tokenizer, c.tokenizer));
  }
  tokenizer_ = shared_.tokenizer;
  STRATA_ASSIGN_OR_RETURN(template_, MakeTemplate(c.chat_template));
  std::vector<std::string> markers;
  if (IsGlmTemplate(c.chat_template))
    markers.assign(std::begin(kGlmMarkers), std::end(kGlmMarkers));
  prompt_tokens_ = std::make_unique<agent_internal::PromptTokens>(tokenizer_, markers);
  if (template_) {
    counter_ = std::make_unique<agent_internal::IncrementalRequestCounter>(
        template_.get(), tokenizer_, prompt_tokens_.get());
  }
  if (shared_.summarizer == nullptr) {
    own_summarizer_ = MakeExtractiveSummarizer();
    shared_.summarizer = own_summarizer_.get();
  }
  STRATA_ASSIGN_OR_RETURN(std::unique_ptr<CompactionPolicy> policy,
                          agent_internal::MakeConfiguredPolicy(c.policy, shared_.summarizer));
  if (shared_.policy != nullptr) policy = agent_internal::BorrowPolicy(shared_.policy);
  auto goal_policy = std::make_unique<agent_internal::GoalPolicy>(std::move(policy));
  goal_policy_ = goal_policy.get();
  policy_ = std::move(goal_policy);
  if (c.budget.enforce) {
    StatusOr<Budget> budget = ResolveBudget(c.budget);
    if (!budget.ok()) return budget.status();
    budget_ = *budget;
  }
  STRATA_ASSIGN_OR_RETURN(backend_, ParseBackend(c.endpoint.backend));
  if (c.cache.block_tokens == 0 || c.cache.bytes_per_token == 0) {
    return InvalidArgumentError("cache.block_tokens and cache.bytes_per_token must be > 0");
  }
  if (c.recall.max_share_of_target <= 0 || c.recall.max_share_of_target > 1) {
    return InvalidArgumentError("recall.max_share_of_target " +
                                std::to_string(c.recall.max_share_of_target) +
                                " is outside (0, 1]");
  }
  if (c.endpoint.max_output_tokens < 0) {
    return InvalidArgumentError("endpoint.max_output_tokens must not be negative");
  }
  if (shared_.transport == nullptr && !c.endpoint.base_url.empty()) {
    HttpTransportOptions http;
    http.base_url = c.endpoint.base_url;
    if (!c.endpoint.api_key_env.empty()) {
      http.api_key = EnvOrEmpty(c.endpoint.api_key_env);
      if (http.api_key.empty()) {
        return FailedPreconditionError(
            "endpoint.api_key_env names " + c.endpoint.api_key_env +
            ", which is not set in the environment; export it or clear api_key_env");
      }
    }
    http.timeouts.connect = std::chrono::milliseconds(c.endpoint.connect_timeout_ms);
    http.timeouts.first_byte = std::chrono::milliseconds(c.endpoint.first_byte_timeout_ms);
    http.timeouts.idle = std::chrono::milliseconds(c.endpoint.idle_timeout_ms);
    http.timeouts.total = std::chrono::milliseconds(c.endpoint.total_timeout_ms);
    http.retry.max_attempts = c.endpoint.max_attempts;
    http.clock = shared_.clock;
    STRATA_ASSIGN_OR_RETURN(std::unique_ptr<Transport> transport,
                            MakeHttpTransport(std::move(http)));
    shared_.transport_owner = std::move(transport);
    shared_.transport = shared_.transport_owner.get();
  }
  if (shared_.store == nullptr && !c.store_path.empty()) {
    StoreOptions store_options;
    store_options.clock = shared_.clock;
    STRATA_ASSIGN_OR_RETURN(std::unique_ptr<Store> store, OpenStore(c.store_path, store_options));
    shared_.store_owner = std::move(store);
    shared_.store = shared_.store_owner.get();
  }
  salt_ = DeriveCacheSalt(EnvOrEmpty(c.endpoint.deployment_secret_env), IsolationKeyOf(c.identity));
  model_ = std::make_unique<PrefixCacheModel>(c.cache);
  prompts_ = std::make_unique<Prompts>(this);
  ids_ = std::make_unique<turn_internal::RequestIds>(shared_.clock);

  options->agent = c.identity;
  options->render = c.render;
  options->hygiene = c.hygiene;
  options->tokenizer = tokenizer_;
  options->keep_originals = c.keep_originals;
  options->budget = budget_;
  options->compaction = policy_.get();
  options->request_counter = counter_.get();
  options->message_overhead_tokens = c.message_overhead_tokens;
  return Status::Ok();
}

void Agent::Impl::AttachJournal(ContextOptions* options) {
  if (shared_.store == nullptr) return;
  journal_ =
      std::make_unique<agent_internal::AgentJournal>(shared_.store->Journal(config_.identity.id));
  options->journal = journal_.get();
}

}  // namespace strata
