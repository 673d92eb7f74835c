// Running a command line from a test (the CLI tests) and reading back the files it wrote.
#ifndef STRATA_TESTS_TESTING_COMMAND_H_
#define STRATA_TESTS_TESTING_COMMAND_H_

#include <sys/wait.h>

#include <cstdio>
#include <fstream>
#include <iterator>
#include <string>

namespace strata::testing {

struct CommandResult {
  int exit_code = -1;  // -1 when the command could not start or did not exit normally
  std::string output;  // its standard output (redirections in the command line decide the rest)
};

// Runs `command` through /bin/sh and collects its standard output.
inline CommandResult RunCommand(const std::string& command) {
  CommandResult result;
  FILE* pipe = ::popen(command.c_str(), "r");
  if (pipe == nullptr) return result;
  char buf[4096];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, pipe)) > 0) result.output.append(buf, n);
  const int status = ::pclose(pipe);
  result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return result;
}

// The whole file at `path`; "" when it cannot be read.
inline std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

}  // namespace strata::testing

#endif  // STRATA_TESTS_TESTING_COMMAND_H_
