// drain.h — how strata-sidecar stops on SIGTERM: both listeners drain at once.
//
// The gRPC server and the HTTP listener stop accepting calls together and their calls in flight
// get the same `timeout` to finish, waited for concurrently, so the process exits within the
// timeout and a small margin (kDrainMargin). At the timeout, the Complete calls still running are
// cancelled by the service itself (ContextServiceImpl::CancelAll): their clients get CANCELLED,
// as docs/sidecar.md says, and the proxy's completions end the same way (HttpServer::Stop). gRPC
// cancels whatever is left after the margin on its own.
//
// Thread safety: call once, from the thread that waits for the signal.
#ifndef STRATA_APPS_STRATA_SIDECAR_DRAIN_H_
#define STRATA_APPS_STRATA_SIDECAR_DRAIN_H_

#include <grpcpp/grpcpp.h>

#include <chrono>

#include "http_server.h"
#include "service.h"

namespace strata::sidecar {

// What gRPC gives the calls after the service cancelled its own, before it cancels the rest.
inline constexpr std::chrono::milliseconds kDrainMargin{1000};

// Drains `grpc` (serving `service`) and `http` (nullptr: none) concurrently, for up to `timeout`
// each (0: cancel at once), and returns once both stopped.
void DrainListeners(grpc::Server& grpc, ContextServiceImpl& service, HttpServer* http,
                    std::chrono::milliseconds timeout);

}  // namespace strata::sidecar

#endif  // STRATA_APPS_STRATA_SIDECAR_DRAIN_H_
