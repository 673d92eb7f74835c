// The gRPC strata.v1.ContextService of strata-sidecar (proto/strata/v1/context_service.proto), on
// gRPC++'s synchronous API: each call runs on a thread of the server's pool (bounded by
// SidecarConfig::max_threads), where it may block on its agent's lease and on the upstream
// request. docs/sidecar.md explains the choice.
//
// Every call authenticates first (metadata "authorization"), then checks the tenant's
// max_request_bytes, then takes one of the tenant's max_concurrent_calls slots (RESOURCE_EXHAUSTED
// when all are taken: one tenant cannot hold every thread of the pool), then leases its agent
// from the registry, waiting at most the registry's lease_wait for it (then UNAVAILABLE): the
// call's work runs under the lease, so one agent's calls are serialized. Complete also holds one
// of the tenant's max_concurrent_completions slots, and cancels its upstream request (CANCELLED)
// when the client cancels or CancelAll() is called (the end of a drain's deadline).
#ifndef STRATA_APPS_STRATA_SIDECAR_SERVICE_H_
#define STRATA_APPS_STRATA_SIDECAR_SERVICE_H_

#include <chrono>
#include <functional>
#include <memory>
#include <string_view>

#include "registry.h"
#include "strata/agent.h"
#include "strata/v1/context_service.grpc.pb.h"
#include "tenants.h"

namespace strata::sidecar {

namespace v1 = ::strata::v1;

// Observers the service calls (the metrics component plugs in here); each may be empty.
struct ServiceHooks {
  std::function<void(std::string_view tenant, const strata::Turn& turn)> on_turn;
  std::function<void(std::string_view tenant, strata::StatusCode code)> on_error;
  std::function<void(std::string_view tenant, int64_t agents)> on_agents;
  // A Complete whose writes the store refused (its Agent's record_write_failures() grew by
  // `count`).
  std::function<void(std::string_view tenant, int64_t count)> on_record_write_failures;
  // A completion is about to be sent (the agent's input tokens now, as its context counts them
  // without rendering the request, and its max output tokens); the returned object is released
  // when the call ends (the metrics' requests in flight). The request's exact count comes with
  // the Turn (on_turn).
  std::function<std::shared_ptr<void>(std::string_view tenant, int64_t input_tokens,
                                      int64_t max_output_tokens)>
      on_complete_begin;
};

// strata::Status -> grpc::Status (the codes are the same numbers).
grpc::Status ToGrpcStatus(const Status& status);

class ContextServiceImpl final : public strata::v1::ContextService::Service {
 public:
  // Not owned; both must outlive the service.
  ContextServiceImpl(AgentRegistry* registry, const Authenticator* authenticator,
                     ServiceHooks hooks = {});
  ~ContextServiceImpl() override;

  // Cancels every Complete in flight, and every one that starts from now on, with CANCELLED
  // (their upstream requests stop), and makes the calls waiting for an agent's lease fail
  // (AgentRegistry::CancelWaits): the end of a drain's deadline. Thread-safe.
  void CancelAll();

  // The start of a drain: every Complete from now on fails UNAVAILABLE with trailing metadata
  // "retry-after: 1" (seconds), so clients retry on another instance; the calls in flight go on.
  // Thread-safe.
  void BeginDrain();
  // Waits until no call is in progress or `deadline` passes; true when none is. Thread-safe.
  bool WaitIdle(std::chrono::steady_clock::time_point deadline);

  grpc::Status CreateAgent(grpc::ServerContext* context, const v1::CreateAgentRequest* request,
                           v1::AgentInfo* response) override;
  grpc::Status OpenAgent(grpc::ServerContext* context, const v1::OpenAgentRequest* request,
                         v1::AgentInfo* response) override;
  grpc::Status DeleteAgent(grpc::ServerContext* context, const v1::DeleteAgentRequest* request,
                           v1::DeleteAgentResponse* response) override;
  grpc::Status ListAgents(grpc::ServerContext* context, const v1::ListAgentsRequest* request,
                          v1::ListAgentsResponse* response) override;
  grpc::Status SetSystemPrompt(grpc::ServerContext* context,
                               const v1::SetSystemPromptRequest* request,
                               v1::MutationResponse* response) override;
  grpc::Status SetTools(grpc::ServerContext* context, const v1::SetToolsRequest* request,
                        v1::MutationResponse* response) override;
  grpc::Status PutDocument(grpc::ServerContext* context, const v1::PutDocumentRequest* request,
                           v1::MutationResponse* response) override;
  grpc::Status RemoveDocument(grpc::ServerContext* context,
                              const v1::RemoveDocumentRequest* request,
                              v1::MutationResponse* response) override;
  grpc::Status AppendUser(grpc::ServerContext* context, const v1::AppendUserRequest* request,
                          v1::MutationResponse* response) override;
  grpc::Status AppendAssistant(grpc::ServerContext* context,
                               const v1::AppendAssistantRequest* request,
                               v1::MutationResponse* response) override;
  grpc::Status AppendToolResult(grpc::ServerContext* context,
                                const v1::AppendToolResultRequest* request,
                                v1::MutationResponse* response) override;
  grpc::Status Build(grpc::ServerContext* context, const v1::BuildRequest* request,
                     v1::BuildResponse* response) override;
  grpc::Status Complete(grpc::ServerContext* context, const v1::CompleteRequest* request,
                        grpc::ServerWriter<v1::CompleteEvent>* writer) override;
  grpc::Status Compact(grpc::ServerContext* context, const v1::CompactRequest* request,
                       v1::CompactResponse* response) override;
  grpc::Status Recall(grpc::ServerContext* context, const v1::RecallRequest* request,
                      v1::RecallResponse* response) override;
  grpc::Status Pin(grpc::ServerContext* context, const v1::PinRequest* request,
                   v1::MutationResponse* response) override;
  grpc::Status Fork(grpc::ServerContext* context, const v1::ForkRequest* request,
                    v1::AgentInfo* response) override;
  grpc::Status Join(grpc::ServerContext* context, const v1::JoinRequest* request,
                    v1::JoinResponse* response) override;
  grpc::Status Growth(grpc::ServerContext* context, const v1::GrowthRequest* request,
                      v1::GrowthResponse* response) override;
  grpc::Status Records(grpc::ServerContext* context, const v1::RecordsRequest* request,
                       v1::RecordsResponse* response) override;
  grpc::Status Stats(grpc::ServerContext* context, const v1::StatsRequest* request,
                     v1::StatsResponse* response) override;
  grpc::Status GetMessages(grpc::ServerContext* context, const v1::GetMessagesRequest* request,
                           v1::GetMessagesResponse* response) override;

 private:
  struct Call;
  // The tenants' calls in progress and the tokens of the Completes in flight.
  struct InFlight;
  AgentRegistry* registry_;
  const Authenticator* authenticator_;
  ServiceHooks hooks_;
  std::unique_ptr<InFlight> in_flight_;
};

}  // namespace strata::sidecar

#endif  // STRATA_APPS_STRATA_SIDECAR_SERVICE_H_
