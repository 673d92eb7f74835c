// CallWatcher: cancels the upstream request of every call in flight whose client left, with one
// thread for all of them (a thread per call would cost a thread start and join on every turn).
// The gRPC service watches its calls' ServerContexts (service.cc), the HTTP proxy its requests'
// sockets (http_connection.cc); what "the client left" means is the probe each passes.
//
// Thread safety: Watch() may be called from any thread; the handle it returns may be released on
// any thread. The probe runs on the watcher's thread with the watcher's lock held, so a subject is
// probed only while its handle is alive.
#ifndef STRATA_APPS_STRATA_SIDECAR_CALL_WATCHER_H_
#define STRATA_APPS_STRATA_SIDECAR_CALL_WATCHER_H_

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <thread>
#include <utility>
#include <vector>

#include "strata/transport.h"

namespace strata::sidecar {

template <typename Subject>
class CallWatcher {
 public:
  // Gets the watched subjects and returns the positions of those whose client left. Must not
  // block (it runs with the lock held); it is called every `interval` while something is watched.
  using Probe = std::function<std::vector<size_t>(const std::vector<Subject>&)>;

  CallWatcher(Probe probe, std::chrono::milliseconds interval)
      : probe_(std::move(probe)), interval_(interval) {}
  CallWatcher(const CallWatcher&) = delete;
  CallWatcher& operator=(const CallWatcher&) = delete;
  ~CallWatcher() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    if (thread_.joinable()) thread_.join();
  }

  // Cancels `cancel` once the probe says `subject`'s client left, until the returned handle is
  // destroyed; the subject and the token must outlive the handle. The thread starts at the first
  // call. A call is first probed one interval after the watcher's next round: watching it wakes the
  // watcher only when the watcher had nothing to watch for two rounds and went to sleep (a call of
  // a busy sidecar costs no wake-up, and no round that probes every call in flight).
  std::shared_ptr<void> Watch(Subject subject, CancellationToken* cancel) {
    uint64_t id = 0;
    bool wake = false;
    {
      std::lock_guard<std::mutex> lock(mu_);
      id = ++next_id_;
      watched_[id] = {std::move(subject), cancel};
      if (!thread_.joinable()) thread_ = std::thread([this] { Loop(); });
      wake = asleep_;
    }
    if (wake) cv_.notify_all();
    return std::shared_ptr<void>(nullptr, [this, id](void*) {
      std::lock_guard<std::mutex> lock(mu_);
      watched_.erase(id);
    });
  }

 private:
  void Loop() {
    std::unique_lock<std::mutex> lock(mu_);
    std::vector<Subject> subjects;
    std::vector<CancellationToken*> tokens;
    int empty_rounds = 0;  // rounds in a row that found nothing to watch
    const auto stopped = [this] { return stop_; };
    while (!stop_) {
      if (watched_.empty() && ++empty_rounds >= 2) {
        asleep_ = true;
        cv_.wait(lock, [this] { return stop_ || !watched_.empty(); });
        asleep_ = false;
        empty_rounds = 0;
        cv_.wait_for(lock, interval_, stopped);  // a call just begun is probed an interval later
        continue;
      }
      if (!watched_.empty()) {
        empty_rounds = 0;
        subjects.clear();
        tokens.clear();
        for (const auto& [id, call] : watched_) {
          subjects.push_back(call.first);
          tokens.push_back(call.second);
        }
        for (size_t left : probe_(subjects)) {
          if (left < tokens.size()) tokens[left]->Cancel();
        }
      }
      cv_.wait_for(lock, interval_, stopped);
    }
  }

  const Probe probe_;
  const std::chrono::milliseconds interval_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;     // guarded by mu_
  bool asleep_ = false;   // the thread waits for something to watch; guarded by mu_
  uint64_t next_id_ = 0;  // guarded by mu_
  std::map<uint64_t, std::pair<Subject, CancellationToken*>> watched_;  // guarded by mu_
  std::thread thread_;                                                   // guarded by mu_
};

}  // namespace strata::sidecar

#endif  // STRATA_APPS_STRATA_SIDECAR_CALL_WATCHER_H_
