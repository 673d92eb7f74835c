#include "store/schema.h"

#include <cerrno>
#include <cstring>
#include <string>
#include <vector>

namespace strata::store_internal {
namespace {

// Migration i (0-based) takes the schema from version i to version i + 1. Append only: a
// released step is never edited, a change is a new step.
const char* const kMigrations[] = {
    // 0 -> 1: agents, segments, originals, blobs, turns, request records, events.
    R"sql(
CREATE TABLE agents(
  agent INTEGER PRIMARY KEY,
  id TEXT NOT NULL UNIQUE,
  options TEXT NOT NULL,
  tokenizer TEXT NOT NULL,
  created_ms INTEGER NOT NULL,
  updated_ms INTEGER NOT NULL,
  turn INTEGER NOT NULL DEFAULT 0);
CREATE TABLE blobs(
  hash BLOB PRIMARY KEY,
  raw_size INTEGER NOT NULL,
  codec INTEGER NOT NULL,
  data BLOB NOT NULL) WITHOUT ROWID;
CREATE TABLE segments(
  agent INTEGER NOT NULL,
  id TEXT NOT NULL,
  seq INTEGER NOT NULL,
  position INTEGER NOT NULL,
  kind INTEGER NOT NULL,
  layer INTEGER NOT NULL,
  state INTEGER NOT NULL,
  hygiene INTEGER NOT NULL,
  turn INTEGER NOT NULL,
  tokens INTEGER NOT NULL,
  pinned INTEGER NOT NULL,
  sensitive INTEGER NOT NULL,
  ord INTEGER NOT NULL,
  version TEXT NOT NULL,
  name TEXT NOT NULL,
  tool_call_id TEXT NOT NULL,
  recall_id TEXT NOT NULL,
  duplicate_of TEXT NOT NULL,
  reasoning TEXT NOT NULL,
  tool_calls BLOB NOT NULL,
  content BLOB,
  content_hash BLOB,
  PRIMARY KEY(agent, id)) WITHOUT ROWID;
CREATE INDEX segments_by_hash ON segments(content_hash) WHERE content_hash IS NOT NULL;
CREATE TABLE originals(
  agent INTEGER NOT NULL,
  recall_id TEXT NOT NULL,
  content BLOB,
  content_hash BLOB,
  PRIMARY KEY(agent, recall_id)) WITHOUT ROWID;
CREATE INDEX originals_by_hash ON originals(content_hash) WHERE content_hash IS NOT NULL;
CREATE TABLE turns(
  agent INTEGER NOT NULL,
  turn INTEGER NOT NULL,
  started_ms INTEGER NOT NULL,
  PRIMARY KEY(agent, turn)) WITHOUT ROWID;
CREATE TABLE requests(
  id INTEGER PRIMARY KEY,
  agent INTEGER NOT NULL,
  request_id TEXT NOT NULL,
  pool TEXT NOT NULL,
  endpoint TEXT NOT NULL,
  model TEXT NOT NULL,
  started_ms INTEGER NOT NULL,
  input_tokens INTEGER NOT NULL,
  cached_reported INTEGER,
  cached_predicted INTEGER NOT NULL,
  output_tokens INTEGER NOT NULL,
  reasoning_tokens INTEGER NOT NULL,
  queue_wait_ms REAL NOT NULL,
  ttft_ms REAL NOT NULL,
  decode_ms REAL NOT NULL,
  total_ms REAL NOT NULL,
  kv_cache_bytes INTEGER NOT NULL,
  finish_reason TEXT NOT NULL,
  attempts INTEGER NOT NULL,
  http_status INTEGER NOT NULL,
  code INTEGER NOT NULL,
  error TEXT NOT NULL);
CREATE INDEX requests_by_agent ON requests(agent, id);
CREATE TABLE events(
  id INTEGER PRIMARY KEY,
  agent INTEGER NOT NULL,
  turn INTEGER NOT NULL,
  unix_ms INTEGER NOT NULL,
  type TEXT NOT NULL,
  payload TEXT NOT NULL);
CREATE INDEX events_by_agent ON events(agent, type, id);
)sql",
    // 1 -> 2: growth curves; request retention by age needs an index on the start time.
    R"sql(
CREATE TABLE growth(
  agent INTEGER NOT NULL,
  turn INTEGER NOT NULL,
  unix_ms INTEGER NOT NULL,
  system_tokens INTEGER NOT NULL,
  tools_tokens INTEGER NOT NULL,
  index_tokens INTEGER NOT NULL,
  docs_tokens INTEGER NOT NULL,
  history_tokens INTEGER NOT NULL,
  volatile_tokens INTEGER NOT NULL,
  compactions INTEGER NOT NULL,
  invalidated_tokens INTEGER NOT NULL,
  PRIMARY KEY(agent, turn)) WITHOUT ROWID;
CREATE INDEX requests_by_start ON requests(started_ms);
)sql",
    // 2 -> 3: the compaction policy ("name@version") that altered or produced each segment.
    R"sql(
ALTER TABLE segments ADD COLUMN policy TEXT NOT NULL DEFAULT '';
)sql",
    // 3 -> 4: per-agent state beside the context (strata::Agent: its configuration JSON, the
    // prefix-cache model's blocks, recall protections), one value per (agent, key).
    R"sql(
