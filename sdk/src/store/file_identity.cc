#include "store/file_identity.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace strata::store_internal {
namespace {

struct Seen {
  bool exists = false;
  dev_t dev = 0;
  ino_t ino = 0;
  bool locked = false;  // immutable or append-only: no write can succeed
  int error = 0;        // errno of a failure other than "missing"
};

Seen Look(const std::string& path) {
  Seen seen;
#if defined(STATX_ATTR_IMMUTABLE)
  struct statx st;
  if (::statx(AT_FDCWD, path.c_str(), 0, STATX_INO, &st) != 0) {
    seen.error = errno == ENOENT ? 0 : errno;
    return seen;
  }
  seen.exists = true;
  seen.dev = makedev(st.stx_dev_major, st.stx_dev_minor);
  seen.ino = st.stx_ino;
  const uint64_t locking = STATX_ATTR_IMMUTABLE | STATX_ATTR_APPEND;
  seen.locked = (st.stx_attributes & st.stx_attributes_mask & locking) != 0;
#else
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) {
    seen.error = errno == ENOENT ? 0 : errno;
    return seen;
  }
  seen.exists = true;
  seen.dev = st.st_dev;
  seen.ino = st.st_ino;
#endif
  return seen;
}

// `path` made absolute against the working directory of now: a later chdir() of the process must
// not make the store's own file look removed.
std::string Absolute(const std::string& path) {
  if (path.empty() || path[0] == '/') return path;
  char cwd[4096];
  if (::getcwd(cwd, sizeof cwd) == nullptr) return path;
  return std::string(cwd) + "/" + path;
}

}  // namespace

void StoreFiles::Record(const std::string& path, const std::string& db_file, bool uses_shm) {
  files_.clear();
  files_.push_back(File{Absolute(path), "the store"});
  files_.push_back(File{db_file + "-wal", "the store's write-ahead log"});
  if (uses_shm) files_.push_back(File{db_file + "-shm", "the store's shared-memory index"});
  for (File& file : files_) {
    Seen seen = Look(file.path);
    if (!seen.exists) continue;
    file.recorded = true;
    file.dev = seen.dev;
    file.ino = seen.ino;
  }
}

Status StoreFiles::CheckBeforeWrite() {
  for (File& file : files_) STRATA_RETURN_IF_ERROR(Check(file));
  return Status::Ok();
}

Status StoreFiles::Check(File& file) const {
  const std::string store = files_.front().path;
  const std::string refused = ": writes are refused, ";
  Seen seen = Look(file.path);
  if (seen.error != 0) {
    return UnavailableError("cannot check " + file.role + " " + file.path + " before writing (" +
                            std::strerror(seen.error) + "): nothing was written; make the path " +
                            "reachable again and retry");
  }
  if (!seen.exists && !file.recorded) return Status::Ok();  // not created yet
  if (seen.exists && !file.recorded) {
    file.recorded = true;
    file.dev = seen.dev;
    file.ino = seen.ino;
  }
  const bool removed = !seen.exists;
  if (removed || seen.dev != file.dev || seen.ino != file.ino) {
    const std::string what = file.role + " " + file.path +
                             (removed ? " was removed" : " was replaced by another file") +
                             " while the store was open" + refused;
    if (&file == &files_.front()) {
      return UnavailableError(
          what + "as SQLite would go on writing into the old file and they would be lost when " +
          store +
          " is opened again. Nothing was written. What the store held is still readable "
          "in this process: save it (Store::Backup), put the file back, then reopen the store "
          "(restart the process); docs/persistence.md");
    }
    return UnavailableError(
        what +
        "as SQLite keeps writing into the file it opened and another opener would not "
        "see those changes. Nothing was written. Save what the store holds (Store::Backup), stop "
        "every process that has " +
        store + " open, then reopen it; docs/persistence.md");
  }
  return seen.locked ? Locked(file) : Status::Ok();
}

Status StoreFiles::Locked(const File& file) const {
  return UnavailableError(
      file.role + " " + file.path +
      " is immutable or append-only (chattr +i or +a): the store refuses to use it, as SQLite "
      "cannot write it (a write into the -shm mapping would kill the process with SIGBUS). "
      "Nothing was written. Remove the attribute (chattr -i -a " +
      file.path + ") and retry");
}

Status StoreFiles::CheckBeforeRead() {
  if (files_.size() < 3) return Status::Ok();  // no -shm: exclusive locking mode
  const File& shm = files_[2];
  return Look(shm.path).locked ? Locked(shm) : Status::Ok();
}

bool StoreFiles::AnyLocked() const {
  for (const File& file : files_) {
    if (Look(file.path).locked) return true;
  }
  return false;
}

}  // namespace strata::store_internal
