// The files of an open store as they were when it was opened, checked again before each write
// (private to strata::store).
//
// A database file removed or replaced while SQLite has it open goes unnoticed by SQLite: writes go
// on into the removed file (or the -wal of the old one) and are acknowledged, then are lost when
// the path is opened again. A -shm file made immutable (chattr +i) kills the process with SIGBUS
// the next time SQLite writes to its mapping. StoreFiles notices both before a write starts.
//
// Thread safety: none; the store calls it under its connection's mutex.
#ifndef STRATA_SRC_STORE_FILE_IDENTITY_H_
#define STRATA_SRC_STORE_FILE_IDENTITY_H_

#include <sys/types.h>

#include <string>
#include <vector>

#include "strata/status.h"

namespace strata::store_internal {

class StoreFiles {
 public:
  // Records the files of the store opened at `path` (as the caller named it; a symlink is
  // followed). `db_file` is the database file as SQLite opened it (sqlite3_db_filename: symlinks
  // resolved), next to which SQLite keeps the -wal and, when `uses_shm` (not in exclusive locking
  // mode), the -shm file. A -wal or -shm file missing now is recorded the first time
  // CheckBeforeWrite sees it.
  void Record(const std::string& path, const std::string& db_file, bool uses_shm);

  // OK while `path` still names the database file that was opened and the -wal and -shm files are
  // the ones SQLite has open, none of them immutable or append-only. UNAVAILABLE otherwise, saying
  // which file was removed, replaced or locked against writing and what to do. About one statx
  // call per file. OK when nothing was recorded.
  Status CheckBeforeWrite();

  // For a read: UNAVAILABLE when the -shm file is immutable or append-only (a reader writes its
  // marks into the -shm mapping, which would raise SIGBUS). A removed or replaced file is no reason
  // to refuse a read: this process still reads the file it opened.
  Status CheckBeforeRead();

  // True when one of the files is immutable or append-only now: closing must not checkpoint (that
  // writes the -shm mapping and the database).
  bool AnyLocked() const;

 private:
  struct File {
    std::string path;
    std::string role;  // how a message names it: "the store", "the store's write-ahead log"
    bool recorded = false;
    dev_t dev = 0;
    ino_t ino = 0;
  };
  Status Check(File& file) const;
  Status Locked(const File& file) const;

  std::vector<File> files_;  // the database (as named by the caller), then the -wal and -shm
};

}  // namespace strata::store_internal

#endif  // STRATA_SRC_STORE_FILE_IDENTITY_H_
