// strata-sim's gRPC side: sglang.runtime.v1.SglangService (HealthCheck, Abort, ChatComplete) on
// gRPC++, answering like upstream SGLang's native gRPC server (its tonic service in
// rust/sglang-grpc/src/server.rs and the Python bridge it calls, grpc_bridge.py, of
// sgl-project/sglang):
//   - the response headers go out at once, then the prefill delay, then the stream;
//   - each SSE event the HTTP side would send becomes one OpenAIStreamChunk (finished = false);
//     there is no "[DONE]": the stream ends with an empty json_chunk and finished = true;
//   - a request the server cannot parse (not JSON, not an object, messages that do not render) is
//     refused with status INTERNAL and the validation message;
//   - a serving error (a prompt over the context length, an injected "400") is an error JSON
//     inside a chunk with status OK: {"error": {...}} then the empty finished chunk when the body
//     asks for streaming, else the flat error object in one finished chunk;
//   - a non-streaming body gets its whole chat.completion in one chunk with finished = true;
//   - a cancelled call or an expired deadline (grpc-timeout) stops the prefill and the stream;
//   - the KV-memory model (sim_kv.h) admits the call as it admits an HTTP request: it waits
//     (FIFO) for KV blocks, holds them while decoding (with preemption when configured) and a
//     prompt larger than the whole cache is a serving error (400 in a chunk, as HTTP answers 400).
// Injected 429, 503 and 500 faults end the call with RESOURCE_EXHAUSTED, UNAVAILABLE and INTERNAL
// (what a proxy or an overloaded server answers), so retries can be tested.
#ifndef STRATA_APPS_STRATA_SIM_SIM_GRPC_H_
#define STRATA_APPS_STRATA_SIM_SIM_GRPC_H_

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "sim_kv.h"
#include "strata/status.h"

namespace strata::sim {

// One answer as the simulator's engine planned it, in the terms of its HTTP side.
struct GrpcPlan {
  int status = 200;           // the HTTP status the HTTP side would answer
  std::string error_message;  // status != 200
  std::string error_type;     // e.g. "BadRequestError"
  bool serving_error =
      false;  // a 4xx found while serving (context length), not a malformed request
  bool stream = false;
  std::vector<std::string>
      payloads;                   // stream: SSE data payloads ("[DONE]" last); else one JSON body
  std::vector<int64_t> delay_us;  // decode time before each payload
  int64_t prefill_us = 0;
  int64_t prompt_tokens = 0;     // for the KV-memory model
  int64_t kv_output_tokens = 0;  // output tokens the sequence holds KV for
  std::string fault_kind;  // "stall", "reset", "malformed-sse" or ""
  int fault_after = 0;
  int fault_delay_ms = 0;
  std::string rid;
};

// What the gRPC service needs from the simulator (implemented by SimServer's engine).
class GrpcEngine {
 public:
  virtual ~GrpcEngine() = default;
  // Plans (and logs) one ChatComplete: `headers` are the call's metadata and trace headers.
  virtual GrpcPlan PlanGrpc(const std::string& body,
                            const std::map<std::string, std::string>& headers,
                            const std::string& peer) = 0;
  // Sleeps `us` unless the server stops first; false when stopping.
  virtual bool Sleep(int64_t us) = 0;
  virtual void AcquireSlot() = 0;  // the concurrency limit of the timing model
  virtual void ReleaseSlot() = 0;
  virtual KvSim& Kv() = 0;  // the KV-memory model shared with the HTTP side
  virtual bool Aborted(const std::string& rid) = 0;
  virtual bool Abort(const std::string& rid, bool all) = 0;
};

class SimGrpcServer {
 public:
  // Binds host:port (0: any free port) and serves. UNAVAILABLE when the port cannot be bound.
  // `engine` is not owned and must outlive the server.
  static StatusOr<std::unique_ptr<SimGrpcServer>> Start(GrpcEngine* engine, const std::string& host,
                                                        int port);
  ~SimGrpcServer();  // Stop()s

  int port() const;
  // ChatComplete calls that ended because the client cancelled or its deadline passed.
  uint64_t cancelled_calls() const;
  // Stops serving (in-flight calls get a second to end). Idempotent.
  void Stop();

  class Service;

 private:
  SimGrpcServer();
  std::unique_ptr<Service> service_;
  struct State;
  std::unique_ptr<State> state_;
};

}  // namespace strata::sim

#endif  // STRATA_APPS_STRATA_SIM_SIM_GRPC_H_
