// SimServer::Impl (sim_server.h), private to strata-sim's library: the types its jobs share and
// the class itself, whose members are defined by job:
//   sim_server.cc      construction, Init (options, trajectory), timing (Sleep, the concurrency
//                      slots), aborts, the gRPC glue (PlanGrpc, StartGrpc), Stop, the public API
//   sim_parse.cc       ParseRequestShape: a request body parsed without its long texts
//   sim_validation.cc  ValidateRequest: the bodies vLLM/SGLang refuse, as they refuse them
//   sim_faults.cc      fault specs (ParseFault), which fault a request meets (ChooseFault), the
//                      status faults' answers
//   sim_engine.cc      the engine: a request's Plan (cache lookup, prefill time, the reply cut at
//                      the output cap, the completion body or stream chunks, error bodies)
//   sim_http.cc        the hand-written HTTP/1.1 server: accepting, reading heads and bodies,
//                      routing, writing answers and streams
//   sim_metrics.cc     the request log (in memory and the --request-log file), the processing
//                      time measurements and GET /metrics
#ifndef STRATA_APPS_STRATA_SIM_SIM_IMPL_H_
#define STRATA_APPS_STRATA_SIM_SIM_IMPL_H_

#include <nlohmann/json.hpp>

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <deque>
#include <functional>
#include <list>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "sim_grpc.h"
#include "sim_kv.h"
#include "sim_server.h"
#include "strata/prefix_cache.h"
#include "strata/segment.h"
#include "strata/status.h"

namespace strata::sim {
namespace sim_internal {

using json = nlohmann::json;

std::string Lower(std::string s);

// ---- sim_faults.cc ------------------------------------------------------------------------

struct Fault {
  std::string kind;  // "429", "500", "503", "400", "slow-first-byte", "stall", "reset", "malformed-sse", "oversize"
  std::string shape;  // "flat" / "nested" / "" (flavor default)
  double retry_after = 1;
  int delay_ms = 2000;
  int after = 2;
  int times = -1;
  std::string spec;
};

// `spec` as a Fault (sim_server.h's file comment); INVALID_ARGUMENT naming what is unknown.
StatusOr<Fault> ParseFault(const std::string& spec);
// Which request an attempt belongs to, for a fault's `times`: its X-Request-Id without strata's
// "-retry<n>" suffix (a retry is another attempt of the same request), else a hash of the body.
std::string AttemptKey(const std::map<std::string, std::string>& headers, const std::string& body);
// Faults answered with an HTTP error status instead of a completion.
bool IsStatusFault(const Fault& fault);

// ---- sim_parse.cc -------------------------------------------------------------------------

// `body` parsed, except that string values over 4 KiB (message texts; never the fields the engine
// reads: model, cache_salt, extra_key, rid, request_id, role) are parsed as "" once checked as the
// parser checks strings: the same types, structure and validity as json::parse(body), at about
// memory speed. Discarded (is_discarded()) when `body` is not JSON.
json ParseRequestShape(std::string_view body);

// ---- sim_validation.cc --------------------------------------------------------------------

// A request field vLLM's OpenAI server would refuse (pydantic types plus its own checks): the
// message, and the offending parameter for the error body's "param".
struct Invalid {
  std::string message;
  std::string param;
};

// Why `request` is refused, as vLLM/SGLang would refuse it; nullopt when it is not.
std::optional<Invalid> ValidateRequest(const json& request);

// ---- sim_engine.cc ------------------------------------------------------------------------

struct Reply {
  std::string content, reasoning;
  std::vector<ToolCall> tool_calls;
};

// The reply an assistant message (a trajectory's, X-Strata-Sim-Reply's) holds.
Reply ReplyFromMessage(const json& m);

// The answer to one request, independent of the protocol that carries it.
struct Plan {
  int status = 200;
  std::string error_body;
  std::string error_message;
  std::string error_type;
  bool serving_error = false;  // found while serving (context length), not a malformed request
  double retry_after = -1;
  bool stream = false;
  std::vector<std::string> payloads;  // stream: SSE data payloads ("[DONE]" last); else one JSON body
  std::vector<int64_t> delay_us;      // decode time before each payload
  int64_t prefill_us = 0;
  int64_t prompt_tokens = 0, kv_output_tokens = 0;  // for the KV-memory model (sim_kv.h)
  std::optional<Fault> fault;
  std::string rid;
  SimRequestLog log;
};

}  // namespace sim_internal

class SimServer::Impl : public GrpcEngine {
 public:
  using Fault = sim_internal::Fault;
  using Plan = sim_internal::Plan;
  using Reply = sim_internal::Reply;
  using json = sim_internal::json;
  using Headers = std::map<std::string, std::string>;

