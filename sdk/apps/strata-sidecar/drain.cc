// Draining both listeners at once (drain.h).
#include "drain.h"

#include <grpcpp/health_check_service_interface.h>

#include <thread>

namespace strata::sidecar {

void BeginDrain(grpc::Server& grpc, ContextServiceImpl& service, HttpServer* http) {
  if (auto* health = grpc.GetHealthCheckService()) health->SetServingStatus(false);
  service.BeginDrain();
  if (http != nullptr) http->BeginDrain();
}

void DrainListeners(grpc::Server& grpc, ContextServiceImpl& service, HttpServer* http,
                    std::chrono::milliseconds timeout, std::chrono::milliseconds grace) {
  // One deadline for both: the waits run one after the other but end together.
  const auto start = std::chrono::steady_clock::now();
  const auto deadline = start + timeout;
  bool idle = service.WaitIdle(deadline);
  if (http != nullptr) idle = http->WaitIdle(deadline) && idle;
  if (!idle) {
    service.CancelAll();
    if (http != nullptr) http->CancelAll();
  }
  // Open but refusing completions until the grace has passed, so that health checks see the drain.
  std::this_thread::sleep_until(start + grace);
  // The listeners close now; what still runs (a call cancelled a moment ago, a short call that
  // just came in) gets the margin, then gRPC cancels it.
  std::thread http_stop;
  if (http != nullptr) http_stop = std::thread([http] { http->Stop(kDrainMargin); });
  grpc.Shutdown(std::chrono::system_clock::now() + kDrainMargin);
  grpc.Wait();
  if (http_stop.joinable()) http_stop.join();
}

}  // namespace strata::sidecar
