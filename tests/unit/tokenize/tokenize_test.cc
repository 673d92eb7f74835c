// MakeTokenizer's file checks (tokenize.cc): only a regular file below kMaxTokenizerFileBytes is
// read, and a FIFO, a device or a directory is refused without waiting.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <csignal>
#include <cstdlib>
#include <string>

#include "strata/tokenizer_spec.h"
#include "testing/child_process.h"
#include "testing/temp_dir.h"

namespace {

using strata::testing::ChildOutcome;
using strata::testing::RunInChild;
using strata::testing::WriteReport;

using strata::testing::TempDir;

// MakeTokenizer(spec) in a child process with a watchdog: a call that blocks is killed by SIGALRM
// after 20 s and fails the test instead of hanging the run. The child reports "<code>\n<message>".
ChildOutcome MakeInChild(const std::string& spec) {
  return RunInChild([&](int report) {
    ::alarm(20);
    auto made = strata::MakeTokenizer(spec);
    std::string text = made.ok() ? std::string("OK\n")
                                 : std::to_string(static_cast<int>(made.status().code())) + "\n" +
                                       made.status().message();
    return WriteReport(report, text) ? 0 : 1;
  });
}

void RequireRefusedAsNotRegular(const std::string& spec, const std::string& kind) {
  ChildOutcome outcome = MakeInChild(spec);
  INFO(spec << ": " << outcome.report);
  REQUIRE(outcome.signal != SIGALRM);  // it blocked
  REQUIRE(outcome.exited);
  REQUIRE(outcome.exit_code == 0);
  CHECK(outcome.report.rfind(
            std::to_string(static_cast<int>(strata::StatusCode::kInvalidArgument)) + "\n", 0) == 0);
  CHECK_THAT(outcome.report, Catch::Contains("is " + kind + ", not a regular file"));
}

}  // namespace

TEST_CASE("a FIFO as tokenizer file is refused at once, with or without a writer", "[tokenize]") {
  TempDir dir;
  REQUIRE(!dir.path().empty());
  const std::string fifo = dir.path() + "/tokenizer.json";
  REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
  RequireRefusedAsNotRegular("hf:" + fifo, "a FIFO");
  RequireRefusedAsNotRegular("spm:" + fifo, "a FIFO");
}

TEST_CASE("a pipe named through /proc/self/fd is refused without blocking", "[tokenize]") {
  int fds[2];
  REQUIRE(::pipe(fds) == 0);
  RequireRefusedAsNotRegular("hf:/proc/self/fd/" + std::to_string(fds[0]), "a FIFO");
  ::close(fds[0]);
  ::close(fds[1]);
}

TEST_CASE("/dev/zero and a directory as tokenizer files are refused", "[tokenize]") {
  RequireRefusedAsNotRegular("hf:/dev/zero", "a character device");
  RequireRefusedAsNotRegular("spm:/dev/zero", "a character device");
  TempDir dir;
  REQUIRE(!dir.path().empty());
  RequireRefusedAsNotRegular("hf:" + dir.path(), "a directory");
}

TEST_CASE("a tokenizer file above kMaxTokenizerFileBytes is refused before it is read",
          "[tokenize]") {
  TempDir dir;
  REQUIRE(!dir.path().empty());
  const std::string big = dir.path() + "/tokenizer.json";
  int fd = ::open(big.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
  REQUIRE(fd >= 0);
  // Sparse: costs no disk space.
  REQUIRE(::ftruncate(fd, static_cast<off_t>(strata::kMaxTokenizerFileBytes + 1)) == 0);
  ::close(fd);
  auto made = strata::MakeTokenizer("hf:" + big);
  REQUIRE_FALSE(made.ok());
  CHECK(made.status().code() == strata::StatusCode::kInvalidArgument);
  CHECK_THAT(made.status().message(),
             Catch::Contains(std::to_string(strata::kMaxTokenizerFileBytes + 1) + " bytes") &&
                 Catch::Contains("above the limit of tokenizer files"));
}

TEST_CASE("a small regular tokenizer file passes the file checks", "[tokenize]") {
  TempDir dir;
  REQUIRE(!dir.path().empty());
  const std::string empty = dir.path() + "/tokenizer.json";
  int fd = ::open(empty.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
  REQUIRE(fd >= 0);
  REQUIRE(::write(fd, "{}", 2) == 2);
  ::close(fd);
  // Read (it is a regular file), then refused as a tokenizer.json without a model.
  auto made = strata::MakeTokenizer("hf:" + empty);
  REQUIRE_FALSE(made.ok());
  CHECK_THAT(made.status().message(),
             !Catch::Contains("not a regular file") && !Catch::Contains("above the limit"));
}