CREATE TABLE agent_state(
  agent INTEGER NOT NULL,
  key TEXT NOT NULL,
  value BLOB NOT NULL,
  updated_ms INTEGER NOT NULL,
  PRIMARY KEY(agent, key)) WITHOUT ROWID;
)sql",
    // 4 -> 5: what a length pool (strata/pools.h) did with each request: the degradation step it
    // applied and why earlier steps were skipped (RequestRecord::degradation, degradation_notes).
    R"sql(
ALTER TABLE requests ADD COLUMN degradation TEXT NOT NULL DEFAULT '';
ALTER TABLE requests ADD COLUMN degradation_notes TEXT NOT NULL DEFAULT '';
)sql",
    // 5 -> 6: write leases, one row per agent id (strata/store.h, AgentLease): the same lease
    // semantics as a PostgreSQL store, so that code holding a Store has one path.
    R"sql(
CREATE TABLE leases(
  agent_id TEXT PRIMARY KEY,
  owner TEXT NOT NULL,
  epoch INTEGER NOT NULL,
  expires_ms INTEGER NOT NULL,
  acquired_ms INTEGER NOT NULL) WITHOUT ROWID;
)sql",
    // 6 -> 7: why each request was sent (RequestRecord::purpose): "turn", or "compaction" for a
    // summarizer's request.
    R"sql(
ALTER TABLE requests ADD COLUMN purpose TEXT NOT NULL DEFAULT 'turn';
)sql",
    // 7 -> 8: the tokens of each turn's summary requests in its growth point
    // (GrowthPoint::summary_input_tokens, summary_cached_tokens, summary_output_tokens).
    R"sql(
ALTER TABLE growth ADD COLUMN summary_input_tokens INTEGER NOT NULL DEFAULT 0;
ALTER TABLE growth ADD COLUMN summary_cached_tokens INTEGER NOT NULL DEFAULT 0;
ALTER TABLE growth ADD COLUMN summary_output_tokens INTEGER NOT NULL DEFAULT 0;
)sql",
};
static_assert(sizeof(kMigrations) / sizeof(kMigrations[0]) == kSchemaVersion,
              "one migration per schema version");

Status RunSteps(sqlite3* db, int64_t from, int64_t to, const std::string& path) {
  for (int64_t v = from; v < to; ++v) {
    STRATA_RETURN_IF_ERROR(Exec(db, kMigrations[v], path));
  }
  std::string pragmas = "PRAGMA application_id = " + std::to_string(kApplicationId) +
                        "; PRAGMA user_version = " + std::to_string(to) + ";";
  return Exec(db, pragmas.c_str(), path);
}

}  // namespace

