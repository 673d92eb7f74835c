// strata/http_transport.h — the Transport over HTTP/1.1 (strata::transport, on libcurl).
//
// Sends Chat Completions bodies to any OpenAI-compatible server (vLLM, SGLang, Z.ai, strata-sim),
// streamed (SSE) or whole, and parses the answer into the Response of strata/transport.h; the gRPC
// transport is in strata/grpc_transport.h.
//
//   strata::HttpTransportOptions options;
//   options.base_url = "http://127.0.0.1:8000/v1";
//   if (const char* key = std::getenv("API_KEY")) options.api_key = key;  // unset: no key
//   std::unique_ptr<strata::Transport> transport = strata::MakeHttpTransport(options).value();
//   strata::Response response;
//   strata::CallOptions call;
//   call.deadline = std::chrono::seconds(60);
//   strata::Status status = transport->Send(request.body, call, &response);
//
// HTTP statuses become Status codes as strata/transport.h lists (429 RESOURCE_EXHAUSTED, 401
// UNAUTHENTICATED, 5xx UNAVAILABLE after retries, ...), the message quoting the server's error.
// Idle connections are pooled and reused; HealthCheck() is GET {base_url}/models; Abort() is
// UNIMPLEMENTED (cancel the call with CallOptions::cancel instead).
//
// Thread safety: the Transport is thread-safe; concurrent Send() calls share the connection pool.
#ifndef STRATA_HTTP_TRANSPORT_H_
#define STRATA_HTTP_TRANSPORT_H_

#include <cstddef>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "strata/clock.h"
#include "strata/status.h"
#include "strata/transport.h"

namespace strata {

// What an HTTP transport is created with (MakeHttpTransport).
struct HttpTransportOptions {
  // Base URL up to and excluding /chat/completions, e.g. "http://127.0.0.1:8000/v1" (vLLM,
  // SGLang) or "https://api.z.ai/api/paas/v4". Required.
  std::string base_url;
  // Sent as "Authorization: Bearer <api_key>" when non-empty. Never logged: messages and
  // records show base_url through RedactUrl(), and the STRATA_CURL_VERBOSE=1 trace redacts the
  // Authorization header and the key. A key with a control character (CR/LF would inject headers)
  // is refused by MakeHttpTransport().
  std::string api_key;
  // A non-empty api_key over plain http:// to a host that is not loopback (localhost, 127.0.0.0/8,
  // [::1]) is refused (INVALID_ARGUMENT) unless this is true: the key would cross the network in
  // clear text. Default false.
  bool allow_insecure = false;
  Timeouts timeouts;  // per attempt (Timeouts); defaults as there
  RetryPolicy retry;  // when failed calls are retried (RetryPolicy)
  // Idle connections kept for reuse. Default 64.
  size_t max_idle_connections = 64;
  // Backoff sleeps, the deadline accounting of retries and the jitter seed (strata/clock.h). Not
  // owned. Default nullptr: SystemClock().
  Clock* clock = nullptr;
  // Extra headers on every request.
  std::vector<std::pair<std::string, std::string>> headers;
  // An answer's body (a whole JSON answer or a stream, SSE framing included) may be at most this
  // big; beyond it the call fails with RESOURCE_EXHAUSTED naming the limit. Bounds the memory a
  // broken or hostile server can make the client hold (an endless stream, SSE without
  // separators). Default 256 MiB, far above a 1M-token answer.
  size_t max_response_bytes = 256u << 20;
};

// An HTTP/1.1 transport over libcurl. INVALID_ARGUMENT for a base_url that is not http(s)://, an
// api_key or header with a control character, or an api_key over http:// to a non-loopback host
// without allow_insecure.
StatusOr<std::unique_ptr<Transport>> MakeHttpTransport(HttpTransportOptions options);

}  // namespace strata

#endif  // STRATA_HTTP_TRANSPORT_H_
