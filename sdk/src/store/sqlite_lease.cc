#include "store/sqlite_lease.h"

#include "store/schema.h"

namespace strata::store_internal {
namespace {

// One statement, finalized when it goes out of scope.
class Statement {
 public:
  Statement(sqlite3* db, const char* sql) { rc_ = sqlite3_prepare_v2(db, sql, -1, &stmt_, nullptr); }
  ~Statement() { sqlite3_finalize(stmt_); }
  int rc() const { return rc_; }
  sqlite3_stmt* get() const { return stmt_; }

 private:
  sqlite3_stmt* stmt_ = nullptr;
  int rc_;
};

std::string ColumnText(sqlite3_stmt* stmt, int i) {
  const unsigned char* text = sqlite3_column_text(stmt, i);
  return text == nullptr ? std::string()
                         : std::string(reinterpret_cast<const char*>(text),
                                       static_cast<size_t>(sqlite3_column_bytes(stmt, i)));
}

StatusOr<std::optional<AgentLease>> TakeLocked(sqlite3* db, std::string_view agent_id,
                                               const std::string& owner, int64_t ttl_ms,
                                               int64_t now_ms, std::optional<int64_t> held_epoch,
                                               std::optional<AgentLease>& holder,
                                               const std::string& path,
                                               const LeaseKeeper& leases) {
  STRATA_ASSIGN_OR_RETURN(holder, SqliteReadLease(db, agent_id, path));
  int64_t epoch = 0;
  if (held_epoch) {
    if (!holder || holder->owner != owner || holder->epoch != *held_epoch) return std::optional<AgentLease>();
    epoch = *held_epoch;
  } else {
    if (holder && leases.LiveElsewhere(*holder, now_ms)) {
      return std::optional<AgentLease>();
    }
    epoch = (holder ? holder->epoch : 0) + 1;
  }
  Statement write(db,
                  "INSERT INTO leases(agent_id, owner, epoch, expires_ms, acquired_ms) "
                  "VALUES(?1, ?2, ?3, ?4, ?5) ON CONFLICT(agent_id) DO UPDATE SET owner = "
                  "excluded.owner, epoch = excluded.epoch, expires_ms = excluded.expires_ms, "
                  "acquired_ms = CASE WHEN leases.epoch = excluded.epoch THEN leases.acquired_ms "
                  "ELSE excluded.acquired_ms END");
  if (write.rc() != SQLITE_OK) return SqliteStatus(db, write.rc(), "preparing a lease", path);
  sqlite3_bind_text(write.get(), 1, agent_id.data(), static_cast<int>(agent_id.size()),
                    SQLITE_TRANSIENT);
  sqlite3_bind_text(write.get(), 2, owner.data(), static_cast<int>(owner.size()),
                    SQLITE_TRANSIENT);
  sqlite3_bind_int64(write.get(), 3, epoch);
  sqlite3_bind_int64(write.get(), 4, now_ms + ttl_ms);
  sqlite3_bind_int64(write.get(), 5, now_ms);
  int rc = sqlite3_step(write.get());
  if (rc != SQLITE_DONE) return SqliteStatus(db, rc, "writing a lease", path);
  return std::optional<AgentLease>(AgentLease{std::string(agent_id), owner, epoch, now_ms + ttl_ms});
}

}  // namespace

const char kReadLeaseSql[] = "SELECT owner, epoch, expires_ms FROM leases WHERE agent_id = ?1";

StatusOr<std::optional<AgentLease>> ReadLeaseWith(sqlite3_stmt* read, sqlite3* db,
                                                  std::string_view agent_id,
                                                  const std::string& path) {
  sqlite3_bind_text(read, 1, agent_id.data(), static_cast<int>(agent_id.size()), SQLITE_TRANSIENT);
  int rc = sqlite3_step(read);
  if (rc == SQLITE_DONE) return std::optional<AgentLease>();
  if (rc != SQLITE_ROW) return SqliteStatus(db, rc, "reading a lease", path);
  return std::optional<AgentLease>(AgentLease{std::string(agent_id), ColumnText(read, 0),
                                              sqlite3_column_int64(read, 1),
                                              sqlite3_column_int64(read, 2)});
}

StatusOr<std::optional<AgentLease>> SqliteReadLease(sqlite3* db, std::string_view agent_id,
                                                    const std::string& path) {
  Statement read(db, kReadLeaseSql);
  if (read.rc() != SQLITE_OK) return SqliteStatus(db, read.rc(), "reading a lease", path);
  return ReadLeaseWith(read.get(), db, agent_id, path);
}

StatusOr<std::optional<AgentLease>> SqliteTakeLease(sqlite3* db, std::string_view agent_id,
                                                    const std::string& owner, int64_t ttl_ms,
                                                    int64_t now_ms,
                                                    std::optional<int64_t> held_epoch,
                                                    std::optional<AgentLease>& holder,
                                                    const std::string& path, int busy_timeout_ms,
                                                    const LeaseKeeper& leases) {
  int rc = sqlite3_exec(db, "BEGIN IMMEDIATE", nullptr, nullptr, nullptr);
  if (rc != SQLITE_OK) {
    return SqliteStatus(db, rc, "taking the write lock to lease an agent", path, busy_timeout_ms);
  }
  StatusOr<std::optional<AgentLease>> taken =
      TakeLocked(db, agent_id, owner, ttl_ms, now_ms, held_epoch, holder, path, leases);
  if (taken.ok() && taken->has_value()) {
    rc = sqlite3_exec(db, "COMMIT", nullptr, nullptr, nullptr);
    if (rc != SQLITE_OK) {
      sqlite3_exec(db, "ROLLBACK", nullptr, nullptr, nullptr);
      return SqliteStatus(db, rc, "committing a lease", path, busy_timeout_ms);
    }
    return taken;
  }
  sqlite3_exec(db, "ROLLBACK", nullptr, nullptr, nullptr);
  return taken;
}

Status SqliteReleaseLease(sqlite3* db, std::string_view agent_id, const std::string& owner,
                          int64_t epoch, const std::string& path, int busy_timeout_ms) {
  Statement release(db,
                    "UPDATE leases SET owner = '', expires_ms = 0 WHERE agent_id = ?1 AND "
                    "owner = ?2 AND epoch = ?3");
  if (release.rc() != SQLITE_OK) {
    return SqliteStatus(db, release.rc(), "releasing a lease", path, busy_timeout_ms);
  }
  sqlite3_bind_text(release.get(), 1, agent_id.data(), static_cast<int>(agent_id.size()),
                    SQLITE_TRANSIENT);
  sqlite3_bind_text(release.get(), 2, owner.data(), static_cast<int>(owner.size()),
                    SQLITE_TRANSIENT);
  sqlite3_bind_int64(release.get(), 3, epoch);
  int rc = sqlite3_step(release.get());
  if (rc != SQLITE_DONE) return SqliteStatus(db, rc, "releasing a lease", path, busy_timeout_ms);
  return Status::Ok();
}

}  // namespace strata::store_internal
