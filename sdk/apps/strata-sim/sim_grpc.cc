// strata-sim's SGLang gRPC service (see sim_grpc.h for the upstream behaviour it follows).
#include "sim_grpc.h"

#include <grpcpp/grpcpp.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <nlohmann/json.hpp>

#include "sglang/runtime/v1/sglang.grpc.pb.h"

namespace strata::sim {
namespace {

namespace pb = ::sglang::runtime::v1;
using nlohmann::json;

std::string Lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

pb::OpenAIStreamChunk Chunk(const std::string& json_chunk, bool finished) {
  pb::OpenAIStreamChunk chunk;
  chunk.set_json_chunk(json_chunk);
  chunk.set_finished(finished);
  return chunk;
}

}  // namespace

struct SimGrpcServer::State {
  std::unique_ptr<grpc::Server> server;
  int port = 0;
  std::atomic<bool> stopped{false};
};

class SimGrpcServer::Service final : public pb::SglangService::Service {
 public:
  explicit Service(GrpcEngine* engine) : engine_(engine) {}

  uint64_t cancelled() const { return cancelled_.load(); }

  grpc::Status HealthCheck(grpc::ServerContext*, const pb::HealthCheckRequest*,
                           pb::HealthCheckResponse* reply) override {
    reply->set_healthy(true);
    return grpc::Status::OK;
  }

  grpc::Status Abort(grpc::ServerContext*, const pb::AbortRequest* request,
                     pb::AbortResponse* reply) override {
    reply->set_success(engine_->Abort(request->rid(), request->abort_all()));
    return grpc::Status::OK;
  }

