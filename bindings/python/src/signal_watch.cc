// SignalWatch (common.h): Ctrl-C cancels a blocking call that waits with the GIL released.
//
// One watcher thread per process, started by the first watch, reads a pipe forever; a watch makes
// that pipe Python's wakeup fd for the duration of its call and registers its call's token, so a
// call pays two set_wakeup_fd calls, not a thread.
#include <fcntl.h>
#include <poll.h>
#include <unistd.h>

#include <algorithm>
#include <csignal>
#include <mutex>
#include <thread>
#include <vector>

#include "common.h"

namespace strata_py {
namespace {

class Watcher {
 public:
  // The process's watcher, or nullptr when no pipe could be made (no watch then: Ctrl-C waits
  // for the call). Requires the GIL (which serializes the first call).
  static Watcher* Get() {
    static Watcher* watcher = Make();
    return watcher;
  }

  int fd() const { return write_fd_; }

  // The wakeup fd set before the outermost watch: where the bytes are forwarded.
  void Push(strata::CancellationToken* token, int previous_fd) {
    std::lock_guard<std::mutex> lock(mu_);
    if (tokens_.empty()) forward_fd_ = previous_fd;
    tokens_.push_back(token);
  }
  void Pop(strata::CancellationToken* token) {
    std::lock_guard<std::mutex> lock(mu_);
    tokens_.erase(std::find(tokens_.begin(), tokens_.end(), token));
  }

 private:
  static Watcher* Make() {
    int fds[2];
    if (pipe2(fds, O_NONBLOCK | O_CLOEXEC) != 0) return nullptr;
    auto* w = new Watcher(fds[0], fds[1]);  // lives as long as the process, like its thread
    std::thread([w] { w->Loop(); }).detach();
    return w;
  }
  Watcher(int read_fd, int write_fd) : read_fd_(read_fd), write_fd_(write_fd) {}

  void Loop() {
    pollfd p = {read_fd_, POLLIN, 0};
    while (true) {
      if (poll(&p, 1, -1) <= 0) continue;  // EINTR
      char bytes[64];
      ssize_t n = read(read_fd_, bytes, sizeof(bytes));
      if (n <= 0) continue;
      std::lock_guard<std::mutex> lock(mu_);
      for (ssize_t i = 0; i < n; ++i) {
        if (static_cast<unsigned char>(bytes[i]) != SIGINT) continue;
        for (strata::CancellationToken* token : tokens_) token->Cancel();
      }
      // As Python's own handler does: a full (non-blocking) pipe drops the bytes.
      if (forward_fd_ >= 0) {
        ssize_t unused = write(forward_fd_, bytes, static_cast<size_t>(n));
        (void)unused;
      }
    }
  }

  const int read_fd_, write_fd_;
  std::mutex mu_;
  std::vector<strata::CancellationToken*> tokens_;  // guarded by mu_: the calls being watched
  int forward_fd_ = -1;                             // guarded by mu_
};

bool OnMainThread() {
  py::module_ threading = py::module_::import("threading");
  return threading.attr("get_ident")().equal(threading.attr("main_thread")().attr("ident"));
}

}  // namespace

SignalWatch::SignalWatch(strata::CancellationToken* token) : token_(token) {
  if (!OnMainThread()) return;
  Watcher* watcher = Watcher::Get();
  if (watcher == nullptr) return;
  try {
    previous_fd_ = py::module_::import("signal").attr("set_wakeup_fd")(watcher->fd()).cast<int>();
  } catch (py::error_already_set&) {  // e.g. a subinterpreter: no watch
    return;
  }
  // A nested watch (a tool handler's own call) finds the watcher's fd already set: the bytes keep
  // going where the outermost watch forwards them.
  watcher->Push(token, previous_fd_ == watcher->fd() ? -1 : previous_fd_);
  active_ = true;
}

SignalWatch::~SignalWatch() {
  if (!active_) return;
  Watcher::Get()->Pop(token_);
  try {
    py::module_::import("signal").attr("set_wakeup_fd")(previous_fd_);
  } catch (py::error_already_set&) {
    // Cannot happen on the main thread with a valid fd; nothing better to do in a destructor.
  }
}

}  // namespace strata_py