  explicit Impl(SimOptions options);
  static KvSimOptions KvOptions(const SimOptions& o);
  Status Init();

  // ---- The engine (sim_engine.cc) ---------------------------------------------------------

  // Never throws: a request that makes the engine throw (a JSON type error missed by the
  // validation) is answered 400 with what went wrong, never an exception out of a serving thread.
  Plan MakePlan(const std::string& protocol, const std::string& path, const std::string& body,
                const Headers& headers);
  // A plan with only the request's log filled in.
  Plan NewPlan(const std::string& protocol, const std::string& path, const std::string& body,
               const Headers& headers) const;
  // The request's checks, as vLLM/SGLang refuse requests (after an injected fault: the body, the
  // prompt, the context length), then the plan: cache hit and prefill time, then the reply.
  Plan MakePlanOrThrow(const std::string& protocol, const std::string& path, const std::string& body,
                       const Headers& headers);
  // The text the prompt's cache blocks are cut from: the chat template's rendering, or
  // RenderPromptText() when there is no template or it refuses the body.
  StatusOr<PromptText> RenderPrompt(const std::string& body) const;
  // vLLM's answer to a prompt over the context window, in its words (clients match them).
  Plan ContextTooLongPlan(Plan plan, int64_t prompt_tokens, int64_t max_out, const std::string& shape) const;
  // What the assistant answers a (validated) request: the X-Strata-Sim-Reply header's message, else
  // SimOptions::answer's, else the trajectory's assistant turn after as many as the request holds,
  // else generated text of about generated_output_tokens. An error when the header is no JSON object.
  StatusOr<Reply> ChooseReply(const json& request, const Headers& headers, int64_t prompt_tokens);

  // What a completion carries, whether answered whole or streamed.
  struct Completion {
    std::string id, model, reasoning_field, finish_reason;
    Reply reply;
    json usage;
  };

  // Fills `plan` with `reply`, cut at `max_out` tokens (0: no cap) as a server stops generating
  // there: one chat.completion body, or the stream's chunks, each after its decode time.
  Plan PlanReply(Plan plan, const json& request, const Headers& headers, Reply reply, int64_t cached,
                 int64_t max_out);
  // Tokens of reply text: the tokenizer's count, else bytes / bytes_per_token rounded up.
  int64_t CountTokens(const std::string& s) const;
  // The chat.completion body of a reply answered whole.
  static std::string CompletionBody(const Completion& done);
  // Appends the chat.completion.chunk stream of a reply to `plan`: the role; reasoning, content and
  // tool-call arguments in pieces of X-Strata-Sim-Chunk (else chunk_bytes) bytes, each after its
  // decode time; the finish reason; the usage when stream_options.include_usage; "[DONE]".
  void AddStreamChunks(const Completion& done, const json& request, const Headers& headers, Plan* plan) const;
  static Plan ErrorPlan(Plan plan, int status, const std::string& message, const std::string& shape,
                        const std::string& type, const std::string& param = "");

  // ---- Faults (sim_faults.cc) -------------------------------------------------------------

  // Sets `*fault` to the fault this request meets: the X-Strata-Sim-Fault header's (while its
  // `times` last for this request, retries included), else the next one InjectFault queued, else
  // the default one; nullopt for none. An error, `*fault` untouched, when the header is malformed.
  Status ChooseFault(const Headers& headers, const std::string& body, std::optional<Fault>* fault);
  // The error a status fault ("429", "500", "503" or "400") answers with.
  static Plan StatusFaultPlan(Plan plan, const Fault& fault, const std::string& shape);

  // ---- The request log and metrics (sim_metrics.cc) ---------------------------------------

  // Opens SimOptions::request_log_path for appending (nothing when it is ""); INVALID_ARGUMENT
  // naming the path and why when it cannot be opened.
  Status OpenRequestLog();
  // Keeps `log` (the request whose whole body is `body`) in the request log and, with a
  // --request-log file, appends it there.
  void Log(SimRequestLog log, const std::string& body);
  // Counts one request's processing time (SimRequestLog::processing_us) for GET /metrics.
  void CountProcessing(int64_t us);
  std::string MetricsResponse();

  // ---- Timing and stopping (sim_server.cc) ------------------------------------------------

  // Sleeps `us` unless the server stops first. False when stopping.
  bool Sleep(int64_t us) override;
  // Concurrency limit: a counting semaphore with a FIFO-ish queue.
  void AcquireSlot() override;
  void ReleaseSlot() override;
  bool Aborted(const std::string& rid) override;
  bool Abort(const std::string& rid, bool all) override;

  // ---- HTTP (sim_http.cc) -----------------------------------------------------------------