  grpc::Status ChatComplete(grpc::ServerContext* context, const pb::OpenAIRequest* request,
                            grpc::ServerWriter<pb::OpenAIStreamChunk>* writer) override {
    GrpcPlan plan = engine_->PlanGrpc(request->json_body(), Headers(*context, *request),
                                      context->peer());
    if (plan.status != 200 && !plan.serving_error) {
      // A request refused before serving: upstream ends the call with the message as INTERNAL.
      // Injected overload faults take the codes a proxy or an overloaded server would give.
      grpc::StatusCode code = plan.status == 429   ? grpc::StatusCode::RESOURCE_EXHAUSTED
                              : plan.status == 503 ? grpc::StatusCode::UNAVAILABLE
                                                   : grpc::StatusCode::INTERNAL;
      return grpc::Status(code, plan.error_message);
    }
    // Headers first (tonic answers them as soon as the stream exists), then the prefill.
    writer->SendInitialMetadata();
    auto serving_error = [&](int status, const std::string& message, const std::string& type) {
      return WriteServingError(request->json_body(), status, message, type, writer);
    };
    if (plan.status != 200) {
      return serving_error(plan.status, plan.error_message, plan.error_type);
    }
    engine_->AcquireSlot();
    struct SlotGuard {
      GrpcEngine* engine;
      ~SlotGuard() { engine->ReleaseSlot(); }
    } guard{engine_};
    // The KV-memory model, as on the HTTP side: admission (may queue), prefill, growth.
    KvSim& kv = engine_->Kv();
    uint64_t sequence = 0;
    int64_t kv_wait_us = 0;
    switch (kv.Admit(plan.prompt_tokens, plan.kv_output_tokens, &sequence, &kv_wait_us)) {
      case KvSim::Admission::kTooLarge:
        return serving_error(400,
                             "prompt of " + std::to_string(plan.prompt_tokens) +
                                 " tokens does not fit the KV cache of " +
                                 std::to_string(kv.capacity_tokens()) + " tokens",
                             "BadRequestError");
      case KvSim::Admission::kStopping:
        return grpc::Status(grpc::StatusCode::UNAVAILABLE, "server stopping");
      case KvSim::Admission::kAdmitted:
        break;
    }
    struct SequenceGuard {
      KvSim& kv;
      uint64_t id;
      ~SequenceGuard() { kv.Release(id); }
    } sequence_guard{kv, sequence};
    grpc::Status stop;
    const KvSim::SleepFn sleep = [&](int64_t us) {
      return SleepWatching(context, us, plan.rid, &stop);
    };
    // How a call that stopped early ends: an aborted request as a served one does (vLLM and
    // SGLang finish it with finish_reason "abort", whether it was queued, prefilling or decoding),
    // a cancelled one with its status.
    auto stopped = [&]() {
      if (engine_->Aborted(plan.rid)) return WriteAbortChunks(writer);
      return stop.ok() ? grpc::Status(grpc::StatusCode::UNAVAILABLE, "server stopping") : stop;
    };
    if (!kv.Prefill(sequence, plan.prefill_us, sleep)) return stopped();
    if (!SleepWatching(context, 0, plan.rid, &stop)) return stopped();  // cancelled while queued

    std::vector<std::string> payloads;
    for (const std::string& p : plan.payloads) {
      if (p != "[DONE]") payloads.push_back(p);
    }
    for (size_t i = 0; i < payloads.size(); ++i) {
      if (plan.fault_kind == "stall" && static_cast<int>(i) == plan.fault_after) {
        // A stall ends early on Abort (then the abort chunk follows) or a cancelled call.
        if (!SleepWatching(context, int64_t{plan.fault_delay_ms} * 1000, plan.rid, &stop)) return stopped();
      } else if (plan.fault_kind == "reset" && static_cast<int>(i) == plan.fault_after) {
        return grpc::Status(grpc::StatusCode::UNAVAILABLE, "connection reset (simulated)");
      } else if (plan.fault_kind == "malformed-sse" && static_cast<int>(i) == plan.fault_after) {
        writer->Write(Chunk("{\"id\": \"chatcmpl-sim\", \"choices\": [", false));
      }
      if (engine_->Aborted(plan.rid)) return WriteAbortChunks(writer);
      if (!SleepWatching(context, plan.delay_us[i], plan.rid, &stop)) return stopped();
      const int64_t grown = plan.prompt_tokens + plan.kv_output_tokens *
                                                     static_cast<int64_t>(i + 1) /
                                                     static_cast<int64_t>(payloads.size());
      if (!kv.Grow(sequence, grown, plan.prefill_us, sleep)) return stopped();
      // Streaming: one chunk per SSE event, then the empty finished chunk. Not streaming: the
      // whole completion in one finished chunk.
      if (!writer->Write(Chunk(payloads[i], !plan.stream))) {
        ++cancelled_;
        return grpc::Status(grpc::StatusCode::CANCELLED, "client went away");
      }
    }
    if (plan.stream) writer->Write(Chunk("", true));
    return grpc::Status::OK;
  }

 private:
  // The call's headers: its trace headers and metadata (metadata wins), names in lower case.
  static std::map<std::string, std::string> Headers(const grpc::ServerContext& context,
                                                    const pb::OpenAIRequest& request) {
    std::map<std::string, std::string> headers;
    for (const auto& [k, v] : request.trace_headers()) headers[Lower(k)] = v;
    for (const auto& [k, v] : context.client_metadata()) {
      headers[Lower(std::string(k.data(), k.size()))] = std::string(v.data(), v.size());
    }
    return headers;
  }

  // A serving error: an error JSON inside the stream (streamed as the body of `request_json`
  // asks, since an error plan does not say), the call itself ends OK.
  static grpc::Status WriteServingError(const std::string& request_json, int status,
                                        const std::string& message, const std::string& type,
                                        grpc::ServerWriter<pb::OpenAIStreamChunk>* writer) {
    json error = {{"object", "error"},
                  {"message", message},
                  {"type", type.empty() ? "BadRequestError" : type},
                  {"param", nullptr},
                  {"code", status}};
    json body = json::parse(request_json, nullptr, false);
    const bool stream = body.is_object() && body.contains("stream") &&
                        body["stream"].is_boolean() && body["stream"].get<bool>();
    if (stream) {
      writer->Write(Chunk(json({{"error", error}}).dump(), false));
      writer->Write(Chunk("", true));
    } else {
      writer->Write(Chunk(error.dump(), true));
    }
    return grpc::Status::OK;
  }

