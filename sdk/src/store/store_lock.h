// StoreOptions::exclusive: one Store per database file, whatever path names it (private to
// strata::store).
//
// The lock is SQLite's own: the connection is put in exclusive locking mode before its first read
// and takes the write lock at once, so SQLite holds its POSIX lock on the database file (its inode:
// a symlink or a hard link names the same lock) until the connection closes, and keeps the WAL
// index in its own memory (no -shm file: nothing another process could map, nothing that can
// raise SIGBUS). Every other connection, in this process or another, read-only ones included, is
// refused while it is held. The kernel drops the lock when the process ends, SIGKILL included.
#ifndef STRATA_SRC_STORE_STORE_LOCK_H_
#define STRATA_SRC_STORE_STORE_LOCK_H_

#include <sqlite3.h>

#include <string>

#include "strata/status.h"
#include "strata/store.h"

namespace strata::store_internal {

// The processes holding a lock on the file `path` names (Linux /proc/locks), as
// "process 1234 (strata-sidecar)" joined with ", "; only write locks when `writers_only`. "" when
// none is listed or the system does not say.
std::string LockHolders(const std::string& path, bool writers_only);

// For a read-write open with StoreOptions::exclusive, before the connection's first read: switches
// `db` to exclusive locking mode and takes the lock. FAILED_PRECONDITION, naming `path` and the
// holder, when another connection has the file open (at once when the holder has it exclusively,
// else after the busy timeout); another SQLite error as SqliteStatus maps it.
Status LockExclusively(sqlite3* db, const std::string& path, const StoreOptions& options);

// `status` (an open that failed) with the processes holding locks on `path` named when it is a
// lock timeout (UNAVAILABLE) and they are known; `status` unchanged otherwise.
Status NameLockHolders(const Status& status, const std::string& path);

}  // namespace strata::store_internal

#endif  // STRATA_SRC_STORE_STORE_LOCK_H_
