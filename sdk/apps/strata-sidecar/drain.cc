// Draining both listeners at once (drain.h).
#include "drain.h"

#include <condition_variable>
#include <mutex>
#include <thread>

namespace strata::sidecar {

void DrainListeners(grpc::Server& grpc, ContextServiceImpl& service, HttpServer* http,
                    std::chrono::milliseconds timeout) {
  std::thread http_stop;
  if (http != nullptr) {
    // HttpServer::Stop(0) waits without limit: a zero timeout cancels at once instead.
    http_stop = std::thread([http, timeout] {
      http->Stop(timeout.count() > 0 ? timeout : std::chrono::milliseconds(1));
    });
  }
  std::mutex mu;
  std::condition_variable cv;
  bool grpc_done = false;  // guarded by mu
  std::thread canceller([&] {
    std::unique_lock<std::mutex> lock(mu);
    if (!cv.wait_for(lock, timeout, [&] { return grpc_done; })) service.CancelAll();
  });
  grpc.Shutdown(std::chrono::system_clock::now() + timeout + kDrainMargin);
  grpc.Wait();
  {
    std::lock_guard<std::mutex> lock(mu);
    grpc_done = true;
  }
  cv.notify_all();
  canceller.join();
  if (http_stop.joinable()) http_stop.join();
}

}  // namespace strata::sidecar