  // An aborted request's end: a chunk with finish_reason "abort", then the finished chunk.
  static grpc::Status WriteAbortChunks(grpc::ServerWriter<pb::OpenAIStreamChunk>* writer) {
    json abort = {
        {"id", "chatcmpl-sim-abort"},
        {"object", "chat.completion.chunk"},
        {"choices",
         json::array({{{"index", 0}, {"delta", json::object()}, {"finish_reason", "abort"}}})}};
    writer->Write(Chunk(abort.dump(), false));
    writer->Write(Chunk("", true));
    return grpc::Status::OK;
  }

  // Sleeps `us` in slices; false (with *stop set) when the call is cancelled, its deadline passes,
  // the request is aborted or the server stops.
  bool SleepWatching(grpc::ServerContext* context, int64_t us, const std::string& rid,
                     grpc::Status* stop) {
    for (int64_t left = us;; left -= 10000) {
      if (context->IsCancelled()) {
        ++cancelled_;
        *stop =
            grpc::Status(grpc::StatusCode::CANCELLED, "cancelled by the client or its deadline");
        return false;
      }
      if (engine_->Aborted(rid)) {
        *stop = grpc::Status(grpc::StatusCode::CANCELLED, "request aborted");
        return false;
      }
      if (left <= 0) return true;
      if (!engine_->Sleep(std::min<int64_t>(left, 10000))) {
        *stop = grpc::Status(grpc::StatusCode::UNAVAILABLE, "server stopping");
        return false;
      }
    }
  }

  GrpcEngine* engine_;
  std::atomic<uint64_t> cancelled_{0};
};

SimGrpcServer::SimGrpcServer() : state_(std::make_unique<State>()) {}

SimGrpcServer::~SimGrpcServer() { Stop(); }

StatusOr<std::unique_ptr<SimGrpcServer>> SimGrpcServer::Start(GrpcEngine* engine,
                                                              const std::string& host, int port) {
  std::unique_ptr<SimGrpcServer> server(new SimGrpcServer());
  server->service_ = std::make_unique<Service>(engine);
  grpc::ServerBuilder builder;
  builder.AddListeningPort(host + ":" + std::to_string(port), grpc::InsecureServerCredentials(),
                           &server->state_->port);
  builder.RegisterService(server->service_.get());
  builder.SetMaxReceiveMessageSize(256 << 20);
  // Accept the clients' keepalive pings (every second at most, also between calls): gRPC's default
  // policy answers pings more frequent than every 5 minutes with GOAWAY.
  builder.AddChannelArgument(GRPC_ARG_HTTP2_MIN_RECV_PING_INTERVAL_WITHOUT_DATA_MS, 1000);
  builder.AddChannelArgument(GRPC_ARG_KEEPALIVE_PERMIT_WITHOUT_CALLS, 1);
  builder.AddChannelArgument(GRPC_ARG_HTTP2_MAX_PING_STRIKES, 0);
  server->state_->server = builder.BuildAndStart();
  if (server->state_->server == nullptr || server->state_->port == 0) {
    return UnavailableError("cannot bind gRPC on " + host + ":" + std::to_string(port));
  }
  return server;
}

int SimGrpcServer::port() const { return state_->port; }
uint64_t SimGrpcServer::cancelled_calls() const { return service_ ? service_->cancelled() : 0; }

void SimGrpcServer::Stop() {
  if (state_->stopped.exchange(true)) return;
  if (state_->server)
    state_->server->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(1));
}

}  // namespace strata::sim
