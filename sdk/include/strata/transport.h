// strata/transport.h — the Transport interface: sending a Chat Completions request to a model
// endpoint.
//
// A Transport sends one OpenAI Chat Completions request body (as built by Context::Build()) to an
// endpoint and returns the parsed Response: content, reasoning, tool calls, finish reason, usage
// (with the server's cached-token count when it reports one) and timings. This header holds what
// every transport shares: the interface, the Response, the per-call CallOptions and the RetryPolicy
// and Timeouts transports are created with. Two implementations: HTTP over libcurl (vLLM, SGLang,
// Z.ai, any OpenAI-compatible server; SSE streaming or not), strata/http_transport.h, and gRPC to
// SGLang's native `sglang.runtime.v1.SglangService`, strata/grpc_transport.h. Both share one
// response parser, so a body gives the same Response over either; a PoolSet (strata/pools.h) is a
// Transport over several of them.
//
//   // strata::MakeHttpTransport(), strata::MakeGrpcTransport() or a strata::PoolSet:
//   std::unique_ptr<strata::Transport> transport = strata::MakeHttpTransport(options).value();
//   strata::Response response;
//   strata::CallOptions call;
//   call.deadline = std::chrono::seconds(60);
//   strata::Status status = transport->Send(request.body, call, &response);
//   if (status.ok()) use(response.content, response.usage.cached_tokens);
//
// The body is sent byte for byte (backend-specific fields are added when the body is built, see
// strata/client.h ProfileFields()), with one exception: retry n of a call replaces a top-level
// "rid"/"request_id" string (and the X-Request-Id header) with "<id>-retry<n>", because SGLang and
// vLLM refuse an id that may still be running from the attempt that failed. Streaming or not is read from
// the response (text/event-stream or JSON), so the body's own "stream" field decides.
//
// Errors (Status codes): CANCELLED (CallOptions::cancel), DEADLINE_EXCEEDED (a timeout or the
// deadline), UNAVAILABLE (connection failed, 5xx after retries, connection lost mid-stream),
// RESOURCE_EXHAUSTED (429 after retries, or a prompt over the endpoint's context length),
// INVALID_ARGUMENT (other 400s), UNAUTHENTICATED / PERMISSION_DENIED (401 / 403), NOT_FOUND (404),
// DATA_LOSS (malformed or truncated stream). The message quotes the server's error message.
//
// Thread safety: every Transport is thread-safe; one instance may serve concurrent Send() calls
// from many threads (connections are pooled and reused).
#ifndef STRATA_TRANSPORT_H_
#define STRATA_TRANSPORT_H_

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "strata/pool_call.h"
#include "strata/segment.h"
#include "strata/status.h"

namespace strata {

// Token usage as reported by the server.
struct Usage {
  bool reported = false;  // the response carried a usage object
  int64_t prompt_tokens = 0;      // input tokens the server counted
  int64_t completion_tokens = 0;  // output tokens, reasoning included
  int64_t total_tokens = 0;       // prompt_tokens + completion_tokens as the server reports it
  // prompt_tokens_details.cached_tokens; std::nullopt when absent or null (vLLM without
  // --enable-prompt-tokens-details, SGLang without --enable-cache-report).
  std::optional<int64_t> cached_tokens;
  int64_t reasoning_tokens = 0;  // completion_tokens_details.reasoning_tokens, 0 if absent
};

// Wall-clock measurements of one Send(), in milliseconds (steady clock).
struct Timings {
  double ttft_ms = 0;         // start of the successful attempt to the first generated token
  double decode_ms = 0;       // first token to the last one
  double total_ms = 0;        // the whole call, retries and backoff included
  double retry_wait_ms = 0;   // time spent in backoff between attempts
};

// What Transport::Send() parsed from one answer (streamed or not; see the file comment).
struct Response {
  std::string id;     // the server's completion id
  std::string model;  // the model that answered
  std::string content;  // the answer's text (content deltas concatenated)
  std::string reasoning;  // from "reasoning" or "reasoning_content"
  std::vector<ToolCall> tool_calls;  // in index order; arguments exactly as streamed
  std::string finish_reason;  // stop, length, tool_calls, content_filter, abort
  Usage usage;      // the server's token counts
  Timings timings;  // measured by the transport
  bool streamed = false;  // the answer came as a stream of chunks
  // Filled on success and on failure, so that a record can say what happened:
  int attempts = 0;       // 1 + retries
  int http_status = 0;    // last HTTP status; 0 for gRPC or when no response arrived
};

// Cancels in-flight calls that were given this token. Thread-safe; may be cancelled from any thread.
class CancellationToken {
 public:
  // Cancels every call given this token, now and later (there is no reset).
  void Cancel() { cancelled_.store(true, std::memory_order_release); }
  // True once Cancel() was called.
  bool cancelled() const { return cancelled_.load(std::memory_order_acquire); }

