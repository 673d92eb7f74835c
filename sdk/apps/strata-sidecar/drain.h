// drain.h — how strata-sidecar stops on SIGTERM: both listeners drain at once, and stay open
// while they do.
//
// A drain has two steps. First (BeginDrain, at the signal): the gRPC health service answers
// NOT_SERVING, /readyz 503, and new completions are refused (UNAVAILABLE with trailing metadata
// "retry-after", HTTP 503 with Retry-After), while both listeners still accept connections, so a
// load balancer sees the replica drain instead of a refused connection, and the calls in flight
// go on. Then (DrainListeners) the calls in flight get up to `timeout` to finish, waited for
// against one deadline for both listeners; at the deadline those still running are cancelled (gRPC
// Complete: CANCELLED, ContextServiceImpl::CancelAll; the proxy's completions: an error event or
// 499, Proxy::CancelAll). Only then are the listeners closed, within kDrainMargin, and the process
// exits 0: within `timeout` and the margin.
//
// Thread safety: call each once, from the thread that waits for the signal.
#ifndef STRATA_APPS_STRATA_SIDECAR_DRAIN_H_
#define STRATA_APPS_STRATA_SIDECAR_DRAIN_H_

#include <grpcpp/grpcpp.h>

#include <chrono>

#include "http_server.h"
#include "service.h"

namespace strata::sidecar {

// What the calls get after the deadline's cancellation (or after the listeners went idle) before
// the listeners close and gRPC cancels whatever is left.
inline constexpr std::chrono::milliseconds kDrainMargin{1000};

// The first step: NOT_SERVING on `grpc`'s health service, `service` and `http` (nullptr: none)
// refuse new completions; nothing is closed.
void BeginDrain(grpc::Server& grpc, ContextServiceImpl& service, HttpServer* http);

// The second step: waits up to `timeout` (0: cancel at once) for the calls in flight of both
// listeners, cancels what is left, keeps the listeners open until `grace` has passed since the
// call (even when idle earlier), then closes both listeners and returns once they stopped.
void DrainListeners(grpc::Server& grpc, ContextServiceImpl& service, HttpServer* http,
                    std::chrono::milliseconds timeout,
                    std::chrono::milliseconds grace = std::chrono::milliseconds(0));

}  // namespace strata::sidecar

#endif  // STRATA_APPS_STRATA_SIDECAR_DRAIN_H_
