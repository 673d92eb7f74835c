// http_server.h — strata-sidecar's HTTP listener (cpp-httplib), plain or TLS.
//
// Routes:
//   POST /v1/chat/completions  the OpenAI-compatible proxy (proxy.h)
//   GET  /v1/models            passed through to the upstream
//   GET  /v1/strata/agents/{id}/recall/{recall_id}?offset=&max_tokens=
//                              a page of an original hygiene or compaction altered (Proxy::Recall)
//   GET  /metrics              the text of ServeOptions::metrics (Prometheus exposition), for
//                              the metrics tokens only (Authenticator::AuthorizeMetrics)
//   GET  /healthz              200 while the process serves (never authenticated)
//   GET  /readyz               200 when ready: the store is open (ready() says so) and not
//                              draining; 503 otherwise (never authenticated)
//   GET  <prefix>...           each of HttpServerOptions::get_routes (the console's /ui,
//                              console_routes.h), which authenticates its own requests
// Connections are read as http_connection.h says: a deadline on each request head, a cap on the
// connections of one client address, and the head checked against RFC 9112 before any route.
// A chat completion whose client closes its connection is cancelled (its upstream request
// stops and its agent is released).
// Every other call carries "Authorization: Bearer <token>", checked by the Authenticator (401 in
// OpenAI's error shape otherwise; with no tenants configured, no header is needed). Bodies above
// the caller's tenant's max_request_bytes are refused with 413 (above the largest tenant's
// limit, before they are read). While draining, new chat completions get 503 with Retry-After
// and /readyz 503, while the listener still accepts connections; completions in flight finish.
//
//   HttpServerOptions options;
//   options.listen = "127.0.0.1:0";
//   options.authenticator = &authenticator;
//   options.proxy = &proxy;
//   STRATA_ASSIGN_OR_RETURN(std::unique_ptr<HttpServer> server, HttpServer::Start(options));
//   std::cout << "http listening on " << server->host() << ":" << server->port() << "\n";
//   ...
//   server->BeginDrain();
//   server->Stop(std::chrono::seconds(10));  // in-flight requests get 10 s, then are cancelled
//
// Thread safety: every method may be called from any thread; the Authenticator, Proxy and
// callbacks must outlive the server and be thread-safe.
#ifndef STRATA_APPS_STRATA_SIDECAR_HTTP_SERVER_H_
#define STRATA_APPS_STRATA_SIDECAR_HTTP_SERVER_H_

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "proxy.h"
#include "sidecar_config.h"
#include "strata/status.h"
#include "tenants.h"

namespace strata::sidecar {

// A GET request as HttpServerOptions::get_routes see it.
struct HttpGetRequest {
  std::string path;                                // decoded, without the query
  std::multimap<std::string, std::string> params;  // the query's parameters, decoded
  std::string authorization;                       // the Authorization header ("" absent)
};

// GET requests of `prefix` and of the paths under it ("<prefix>/..."), answered by `handle`.
struct HttpGetRoute {
  std::string prefix;  // e.g. "/ui"; made of [A-Za-z0-9/_-] only
  std::function<HttpReply(const HttpGetRequest& request)> handle;
};

struct HttpServerOptions {
  std::string listen = "127.0.0.1:0";            // HOST:PORT; port 0 binds a free port
  TlsConfig tls;                                 // cert/key PEM files: HTTPS; client_ca_file: mTLS
  const Authenticator* authenticator = nullptr;  // required
  Proxy* proxy = nullptr;                        // required
  // GET /metrics serves its text (text/plain; version=0.0.4). Empty: /metrics is 404.
  std::function<std::string()> metrics;
  // Readiness besides draining (e.g. the store is open). Empty: ready.
  std::function<bool()> ready;
  // Requests handled at once (streams included); more wait for a free thread. Default 64.
  int threads = 64;
  // The whole request head must arrive within this, or the connection gets 408 and is closed
  // (http_connection.h: a client dripping its head holds a thread no longer).
  std::chrono::milliseconds head_timeout{10000};
  // Connections one client address may hold at once (more get 429 and are closed); 0: no limit.
  int max_connections_per_client = 32;
  // More GET routes (the console). Their handlers must be thread-safe and outlive the server.
  std::vector<HttpGetRoute> get_routes;
};

class HttpServer {
 public:
  // Binds and starts serving on its own threads. INVALID_ARGUMENT for a bad listen address or
  // missing authenticator/proxy; UNAVAILABLE when the address cannot be bound or the TLS files
  // cannot be loaded (the message names the file).
  static StatusOr<std::unique_ptr<HttpServer>> Start(HttpServerOptions options);
  ~HttpServer();  // Stop()s
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  const std::string& host() const;
  int port() const;  // the bound port

  // /readyz answers 503 and new chat completions are refused with 503 (and Retry-After) from now
  // on; the listener stays open and the completions in flight go on.
  void BeginDrain();
  bool draining() const;
  // Waits until no chat completion is being answered or `deadline` passes; true when none is.
  bool WaitIdle(std::chrono::steady_clock::time_point deadline);
  // Cancels the chat completions in flight (Proxy::CancelAll): the end of a drain's deadline.
  void CancelAll();
  // Stops accepting connections and returns once the requests in flight are answered; those
  // still running after `drain_timeout` (0: no limit) are cancelled (Proxy::CancelAll: a stream
  // ends with an error event, a plain completion gets 499). Idempotent.
  void Stop(std::chrono::milliseconds drain_timeout = std::chrono::milliseconds(0));

  class Impl;

 private:
  explicit HttpServer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace strata::sidecar

#endif  // STRATA_APPS_STRATA_SIDECAR_HTTP_SERVER_H_
