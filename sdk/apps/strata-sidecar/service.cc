#include "service.h"

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <thread>

#include "call_watcher.h"
#include "core/utf8.h"
#include "delta_joiner.h"
#include "service_convert.h"
#include "strata/client.h"

namespace strata::sidecar {
namespace {

using json = nlohmann::json;


void FillInfo(const StoredAgent& a, const std::string& local_id, v1::AgentInfo* out) {
  out->set_agent_id(local_id);
  out->set_created_unix_ms(a.created_unix_ms);
  out->set_updated_unix_ms(a.updated_unix_ms);
  out->set_turn(a.turn);
  out->set_segments(a.segments);
  out->set_tokens(a.tokens);
  out->set_requests(a.requests);
  out->set_compactions(a.compactions);
}

// The configuration document as the client sees it: its id within the tenant, without what
// belongs to the sidecar (the upstream's address, the names of its secrets' variables, the store).
// Its tokenizer is shown by the allow-list's name, never as the operator's path.
std::string ClientConfigJson(const AgentRegistry& registry, const Agent& agent,
                             const std::string& local_id) {
  json doc = json::parse(agent.ConfigJson(), nullptr, false);
  if (!doc.is_object()) return "{}";
  if (doc.contains("identity") && doc["identity"].is_object()) doc["identity"]["id"] = local_id;
  if (doc.contains("tokenizer") && doc["tokenizer"].is_string()) {
    doc["tokenizer"] = registry.ShownTokenizer(doc["tokenizer"].get<std::string>());
  }
  doc.erase("store_path");
  if (doc.contains("endpoint") && doc["endpoint"].is_object()) {
    for (const char* key : {"base_url", "api_key_env", "deployment_secret_env"}) {
      doc["endpoint"].erase(key);
    }
  }
  return doc.dump();
}

StatusOr<Layer> DocumentLayerOf(v1::DocumentLayer layer) {
  switch (layer) {
    case v1::DOCUMENT_LAYER_INDEX:
      return Layer::kIndex;
    case v1::DOCUMENT_LAYER_DOCS:
      return Layer::kDocs;
    default:
      return InvalidArgumentError("layer " + std::to_string(static_cast<int>(layer)) +
                                  " is not a document layer: use DOCUMENT_LAYER_INDEX or "
                                  "DOCUMENT_LAYER_DOCS");
  }
}

Status RequireNonNegative(int64_t value, const char* field) {
  if (value >= 0) return Status::Ok();
  return InvalidArgumentError(std::string(field) + " " + std::to_string(value) + " is negative");
}

// A paged call's page_size: 1-1000, 0 meaning 100.
StatusOr<int64_t> PageSize(int32_t requested) {
  const int64_t page_size = requested == 0 ? 100 : requested;
  if (page_size < 1 || page_size > 1000) {
    return InvalidArgumentError("page_size " + std::to_string(requested) +
                                " is outside 1-1000 (0: 100)");
  }
  return page_size;
}

// A paged call's page_token: "" (the start) or a next_page_token this service returned.
StatusOr<int64_t> PageOffset(const std::string& token) {
  if (token.empty()) return 0;
  if (token.size() > 12 || token.find_first_not_of("0123456789") != std::string::npos) {
    return InvalidArgumentError("page_token \"" + internal::Utf8Prefix(token, 40, "") +
                                "\" is not one this service returned (use next_page_token)");
  }
  return std::stoll(token);
}

// The agent's tools array with `tools_json`'s tools replacing its own (context_recall kept first).
StatusOr<std::string> MergedToolsJson(Agent& agent, std::string_view tools_json) {
  json tools = json::parse(tools_json.begin(), tools_json.end(), nullptr, false);
  if (tools.is_discarded() || !tools.is_array()) {
    return InvalidArgumentError(
        "tools_json is not a JSON array of OpenAI tools "
        "([{\"type\":\"function\",\"function\":{\"name\":...}}])");
  }
  json merged = json::array();
  for (const Segment& s : agent.context().Segments()) {
    if (s.layer != Layer::kTools) continue;
    json tool = json::parse(s.content, nullptr, false);
    if (tool.is_object() && tool.contains("function") &&
        tool["function"].value("name", "") == "context_recall") {
      merged.push_back(tool);
    }
  }
  std::set<std::string> names;
  for (size_t i = 0; i < tools.size(); ++i) {
    const json& tool = tools[i];
    std::string at = "tools_json[" + std::to_string(i) + "]";
    if (!tool.is_object() || !tool.contains("function") || !tool["function"].is_object()) {
      return InvalidArgumentError(at + " is not a tool object with a \"function\" object");
    }
    const json& function = tool["function"];
    if (!function.contains("name") || !function["name"].is_string() ||
        function["name"].get<std::string>().empty()) {
      return InvalidArgumentError(at + ".function.name is missing or not a non-empty string");
    }
    std::string name = function["name"].get<std::string>();
    if (name == "context_recall") {
      return InvalidArgumentError(at + ": \"context_recall\" is the agent's own tool");
    }
    if (!names.insert(name).second) {
      return InvalidArgumentError(at + ": a second tool named \"" + name + "\"");
    }
    if (function.contains("parameters") && !function["parameters"].is_object()) {
      return InvalidArgumentError(at + ".function.parameters must be a JSON Schema object");
    }
    merged.push_back({{"type", "function"}, {"function", function}});
  }
  return merged.dump();
}

}  // namespace

struct ContextServiceImpl::InFlight {
  std::mutex mu;
  std::map<std::string, int64_t, std::less<>> calls;  // tenant -> calls in progress; guarded by mu
  std::set<CancellationToken*> completions;           // guarded by mu
  bool cancel_all = false;                            // guarded by mu
  bool draining = false;                              // guarded by mu
  int64_t total = 0;  // calls in progress, every tenant's; guarded by mu
  std::condition_variable idle;  // notified when `total` drops to 0
  // Cancels the Completes whose client ended the call or the server stopped waiting for
  // (IsCancelled), checked every 100 ms: on the synchronous server each IsCancelled polls the
  // call's completion queue, and checking every call 50 times a second took about 7% of the
  // sidecar's CPU at 32 concurrent calls; a tenth of a second is still far below a prefill.
  CallWatcher<grpc::ServerContext*> departures{
      [](const std::vector<grpc::ServerContext*>& calls) {
        std::vector<size_t> left;
        for (size_t i = 0; i < calls.size(); ++i) {
          if (calls[i]->IsCancelled()) left.push_back(i);
        }
        return left;
      },
      std::chrono::milliseconds(100)};