  Status StartHttp();
  void AcceptLoop();
  void ReapLocked();  // requires conn_mu_
  static bool WriteAll(int fd, const std::string& data);
  static std::string SimpleResponse(int status, const std::string& body, const std::string& extra = "");
  // Waits up to `timeout_ms` for bytes and appends them. False on timeout, EOF or error.
  bool RecvWithin(int fd, std::string* buffer, int64_t timeout_ms);
  std::string ErrorBody(int status, const std::string& message) const;
  void ServeConnection(int fd);
  // One request as it arrived over HTTP.
  struct HttpRequest {
    std::string method, target, version, path;  // path: the target without its query
    Headers headers;                             // lower-case names
    std::string body;
  };
  // The request line and header fields of `head` (the request's head without its blank line).
  static void ParseHead(const std::string& head, HttpRequest* request);
  // Reads the connection's next request (its first bytes in `*buffer`, which keeps what follows
  // it). False when the connection must be closed: it ended, or the request was refused (408, 411,
  // 413, 431, 400 for a bad Content-Length) and answered.
  bool ReadRequest(int fd, std::string* buffer, HttpRequest* request);
  // Answers `request`; false when the connection must be closed.
  bool Route(int fd, const HttpRequest& request);
  // False when the connection must be closed.
  bool ServeChat(int fd, const std::string& path, const std::string& body, const Headers& headers);
  std::string KvTooLargeBody(int64_t prompt_tokens) const;

  // ---- gRPC (sim_server.cc; the server is sim_grpc.cc) ------------------------------------

  GrpcPlan PlanGrpc(const std::string& body, const Headers& headers, const std::string& peer) override;
  KvSim& Kv() override { return kv_; }
  Status StartGrpc();

  void Stop();

  SimOptions options_;
  PrefixCacheModel cache_;
  KvSim kv_;

  // One request's sequence in the KV-memory model; released when it goes out of scope.
  struct KvSequence {
    explicit KvSequence(KvSim* kv) : kv(kv) {}
    ~KvSequence() {
      if (admitted) kv->Release(id);
    }
    bool Admit(int64_t prompt_tokens, int64_t output_tokens) {
      int64_t wait_us = 0;
      KvSim::Admission a = kv->Admit(prompt_tokens, output_tokens, &id, &wait_us);
      admitted = a == KvSim::Admission::kAdmitted;
      too_large = a == KvSim::Admission::kTooLarge;
      return admitted;
    }
    bool Prefill(int64_t us) { return kv->Prefill(id, us); }
    bool Grow(int64_t tokens, int64_t prefill_us) { return kv->Grow(id, tokens, prefill_us); }
    KvSim* kv;
    uint64_t id = 0;
    bool admitted = false, too_large = false;
  };

  int http_port_ = -1;
  int grpc_port_ = 0;

  mutable std::mutex mu_;
  std::deque<Fault> injected_;                // guarded by mu_
  std::map<std::string, int> fault_attempts_;  // guarded by mu_
  std::deque<SimRequestLog> log_;             // guarded by mu_
  size_t log_bytes_ = 0;                      // bodies in log_; guarded by mu_
  std::set<std::string> aborted_;             // guarded by mu_
  bool abort_all_ = false;                    // guarded by mu_
  std::vector<Reply> script_;                 // immutable after Init
  std::atomic<uint64_t> generated_{0};
  std::atomic<uint64_t> completions_{0};
  std::atomic<uint64_t> connections_{0};
  Clock* clock_ = nullptr;  // options_.clock, else SystemClock()
  std::atomic<uint64_t> processed_requests_{0};
  std::atomic<int64_t> processing_us_total_{0};
  struct FileCloser {
    void operator()(std::FILE* f) const { std::fclose(f); }
  };
  std::mutex request_log_mu_;
  std::unique_ptr<std::FILE, FileCloser> request_log_;  // --request-log; guarded by request_log_mu_

 private:
  std::atomic<bool> stopping_{false};
  std::mutex stop_mu_;
  std::condition_variable stop_cv_;
  std::mutex slot_mu_;
  std::condition_variable slot_cv_;
  int in_flight_ = 0;  // guarded by slot_mu_

  int listen_fd_ = -1;
  std::thread accept_thread_;
  std::mutex conn_mu_;
  std::set<int> conn_fds_;                                       // guarded by conn_mu_
  std::list<std::thread> conn_threads_;                          // guarded by conn_mu_
  std::vector<std::list<std::thread>::iterator> finished_;       // guarded by conn_mu_

  std::unique_ptr<SimGrpcServer> grpc_server_;

  friend class SimServer;
};

}  // namespace strata::sim

#endif  // STRATA_APPS_STRATA_SIM_SIM_IMPL_H_
