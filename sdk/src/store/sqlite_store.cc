// The SQLite store: construction, the transaction drivers and statement cache, agents, leases,
// statistics and backups, and OpenSqliteStore (sqlite_store.h says which file holds what).
#include "store/sqlite_store.h"

#include <sys/stat.h>

#include <utility>

#include "store/open_database.h"
#include "store/options_codec.h"
#include "store/schema.h"
#include "store/sqlite_lease.h"

namespace strata::store_internal {
namespace {

// Segment states whose content is rendered (their tokens count toward the context's size).
constexpr const char* kRenderedStates = "(0, 1)";

}  // namespace

SqliteStore::SqliteStore(std::string path, StoreOptions options, sqlite3* db)
    : path_(std::move(path)),
      options_(std::move(options)),
      db_(db),
      journals_(this),
      leases_(options_.lease_owner.empty() ? DefaultLeaseOwner(TheClock()) : options_.lease_owner,
              options_.lease_ttl_ms, options_.renew_leases, TheClock()) {
  leases_.SetRenew([this](const AgentLease& held) {
    internal::MutexLock lock(mu_);
    return TakeLease(held.agent_id, held.epoch);
  });
  // A file on one host: a lease whose process is gone is dead; with an exclusive store, every
  // other owner's is (the file lock proves its process ended).
  const bool exclusive = options_.exclusive;
  leases_.SetHolderGone([exclusive](const AgentLease& lease) {
    return exclusive || LeaseOwnerProcessGone(lease.owner);
  });
  const char* db_file = sqlite3_db_filename(db_, "main");  // "" for an in-memory database
  if (!options_.read_only && db_file != nullptr && *db_file != '\0') {
    files_.Record(path_, db_file, /*uses_shm=*/!options_.exclusive);
  }
}

SqliteStore::~SqliteStore() {
  leases_.Stop();
  for (auto& [sql, stmt] : statements_) sqlite3_finalize(stmt);
  // Closing checkpoints the WAL: with a file made immutable that would raise SIGBUS in the -shm
  // mapping. The WAL then stays, and the next open applies it.
  if (files_.AnyLocked()) sqlite3_db_config(db_, SQLITE_DBCONFIG_NO_CKPT_ON_CLOSE, 1, nullptr);
  sqlite3_close_v2(db_);
}

Status SqliteStore::CreateAgent(const ContextOptions& options) {
  if (options.agent.id.empty()) return InvalidArgumentError("agent id must not be empty");
  internal::MutexLock lock(mu_);
  return Transaction(
      "creating agent \"" + options.agent.id + "\"", [&]() STRATA_REQUIRES(mu_) -> Status {
        STRATA_RETURN_IF_ERROR(Fence(options.agent.id));
        STRATA_ASSIGN_OR_RETURN(Stmt find, Prepare("SELECT agent FROM agents WHERE id = ?1"));
        find.Text(1, options.agent.id);
        int rc = find.Step();
        if (rc == SQLITE_ROW) {
          return AlreadyExistsError("agent \"" + options.agent.id + "\" already exists in " +
                                    path_ +
                                    " (use OpenContext to continue it, or DeleteAgent first)");
        }
        if (rc != SQLITE_DONE) return Error(rc, "looking up an agent");
        STRATA_ASSIGN_OR_RETURN(
            Stmt insert,
            Prepare("INSERT INTO agents(id, options, tokenizer, created_ms, updated_ms, "
                    "turn) VALUES(?1, ?2, ?3, ?4, ?4, 0)"));
        std::string tokenizer =
            options.tokenizer != nullptr ? options.tokenizer->Name() : "estimate:4";
        insert.Text(1, options.agent.id)
            .Text(2, OptionsToJson(options))
            .Text(3, tokenizer)
            .Int(4, Now());
        rc = insert.Step();
        if (rc != SQLITE_DONE) return Error(rc, "inserting an agent");
        return Status::Ok();
      });
}

StatusOr<StoredAgent> SqliteStore::GetAgent(std::string_view agent_id) {
  internal::MutexLock lock(mu_);
  StatusOr<std::vector<StoredAgent>> agents = ReadAgents(agent_id, true);
  if (!agents.ok()) return agents.status();
  if (agents->empty()) return UnknownAgent(agent_id);
  return std::move(agents->front());
}

StatusOr<std::vector<StoredAgent>> SqliteStore::ListAgents() {
  internal::MutexLock lock(mu_);
  return ReadAgents("", false);
}

Status SqliteStore::DeleteAgent(std::string_view agent_id) {
  internal::MutexLock lock(mu_);
  return Transaction("deleting agent \"" + std::string(agent_id) + "\"",
                     [&]() STRATA_REQUIRES(mu_) -> Status {
                       STRATA_ASSIGN_OR_RETURN(int64_t agent, AgentRow(agent_id));
                       return DeleteAgentRow(agent);
                     });
}

Status SqliteStore::ReplaceAgent(std::string_view from_id, std::string_view to_id) {
  if (from_id.empty() || to_id.empty() || from_id == to_id) {
    return InvalidArgumentError("ReplaceAgent needs two different, non-empty ids (got \"" +
                                std::string(from_id) + "\" and \"" + std::string(to_id) + "\")");
  }
  internal::MutexLock lock(mu_);
  return Transaction(
      "replacing agent \"" + std::string(to_id) + "\" with \"" + std::string(from_id) + "\"",
      [&]() STRATA_REQUIRES(mu_) -> Status {
        STRATA_ASSIGN_OR_RETURN(int64_t from, AgentRow(from_id));
        int64_t old = -1;
        {
          STRATA_ASSIGN_OR_RETURN(Stmt find, Prepare("SELECT agent FROM agents WHERE id = ?1"));
          find.Text(1, to_id);
          int rc = find.Step();
          if (rc == SQLITE_ROW) {
            old = find.ColInt(0);
          } else if (rc != SQLITE_DONE) {
            return Error(rc, "looking up an agent");
          }
        }
        if (old >= 0) STRATA_RETURN_IF_ERROR(DeleteAgentRow(old));
        int rc;
        STRATA_ASSIGN_OR_RETURN(Stmt rename, Prepare("UPDATE agents SET id = ?2 WHERE agent = ?1"));
        rename.Int(1, from).Text(2, to_id);
        rc = rename.Step();
        if (rc != SQLITE_DONE) return Error(rc, "renaming an agent");
        return Status::Ok();
      });
}

Status SqliteStore::DeleteAgentRow(int64_t agent) {
  {
    std::set<std::string> hashes;
    for (const char* sql : {"SELECT content_hash FROM segments WHERE agent = ?1 AND "
                            "content_hash IS NOT NULL",
                            "SELECT content_hash FROM originals WHERE agent = ?1 AND "
                            "content_hash IS NOT NULL"}) {
      STRATA_ASSIGN_OR_RETURN(Stmt select, Prepare(sql));
      select.Int(1, agent);
      int rc;
      while ((rc = select.Step()) == SQLITE_ROW) hashes.insert(select.ColText(0));
      if (rc != SQLITE_DONE) return Error(rc, "listing an agent's blobs");
    }
    for (const char* sql :
         {"DELETE FROM segments WHERE agent = ?1", "DELETE FROM originals WHERE agent = ?1",
          "DELETE FROM turns WHERE agent = ?1", "DELETE FROM requests WHERE agent = ?1",
          "DELETE FROM events WHERE agent = ?1", "DELETE FROM growth WHERE agent = ?1",
          "DELETE FROM agent_state WHERE agent = ?1", "DELETE FROM agents WHERE agent = ?1"}) {
      STRATA_ASSIGN_OR_RETURN(Stmt del, Prepare(sql));
      del.Int(1, agent);
      int rc = del.Step();
      if (rc != SQLITE_DONE) return Error(rc, "deleting an agent");
    }
    for (const std::string& hash : hashes) STRATA_RETURN_IF_ERROR(CollectBlob(hash));
    return Status::Ok();
  }
}

StatusOr<StoreStats> SqliteStore::Stats() {
  internal::MutexLock lock(mu_);
  return ReadTransaction<StoreStats>([&]() STRATA_REQUIRES(mu_) -> StatusOr<StoreStats> {
    StoreStats stats;
    stats.schema_version = kSchemaVersion;
    STRATA_ASSIGN_OR_RETURN(int64_t pages, PragmaInt(db_, "page_count", path_));
    STRATA_ASSIGN_OR_RETURN(int64_t page_size, PragmaInt(db_, "page_size", path_));
    stats.file_bytes = pages * page_size;
    STRATA_ASSIGN_OR_RETURN(int64_t sync, PragmaInt(db_, "synchronous", path_));
    // 1 is NORMAL, 2 FULL (also SQLite's default, which read-only stores keep) and 3 EXTRA
    // (FULL and more); OFF (0) is never set.
    if (sync < 1 || sync > 3) {
      return InternalError("PRAGMA synchronous of " + path_ + " reads " + std::to_string(sync) +
                           ", not NORMAL (1), FULL (2) or EXTRA (3)");
    }
    stats.synchronous = sync == 1 ? StoreSync::kNormal : StoreSync::kFull;
    STRATA_ASSIGN_OR_RETURN(
        Stmt select,
        Prepare("SELECT (SELECT count(*) FROM agents), (SELECT count(*) FROM segments), "
                "(SELECT count(*) FROM blobs), (SELECT coalesce(sum(raw_size), 0) FROM blobs), "
                "(SELECT coalesce(sum(length(data)), 0) FROM blobs), (SELECT count(*) FROM "
                "requests), "
                "(SELECT count(*) FROM events)"));
    int rc = select.Step();
    if (rc != SQLITE_ROW) return Error(rc, "reading store statistics");
    stats.agents = select.ColInt(0);
    stats.segments = select.ColInt(1);
    stats.blobs = select.ColInt(2);
    stats.blob_raw_bytes = select.ColInt(3);
    stats.blob_stored_bytes = select.ColInt(4);
    stats.requests = select.ColInt(5);
    stats.events = select.ColInt(6);
    stats.write_transactions = write_transactions_;
    return stats;
  });
}

Status SqliteStore::CheckFiles() {
  internal::MutexLock lock(mu_);
  return files_.CheckBeforeWrite();
}

Status SqliteStore::Backup(const std::string& destination) {
  struct stat st;
  if (::stat(destination.c_str(), &st) == 0) {
    return AlreadyExistsError("backup destination " + destination +
                              " exists; choose a new file name");
  }
  internal::MutexLock lock(mu_);
  STRATA_RETURN_IF_ERROR(files_.CheckBeforeRead());
  STRATA_ASSIGN_OR_RETURN(Stmt vacuum, Prepare("VACUUM INTO ?1"));
  vacuum.Text(1, destination);
  int rc = vacuum.Step();
  if (rc != SQLITE_DONE) return Error(rc, "writing a backup to " + destination);
  return Status::Ok();
}

StatusOr<AgentLease> SqliteStore::AcquireLease(std::string_view agent_id) {
  if (agent_id.empty()) return InvalidArgumentError("AcquireLease needs an agent id");
  if (options_.read_only) {
    return FailedPreconditionError("cannot lease agent \"" + std::string(agent_id) +
                                   "\": the store " + path_ + " was opened read-only");
  }
  internal::MutexLock lock(mu_);
  std::optional<AgentLease> held = leases_.Held(agent_id);
  return TakeLease(agent_id, held ? std::optional<int64_t>(held->epoch) : std::nullopt);
}

Status SqliteStore::ReleaseLease(std::string_view agent_id) {
  internal::MutexLock lock(mu_);
  std::optional<AgentLease> held = leases_.Held(agent_id);
  if (!held) return Status::Ok();
  leases_.Forget(agent_id);
  return SqliteReleaseLease(db_, agent_id, leases_.owner(), held->epoch, path_,
                            options_.busy_timeout_ms);
}

Status SqliteStore::ReleaseAllLeases() {
  Status first;
  for (const AgentLease& lease : leases_.AllHeld()) {
    Status status = ReleaseLease(lease.agent_id);
    if (first.ok()) first = status;
  }
  return first;
}

StatusOr<std::optional<AgentLease>> SqliteStore::GetLease(std::string_view agent_id) {
  internal::MutexLock lock(mu_);
  return SqliteReadLease(db_, agent_id, path_);
}

StatusOr<AgentLease> SqliteStore::TakeLease(std::string_view agent_id,
                                            std::optional<int64_t> held_epoch) {
  std::optional<AgentLease> holder;
  const int64_t now = Now();
  STRATA_ASSIGN_OR_RETURN(
      std::optional<AgentLease> taken,
      SqliteTakeLease(db_, agent_id, leases_.owner(), leases_.ttl_ms(), now, held_epoch, holder,
                      path_, options_.busy_timeout_ms, leases_));
  if (taken) {
    leases_.Hold(*taken);
    return *taken;
  }
  if (held_epoch) return leases_.Check(agent_id, holder, now);  // lost: ABORTED, forgotten
  return LeaseHeldElsewhere(*holder, now);
}

Status SqliteStore::Fence(std::string_view agent_id) {
  STRATA_ASSIGN_OR_RETURN(Stmt read,
                          Prepare(kReadLeaseSql));  // kept prepared: every write reads it
  STRATA_ASSIGN_OR_RETURN(std::optional<AgentLease> row,
                          ReadLeaseWith(read.get(), db_, agent_id, path_));
  return leases_.Check(agent_id, row, Now());
}

Status SqliteStore::Error(int rc, std::string_view what) {
  return SqliteStatus(db_, rc, what, path_, options_.busy_timeout_ms);
}

StatusOr<Stmt> SqliteStore::Prepare(const char* sql) {
  auto it = statements_.find(sql);
  if (it != statements_.end()) return Stmt(it->second);
  sqlite3_stmt* stmt = nullptr;
  int rc = sqlite3_prepare_v3(db_, sql, -1, SQLITE_PREPARE_PERSISTENT, &stmt, nullptr);
  if (rc != SQLITE_OK) return Error(rc, std::string("preparing: ") + sql);
  statements_.emplace(sql, stmt);
  return Stmt(stmt);
}

Status SqliteStore::Transaction(const std::string& what, const std::function<Status()>& body) {
  if (options_.read_only) {
    return FailedPreconditionError(what + ": the store " + path_ + " was opened read-only");
  }
  Status files = files_.CheckBeforeWrite();  // removed, replaced or immutable files
  if (!files.ok()) return Status(files.code(), what + ": " + files.message());
  // BEGIN and COMMIT are kept prepared like every other statement (sqlite3_exec would compile
  // them for each transaction).
  {
    STRATA_ASSIGN_OR_RETURN(Stmt begin, Prepare("BEGIN IMMEDIATE"));
    const int rc = begin.Step();
    if (rc != SQLITE_DONE) return Error(rc, what + ": taking the write lock");
  }
  Status status = body();
  if (status.ok()) {
    StatusOr<Stmt> commit = Prepare("COMMIT");
    if (!commit.ok()) {
      status = Status(commit.status().code(), what + ": " + commit.status().message());
    } else if (const int rc = commit->Step(); rc != SQLITE_DONE) {
      status = Error(rc, what + ": committing");
    } else {
      ++write_transactions_;
    }
  } else {
    status = Status(status.code(), what + ": " + status.message());
  }
  if (!status.ok()) {
    if (!sqlite3_get_autocommit(db_)) sqlite3_exec(db_, "ROLLBACK", nullptr, nullptr, nullptr);
  }
  return status;
}

Status SqliteStore::UnknownAgent(std::string_view agent_id) {
  std::string known;
  if (auto stmt = Prepare("SELECT id FROM agents ORDER BY id LIMIT 6"); stmt.ok()) {
    int n = 0;
    while (stmt->Step() == SQLITE_ROW) {
      if (n++ == 5) {
        known += ", ...";
        break;
      }
      known += (known.empty() ? "" : ", ") + stmt->ColText(0);
    }
  }
  return NotFoundError("no agent \"" + std::string(agent_id) + "\" in " + path_ +
                       " (known: " + (known.empty() ? "none" : known) + ")");
}

StatusOr<int64_t> SqliteStore::AgentRow(std::string_view agent_id) {
  STRATA_RETURN_IF_ERROR(files_.CheckBeforeRead());  // reads outside ReadTransaction start here
  // Every write of an agent looks its row up first: the lease fence goes with it.
  if (sqlite3_txn_state(db_, "main") == SQLITE_TXN_WRITE) STRATA_RETURN_IF_ERROR(Fence(agent_id));
  STRATA_ASSIGN_OR_RETURN(Stmt find, Prepare("SELECT agent FROM agents WHERE id = ?1"));
  find.Text(1, agent_id);
  int rc = find.Step();
  if (rc == SQLITE_DONE) return UnknownAgent(agent_id);
  if (rc != SQLITE_ROW) return Error(rc, "looking up an agent");
  return find.ColInt(0);
}

StatusOr<std::vector<StoredAgent>> SqliteStore::ReadAgents(std::string_view only, bool filter) {
  return ReadTransaction<std::vector<StoredAgent>>(
      [&]() STRATA_REQUIRES(mu_) -> StatusOr<std::vector<StoredAgent>> {
        std::string sql =
            std::string(
                "SELECT a.id, a.options, a.tokenizer, a.created_ms, a.updated_ms, a.turn, "
                "(SELECT count(*) FROM segments s WHERE s.agent = a.agent), "
                "(SELECT coalesce(sum(tokens), 0) FROM segments s WHERE s.agent = a.agent AND "
                "s.state IN ") +
            kRenderedStates +
            "), (SELECT count(*) FROM requests r WHERE r.agent = a.agent), "
            "(SELECT count(*) FROM events e WHERE e.agent = a.agent AND e.type = 'compaction') "
            "FROM agents a WHERE (?1 = 0 OR a.id = ?2) ORDER BY a.id";
        // Built once per process: the text is a constant, so the cache key stays valid.
        static const std::string kSql = sql;
        STRATA_ASSIGN_OR_RETURN(Stmt select, Prepare(kSql.c_str()));
        select.Int(1, filter ? 1 : 0).Text(2, only);
        std::vector<StoredAgent> agents;
        int rc;
        while ((rc = select.Step()) == SQLITE_ROW) {
          StoredAgent a;
          std::string id = select.ColText(0);
          STRATA_ASSIGN_OR_RETURN(a.options, OptionsFromJson(select.ColText(1), id));
          a.options.agent.id = id;
          a.tokenizer_name = select.ColText(2);
          a.created_unix_ms = select.ColInt(3);
          a.updated_unix_ms = select.ColInt(4);
          a.turn = select.ColInt(5);
          a.segments = select.ColInt(6);
          a.tokens = select.ColInt(7);
          a.requests = select.ColInt(8);
          a.compactions = select.ColInt(9);
          agents.push_back(std::move(a));
        }
        if (rc != SQLITE_DONE) return Error(rc, "reading agents");
        return agents;
      });
}

}  // namespace strata::store_internal

namespace strata {

int64_t GrowthPoint::TotalTokens() const {
  int64_t total = 0;
  for (int64_t t : layer_tokens) total += t;
  return total;
}

int64_t StoreSchemaVersion() { return store_internal::kSchemaVersion; }

StatusOr<std::unique_ptr<Store>> OpenSqliteStore(const std::string& path, StoreOptions options) {
  STRATA_ASSIGN_OR_RETURN(sqlite3 * db, store_internal::OpenDatabase(path, options));
  return std::unique_ptr<Store>(new store_internal::SqliteStore(path, std::move(options), db));
}

}  // namespace strata
