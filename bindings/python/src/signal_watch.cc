// SignalWatch (common.h): Ctrl-C cancels a blocking call that waits with the GIL released.
#include <fcntl.h>
#include <poll.h>
#include <unistd.h>

#include <csignal>

#include "common.h"

namespace strata_py {
namespace {

bool OnMainThread() {
  py::module_ threading = py::module_::import("threading");
  return threading.attr("get_ident")().equal(threading.attr("main_thread")().attr("ident"));
}

void CloseFd(int* fd) {
  if (*fd >= 0) close(*fd);
  *fd = -1;
}

// Writes `n` bytes to the wakeup fd set before ours, as Python's handler would have (it is
// non-blocking: a full pipe drops them, like Python's own handler does).
void Forward(int fd, const char* data, ssize_t n) {
  if (fd < 0 || n <= 0) return;
  ssize_t unused = write(fd, data, static_cast<size_t>(n));
  (void)unused;
}

}  // namespace

SignalWatch::SignalWatch(strata::CancellationToken* token) {
  if (!OnMainThread()) return;
  int wake[2], stop[2];
  if (pipe2(wake, O_NONBLOCK | O_CLOEXEC) != 0) return;  // no watch: Ctrl-C waits for the call
  if (pipe2(stop, O_CLOEXEC) != 0) {
    close(wake[0]);
    close(wake[1]);
    return;
  }
  wake_read_ = wake[0];
  wake_write_ = wake[1];
  stop_read_ = stop[0];
  stop_write_ = stop[1];
  try {
    previous_fd_ = py::module_::import("signal").attr("set_wakeup_fd")(wake_write_).cast<int>();
  } catch (py::error_already_set&) {  // e.g. a subinterpreter: no watch
    CloseFd(&wake_read_);
    CloseFd(&wake_write_);
    CloseFd(&stop_read_);
    CloseFd(&stop_write_);
    return;
  }
  int wake_read = wake_read_, stop_read = stop_read_, previous = previous_fd_;
  watcher_ = std::thread([wake_read, stop_read, previous, token] {
    pollfd fds[2] = {{wake_read, POLLIN, 0}, {stop_read, POLLIN, 0}};
    while (true) {
      if (poll(fds, 2, -1) < 0) continue;  // EINTR
      if (fds[0].revents & POLLIN) {
        char bytes[64];
        ssize_t n = read(wake_read, bytes, sizeof(bytes));
        for (ssize_t i = 0; i < n; ++i) {
          if (static_cast<unsigned char>(bytes[i]) == SIGINT) token->Cancel();
        }
        Forward(previous, bytes, n);
      }
      if (fds[1].revents) return;
    }
  });
}

SignalWatch::~SignalWatch() {
  if (!watcher_.joinable()) return;
  try {
    py::module_::import("signal").attr("set_wakeup_fd")(previous_fd_);
  } catch (py::error_already_set&) {
    // Cannot happen on the main thread with a valid fd; nothing better to do in a destructor.
  }
  char byte = 0;
  ssize_t unused = write(stop_write_, &byte, 1);
  (void)unused;
  watcher_.join();
  // Bytes that arrived after the watcher's last read still belong to the previous wakeup fd.
  char bytes[64];
  ssize_t n;
  while ((n = read(wake_read_, bytes, sizeof(bytes))) > 0) Forward(previous_fd_, bytes, n);
  CloseFd(&wake_read_);
  CloseFd(&wake_write_);
  CloseFd(&stop_read_);
  CloseFd(&stop_write_);
}

}  // namespace strata_py