Status SqliteStatus(sqlite3* db, int rc, std::string_view what, const std::string& path,
                    int busy_timeout_ms) {
  std::string message = std::string(what) + " (" + path + "): ";
  message += db != nullptr ? sqlite3_errmsg(db) : sqlite3_errstr(rc);
  int os_error = db != nullptr ? sqlite3_system_errno(db) : 0;
  int primary = rc & 0xff;
  switch (primary) {
    case SQLITE_BUSY:
    case SQLITE_LOCKED:
      return UnavailableError(message +
                              "; another connection holds the write lock and it was not "
                              "released within the busy timeout (" +
                              std::to_string(busy_timeout_ms) +
                              " ms, StoreOptions::busy_timeout_ms); retry later");
    case SQLITE_FULL:
      return ResourceExhaustedError(message + "; free disk space or raise StoreOptions::max_pages");
    case SQLITE_READONLY:
    case SQLITE_PERM:
    case SQLITE_AUTH:
      return PermissionDeniedError(message + "; the file or its directory is not writable");
    case SQLITE_CANTOPEN:
      if (os_error == EACCES || os_error == EPERM || os_error == EROFS) {
        return PermissionDeniedError(message + " (" + std::strerror(os_error) +
                                     "); the file or its directory is not writable");
      }
      if (os_error == ENOENT) {
        return NotFoundError(message + " (" + std::strerror(os_error) + ")");
      }
      return UnavailableError(
          message + (os_error ? std::string(" (") + std::strerror(os_error) + ")" : std::string()));
    case SQLITE_NOTADB:
      return DataLossError(message +
                           "; the file is not a SQLite database (foreign or damaged file)");
    case SQLITE_CORRUPT:
      return DataLossError(message + "; the database is damaged; restore it from a backup");
    case SQLITE_IOERR:
      if (os_error == ENOSPC || os_error == EDQUOT) {
        return ResourceExhaustedError(message + " (" + std::strerror(os_error) +
                                      "); free disk space");
      }
      if (os_error == EROFS || os_error == EACCES) {
        return PermissionDeniedError(message + " (" + std::strerror(os_error) + ")");
      }
      return UnavailableError(
          message + (os_error ? std::string(" (") + std::strerror(os_error) + ")" : std::string()));
    case SQLITE_CONSTRAINT:
      return AlreadyExistsError(message);
    default:
      return InternalError(message + " (SQLite code " + std::to_string(rc) + ")");
  }
}

Status Exec(sqlite3* db, const char* sql, const std::string& path) {
  char* error = nullptr;
  int rc = sqlite3_exec(db, sql, nullptr, nullptr, &error);
  if (error != nullptr) sqlite3_free(error);
  if (rc != SQLITE_OK) return SqliteStatus(db, rc, "executing schema/transaction statement", path);
  return Status::Ok();
}

StatusOr<int64_t> PragmaInt(sqlite3* db, const char* pragma, const std::string& path,
                            int busy_timeout_ms) {
  std::string sql = std::string("PRAGMA ") + pragma;
  sqlite3_stmt* stmt = nullptr;
  int rc = sqlite3_prepare_v2(db, sql.c_str(), -1, &stmt, nullptr);
  if (rc != SQLITE_OK) return SqliteStatus(db, rc, "reading " + sql, path, busy_timeout_ms);
  rc = sqlite3_step(stmt);
  int64_t value = 0;
  if (rc == SQLITE_ROW) {
    value = sqlite3_column_int64(stmt, 0);
    rc = SQLITE_OK;
  } else if (rc == SQLITE_DONE) {
    rc = SQLITE_OK;
  }
  sqlite3_finalize(stmt);
  if (rc != SQLITE_OK) return SqliteStatus(db, rc, "reading " + sql, path, busy_timeout_ms);
  return value;
}

Status Migrate(sqlite3* db, const std::string& path, int busy_timeout_ms) {
  int rc = sqlite3_exec(db, "BEGIN IMMEDIATE", nullptr, nullptr, nullptr);
  if (rc != SQLITE_OK) {
    return SqliteStatus(db, rc, "locking the database to check its schema", path, busy_timeout_ms);
  }
  auto fail = [&](Status status) {
    sqlite3_exec(db, "ROLLBACK", nullptr, nullptr, nullptr);
    return status;
  };
  StatusOr<int64_t> version = PragmaInt(db, "user_version", path);
  if (!version.ok()) return fail(version.status());
  if (*version > kSchemaVersion) {
    return fail(FailedPreconditionError(
        path + " was written by a newer strata (store schema version " + std::to_string(*version) +
        "; this build reads up to " + std::to_string(kSchemaVersion) +
        "); upgrade strata to open it. The file was not modified."));
  }
  if (*version == kSchemaVersion) {
    rc = sqlite3_exec(db, "COMMIT", nullptr, nullptr, nullptr);
    if (rc != SQLITE_OK) return fail(SqliteStatus(db, rc, "checking the schema", path));
    return Status::Ok();
  }
  Status status = RunSteps(db, *version, kSchemaVersion, path);
  if (!status.ok()) return fail(status);
  rc = sqlite3_exec(db, "COMMIT", nullptr, nullptr, nullptr);
  if (rc != SQLITE_OK) {
    return fail(SqliteStatus(db, rc, "committing the schema upgrade", path, busy_timeout_ms));
  }
  return Status::Ok();
}

Status CreateSchemaAtVersionForTesting(sqlite3* db, int64_t version) {
  if (version < 0 || version > kSchemaVersion) {
    return InvalidArgumentError("no schema version " + std::to_string(version));
  }
  return RunSteps(db, 0, version, "<test>");
}

}  // namespace strata::store_internal
