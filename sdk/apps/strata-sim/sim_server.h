// strata-sim as a library: an endpoint simulator that speaks OpenAI Chat Completions over HTTP/1.1
// (SSE and non-streaming, keep-alive) and SGLang's gRPC service, with a block-hash prefix cache
// keyed by cache_salt, a timing model and fault injection. Tests start it in-process on port 0.
//
//   strata::sim::SimOptions options;            // 127.0.0.1, port 0, 16-token blocks
//   auto sim = strata::sim::SimServer::Start(options).value();
//   std::string base = sim->base_url();         // "http://127.0.0.1:<port>/v1"
//   sim->InjectFault("503", 1);                 // the next request gets a 503
//
// Faults (flag --fault, InjectFault(), or per request the header "X-Strata-Sim-Fault: <spec>"):
//   spec = kind[,key=value...]; kinds:
//     429              429 with Retry-After (retry_after=S, default 1)
//     500, 503, 400    that status with an error body (shape=flat|nested, default error_shape)
//     slow-first-byte  nothing is sent for delay_ms (default 2000) before the answer
//     stall            after `after` chunks (default 2) nothing is sent for delay_ms
//     reset            after `after` chunks the connection is reset (RST)
//     malformed-sse    after `after` chunks an event with broken JSON is sent
//     oversize         400 like vLLM's context-length error
//   times=N (header only) applies the fault to the first N attempts of the same request
//   (same X-Request-Id, ignoring a "-retry<n>" suffix, else the same body); default: every attempt.
// Per-request reply and chunking: "X-Strata-Sim-Reply: <assistant message JSON>" and
// "X-Strata-Sim-Chunk: <bytes per delta>".
//
// Like vLLM and SGLang over HTTP: a streamed answer sends its headers at once and its first event
// after the prefill; bodies vLLM rejects (unknown roles, fields of the wrong JSON type, token caps
// below 1 or not integers, ...) get 400 with {"error":{"message","type","param","code"}}; a reply
// stops at the output cap with finish_reason "length". Each connection has idle and request
// timeouts, a request has a size limit (413) and the request log is bounded.
//
// Its own cost is reported, so that a benchmark can tell the endpoint's time from the harness's:
// every chat completion answered over HTTP carries "X-Strata-Sim-Processing-Us: <microseconds>",
// the simulator's own work on the request (parsing, validation, rendering and hashing the prompt,
// planning the answer; the simulated queue, prefill and decode time excluded), which the request
// log keeps (SimRequestLog::processing_us) and GET /metrics sums
// (strata_sim_processing_seconds_total over strata_sim_requests_processed_total).
// SimOptions::request_log_path (strata-sim --request-log FILE) appends each chat completion
// request received, HTTP or gRPC, to a file as one JSON line.
//
// Thread safety: SimServer is thread-safe; it serves each connection on its own thread.
#ifndef STRATA_APPS_STRATA_SIM_SIM_SERVER_H_
#define STRATA_APPS_STRATA_SIM_SIM_SERVER_H_

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "strata/chat_template.h"
#include "strata/clock.h"
#include "strata/prefix_cache.h"
#include "strata/status.h"
#include "strata/tokenizer.h"
#include "sim_kv.h"

