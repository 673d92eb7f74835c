#include "store/store_lock.h"

#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <cinttypes>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <vector>

#include "store/schema.h"

namespace strata::store_internal {
namespace {

// "process 1234 (name)"; "this process (pid 1234)" for this one.
std::string DescribeProcess(long pid) {
  if (pid == static_cast<long>(::getpid())) {
    return "this process (pid " + std::to_string(pid) + ", another Store)";
  }
  std::string name;
  std::ifstream comm("/proc/" + std::to_string(pid) + "/comm");
  std::getline(comm, name);
  return "process " + std::to_string(pid) + (name.empty() ? "" : " (" + name + ")");
}

Status InUse(const std::string& path, const std::string& holders, const std::string& how) {
  return FailedPreconditionError(
      "the store " + path + " is in use by " + (holders.empty() ? "another connection" : holders) +
      how +
      ", and a store opened with StoreOptions::exclusive admits no other connection to "
      "the file (through any path: a symlink or a hard link names the same file): stop it, or "
      "open another file");
}

}  // namespace

std::string LockHolders(const std::string& path, bool writers_only) {
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) return "";
  std::ifstream locks("/proc/locks");
  std::vector<long> pids;
  std::string line;
  while (std::getline(locks, line)) {
    // "1: POSIX  ADVISORY  WRITE 1234 fe:00:10954151 1073741824 1073742335"; a waiter's line
    // has "->" after the number.
    std::istringstream in(line);
    std::string number, type, advisory, mode, file;
    long pid = 0;
    if (!(in >> number >> type) || type == "->") continue;
    if (!(in >> advisory >> mode >> pid >> file) || pid <= 0) continue;  // OFD locks: pid -1
    if (writers_only && mode != "WRITE") continue;
    unsigned major_number = 0, minor_number = 0;
    uintmax_t inode = 0;
    if (std::sscanf(file.c_str(), "%x:%x:%" SCNuMAX, &major_number, &minor_number, &inode) != 3) {
      continue;
    }
    if (inode != static_cast<uintmax_t>(st.st_ino) || major_number != major(st.st_dev) ||
        minor_number != minor(st.st_dev)) {
      continue;
    }
    bool seen = false;
    for (long p : pids) seen = seen || p == pid;
    if (!seen) pids.push_back(pid);
  }
  std::string holders;
  for (long pid : pids) holders += (holders.empty() ? "" : ", ") + DescribeProcess(pid);
  return holders;
}

Status LockExclusively(sqlite3* db, const std::string& path, const StoreOptions& options) {
  STRATA_RETURN_IF_ERROR(Exec(db, "PRAGMA locking_mode = EXCLUSIVE", path));
  // A write lock on the file is held only by an exclusive connection (in WAL mode the others lock
  // the -shm file): no use waiting for it.
  if (std::string holders = LockHolders(path, /*writers_only=*/true); !holders.empty()) {
    return InUse(path, holders, " (it holds the file's lock)");
  }
  // Exclusive locking mode keeps the lock this takes until the connection closes.
  int rc = sqlite3_exec(db, "BEGIN IMMEDIATE", nullptr, nullptr, nullptr);
  if ((rc & 0xff) == SQLITE_BUSY) {
    return InUse(path, LockHolders(path, /*writers_only=*/false),
                 " (its lock was not released within the busy timeout of " +
                     std::to_string(options.busy_timeout_ms) + " ms)");
  }
  if (rc != SQLITE_OK) return SqliteStatus(db, rc, "taking the store's lock", path);
  return Exec(db, "COMMIT", path);
}

Status NameLockHolders(const Status& status, const std::string& path) {
  if (status.code() != StatusCode::kUnavailable) return status;
  std::string holders = LockHolders(path, /*writers_only=*/false);
  if (holders.empty()) return status;
  return Status(status.code(),
                status.message() + " (locks on " + path + " are held by " + holders + ")");
}

}  // namespace strata::store_internal