  // One of the tenant's max_concurrent_calls slots (released by the returned object), or
  // RESOURCE_EXHAUSTED naming the limit.
  StatusOr<std::shared_ptr<void>> BeginCall(const TenantConfig& tenant) {
    std::lock_guard<std::mutex> lock(mu);
    int64_t& n = calls[tenant.name];
    const int64_t max = tenant.limits.max_concurrent_calls;
    if (max > 0 && n >= max) {
      return ResourceExhaustedError(
          "tenant \"" + tenant.name + "\" has " + std::to_string(n) +
          " calls in progress, its limit max_concurrent_calls = " + std::to_string(max) +
          ": retry when one ends, or raise the tenant's limits.max_concurrent_calls");
    }
    ++n;
    ++total;
    const std::string name = tenant.name;
    return std::shared_ptr<void>(nullptr, [this, name](void*) {
      std::lock_guard<std::mutex> lock(mu);
      auto it = calls.find(name);
      if (it != calls.end() && --it->second <= 0) calls.erase(it);
      if (--total == 0) idle.notify_all();
    });
  }

  bool Draining() {
    std::lock_guard<std::mutex> lock(mu);
    return draining;
  }

  // Registers a Complete's token for CancelAll until the returned object is destroyed.
  std::shared_ptr<void> Register(CancellationToken* token) {
    std::lock_guard<std::mutex> lock(mu);
    if (cancel_all) token->Cancel();
    completions.insert(token);
    return std::shared_ptr<void>(nullptr, [this, token](void*) {
      std::lock_guard<std::mutex> lock(mu);
      completions.erase(token);
    });
  }
};

grpc::Status ToGrpcStatus(const Status& status) {
  if (status.ok()) return grpc::Status::OK;
  // The message may quote outside text; gRPC clients decode it as UTF-8.
  return grpc::Status(static_cast<grpc::StatusCode>(static_cast<int>(status.code())),
                      internal::ToValidUtf8(status.message()));
}

// One call: its authenticated tenant; reports errors to the hooks.
struct ContextServiceImpl::Call {
  ContextServiceImpl* service;
  grpc::ServerContext* context;
  const TenantConfig* tenant = nullptr;

  Status Authorize(const google::protobuf::Message& request) {
    std::string_view authorization;
    const auto& metadata = context->client_metadata();
    auto it = metadata.find("authorization");
    if (it != metadata.end())
      authorization = std::string_view(it->second.data(), it->second.size());
    STRATA_ASSIGN_OR_RETURN(tenant, service->authenticator_->Authenticate(authorization));
    const int64_t size = static_cast<int64_t>(request.ByteSizeLong());
    if (size > tenant->limits.max_request_bytes) {
      return ResourceExhaustedError("the request is " + std::to_string(size) +
                                    " bytes, above the tenant's limit "
                                    "max_request_bytes = " +
                                    std::to_string(tenant->limits.max_request_bytes));
    }
    return Status::Ok();
  }

