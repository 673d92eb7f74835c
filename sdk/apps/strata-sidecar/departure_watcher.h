// DepartureWatcher: cancels the upstream request of every gRPC Complete whose client left, with
// one thread for all the calls in flight (service.cc).
//
// Thread safety: Watch() may be called from any thread; the returned handle may be released on any.
#ifndef STRATA_APPS_STRATA_SIDECAR_DEPARTURE_WATCHER_H_
#define STRATA_APPS_STRATA_SIDECAR_DEPARTURE_WATCHER_H_

#include <grpcpp/grpcpp.h>

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <thread>
#include <utility>

#include "strata/transport.h"

namespace strata::sidecar {

// Cancels the token of every watched Complete whose call the client ended or the server stopped
// waiting for (its context IsCancelled): one thread for all the calls in flight, checking them every
// 20 ms, started by the first Watch() and idle while nothing is watched (a thread per call would
// cost a thread start and join on every turn).
class DepartureWatcher {
 public:
  DepartureWatcher() = default;
  DepartureWatcher(const DepartureWatcher&) = delete;
  DepartureWatcher& operator=(const DepartureWatcher&) = delete;
  ~DepartureWatcher() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    if (thread_.joinable()) thread_.join();
  }

  // Watches `context` for `cancel` until the returned object is destroyed; both must outlive it.
  std::shared_ptr<void> Watch(grpc::ServerContext* context, CancellationToken* cancel) {
    uint64_t id = 0;
    {
      std::lock_guard<std::mutex> lock(mu_);
      id = ++next_id_;
      watched_[id] = {context, cancel};
      if (!thread_.joinable()) thread_ = std::thread([this] { Loop(); });
    }
    cv_.notify_all();
    return std::shared_ptr<void>(nullptr, [this, id](void*) {
      std::lock_guard<std::mutex> lock(mu_);
      watched_.erase(id);
    });
  }

 private:
  void Loop() {
    std::unique_lock<std::mutex> lock(mu_);
    while (!stop_) {
      if (watched_.empty()) {
        cv_.wait(lock, [this] { return stop_ || !watched_.empty(); });
        continue;
      }
      for (const auto& [id, call] : watched_) {
        if (call.first->IsCancelled()) call.second->Cancel();
      }
      cv_.wait_for(lock, std::chrono::milliseconds(20));
    }
  }

  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;      // guarded by mu_
  uint64_t next_id_ = 0;   // guarded by mu_
  std::map<uint64_t, std::pair<grpc::ServerContext*, CancellationToken*>> watched_;  // guarded by mu_
  std::thread thread_;     // guarded by mu_
};

}  // namespace strata::sidecar

#endif  // STRATA_APPS_STRATA_SIDECAR_DEPARTURE_WATCHER_H_
