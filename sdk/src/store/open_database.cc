// Opening the SQLite file of a store: the path checks, the connection, the application and
// version checks, WAL mode and the schema migration (OpenSqliteStore in sqlite_store.cc makes the
// Store over what this opens).
#include "store/open_database.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>
#include <thread>

#include "store/schema.h"
#include "store/store_lock.h"

namespace strata::store_internal {
namespace {

Status CheckApplicationInTransaction(sqlite3* db, const std::string& path, int busy_timeout_ms);

// Checks that an open, non-empty file is a strata store (not another application's database). The
// header and the table list are read in one transaction: another process may be creating the store
// between two separate reads (tables there, application_id not yet visible).
Status CheckApplication(sqlite3* db, const std::string& path, int busy_timeout_ms) {
  int rc = sqlite3_exec(db, "BEGIN", nullptr, nullptr, nullptr);
  if (rc != SQLITE_OK)
    return SqliteStatus(db, rc, "starting a read transaction", path, busy_timeout_ms);
  Status status = CheckApplicationInTransaction(db, path, busy_timeout_ms);
  sqlite3_exec(db, "COMMIT", nullptr, nullptr, nullptr);
  return status;
}

Status CheckApplicationInTransaction(sqlite3* db, const std::string& path, int busy_timeout_ms) {
  STRATA_ASSIGN_OR_RETURN(int64_t application_id,
                          store_internal::PragmaInt(db, "application_id", path, busy_timeout_ms));
  if (application_id == kApplicationId) return Status::Ok();
  // An empty database (new file) becomes a strata store; anything else is foreign.
  sqlite3_stmt* stmt = nullptr;
  int rc = sqlite3_prepare_v2(
      db, "SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name", -1, &stmt, nullptr);
  if (rc != SQLITE_OK) return SqliteStatus(db, rc, "reading the schema", path, busy_timeout_ms);
  std::string tables;
  int count = 0;
  while ((rc = sqlite3_step(stmt)) == SQLITE_ROW) {
    if (count++ < 5) {
      if (!tables.empty()) tables += ", ";
      tables += reinterpret_cast<const char*>(sqlite3_column_text(stmt, 0));
    }
  }
  sqlite3_finalize(stmt);
  if (rc != SQLITE_DONE) return SqliteStatus(db, rc, "reading the schema", path, busy_timeout_ms);
  if (count == 0 && application_id == 0) return Status::Ok();
  char id_hex[16];
  std::snprintf(id_hex, sizeof id_hex, "0x%08llx", static_cast<unsigned long long>(application_id));
  return FailedPreconditionError(
      path + " is a SQLite database of another application (application_id " + id_hex +
      ", tables: " + (tables.empty() ? "none" : tables) + (count > 5 ? ", ..." : "") +
      "), not a strata store; it was not modified");
}

std::string DirectoryOf(const std::string& path) {
  std::string dir = path.find('/') == std::string::npos ? "." : path.substr(0, path.rfind('/'));
  return dir.empty() ? "/" : dir;
}

// True when `path`'s directory is not writable by this process and `path` has no non-empty -wal.
bool ReadOnlyDirectoryWithoutWal(const std::string& path) {
  if (::access(DirectoryOf(path).c_str(), W_OK) == 0) return false;
  struct stat wal;
  return ::stat((path + "-wal").c_str(), &wal) != 0 || wal.st_size == 0;
}

// "file:PATH?immutable=1" with the characters a URI path may not hold percent-encoded.
std::string ImmutableUri(const std::string& path) {
  std::string uri = "file:";
  for (unsigned char c : path) {
    if (std::isalnum(c) || std::strchr("/-._~", c) != nullptr) {
      uri.push_back(static_cast<char>(c));
    } else {
      char escaped[4];
      std::snprintf(escaped, sizeof escaped, "%%%02X", c);
      uri += escaped;
    }
  }
  return uri + "?immutable=1";
}

// Refuses, saying what to do, a path the store cannot be opened at as `options` ask: none there
// (and not to be created), a directory, or for writing a directory or file this process cannot
// write (SQLite would report a vague "unable to open").
Status CheckStorePath(const std::string& path, const StoreOptions& options) {
  if (path.empty()) return InvalidArgumentError("store path must not be empty");
  struct stat st;
  bool exists = ::stat(path.c_str(), &st) == 0;
  if (!exists && (!options.create_if_missing || options.read_only)) {
    return NotFoundError("no store at " + path +
                         (options.read_only ? "" : " (create_if_missing is false)"));
  }
  if (exists && S_ISDIR(st.st_mode)) {
    return InvalidArgumentError(path + " is a directory; give the path of a database file");
  }
  if (options.read_only) return Status::Ok();
  const std::string dir = DirectoryOf(path);
  if (::access(dir.c_str(), W_OK | X_OK) != 0) {
    int error = errno;
    return PermissionDeniedError("cannot write the store " + path + ": directory " + dir +
                                 " is not writable (" + std::strerror(error) +
                                 "); SQLite creates the -wal and -shm files next to the "
                                 "database. Use a writable directory, or open read_only");
  }
  if (exists && ::access(path.c_str(), W_OK) != 0) {
    int error = errno;
    return PermissionDeniedError("cannot write the store " + path + " (" + std::strerror(error) +
                                 "); open it read_only to inspect it");
  }
  return Status::Ok();
}

// The connection to the file at `path` (extended result codes, the busy timeout), read-only or
// read-write (created if missing) as `options` say.
StatusOr<sqlite3*> OpenConnection(const std::string& path, const StoreOptions& options) {
  int flags =
      options.read_only ? SQLITE_OPEN_READONLY : (SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE);
  flags |= SQLITE_OPEN_NOMUTEX;  // the store serializes access itself
  std::string open_name = path;
  if (options.read_only && ReadOnlyDirectoryWithoutWal(path)) {
    // A WAL database needs its -shm file, which cannot be created in a read-only directory. With
    // no -wal file there (the last writer checkpointed and closed), and no writer able to create
    // one, the database file is all there is: open it as immutable.
    open_name = ImmutableUri(path);
    flags |= SQLITE_OPEN_URI;
  }
  sqlite3* db = nullptr;
  int rc = sqlite3_open_v2(open_name.c_str(), &db, flags, nullptr);
  if (rc != SQLITE_OK) {
    Status status = SqliteStatus(db, rc, "opening the store", path);
    sqlite3_close_v2(db);
    return status;
  }
  sqlite3_extended_result_codes(db, 1);
  sqlite3_busy_timeout(db, options.busy_timeout_ms);
  return db;
}

// For reading: refuses a schema version other than this build's, except none at all (version 0,
// *no_schema set).
Status CheckReadableVersion(sqlite3* db, const std::string& path, bool* no_schema) {
  STRATA_ASSIGN_OR_RETURN(int64_t version, store_internal::PragmaInt(db, "user_version", path));
  *no_schema = version == 0;
  if (version > kSchemaVersion) {
    return FailedPreconditionError(path + " was written by a newer strata (store schema version " +
                                   std::to_string(version) + "; this build reads up to " +
                                   std::to_string(kSchemaVersion) + "); upgrade strata to open it");
  }
  if (version != 0 && version < kSchemaVersion) {
    return FailedPreconditionError(path + " has store schema version " + std::to_string(version) +
                                   " and needs an upgrade to " + std::to_string(kSchemaVersion) +
                                   "; open it once read-write");
  }
  return Status::Ok();
}

// An empty store in memory with the current schema, standing for the file at `path`.
StatusOr<sqlite3*> OpenEmptyInMemory(const std::string& path, int busy_timeout_ms) {
  sqlite3* db = nullptr;
  int rc = sqlite3_open_v2(":memory:", &db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_NOMUTEX, nullptr);
  Status status = rc == SQLITE_OK ? Status::Ok()
                                  : SqliteStatus(db, rc, "opening an empty in-memory store", path);
  if (status.ok()) {
    sqlite3_extended_result_codes(db, 1);
    status = store_internal::Migrate(db, path, busy_timeout_ms);
  }
  if (!status.ok()) {
    sqlite3_close_v2(db);
    return status;
  }
  return db;
}

// Switches the file to WAL mode (persistent in the file; it needs the write lock briefly). While
// another process is creating the same file, SQLite reports BUSY here without calling the busy
// handler (the switch cannot wait on a lock it would deadlock with), so the switch is retried until
// the busy timeout has passed.
Status SwitchToWal(sqlite3* db, const std::string& path, int busy_timeout_ms) {
  const auto deadline =
      std::chrono::steady_clock::now() + std::chrono::milliseconds(busy_timeout_ms);
  std::string mode;
  int rc;
  for (;;) {
    sqlite3_stmt* stmt = nullptr;
    rc = sqlite3_prepare_v2(db, "PRAGMA journal_mode = WAL", -1, &stmt, nullptr);
    if (rc == SQLITE_OK) {
      rc = sqlite3_step(stmt);
      if (rc == SQLITE_ROW) {
        mode = reinterpret_cast<const char*>(sqlite3_column_text(stmt, 0));
        rc = SQLITE_OK;
      }
    }
    sqlite3_finalize(stmt);
    if ((rc & 0xff) != SQLITE_BUSY || std::chrono::steady_clock::now() >= deadline) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  if (rc != SQLITE_OK) return SqliteStatus(db, rc, "switching to WAL mode", path, busy_timeout_ms);
  if (mode != "wal") {
    return UnavailableError("could not switch " + path + " to WAL mode (got journal mode \"" +
                            mode + "\"); is it on a filesystem without shared memory?");
  }
  return Status::Ok();
}

// For writing: WAL mode, the synchronous mode and page limit of `options`, then the schema
// migrated to this build's version.
Status PrepareForWriting(sqlite3* db, const std::string& path, const StoreOptions& options) {
  STRATA_RETURN_IF_ERROR(SwitchToWal(db, path, options.busy_timeout_ms));
  std::string pragmas = std::string("PRAGMA synchronous = ") +
                        (options.synchronous == StoreSync::kFull ? "FULL" : "NORMAL") + ";";
  if (options.max_pages > 0) {
    pragmas += " PRAGMA max_page_count = " + std::to_string(options.max_pages) + ";";
  }
  STRATA_RETURN_IF_ERROR(store_internal::Exec(db, pragmas.c_str(), path));
  return store_internal::Migrate(db, path, options.busy_timeout_ms);
}

}  // namespace

StatusOr<sqlite3*> OpenDatabase(const std::string& path, const StoreOptions& options) {
  if (options.exclusive && options.read_only) {
    return InvalidArgumentError("StoreOptions::exclusive is for writing: open " + path +
                                " read_only or exclusive, not both");
  }
  STRATA_RETURN_IF_ERROR(CheckStorePath(path, options));
  STRATA_ASSIGN_OR_RETURN(sqlite3 * db, OpenConnection(path, options));
  Status status = options.exclusive ? LockExclusively(db, path, options) : Status::Ok();
  if (status.ok()) status = CheckApplication(db, path, options.busy_timeout_ms);
  if (status.ok() && options.read_only) {
    bool no_schema = false;
    status = CheckReadableVersion(db, path, &no_schema);
    if (status.ok() && no_schema) {
      // A file without a schema (CheckApplication accepted it: no tables, no application id) is
      // what a process killed before its first commit leaves: an empty store. Read it as one, from
      // an empty in-memory schema, without touching the file.
      sqlite3_close_v2(db);
      return OpenEmptyInMemory(path, options.busy_timeout_ms);
    }
  } else if (status.ok()) {
    status = PrepareForWriting(db, path, options);
  }
  if (!status.ok()) {
    sqlite3_close_v2(db);
    return NameLockHolders(status, path);
  }
  return db;
}

}  // namespace strata::store_internal