  grpc::Status Done(const Status& status) {
    if (!status.ok() && service->hooks_.on_error) {
      service->hooks_.on_error(tenant != nullptr ? tenant->name : "", status.code());
    }
    return ToGrpcStatus(status);
  }

  // Authorizes, takes one of the tenant's call slots, then runs fn(tenant).
  template <typename Fn>
  grpc::Status Run(const google::protobuf::Message& request, Fn&& fn) {
    Status status = Authorize(request);
    if (status.ok()) {
      StatusOr<std::shared_ptr<void>> slot = service->in_flight_->BeginCall(*tenant);
      status = slot.ok() ? fn(*tenant) : slot.status();
    }
    return Done(status);
  }

  // Authorizes, leases `agent_id`, then runs fn(lease).
  template <typename Fn>
  grpc::Status WithAgent(const google::protobuf::Message& request, const std::string& agent_id,
                         Fn&& fn) {
    return Run(request, [&](const TenantConfig& t) -> Status {
      STRATA_ASSIGN_OR_RETURN(AgentLease lease, service->registry_->Acquire(t, agent_id));
      return fn(lease);
    });
  }
};

ContextServiceImpl::ContextServiceImpl(AgentRegistry* registry, const Authenticator* authenticator,
                                       ServiceHooks hooks)
    : registry_(registry),
      authenticator_(authenticator),
      hooks_(std::move(hooks)),
      in_flight_(std::make_unique<InFlight>()) {}
ContextServiceImpl::~ContextServiceImpl() = default;

void ContextServiceImpl::CancelAll() {
  {
    std::lock_guard<std::mutex> lock(in_flight_->mu);
    in_flight_->cancel_all = true;
    for (CancellationToken* token : in_flight_->completions) token->Cancel();
  }
  registry_->CancelWaits();
}

void ContextServiceImpl::BeginDrain() {
  std::lock_guard<std::mutex> lock(in_flight_->mu);
  in_flight_->draining = true;
}

bool ContextServiceImpl::WaitIdle(std::chrono::steady_clock::time_point deadline) {
  std::unique_lock<std::mutex> lock(in_flight_->mu);
  return in_flight_->idle.wait_until(lock, deadline, [this] { return in_flight_->total == 0; });
}

#define STRATA_CALL \
  Call call { this, context }

// ----------------------------------------------------------------------------------- agents

grpc::Status ContextServiceImpl::CreateAgent(grpc::ServerContext* context,
                                             const v1::CreateAgentRequest* request,
                                             v1::AgentInfo* response) {
  STRATA_CALL;
  return call.Run(*request, [&](const TenantConfig& t) -> Status {
    const std::string& id = request->agent_id();
    STRATA_RETURN_IF_ERROR(CheckAgentId(id));
    AgentConfig config;
    std::vector<std::string> prompts;
    if (request->config_case() == v1::CreateAgentRequest::kConfigJson) {
      STRATA_ASSIGN_OR_RETURN(config, registry_->AdoptClientConfig(t, id, request->config_json()));
    } else {
      config = registry_->DefaultConfig(t, id);
      const v1::AgentSpec& spec = request->spec();
      if (!spec.model().empty()) config.render.model = spec.model();
      if (!spec.tokenizer().empty()) {
        StatusOr<std::string> tokenizer = registry_->ResolveTokenizer(spec.tokenizer());
        if (!tokenizer.ok()) return InvalidArgumentError("spec." + tokenizer.status().message());
        config.tokenizer = std::move(tokenizer).value();
      }
      if (!spec.chat_template().empty()) config.chat_template = spec.chat_template();
      STRATA_RETURN_IF_ERROR(RequireNonNegative(spec.window(), "spec.window"));
      if (spec.window() > 0) config.budget.window = spec.window();
      if (!spec.policy().empty()) config.policy.name = spec.policy();
      STRATA_RETURN_IF_ERROR(
          RequireNonNegative(spec.max_output_tokens(), "spec.max_output_tokens"));
      if (spec.max_output_tokens() > 0)
        config.endpoint.max_output_tokens = spec.max_output_tokens();
      config.endpoint.reasoning_effort = spec.reasoning_effort();
      prompts.assign(spec.system_prompts().begin(), spec.system_prompts().end());
    }
    STRATA_ASSIGN_OR_RETURN(AgentLease lease, registry_->Create(t, id, std::move(config)));
    if (!prompts.empty()) {
      Status set = lease.agent().SetSystemPrompts(std::move(prompts));
      if (!set.ok()) {
        // Nothing is left behind on failure.
        lease = AgentLease();
        registry_->Delete(t, id).IgnoreError();
        return Status(set.code(), "spec.system_prompts: " + set.message());
      }
    }
    if (hooks_.on_agents) hooks_.on_agents(t.name, registry_->AgentCount(t));
    response->set_agent_id(id);
    response->set_config_json(ClientConfigJson(*registry_, lease.agent(), id));
    StatusOr<StoredAgent> info = registry_->store().GetAgent(lease.stored_id());
    if (info.ok()) FillInfo(*info, id, response);
    return Status::Ok();
  });
}

grpc::Status ContextServiceImpl::OpenAgent(grpc::ServerContext* context,
                                           const v1::OpenAgentRequest* request,
                                           v1::AgentInfo* response) {
  STRATA_CALL;
  return call.WithAgent(*request, request->agent_id(), [&](AgentLease& lease) -> Status {
    STRATA_ASSIGN_OR_RETURN(StoredAgent info, registry_->store().GetAgent(lease.stored_id()));
    FillInfo(info, lease.id(), response);
    response->set_config_json(ClientConfigJson(*registry_, lease.agent(), lease.id()));
    return Status::Ok();
  });
}

grpc::Status ContextServiceImpl::DeleteAgent(grpc::ServerContext* context,
                                             const v1::DeleteAgentRequest* request,
                                             v1::DeleteAgentResponse*) {
  STRATA_CALL;
  return call.Run(*request, [&](const TenantConfig& t) -> Status {
    STRATA_RETURN_IF_ERROR(registry_->Delete(t, request->agent_id()));
    if (hooks_.on_agents) hooks_.on_agents(t.name, registry_->AgentCount(t));
    return Status::Ok();
  });
}

grpc::Status ContextServiceImpl::ListAgents(grpc::ServerContext* context,
                                            const v1::ListAgentsRequest* request,
                                            v1::ListAgentsResponse* response) {
  STRATA_CALL;
  return call.Run(*request, [&](const TenantConfig& t) -> Status {
    STRATA_ASSIGN_OR_RETURN(std::vector<StoredAgent> agents, registry_->List(t));
    for (const StoredAgent& a : agents) FillInfo(a, a.options.agent.id, response->add_agents());
    return Status::Ok();
  });
}

// ----------------------------------------------------------------------------------- content

grpc::Status ContextServiceImpl::SetSystemPrompt(grpc::ServerContext* context,
                                                 const v1::SetSystemPromptRequest* request,
                                                 v1::MutationResponse* response) {
  STRATA_CALL;
  return call.WithAgent(*request, request->agent_id(), [&](AgentLease& lease) -> Status {
    std::vector<std::string> prompts(request->prompts().begin(), request->prompts().end());
    STRATA_RETURN_IF_ERROR(lease.agent().SetSystemPrompts(std::move(prompts)));
    response->set_input_tokens(static_cast<int64_t>(lease.agent().context().InputTokens()));
    return Status::Ok();
  });
}

grpc::Status ContextServiceImpl::SetTools(grpc::ServerContext* context,
                                          const v1::SetToolsRequest* request,
                                          v1::MutationResponse* response) {
  STRATA_CALL;
  return call.WithAgent(*request, request->agent_id(), [&](AgentLease& lease) -> Status {
    STRATA_ASSIGN_OR_RETURN(std::string merged,
                            MergedToolsJson(lease.agent(), request->tools_json()));
    Status set = lease.agent().context().SetTools(merged);
    if (!set.ok()) return Status(set.code(), "tools_json: " + set.message());
    // The Agent reads its tools from its context when it opens: reopen it from the store.
    STRATA_RETURN_IF_ERROR(registry_->Reopen(lease));
    response->set_input_tokens(static_cast<int64_t>(lease.agent().context().InputTokens()));
    return Status::Ok();
  });
}

grpc::Status ContextServiceImpl::PutDocument(grpc::ServerContext* context,
                                             const v1::PutDocumentRequest* request,
                                             v1::MutationResponse* response) {
  STRATA_CALL;
  return call.WithAgent(*request, request->agent_id(), [&](AgentLease& lease) -> Status {
    STRATA_ASSIGN_OR_RETURN(Layer layer, DocumentLayerOf(request->layer()));
    if (request->name().empty()) return InvalidArgumentError("name: a document needs a name");
    Document doc{request->name(), request->content(), request->version(), request->order()};
    STRATA_ASSIGN_OR_RETURN(std::string id, lease.agent().PutDocument(layer, std::move(doc)));
    response->set_segment_id(id);
    response->set_input_tokens(static_cast<int64_t>(lease.agent().context().InputTokens()));
    return Status::Ok();
  });
}

grpc::Status ContextServiceImpl::RemoveDocument(grpc::ServerContext* context,
                                                const v1::RemoveDocumentRequest* request,
                                                v1::MutationResponse* response) {
  STRATA_CALL;
  return call.WithAgent(*request, request->agent_id(), [&](AgentLease& lease) -> Status {
    STRATA_ASSIGN_OR_RETURN(Layer layer, DocumentLayerOf(request->layer()));
    STRATA_RETURN_IF_ERROR(lease.agent().RemoveDocument(layer, request->name()));
    response->set_input_tokens(static_cast<int64_t>(lease.agent().context().InputTokens()));
    return Status::Ok();
  });
}

grpc::Status ContextServiceImpl::AppendUser(grpc::ServerContext* context,
                                            const v1::AppendUserRequest* request,
                                            v1::MutationResponse* response) {
  STRATA_CALL;
  return call.WithAgent(*request, request->agent_id(), [&](AgentLease& lease) -> Status {
    STRATA_ASSIGN_OR_RETURN(std::string id, lease.agent().AppendUser(request->content()));
    response->set_segment_id(id);
    response->set_input_tokens(static_cast<int64_t>(lease.agent().context().InputTokens()));
    return Status::Ok();
  });
}

grpc::Status ContextServiceImpl::AppendAssistant(grpc::ServerContext* context,
                                                 const v1::AppendAssistantRequest* request,
                                                 v1::MutationResponse* response) {
  STRATA_CALL;
  return call.WithAgent(*request, request->agent_id(), [&](AgentLease& lease) -> Status {
    AssistantMessage message;
    message.content = request->content();
    message.reasoning = request->reasoning();
    for (const v1::ToolCall& c : request->tool_calls()) {
      message.tool_calls.push_back({c.id(), c.name(), c.arguments()});
    }
    STRATA_ASSIGN_OR_RETURN(std::string id,
                            lease.agent().context().AppendAssistant(std::move(message)));
    response->set_segment_id(id);
    response->set_input_tokens(static_cast<int64_t>(lease.agent().context().InputTokens()));
    return Status::Ok();
  });
}

grpc::Status ContextServiceImpl::AppendToolResult(grpc::ServerContext* context,
                                                  const v1::AppendToolResultRequest* request,
                                                  v1::MutationResponse* response) {
  STRATA_CALL;
  return call.WithAgent(*request, request->agent_id(), [&](AgentLease& lease) -> Status {
    if (request->tool_call_id().empty()) {
      return InvalidArgumentError("tool_call_id is empty: name the call this result answers");
    }
    STRATA_ASSIGN_OR_RETURN(
        std::string id, lease.agent().AppendToolResult(
                            {request->tool_call_id(), request->content(), request->is_error()}));
    response->set_segment_id(id);
    response->set_input_tokens(static_cast<int64_t>(lease.agent().context().InputTokens()));
    return Status::Ok();
  });
}

// ----------------------------------------------------------------------------------- requests

grpc::Status ContextServiceImpl::Build(grpc::ServerContext* context,
                                       const v1::BuildRequest* request,
                                       v1::BuildResponse* response) {
  STRATA_CALL;
  return call.WithAgent(*request, request->agent_id(), [&](AgentLease& lease) -> Status {
    Agent& agent = lease.agent();
    STRATA_ASSIGN_OR_RETURN(CachePrediction prediction, agent.PredictCachedTokens());
    response->set_input_tokens(prediction.input_tokens);
    response->set_input_tokens_exact(prediction.input_tokens_exact);
    response->set_predicted_cached_tokens(prediction.predicted_cached_tokens);
    response->set_compaction_due(prediction.compaction_due);
    if (prediction.compaction) FillReport(*prediction.compaction, response->mutable_compaction());
    const Context& ctx = agent.context();
    StatusOr<BuiltRequest> built = ctx.Preview();
    if (built.ok()) {
      response->set_body(built->body);
      response->set_stable_prefix_hash(built->stable_prefix_hash);
      response->set_limit_tokens(static_cast<int64_t>(built->limit_tokens));
      for (int i = 0; i < kLayerCount; ++i) {
        FillLayer(static_cast<Layer>(i), built->layers[i], response->add_layers());
      }
    } else if (!(prediction.compaction_due &&
                 built.status().code() == StatusCode::kResourceExhausted)) {
      return built.status();
    }  // else: only the due compaction makes it fit; the body is left empty
    return Status::Ok();
  });
}

grpc::Status ContextServiceImpl::Complete(grpc::ServerContext* context,
                                          const v1::CompleteRequest* request,
                                          grpc::ServerWriter<v1::CompleteEvent>* writer) {
  STRATA_CALL;
  return call.Run(*request, [&](const TenantConfig& t) -> Status {
    if (in_flight_->Draining()) {
      context->AddTrailingMetadata("retry-after", "1");
      return UnavailableError(
          "the sidecar is draining (shutting down): retry on another instance");
    }
    STRATA_RETURN_IF_ERROR(CheckAgentId(request->agent_id()));
    STRATA_ASSIGN_OR_RETURN(CompletionSlot slot, registry_->BeginCompletion(t));
    STRATA_ASSIGN_OR_RETURN(AgentLease lease, registry_->Acquire(t, request->agent_id()));
    Agent& agent = lease.agent();
    // Refused before anything is sent or recorded (the proxy refuses the same case with 400).
    STRATA_RETURN_IF_ERROR(CheckSomethingToSend(agent, !request->user_message().empty()));
    std::string user_segment;
    // Cancels the upstream request when the client goes away or the server stops waiting.
    CancellationToken cancel;
    std::shared_ptr<void> registered = in_flight_->Register(&cancel);  // CancelAll cancels it
    std::shared_ptr<void> watched = in_flight_->departures.Watch(context, &cancel);
    TurnOptions options;
    options.cancel = &cancel;
    // The fragments that arrive together go out as one message per part.
    DeltaJoiner joiner;
    auto write_delta = [&](const StreamDelta& d) {
      writer->Write(DeltaEvent(d));  // false: the client is gone; the watcher cancels the request
    };
    if (!request->final_only()) {
      options.on_delta = [&](const StreamDelta& d) { joiner.Add(d, write_delta); };
    }
    // The user message is appended inside the turn: stored with it in one Store::CommitTurn, and
    // undone with it when the turn fails (strata/agent.h), so that a failed turn changes nothing.
    std::shared_ptr<void> in_flight;
    options.before_build = [&]() -> Status {
      if (!request->user_message().empty()) {
        STRATA_ASSIGN_OR_RETURN(user_segment, agent.context().AppendUser(request->user_message()));
      }
      if (hooks_.on_complete_begin) {
        // The context's count (kept as it changes): no request is rendered for the metrics.
        in_flight =
            hooks_.on_complete_begin(t.name, static_cast<int64_t>(agent.context().InputTokens()),
                                     agent.config().endpoint.max_output_tokens);
      }
      return Status::Ok();
    };
    const int64_t failures_before = agent.record_write_failures();
    StatusOr<Turn> turn = agent.Complete(options);
    joiner.Flush(write_delta);
    watched.reset();
    const int64_t refused = agent.record_write_failures() - failures_before;
    if (refused > 0 && hooks_.on_record_write_failures) {
      hooks_.on_record_write_failures(t.name, refused);
    }
    if (!turn.ok()) {
      const Status& s = turn.status();
      if (request->user_message().empty()) return s;
      const bool undone = s.message().find("undoing the call failed too") == std::string::npos;
      return Status(s.code(), s.message() + (undone ? " (nothing was appended: retry with the same "
                                                      "user_message)"
                                                    : " (the user message may stay appended: "
                                                      "call Complete again without "
                                                      "user_message to retry)"));
    }
    if (hooks_.on_turn) hooks_.on_turn(t.name, *turn);
    v1::CompleteEvent event;
    FillTurn(*turn, user_segment, event.mutable_turn());
    // Asked only once the token is cancelled (by the watcher, which saw the client leave, or by a
    // drain): on the synchronous server IsCancelled polls the call's completion queue, a few
    // percent of a turn's CPU on its critical path. A client gone since the watcher's last round
    // gets a write that goes nowhere.
    if (cancel.cancelled() && context->IsCancelled()) {
      return CancelledError(
          "the client went away before the turn was delivered (the turn is "
          "stored: read it with Records)");
    }
    // The turn goes out with the call's status, in one write (it is serialized here).
    writer->WriteLast(event, grpc::WriteOptions());
    // The body is not part of the event: the next turn writes only what it adds after it.
    agent.RecycleUnchanged(std::move(turn).value());
    return Status::Ok();
  });
}

grpc::Status ContextServiceImpl::Compact(grpc::ServerContext* context,
                                         const v1::CompactRequest* request,
                                         v1::CompactResponse* response) {
  STRATA_CALL;
  return call.WithAgent(*request, request->agent_id(), [&](AgentLease& lease) -> Status {
    STRATA_ASSIGN_OR_RETURN(std::optional<CompactionReport> report,
                            lease.agent().context().Compact(request->force()));
    response->set_compacted(report.has_value());
    if (report) {
      FillReport(*report, response->mutable_report());
      // The Agent keeps compaction events out of its journal and writes them itself (in
      // Complete); a compaction made through its context is recorded here the same way.
      StoredEvent e;
      e.agent_id = lease.stored_id();
      e.turn = report->turn;
      e.type = "compaction";
      e.payload_json = CompactionReportJson(*report);
      STRATA_RETURN_IF_ERROR(registry_->store().AppendEvent(e).status());
    }
    return Status::Ok();
  });
}

grpc::Status ContextServiceImpl::Recall(grpc::ServerContext* context,
                                        const v1::RecallRequest* request,
                                        v1::RecallResponse* response) {
  STRATA_CALL;
  return call.WithAgent(*request, request->agent_id(), [&](AgentLease& lease) -> Status {
    STRATA_RETURN_IF_ERROR(RequireNonNegative(request->offset(), "offset"));
    STRATA_RETURN_IF_ERROR(RequireNonNegative(request->max_tokens(), "max_tokens"));
    if (request->recall_id().empty()) return InvalidArgumentError("recall_id is empty");
    STRATA_ASSIGN_OR_RETURN(
        RecallPage page,
        lease.agent().Recall(request->recall_id(), static_cast<size_t>(request->offset()),
                             static_cast<size_t>(request->max_tokens())));
    response->set_content(page.content);
    response->set_offset(static_cast<int64_t>(page.offset));
    response->set_total_bytes(static_cast<int64_t>(page.total_bytes));
    response->set_remaining_bytes(static_cast<int64_t>(page.remaining_bytes));
    response->set_tokens(static_cast<int64_t>(page.tokens));
    return Status::Ok();
  });
}

grpc::Status ContextServiceImpl::Pin(grpc::ServerContext* context, const v1::PinRequest* request,
                                     v1::MutationResponse* response) {
  STRATA_CALL;
  return call.WithAgent(*request, request->agent_id(), [&](AgentLease& lease) -> Status {
    if (request->segment_id().empty()) return InvalidArgumentError("segment_id is empty");
    STRATA_RETURN_IF_ERROR(
        lease.agent().context().SetPinned(request->segment_id(), request->pinned()));
    response->set_segment_id(request->segment_id());
    response->set_input_tokens(static_cast<int64_t>(lease.agent().context().InputTokens()));
    return Status::Ok();
  });
}

grpc::Status ContextServiceImpl::Fork(grpc::ServerContext* context, const v1::ForkRequest* request,
                                      v1::AgentInfo* response) {
  STRATA_CALL;
  return call.WithAgent(*request, request->agent_id(), [&](AgentLease& lease) -> Status {
    const TenantConfig& t = *call.tenant;
    if (request->task().empty()) return InvalidArgumentError("task: a fork needs a task");
    STRATA_RETURN_IF_ERROR(RequireNonNegative(request->window(), "window"));
    ForkOptions options;
    if (!request->child_id().empty()) {
      STRATA_RETURN_IF_ERROR(CheckAgentId(request->child_id(), "child_id"));
      options.id = AgentRegistry::StoredId(t, request->child_id());
    }
    // A derived id ("<agent_id>.fork-<n>") stays a valid agent id: cut to fit when it is long.
    options.max_id_length = AgentRegistry::StoredId(t, "").size() + kMaxAgentIdLength;
    if (request->window() > 0) {
      AgentBudgetConfig budget = lease.agent().config().budget;
      budget.window = request->window();
      budget.reserve_output.reset();
      budget.reserve_reasoning.reset();
      budget.reserve_headroom.reset();
      options.budget = budget;
    }
    STRATA_RETURN_IF_ERROR(registry_->CheckCanAdd(t));
    StatusOr<std::unique_ptr<Agent>> child = lease.agent().Fork(request->task(), options);
    if (!child.ok()) {
      if (child.status().code() == StatusCode::kAlreadyExists) {
        return AlreadyExistsError("child_id \"" + request->child_id() + "\" is taken");
      }
      return child.status();
    }
    std::string task_segment;
    for (const Segment& s : (*child)->context().Segments()) {
      if (s.layer == Layer::kHistory && s.kind == SegmentKind::kUser) task_segment = s.id;
    }
    STRATA_ASSIGN_OR_RETURN(AgentLease child_lease, registry_->Adopt(t, std::move(child).value()));
    if (hooks_.on_agents) hooks_.on_agents(t.name, registry_->AgentCount(t));
    response->set_agent_id(child_lease.id());
    response->set_parent_id(lease.id());
    response->set_task_segment_id(task_segment);
    response->set_config_json(ClientConfigJson(*registry_, child_lease.agent(), child_lease.id()));
    StatusOr<StoredAgent> info = registry_->store().GetAgent(child_lease.stored_id());
    if (info.ok()) FillInfo(*info, child_lease.id(), response);
    return Status::Ok();
  });
}

grpc::Status ContextServiceImpl::Join(grpc::ServerContext* context, const v1::JoinRequest* request,
                                      v1::JoinResponse* response) {
  STRATA_CALL;
  return call.Run(*request, [&](const TenantConfig& t) -> Status {
    STRATA_RETURN_IF_ERROR(RequireNonNegative(request->max_tokens(), "max_tokens"));
    STRATA_ASSIGN_OR_RETURN(auto pair,
                            registry_->AcquirePair(t, request->agent_id(), request->child_id()));
    JoinOptions options;
    if (request->max_tokens() > 0) options.max_tokens = static_cast<size_t>(request->max_tokens());
    STRATA_ASSIGN_OR_RETURN(std::string id, pair.first.agent().Join(pair.second.agent(), options));
    response->set_segment_id(id);
    return Status::Ok();
  });
}

grpc::Status ContextServiceImpl::Growth(grpc::ServerContext* context,
                                        const v1::GrowthRequest* request,
                                        v1::GrowthResponse* response) {
  STRATA_CALL;
  return call.WithAgent(*request, request->agent_id(), [&](AgentLease& lease) -> Status {
    STRATA_ASSIGN_OR_RETURN(std::vector<GrowthPoint> points,
                            registry_->store().Growth(lease.stored_id()));
    for (const GrowthPoint& g : points) FillGrowth(g, response->add_points());
    return Status::Ok();
  });
}

grpc::Status ContextServiceImpl::Records(grpc::ServerContext* context,
                                         const v1::RecordsRequest* request,
                                         v1::RecordsResponse* response) {
  STRATA_CALL;
  return call.WithAgent(*request, request->agent_id(), [&](AgentLease& lease) -> Status {
    STRATA_ASSIGN_OR_RETURN(int64_t page_size, PageSize(request->page_size()));
    STRATA_ASSIGN_OR_RETURN(int64_t offset, PageOffset(request->page_token()));
    STRATA_ASSIGN_OR_RETURN(std::vector<RequestRecord> records,
                            registry_->store().RecentRequests(
                                lease.stored_id(), static_cast<size_t>(offset + page_size + 1)));
    for (int64_t i = offset; i < static_cast<int64_t>(records.size()) && i < offset + page_size;
         ++i) {
      FillRecord(records[i], response->add_records());
    }
    if (static_cast<int64_t>(records.size()) > offset + page_size) {
      response->set_next_page_token(std::to_string(offset + page_size));
    }
    return Status::Ok();
  });
}

grpc::Status ContextServiceImpl::Stats(grpc::ServerContext* context,
                                       const v1::StatsRequest* request,
                                       v1::StatsResponse* response) {
  STRATA_CALL;
  return call.WithAgent(*request, request->agent_id(), [&](AgentLease& lease) -> Status {
    const Context& ctx = lease.agent().context();
    ContextStats stats = ctx.Stats();
    response->set_segments(static_cast<int64_t>(stats.segments));
    response->set_turns(static_cast<int64_t>(stats.turns));
    response->set_truncated(static_cast<int64_t>(stats.truncated));
    response->set_deduplicated(static_cast<int64_t>(stats.deduplicated));
    response->set_folded(static_cast<int64_t>(stats.folded));
    response->set_bytes_saved_by_hygiene(static_cast<int64_t>(stats.bytes_saved_by_hygiene));
    for (int i = 0; i < kLayerCount; ++i) {
      FillLayer(static_cast<Layer>(i), stats.layers[i], response->add_layers());
    }
    response->set_input_tokens(static_cast<int64_t>(ctx.InputTokens()));
    STRATA_ASSIGN_OR_RETURN(StoredAgent stored, registry_->store().GetAgent(lease.stored_id()));
    response->set_requests(stored.requests);
    response->set_compactions(stored.compactions);
    response->set_stored_tokens(stored.tokens);
    STRATA_ASSIGN_OR_RETURN(std::vector<StoredEvent> breaks,
                            registry_->store().Events(lease.stored_id(), "prefix_break"));
    response->set_prefix_breaks(static_cast<int64_t>(breaks.size()));
    return Status::Ok();
  });
}

grpc::Status ContextServiceImpl::GetMessages(grpc::ServerContext* context,
                                             const v1::GetMessagesRequest* request,
                                             v1::GetMessagesResponse* response) {
  STRATA_CALL;
  return call.WithAgent(*request, request->agent_id(), [&](AgentLease& lease) -> Status {
    STRATA_ASSIGN_OR_RETURN(int64_t page_size, PageSize(request->page_size()));
    STRATA_ASSIGN_OR_RETURN(int64_t offset, PageOffset(request->page_token()));
    return FillMessages(lease.agent(), offset, page_size, response);
  });
}

#undef STRATA_CALL

}  // namespace strata::sidecar