namespace strata::sim {

enum class CachedReport : int {
  kPresent = 0,  // usage.prompt_tokens_details.cached_tokens (vLLM --enable-prompt-tokens-details)
  kNull = 1,     // "prompt_tokens_details": null
  kAbsent = 2,   // no prompt_tokens_details
};

struct SimOptions {
  std::string host = "127.0.0.1";
  int http_port = 0;   // 0: any free port; -1: no HTTP server
  int grpc_port = -1;  // 0: any free port; -1: no gRPC server (default)
  // Counts prompt tokens; not owned. nullptr: an estimator with cache.bytes_per_token bytes/token.
  const Tokenizer* tokenizer = nullptr;
  // Renders the prompt the cache blocks are cut from; not owned. nullptr: RenderPromptText().
  // (A body the template refuses falls back to RenderPromptText(), as in strata::Client.)
  const ChatTemplate* chat_template = nullptr;
  PrefixCacheOptions cache;  // block size, capacity (LRU), bytes per token
  // "vllm" (reasoning in "reasoning") or "sglang" / "openai" ("reasoning_content").
  std::string flavor = "vllm";
  // Error bodies: "nested" {"error":{"message","type","param","code"}} (current vLLM, OpenAI; what
  // the official clients read) or "flat" {"object":"error","message",...} (older servers).
  std::string error_shape = "nested";
  CachedReport cached_report = CachedReport::kPresent;
  int64_t max_context_tokens = 1048576;
  // Timing model: prefill time per uncached prompt token, decode time per output token, and at
  // most `max_concurrency` requests in progress (0: unlimited; others queue).
  double prefill_us_per_token = 0;
  double decode_us_per_token = 0;
  int max_concurrency = 0;
  // KV-memory model (sim_kv.h): capacity, preemption, attention term of the prefill time, serial
  // prefill; its linear term is prefill_us_per_token. Reported at GET /metrics.
  KvSimOptions kv;
  // Replies: from this trajectory (JSON lines, one chat message per line): a request holding k
  // assistant messages gets the trajectory's k-th assistant message (0-based). Else generated.
  std::string trajectory_path;
  // Set: the reply's content is what this returns for the request body and its prompt tokens
  // (strata-sim --answer retrieve, sim_retrieve.h), unless X-Strata-Sim-Reply gives the reply.
  // Called from serving threads at once: it must be thread-safe.
  std::function<std::string(const std::string& request_json, int64_t prompt_tokens)> answer;
  int64_t generated_output_tokens = 16;
  size_t chunk_bytes = 16;  // bytes per streamed delta
  // Write every SSE event with its own send(). Default false: events due at the same time (no
  // decode delay between them) are written together, which keeps the simulator's own cost low.
  bool flush_each_event = false;
  std::string default_fault;  // applied to every request, e.g. "503"; "" none
  // The request log keeps the last `max_logged_requests` requests, each body cut to
  // `max_logged_body_bytes`, and drops the oldest beyond `max_log_bytes` of bodies in all.
  size_t max_logged_requests = 10000;
  size_t max_logged_body_bytes = 4u << 20;
  size_t max_log_bytes = 256u << 20;
  // Set: every chat completion request (HTTP and gRPC) is appended to this file, once planned, as
  // one JSON line: {"unix_ms", "protocol", "path", "headers" (lower-case names), "body" (whole,
  // as a string; bytes that are not UTF-8 become U+FFFD), "body_bytes", "status", "fault",
  // "cache_salt", "prompt_tokens", "cached_tokens", "processing_us", "peer" (gRPC)}. The file is
  // created if missing and appended to; each line is flushed when written. "": no file (default).
  std::string request_log_path;
  // Reads the time of the processing measurements and of the request log's unix_ms; not owned.
  // nullptr: SystemClock().
  Clock* clock = nullptr;
  // Connection limits. A kept-alive connection waiting for its next request is closed after
  // `idle_timeout_ms`; a request whose head and body take longer than `request_timeout_ms` to
  // arrive is answered 408 and closed; a body over `max_request_bytes` gets 413, a head over
  // `max_header_bytes` 431; beyond `max_connections` open connections a new one gets 503.
  int idle_timeout_ms = 5000;
  int request_timeout_ms = 30000;
  size_t max_request_bytes = 64u << 20;
  size_t max_header_bytes = 64u << 10;
  int max_connections = 1024;
};

// What the simulator received and answered, per request.
struct SimRequestLog {
  std::string protocol;  // "http" or "grpc"
  std::string path;
  std::map<std::string, std::string> headers;  // lower-case names
  std::string body;        // at most SimOptions::max_logged_body_bytes of it
  size_t body_bytes = 0;   // the body's full size
  std::string fault;  // the fault applied, "" none
  std::string cache_salt;
  int64_t prompt_tokens = 0;
  int64_t cached_tokens = 0;
  int status = 0;
  std::string peer;  // gRPC: the client's address (one per connection)
  // The simulator's own work on the request, in microseconds (see the file comment).
  int64_t processing_us = 0;
};

class SimServer {
 public:
  // Binds and starts serving. UNAVAILABLE when a port cannot be bound; INVALID_ARGUMENT for a port
  // outside -1..65535, a bad trajectory, fault spec or error shape, or a request log file that
  // cannot be opened for appending.
  static StatusOr<std::unique_ptr<SimServer>> Start(SimOptions options);
  ~SimServer();  // Stop()s

  int http_port() const;
  int grpc_port() const;
  std::string base_url() const;     // "http://127.0.0.1:<port>/v1"
  std::string grpc_target() const;  // "127.0.0.1:<port>"

  // The next `count` requests (any protocol) get `spec` (see the file comment).
  Status InjectFault(const std::string& spec, int count);
  std::vector<SimRequestLog> requests() const;
  void ClearRequests();
  PrefixCacheModel& cache();
  // HTTP connections accepted so far (keep-alive reuse shows as fewer connections than requests).
  uint64_t connections_accepted() const;
  // gRPC ChatComplete calls ended by the client (cancel) or by their deadline (see sim_grpc.h).
  uint64_t grpc_cancelled_calls() const;

  // Stops accepting, closes every connection and joins the serving threads. Idempotent.
  void Stop();

  class Impl;

 private:
  explicit SimServer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace strata::sim

#endif  // STRATA_APPS_STRATA_SIM_SIM_SERVER_H_
