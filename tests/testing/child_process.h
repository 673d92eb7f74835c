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


// A forked child that runs `setup(report_fd)` and then stays alive, holding whatever setup opened
// (a store, a lock), until the parent calls Finish() or destroys it: a second process for the test
// to act against. setup's return value becomes the child's exit code. The child inherits the
// parent's memory: setup should open what it holds itself (the parent must not have it open).
class BackgroundChild {
 public:
  explicit BackgroundChild(const std::function<int(int report_fd)>& setup) {
    int report[2];
    int release[2];
    if (::pipe(report) != 0 || ::pipe(release) != 0) throw std::runtime_error("pipe failed");
    pid_ = ::fork();
    if (pid_ < 0) throw std::runtime_error("fork failed");
    if (pid_ == 0) {
      ::close(report[0]);
      ::close(release[1]);
      int code = 125;
      try {
        code = setup(report[1]);
      } catch (...) {
        code = 126;
      }
      ::close(report[1]);  // the parent's WaitForReport returns
      char byte;
      while (::read(release[0], &byte, 1) < 0 && errno == EINTR) {
      }
      ::_exit(code);
    }
    ::close(report[1]);
    ::close(release[0]);
    report_fd_ = report[0];
    release_fd_ = release[1];
  }
  BackgroundChild(const BackgroundChild&) = delete;
  BackgroundChild& operator=(const BackgroundChild&) = delete;
  ~BackgroundChild() {
    if (pid_ > 0) Finish();
  }

  pid_t pid() const { return pid_; }

  // Everything setup wrote with WriteReport; returns once setup has returned.
  const std::string& WaitForReport() {
    char buffer[4096];
    while (report_fd_ >= 0) {
      ssize_t n = ::read(report_fd_, buffer, sizeof buffer);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) {
        ::close(report_fd_);
        report_fd_ = -1;
        break;
      }
      report_.append(buffer, static_cast<size_t>(n));
    }
    return report_;
  }

  // Lets the child exit and waits for it; how it ended (report: what setup reported).
  ChildOutcome Finish() {
    ChildOutcome outcome;
    if (pid_ <= 0) return outcome;
    WaitForReport();
    ::close(release_fd_);
    int status = 0;
    while (::waitpid(pid_, &status, 0) < 0 && errno == EINTR) {
    }
    pid_ = -1;
    outcome.exited = WIFEXITED(status);
    outcome.exit_code = outcome.exited ? WEXITSTATUS(status) : -1;
    outcome.signal = WIFSIGNALED(status) ? WTERMSIG(status) : 0;
    outcome.report = report_;
    return outcome;
  }

 private:
  pid_t pid_ = -1;
  int report_fd_ = -1;
  int release_fd_ = -1;
  std::string report_;
};

}  // namespace strata::testing

#endif  // STRATA_TESTS_TESTING_CHILD_PROCESS_H_
