// Tests of the check every write makes on the store's files: a database file (or its -wal) removed
// or replaced while the store is open, or its files made immutable (chattr +i), refuses the write
// with UNAVAILABLE instead of acknowledging a change a reopen would not find, or crashing.
#include <fcntl.h>
#include <linux/fs.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include "strata/store.h"
#include "testing/child_process.h"
#include "testing/skip.h"
#include "testing/temp_dir.h"

namespace strata {
namespace {

using testing::TempDir;

ContextOptions AgentOptions(const std::string& id) {
  ContextOptions options;
  options.agent.id = id;
  return options;
}

bool Exists(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0;
}

// Sets or clears FS_IMMUTABLE_FL (chattr +i / -i); the errno of a failure, 0 on success.
int SetImmutable(const std::string& path, bool immutable) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return errno;
  int flags = 0;
  int error = 0;
  if (::ioctl(fd, FS_IOC_GETFLAGS, &flags) != 0) {
    error = errno;
  } else {
    flags = immutable ? (flags | FS_IMMUTABLE_FL) : (flags & ~FS_IMMUTABLE_FL);
    if (::ioctl(fd, FS_IOC_SETFLAGS, &flags) != 0) error = errno;
  }
  ::close(fd);
  return error;
}

TEST_CASE(
    "a store whose file was removed while open refuses the next write and acknowledges "
    "nothing",
    "[store][files]") {
  const bool exclusive = GENERATE(false, true);
  INFO("exclusive: " << exclusive);
  TempDir dir;
  const std::string path = dir.File("agents.db");
  StoreOptions options;
  options.exclusive = exclusive;
  auto store = OpenSqliteStore(path, options);
  REQUIRE(store.ok());
  auto context = CreateContext(**store, AgentOptions("a"));
  REQUIRE(context.ok());
  REQUIRE((*context)->AppendUser("kept").ok());
  REQUIRE((*store)->CheckFiles().ok());

  REQUIRE(::unlink(path.c_str()) == 0);
  StatusOr<std::string> append = (*context)->AppendUser("lost if acknowledged");
  REQUIRE(append.status().code() == StatusCode::kUnavailable);
  CHECK_THAT(append.status().message(),
             Catch::Contains("the store " + path + " was removed while the store was open") &&
                 Catch::Contains("Nothing was written") && Catch::Contains("Store::Backup"));
  CHECK((*context)->Segments().size() == 1);  // rolled back: memory agrees with the file
  CHECK((*store)->CheckFiles().code() == StatusCode::kUnavailable);
  CHECK((*store)->CreateAgent(AgentOptions("b")).code() == StatusCode::kUnavailable);
  // What to do: what the store held is still readable, and a backup saves it.
  REQUIRE((*store)->Backup(dir.File("saved.db")).ok());
  auto saved = OpenSqliteStore(dir.File("saved.db"));
  REQUIRE(saved.ok());
  CHECK((*saved)->LoadSnapshot("a")->segments.size() == 1);
  CHECK((*saved)->GetAgent("b").status().code() == StatusCode::kNotFound);
}

TEST_CASE("a store opened by a relative path keeps writing after the process changes directory",
          "[store][files]") {
  TempDir dir;
  char cwd[4096];
  REQUIRE(::getcwd(cwd, sizeof cwd) != nullptr);
  REQUIRE(::chdir(dir.path().c_str()) == 0);
  auto store = OpenSqliteStore("agents.db");
  REQUIRE(::chdir(cwd) == 0);  // "agents.db" now names no file, but the store's file is in place
  REQUIRE(store.ok());
  CHECK((*store)->CreateAgent(AgentOptions("a")).ok());
  CHECK((*store)->CheckFiles().ok());
}

TEST_CASE("a store whose file or -wal was replaced while open refuses writes", "[store][files]") {
  const std::string replaced = GENERATE(std::string(""), std::string("-wal"));
  INFO("replaced: agents.db" << replaced);
  TempDir dir;
  const std::string path = dir.File("agents.db");
  auto store = OpenSqliteStore(path);
  REQUIRE(store.ok());
  REQUIRE((*store)->CreateAgent(AgentOptions("a")).ok());
  REQUIRE(Exists(path + "-wal"));
  const std::string other = dir.File("other");
  std::ofstream(other) << "another file";
  REQUIRE(::rename(other.c_str(), (path + replaced).c_str()) == 0);

  Status status = (*store)->CreateAgent(AgentOptions("b"));
  REQUIRE(status.code() == StatusCode::kUnavailable);
  CHECK_THAT(status.message(), Catch::Contains(path + replaced + " was replaced by another file"));
  CHECK(status.message().find(replaced.empty() ? "the store " : "write-ahead log ") !=
        std::string::npos);
}

TEST_CASE("a store whose files were made immutable refuses writes without a signal",
          "[store][files]") {
  TempDir dir;
  {
    const std::string probe = dir.File("probe");
    std::ofstream(probe) << "x";
    if (int error = SetImmutable(probe, true); error != 0) {
      STRATA_SKIP("cannot make a file immutable in "
                  << dir.path() << " (FS_IOC_SETFLAGS: " << std::strerror(error)
                  << "; needs CAP_LINUX_IMMUTABLE and ext4 "
                     "or another filesystem with the flag)");
    }
    REQUIRE(SetImmutable(probe, false) == 0);
  }
  const bool exclusive = GENERATE(false, true);
  INFO("exclusive: " << exclusive);
  const std::string path = dir.File(exclusive ? "exclusive.db" : "shared.db");
  const std::vector<std::string> files = {path, path + "-wal", path + "-shm"};
  // In a child: without the check, SQLite's next write into the -shm mapping raises SIGBUS.
  testing::ChildOutcome child = testing::RunInChild([&](int report_fd) {
    StoreOptions options;
    options.exclusive = exclusive;
    auto store = OpenSqliteStore(path, options);
    if (!store.ok()) return 3;
    auto context = CreateContext(**store, AgentOptions("a"));
    if (!context.ok() || !(*context)->AppendUser("kept").ok()) return 4;
    for (const std::string& file : files) {
      int fd = ::open(file.c_str(), O_RDONLY | O_CLOEXEC);
      if (fd < 0) continue;  // no -shm in exclusive mode
      ::fsync(fd);  // written back: SQLite's next write to a mapped page faults it in again
      ::close(fd);
      if (SetImmutable(file, true) != 0) return 5;
    }
    StatusOr<std::string> append = (*context)->AppendUser("refused");
    // Reads write marks into the -shm mapping: refused too while it is immutable.
    StatusOr<ContextSnapshot> read = (*store)->LoadSnapshot("a");
    std::string report = append.status().ToString() +
                         "\nread: " + (read.ok() ? "ok" : read.status().ToString()) +
                         "\nsegments: " + std::to_string((*context)->Segments().size());
    context->reset();
    store->reset();  // closing must not checkpoint into the immutable files
    return testing::WriteReport(report_fd, report) ? 0 : 6;
  });
  for (const std::string& file : files) {
    if (Exists(file)) CHECK(SetImmutable(file, false) == 0);
  }
  CHECK(child.signal == 0);
  REQUIRE(child.exited);
  REQUIRE(child.exit_code == 0);
  CHECK_THAT(child.report, Catch::StartsWith("UNAVAILABLE") &&
                               Catch::Contains("is immutable or append-only") &&
                               Catch::Contains("chattr -i -a") && Catch::EndsWith("segments: 1"));
  CHECK_THAT(child.report, Catch::Contains(exclusive ? "read: ok" : "read: UNAVAILABLE"));
  // Nothing of the refused append reached the file.
  auto reopened = OpenSqliteStore(path);
  REQUIRE(reopened.ok());
  CHECK((*reopened)->LoadSnapshot("a")->segments.size() == 1);
}

}  // namespace
}  // namespace strata
