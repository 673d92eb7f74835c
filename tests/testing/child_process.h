// Running part of a test in a forked child process (a second process on the same store, a different
// user, a private mount namespace) and collecting what it reports through a pipe.
#ifndef STRATA_TESTS_TESTING_CHILD_PROCESS_H_
#define STRATA_TESTS_TESTING_CHILD_PROCESS_H_

#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <functional>
#include <stdexcept>
#include <string>
#include <string_view>

namespace strata::testing {

struct ChildOutcome {
  bool exited = false;  // ended by _exit/exit (else killed by a signal)
  int exit_code = -1;   // when exited
  int signal = 0;       // when killed
  std::string report;   // everything the child wrote with WriteReport
};

// Writes all of `text` to the report pipe; false on a write error.
inline bool WriteReport(int report_fd, std::string_view text) {
  size_t written = 0;
  while (written < text.size()) {
    ssize_t n = ::write(report_fd, text.data() + written, text.size() - written);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    written += static_cast<size_t>(n);
  }
  return true;
}

// Forks; the child runs `child(report_fd)` and _exits with its return value (no destructors or
// atexit handlers of the parent's objects run in the child). The parent reads the report until the
// child closes it, waits for the child and returns how it ended. Throws when fork or pipe fails.
inline ChildOutcome RunInChild(const std::function<int(int report_fd)>& child) {
  int fds[2];
  if (::pipe(fds) != 0) throw std::runtime_error("pipe failed");
  pid_t pid = ::fork();
  if (pid < 0) throw std::runtime_error("fork failed");
  if (pid == 0) {
    ::close(fds[0]);
    int code = 125;
    try {
      code = child(fds[1]);
    } catch (...) {
      code = 126;
    }
    ::_exit(code);
  }
  ::close(fds[1]);
  ChildOutcome outcome;
  char buffer[65536];
  for (;;) {
    ssize_t n = ::read(fds[0], buffer, sizeof buffer);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    outcome.report.append(buffer, static_cast<size_t>(n));
  }
  ::close(fds[0]);
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  outcome.exited = WIFEXITED(status);
  outcome.exit_code = outcome.exited ? WEXITSTATUS(status) : -1;
  outcome.signal = WIFSIGNALED(status) ? WTERMSIG(status) : 0;
  return outcome;
}

}  // namespace strata::testing

#endif  // STRATA_TESTS_TESTING_CHILD_PROCESS_H_