 private:
  std::atomic<bool> cancelled_{false};
};

// One streamed fragment of an answer, handed to CallOptions::on_delta as it arrives (a whole,
// non-streamed answer gives one delta per field).
struct StreamDelta {
  // Which part of the answer a fragment belongs to.
  enum class Kind : int { kContent = 0, kReasoning = 1, kToolCallArguments = 2 };
  Kind kind = Kind::kContent;  // the part this fragment extends
  std::string text;            // the fragment, exactly as received
  int tool_call_index = 0;    // kToolCallArguments: the call's index in the answer
  std::string tool_call_id;   // kToolCallArguments: the call's id once known, else ""
  std::string tool_name;      // kToolCallArguments: the function name once known, else ""
  // True when another fragment that arrived with this one is handed on right after it (the HTTP
  // transport hands on together what one pass over the connection read): a consumer that
  // forwards fragments may hold this one and send them together without delaying any. False for
  // the last fragment of a pass, and always from the gRPC transport.
  bool more_follows = false;
};

// Per-call options of Transport::Send().
struct CallOptions {
  // Total time budget of the call including retries. Default 0: the transport's total timeout.
  std::chrono::milliseconds deadline{0};
  // Not owned. Cancel() makes Send() return CANCELLED promptly (within ~50 ms). Default nullptr:
  // not cancellable.
  const CancellationToken* cancel = nullptr;
  // Sent as the X-Request-Id header (HTTP) and used by Abort(); "" sends none.
  std::string request_id;
  // Extra request headers (HTTP) or metadata (gRPC, lower-cased names), e.g. tracing headers.
  std::vector<std::pair<std::string, std::string>> headers;
  // Prompt size hint for the first-byte timeout (Timeouts::prefill_per_100k_tokens). Default 0:
  // estimated from the body as bytes/4.
  int64_t prompt_tokens = 0;
  // Called on the sending thread with each content, reasoning and tool-call-argument fragment as
  // the response parser sees it (before Send() returns). May be empty. Must not throw.
  std::function<void(const StreamDelta&)> on_delta;
  // For a PoolSet transport (strata/pools.h): the handler that compacts or forks this request when
  // its pool is full (e.g. the Agent that sent it), and that is told the pool's decision. Ignored
  // by other transports. Not owned. Default nullptr: the PoolSet's own handler, if any.
  DegradationHandler* degradation = nullptr;
};

// The most attempts one call makes, whatever RetryPolicy::max_attempts says: a server answering
// 429 with Retry-After: 0 gets at most this many requests per call.
inline constexpr int kMaxRetryAttempts = 10;

// When and how long a transport waits before sending a failed request again.
struct RetryPolicy {
  // Attempts in total (1 = no retry), at most kMaxRetryAttempts. Default 4.
  int max_attempts = 4;
  // Backoff before retry n (n = 1, 2, ...) is min(max_backoff, initial_backoff * 2^(n-1)), of which
  // a random half is jitter: delay = d/2 + U[0,1) * d/2. Defaults 200 ms and 10 s.
  std::chrono::milliseconds initial_backoff{200};
  std::chrono::milliseconds max_backoff{10000};  // see initial_backoff. Default 10 s
  // A server's Retry-After (seconds) replaces the backoff, capped at this. Default 60 s.
  std::chrono::milliseconds max_retry_after{60000};
  // The waits between the attempts of one call add up to at most this; a retry that would exceed
  // it is not made (the last error is returned, saying so). Default 5 min.
  std::chrono::milliseconds max_total_retry_wait{300000};
  // Retry on connection failures, 429 and 500/502/503/504. Never after the first byte of a
  // successful (2xx) response body: a broken stream is returned, not re-sent. Default true.
  bool retry_enabled = true;
  // Returns U[0,1) for the jitter. nullptr: a generator seeded with `seed` (0: the transport's
  // Clock::Random64()).
  std::function<double()> uniform01;
  uint64_t seed = 0;  // see uniform01. Default 0
};

// Transfer timeouts. Measured on the steady clock (they bound real network waits).
struct Timeouts {
  std::chrono::milliseconds connect{10000};      // TCP (+TLS) connect; default 10 s
  // Request sent -> first BODY byte (first SSE event, first gRPC message), not the response
  // headers: vLLM and SGLang send headers at once and the first token only after the prefill.
  // The floor of the first-byte timeout; default 5 min (see prefill_per_100k_tokens).
  std::chrono::milliseconds first_byte{300000};
  std::chrono::milliseconds idle{60000};         // gap between two body bytes; 60 s
  std::chrono::milliseconds total{900000};       // one attempt, default 15 min
  // The first-byte timeout grows by this per 100K prompt tokens; `first_byte` becomes the floor.
  std::chrono::milliseconds prefill_per_100k_tokens{60000};
};

// Sends Chat Completions requests to one endpoint (see the file comment). Implementations:
// MakeHttpTransport() (strata/http_transport.h), MakeGrpcTransport() (strata/grpc_transport.h).
class Transport {
 public:
  virtual ~Transport() = default;

  // "http" or "grpc".
  virtual std::string Name() const = 0;
  // The base URL or gRPC target, for records.
  virtual std::string Endpoint() const = 0;

  // Sends `body` (a Chat Completions request, UTF-8 JSON) and parses the answer into *response.
  // *response is reset first; on error its attempts, http_status and timings still say what
  // happened, and its content is unspecified. See the file comment for the error codes.
  virtual Status Send(std::string_view body, const CallOptions& options, Response* response) = 0;

  // OK when the endpoint answers its health check (HTTP GET {base}/models, gRPC HealthCheck).
  virtual Status HealthCheck(std::chrono::milliseconds timeout) = 0;

  // Asks the server to abort the request with `request_id` (gRPC Abort; HTTP: UNIMPLEMENTED, the
  // in-flight call is cancelled with a CancellationToken instead).
  virtual Status Abort(const std::string& request_id) = 0;
};

// `url` with the user:password@ part of its authority replaced by "[redacted]@"
// ("http://u:pw@host:8000/v1" -> "http://[redacted]@host:8000/v1"); other URLs unchanged. What
// Transport::Endpoint(), records and messages show; use it wherever an endpoint is printed.
std::string RedactUrl(std::string_view url);

}  // namespace strata

#endif  // STRATA_TRANSPORT_H_
