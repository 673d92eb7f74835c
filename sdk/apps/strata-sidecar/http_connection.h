// http_connection.h — how strata-sidecar's HTTP listener (http_server.h) reads its connections.
//
// cpp-httplib gives each connection a thread of the listener's pool and times out each recv()
// on its own, so a client that drips its request head (a byte every few seconds) holds a thread
// for as long as it likes, and 64 such clients stop the listener. Here, before cpp-httplib sees
// a request:
//   - a client address holds at most ConnectionLimits::max_per_client connections at once (more
//     are answered 429, or over TLS closed, at once);
//   - the whole request head (request line and header fields) must arrive within
//     ConnectionLimits::head_timeout of the connection's start (or of the end of the previous
//     request on a kept-alive connection): a late head gets 408 and the connection is closed;
//   - the head is read whole and checked against RFC 9112 (CheckRequestHead): a malformed one is
//     answered at once (400, 413, 414, 431) and the connection closed, since its framing cannot
//     be trusted.
// While a request runs, the request's handler can ask to be told when the client closes its
// connection (ClientWatch), so that work done for it stops.
//
// Thread safety: CheckRequestHead is a pure function. The server classes are cpp-httplib
// servers: every method may be called from any thread.
#ifndef STRATA_APPS_STRATA_SIDECAR_HTTP_CONNECTION_H_
#define STRATA_APPS_STRATA_SIDECAR_HTTP_CONNECTION_H_

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "sidecar_config.h"
#include "strata/status.h"
#include "strata/transport.h"

namespace httplib {
class Server;
}  // namespace httplib

namespace strata::sidecar {

// The listener's limits on connections and request heads.
struct ConnectionLimits {
  // The whole request head must arrive within this (HttpServerOptions::head_timeout).
  std::chrono::milliseconds head_timeout{10000};
  // Connections one client address may hold at once; 0: no limit.
  int max_per_client = 32;
  // The request line at most, in bytes (its end excluded): longer is 414.
  size_t max_request_line = 8190;
  // The whole head at most, in bytes: larger is 431.
  size_t max_head_bytes = 64 * 1024;
  // A Content-Length above this is 413 before the body is read.
  int64_t max_body_bytes = 4 << 20;
  // Waiting for the next request of a kept-alive connection, at most.
  std::chrono::milliseconds keep_alive_timeout{2000};
  // Each read or write of a body waits at most this long for the socket.
  std::chrono::milliseconds io_timeout{30000};
};

// A refused request head: the HTTP status, an error code for OpenAI's error shape and what was
// wrong. status 0: the head is acceptable.
struct HeadVerdict {
  int status = 0;
  std::string code;
  std::string message;
};

// Checks one request head: `head` is the request line and header fields up to and including the
// empty line that ends them. Refused (RFC 9112): a request line that is not METHOD SP TARGET SP
// HTTP/1.x (400) or above max_request_line (414); a field line that starts with whitespace
// (obs-fold), has no colon, whitespace before its colon, a name that is not a token, a control
// character in its value, or a bare CR or LF (400); a Content-Length that is not a decimal number
// (400), differs from another Content-Length (400) or is above max_body_bytes (413); a
// Transfer-Encoding other than exactly "chunked", more than one, one in an HTTP/1.0 request, or
// one beside Content-Length (400); more than one Host, Authorization or X-Strata-Agent (400).
HeadVerdict CheckRequestHead(std::string_view head, const ConnectionLimits& limits);

// Registers `token` to be cancelled when the client of the request being handled closes its
// connection; the watch ends when the returned object is destroyed. Empty: nothing is watched.
using ClientWatch = std::function<std::shared_ptr<void>(CancellationToken* token)>;

// A cpp-httplib server that reads its connections as above: plaintext, or TLS from `tls`'s PEM
// files. UNAVAILABLE when the TLS files do not make a certificate and its key.
StatusOr<std::unique_ptr<httplib::Server>> MakeGuardedServer(const TlsConfig& tls,
                                                             const ConnectionLimits& limits);

// Connections a listener made by MakeGuardedServer lets wait to be accepted. cpp-httplib listens
// with a backlog of 5: a burst of more new clients than that loses SYNs, which a client sends again
// only after a second (the p99 of a proxy under 32 clients).
inline constexpr int kListenBacklog = 1024;
// Sets the listen backlog of `server` (made by MakeGuardedServer, bound to its port) to
// kListenBacklog; nothing for another server or one not bound yet.
void WidenListenBacklog(httplib::Server& server);

// The ClientWatch of the request this thread is handling (inside a handler of a server made by
// MakeGuardedServer, its streamed content included); empty elsewhere.
ClientWatch CurrentClientWatch();

// The positions in `sockets` of those whose peer closed its side (POLLRDHUP, POLLHUP or POLLERR),
// checked without waiting: the probe of the proxy's CallWatcher (call_watcher.h).
std::vector<size_t> ClosedByPeer(const std::vector<int>& sockets);

}  // namespace strata::sidecar

#endif  // STRATA_APPS_STRATA_SIDECAR_HTTP_CONNECTION_H_
