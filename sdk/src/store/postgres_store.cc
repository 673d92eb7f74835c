// The PostgreSQL store: opening, the transaction drivers, agents, leases and statistics
// (postgres_store.h says which file holds what).
#include "store/postgres_store.h"

#include <algorithm>
#include <utility>

#include "store/options_codec.h"
#include "store/postgres_schema.h"

namespace strata::store_internal {
namespace {

// The database's wall clock in Unix milliseconds: leases compare against one clock for every
// host, so that hosts with skewed clocks agree on when a lease expired.
constexpr const char* kDbNowMs = "(extract(epoch from clock_timestamp()) * 1000)::bigint";

Status Prefixed(const std::string& what, const Status& status) {
  if (status.ok()) return status;
  return Status(status.code(), what + ": " + status.message());
}

}  // namespace

PostgresStore::PostgresStore(std::string conninfo, StoreOptions options)
    : conninfo_(std::move(conninfo)),
      target_(RedactConninfo(conninfo_)),
      options_(std::move(options)),
      pool_(conninfo_, target_, options_.pool_size, options_.connect_timeout_ms),
      journals_(this),
      leases_(options_.lease_owner.empty()
                  ? DefaultLeaseOwner(options_.clock != nullptr ? options_.clock : SystemClock())
                  : options_.lease_owner,
              options_.lease_ttl_ms, options_.renew_leases,
              options_.clock != nullptr ? options_.clock : SystemClock()) {
  leases_.SetRenew([this](const AgentLease& held) { return RenewHeld(held); });
}

PostgresStore::~PostgresStore() { leases_.Stop(); }

Status PostgresStore::Open() {
  Status status = Run("opening the store", [&](PgConnection& c) -> Status {
    if (options_.read_only) {
      STRATA_ASSIGN_OR_RETURN(int64_t version, PostgresSchemaVersion(c));
      if (version > kPostgresSchemaVersion) {
        return FailedPreconditionError(
            "the PostgreSQL store was written by a newer strata (schema version " +
            std::to_string(version) + "; this build reads up to version " +
            std::to_string(kPostgresSchemaVersion) + "): upgrade strata");
      }
      if (version < kPostgresSchemaVersion) {
        return FailedPreconditionError(
            "the PostgreSQL store has schema version " + std::to_string(version) +
            " and this build reads version " + std::to_string(kPostgresSchemaVersion) +
            "; open it once for writing to create or upgrade it");
      }
      return Status::Ok();
    }
    return MigratePostgres(c, options_.create_if_missing);
  });
  return Prefixed(target_, status);
}

int64_t PostgresStore::Now() const {
  return (options_.clock != nullptr ? options_.clock : SystemClock())->UnixMillis();
}

void PostgresStore::Backoff(int attempt) {
  Clock* clock = options_.clock != nullptr ? options_.clock : SystemClock();
  clock->SleepForMicros(int64_t{50000} << std::min(attempt - 1, 6));
}

// ---- Transaction drivers ---------------------------------------------------------------------

Status PostgresStore::Run(const std::string& what, const Body& body) {
  Status last;
  for (int attempt = 0; attempt <= std::max(0, options_.retries); ++attempt) {
    if (attempt > 0) Backoff(attempt);
    StatusOr<PgPool::Handle> handle = pool_.Acquire();
    if (!handle.ok()) {
      last = handle.status();
      continue;
    }
    PgConnection& c = **handle;
    last = body(c);
    if (last.ok() || (c.healthy() && c.last_failure() != PgFailure::kConnection &&
                      c.last_failure() != PgFailure::kRetryable)) {
      return last;
    }
    pool_.DropIdle();  // a lost connection usually means every idle one is lost too
  }
  return Prefixed(what, last);
}

Status PostgresStore::Read(const std::string& what, const Body& body) {
  return Run(what, [&](PgConnection& c) -> Status {
    STRATA_RETURN_IF_ERROR(
        c.Exec("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY", "starting a read").status());
    Status status = body(c);
    if (!status.ok()) {
      if (c.healthy()) {
        PgFailure failure = c.last_failure();
        c.Exec("ROLLBACK", "ending a read").status().IgnoreError();
        if (failure == PgFailure::kConnection) return status;
      }
      return status;
    }
    return c.Exec("COMMIT", "ending a read").status();
  });
}

Status PostgresStore::Write(const std::string& what, std::string_view agent_id,
                            const Body& body) {
  if (options_.read_only) {
    return FailedPreconditionError(what + ": the store " + target_ + " was opened read-only");
  }
  Status last;
  for (int attempt = 0; attempt <= std::max(0, options_.retries); ++attempt) {
    if (attempt > 0) Backoff(attempt);
    bool retry = false;
    last = TryWrite(agent_id, body, retry);
    if (!retry) break;
  }
  return Prefixed(what, last);
}

Status PostgresStore::TryWrite(std::string_view agent_id, const Body& body, bool& retry) {
  retry = true;  // until the transaction is known to have failed for a reason a retry keeps
  StatusOr<PgPool::Handle> handle = pool_.Acquire();
  if (!handle.ok()) return handle.status();
  PgConnection& c = **handle;
  auto abandon = [&](Status status) {
    PgFailure failure = c.last_failure();
    if (c.healthy()) c.Exec("ROLLBACK", "rolling back").status().IgnoreError();
    if (!c.healthy() || failure == PgFailure::kConnection) {
      pool_.DropIdle();  // nothing was committed: COMMIT was not sent
    } else if (failure != PgFailure::kRetryable) {
      retry = false;
    }
    return status;
  };
  std::string begin = "BEGIN; SET LOCAL lock_timeout = " +
                      std::to_string(std::max(1, options_.busy_timeout_ms)) + ";";
  if (options_.synchronous == StoreSync::kNormal) begin += " SET LOCAL synchronous_commit = off;";
  begin += " SELECT txid_current()";
  StatusOr<PgResult> started = c.Exec(begin.c_str(), "starting a write");
  if (!started.ok()) return abandon(started.status());
  const int64_t txid = started->Int(0, 0);
  if (!agent_id.empty()) {
    Status fence = Fence(c, agent_id);
    if (!fence.ok()) return abandon(fence);
  }
  Status status = body(c);
  if (!status.ok()) return abandon(status);
  StatusOr<PgResult> committed = c.Exec("COMMIT", "committing");
  if (committed.ok()) {
    retry = false;
    return Status::Ok();
  }
  if (c.healthy() && c.last_failure() != PgFailure::kConnection) {
    if (c.last_failure() != PgFailure::kRetryable) retry = false;
    return committed.status();
  }
  // The connection broke during COMMIT: the transaction may or may not have committed.
  pool_.DropIdle();
  StatusOr<bool> outcome = Committed(txid);
  if (!outcome.ok()) {
    retry = false;
    return UnavailableError(committed.status().message() +
                            "; whether the change committed could not be learned (" +
                            outcome.status().message() +
                            "): reopen the context from the store before continuing");
  }
  if (*outcome) {
    retry = false;
    return Status::Ok();
  }
  return committed.status();  // it rolled back: try again
}

StatusOr<bool> PostgresStore::Committed(int64_t txid) {
  Status last;
  for (int attempt = 0; attempt <= std::max(1, options_.retries); ++attempt) {
    if (attempt > 0) Backoff(attempt);
    StatusOr<std::unique_ptr<PgConnection>> conn = pool_.ConnectFresh();
    if (!conn.ok()) {
      last = conn.status();
      continue;
    }
    StatusOr<PgResult> status = (*conn)->Exec("SELECT txid_status($1)", PgParams().Int(txid),
                                              "asking whether a write committed");
    if (!status.ok()) {
      last = status.status();
      continue;
    }
    std::string state = status->IsNull(0, 0) ? "" : status->Text(0, 0);
    if (state == "committed") return true;
    if (state == "aborted") return false;
    last = UnavailableError("transaction " + std::to_string(txid) + " is " +
                            (state.empty() ? std::string("too old to tell") : state));
    if (state.empty()) break;
  }
  return last;
}

// ---- Agents ----------------------------------------------------------------------------------

Status PostgresStore::UnknownAgent(PgConnection& c, std::string_view agent_id) {
  std::string known;
  if (auto rows = c.Exec("SELECT id FROM strata_agents ORDER BY id LIMIT 6", "listing agents");
      rows.ok()) {
    for (int i = 0; i < rows->rows(); ++i) {
      if (i == 5) {
        known += ", ...";
        break;
      }
      known += (known.empty() ? "" : ", ") + rows->Text(i, 0);
    }
  }
  return NotFoundError("no agent \"" + std::string(agent_id) + "\" in " + target_ +
                       " (known: " + (known.empty() ? "none" : known) + ")");
}

StatusOr<int64_t> PostgresStore::AgentRow(PgConnection& c, std::string_view agent_id) {
  STRATA_ASSIGN_OR_RETURN(PgResult row, c.Exec("SELECT agent FROM strata_agents WHERE id = $1",
                                                PgParams().Text(agent_id), "looking up an agent"));
  if (row.rows() == 0) return UnknownAgent(c, agent_id);
  return row.Int(0, 0);
}

Status PostgresStore::CreateAgent(const ContextOptions& options) {
  if (options.agent.id.empty()) return InvalidArgumentError("agent id must not be empty");
  const std::string& id = options.agent.id;
  return Write("creating agent \"" + id + "\"", id, [&](PgConnection& c) -> Status {
    std::string tokenizer =
        options.tokenizer != nullptr ? options.tokenizer->Name() : "estimate:4";
    StatusOr<PgResult> inserted = c.Exec(
        "INSERT INTO strata_agents(id, options, tokenizer, created_ms, updated_ms, turn) "
        "VALUES($1, $2, $3, $4, $4, 0) ON CONFLICT (id) DO NOTHING",
        PgParams().Text(id).Text(OptionsToJson(options)).Text(tokenizer).Int(Now()),
        "inserting an agent");
    if (!inserted.ok()) return inserted.status();
    if (inserted->Affected() == 0) {
      return AlreadyExistsError("agent \"" + id + "\" already exists in " + target_ +
                                " (use OpenContext to continue it, or DeleteAgent first)");
    }
    return Status::Ok();
  });
}

StatusOr<std::vector<StoredAgent>> PostgresStore::ReadAgents(PgConnection& c,
                                                             std::string_view only, bool filter) {
  STRATA_ASSIGN_OR_RETURN(
      PgResult rows,
      c.Exec("SELECT a.id, a.options, a.tokenizer, a.created_ms, a.updated_ms, a.turn, "
             "(SELECT count(*) FROM strata_segments s WHERE s.agent = a.agent), "
             "(SELECT coalesce(sum(tokens), 0) FROM strata_segments s WHERE s.agent = a.agent "
             "AND s.state IN (0, 1)), "
             "(SELECT count(*) FROM strata_requests r WHERE r.agent = a.agent), "
             "(SELECT count(*) FROM strata_events e WHERE e.agent = a.agent AND "
             "e.type = 'compaction') "
             "FROM strata_agents a WHERE ($1 = 0 OR a.id = $2) ORDER BY a.id",
             PgParams().Int(filter ? 1 : 0).Text(only), "reading agents"));
  std::vector<StoredAgent> agents;
  for (int i = 0; i < rows.rows(); ++i) {
    StoredAgent a;
    std::string id = rows.Text(i, 0);
    STRATA_ASSIGN_OR_RETURN(a.options, OptionsFromJson(rows.Text(i, 1), id));
    a.options.agent.id = id;
    a.tokenizer_name = rows.Text(i, 2);
    a.created_unix_ms = rows.Int(i, 3);
    a.updated_unix_ms = rows.Int(i, 4);
    a.turn = rows.Int(i, 5);
    a.segments = rows.Int(i, 6);
    a.tokens = rows.Int(i, 7);
    a.requests = rows.Int(i, 8);
    a.compactions = rows.Int(i, 9);
    agents.push_back(std::move(a));
  }
  return agents;
}

StatusOr<StoredAgent> PostgresStore::GetAgent(std::string_view agent_id) {
  StoredAgent agent;
  STRATA_RETURN_IF_ERROR(Read("reading agent \"" + std::string(agent_id) + "\"",
                              [&](PgConnection& c) -> Status {
                                STRATA_ASSIGN_OR_RETURN(std::vector<StoredAgent> agents,
                                                        ReadAgents(c, agent_id, true));
                                if (agents.empty()) return UnknownAgent(c, agent_id);
                                agent = std::move(agents.front());
                                return Status::Ok();
                              }));
  return agent;
}

StatusOr<std::vector<StoredAgent>> PostgresStore::ListAgents() {
  std::vector<StoredAgent> agents;
  STRATA_RETURN_IF_ERROR(Read("listing agents", [&](PgConnection& c) -> Status {
    STRATA_ASSIGN_OR_RETURN(agents, ReadAgents(c, "", false));
    return Status::Ok();
  }));
  return agents;
}

Status PostgresStore::DeleteAgentRow(PgConnection& c, int64_t agent) {
  std::set<std::string> hashes;
  for (const char* sql : {"SELECT content_hash FROM strata_segments WHERE agent = $1 AND "
                          "content_hash IS NOT NULL",
                          "SELECT content_hash FROM strata_originals WHERE agent = $1 AND "
                          "content_hash IS NOT NULL"}) {
    STRATA_ASSIGN_OR_RETURN(PgResult rows,
                            c.Exec(sql, PgParams().Int(agent), "listing an agent's blobs"));
    for (int i = 0; i < rows.rows(); ++i) hashes.insert(rows.Bytes(i, 0));
  }
  for (const char* sql :
       {"DELETE FROM strata_segments WHERE agent = $1",
        "DELETE FROM strata_originals WHERE agent = $1", "DELETE FROM strata_turns WHERE agent = $1",
        "DELETE FROM strata_requests WHERE agent = $1", "DELETE FROM strata_events WHERE agent = $1",
        "DELETE FROM strata_growth WHERE agent = $1",
        "DELETE FROM strata_agent_state WHERE agent = $1",
        "DELETE FROM strata_agents WHERE agent = $1"}) {
    STRATA_RETURN_IF_ERROR(c.Exec(sql, PgParams().Int(agent), "deleting an agent").status());
  }
  return CollectBlobs(c, hashes);
}

Status PostgresStore::DeleteAgent(std::string_view agent_id) {
  return Write("deleting agent \"" + std::string(agent_id) + "\"", agent_id,
               [&](PgConnection& c) -> Status {
                 STRATA_ASSIGN_OR_RETURN(int64_t agent, AgentRow(c, agent_id));
                 return DeleteAgentRow(c, agent);
               });
}

Status PostgresStore::ReplaceAgent(std::string_view from_id, std::string_view to_id) {
  if (from_id.empty() || to_id.empty() || from_id == to_id) {
    return InvalidArgumentError("ReplaceAgent needs two different, non-empty ids (got \"" +
                                std::string(from_id) + "\" and \"" + std::string(to_id) + "\")");
  }
  // The fence is the one of the agent replaced: its lease holder is the one writing it.
  return Write(
      "replacing agent \"" + std::string(to_id) + "\" with \"" + std::string(from_id) + "\"",
      to_id, [&](PgConnection& c) -> Status {
        STRATA_ASSIGN_OR_RETURN(int64_t from, AgentRow(c, from_id));
        STRATA_ASSIGN_OR_RETURN(PgResult old,
                                c.Exec("SELECT agent FROM strata_agents WHERE id = $1",
                                       PgParams().Text(to_id), "looking up an agent"));
        if (old.rows() > 0) STRATA_RETURN_IF_ERROR(DeleteAgentRow(c, old.Int(0, 0)));
        return c
            .Exec("UPDATE strata_agents SET id = $2 WHERE agent = $1",
                  PgParams().Int(from).Text(to_id), "renaming an agent")
            .status();
      });
}

ContextJournal* PostgresStore::Journal(std::string_view agent_id) {
  return journals_.For(agent_id);
}

// ---- Leases ----------------------------------------------------------------------------------

StatusOr<std::optional<AgentLease>> PostgresStore::ReadLease(PgConnection& c,
                                                             std::string_view agent_id) {
  const std::string sql = std::string("SELECT owner, epoch, expires_ms, ") + kDbNowMs +
                          " FROM strata_leases WHERE agent_id = $1";
  STRATA_ASSIGN_OR_RETURN(PgResult row,
                          c.Exec(sql.c_str(), PgParams().Text(agent_id), "reading a lease"));
  if (row.rows() == 0) return std::optional<AgentLease>();
  return std::optional<AgentLease>(
      AgentLease{std::string(agent_id), row.Text(0, 0), row.Int(0, 1), row.Int(0, 2)});
}

Status PostgresStore::Fence(PgConnection& c, std::string_view agent_id) {
  // FOR SHARE: a takeover (an UPDATE of this row) waits until this transaction ends, and this
  // statement, when it waited for one, reads the row as the takeover left it.
  static const std::string kSql = std::string("SELECT owner, epoch, expires_ms, ") + kDbNowMs +
                                  " FROM strata_leases WHERE agent_id = $1 FOR SHARE";
  STRATA_ASSIGN_OR_RETURN(PgResult row, c.Exec(kSql.c_str(), PgParams().Text(agent_id),
                                               "checking the agent's lease"));
  std::optional<AgentLease> lease;
  int64_t now = 0;
  if (row.rows() > 0) {
    lease = AgentLease{std::string(agent_id), row.Text(0, 0), row.Int(0, 1), row.Int(0, 2)};
    now = row.Int(0, 3);
  }
  return leases_.Check(agent_id, lease, now);
}

StatusOr<AgentLease> PostgresStore::RenewHeld(const AgentLease& held) {
  std::optional<AgentLease> renewed;
  std::optional<AgentLease> current;
  static const std::string kSql = std::string("UPDATE strata_leases SET expires_ms = ") +
                                  kDbNowMs +
                                  " + $4 WHERE agent_id = $1 AND owner = $2 AND epoch = $3 "
                                  "RETURNING expires_ms";
  STRATA_RETURN_IF_ERROR(Run("renewing the lease of agent \"" + held.agent_id + "\"",
                             [&](PgConnection& c) -> Status {
                               STRATA_ASSIGN_OR_RETURN(
                                   PgResult row,
                                   c.Exec(kSql.c_str(),
                                          PgParams()
                                              .Text(held.agent_id)
                                              .Text(leases_.owner())
                                              .Int(held.epoch)
                                              .Int(leases_.ttl_ms()),
                                          "renewing a lease"));
                               if (row.rows() > 0) {
                                 renewed = held;
                                 renewed->expires_unix_ms = row.Int(0, 0);
                                 return Status::Ok();
                               }
                               STRATA_ASSIGN_OR_RETURN(current, ReadLease(c, held.agent_id));
                               return Status::Ok();
                             }));
  if (renewed) return *renewed;
  // Lost (another owner took it, or it was released): Check says so and forgets it.
  Status lost = leases_.Check(held.agent_id, current, 0);
  if (lost.ok()) return held;
  return lost;
}

StatusOr<AgentLease> PostgresStore::AcquireLease(std::string_view agent_id) {
  if (agent_id.empty()) return InvalidArgumentError("AcquireLease needs an agent id");
  if (options_.read_only) {
    return FailedPreconditionError("cannot lease agent \"" + std::string(agent_id) +
                                   "\": the store " + target_ + " was opened read-only");
  }
  if (std::optional<AgentLease> held = leases_.Held(agent_id)) {
    STRATA_ASSIGN_OR_RETURN(AgentLease renewed, RenewHeld(*held));
    leases_.Hold(renewed);
    return renewed;
  }
  // Taken when free, released, expired, or left by an earlier open under this owner name; the
  // epoch grows at every take, so whatever wrote under an older epoch is fenced off.
  static const std::string kSql =
      std::string(
          "INSERT INTO strata_leases AS l(agent_id, owner, epoch, expires_ms, acquired_ms) "
          "VALUES($1, $2, 1, ") +
      kDbNowMs + " + $3, " + kDbNowMs +
      ") ON CONFLICT (agent_id) DO UPDATE SET owner = excluded.owner, epoch = l.epoch + 1, "
      "expires_ms = excluded.expires_ms, acquired_ms = excluded.acquired_ms "
      "WHERE l.owner = '' OR l.owner = excluded.owner OR l.expires_ms <= excluded.acquired_ms "
      "RETURNING epoch, expires_ms";
  std::optional<AgentLease> taken;
  std::optional<AgentLease> holder;
  STRATA_RETURN_IF_ERROR(Run(
      "leasing agent \"" + std::string(agent_id) + "\"", [&](PgConnection& c) -> Status {
        STRATA_ASSIGN_OR_RETURN(
            PgResult row,
            c.Exec(kSql.c_str(),
                   PgParams().Text(agent_id).Text(leases_.owner()).Int(leases_.ttl_ms()),
                   "taking a lease"));
        if (row.rows() > 0) {
          taken = AgentLease{std::string(agent_id), leases_.owner(), row.Int(0, 0), row.Int(0, 1)};
          return Status::Ok();
        }
        STRATA_ASSIGN_OR_RETURN(PgResult now, c.Exec((std::string("SELECT ") + kDbNowMs).c_str(),
                                                     "reading the database's clock"));
        STRATA_ASSIGN_OR_RETURN(holder, ReadLease(c, agent_id));
        if (holder) return LeaseHeldElsewhere(*holder, now.Int(0, 0));
        return AbortedError("the lease of agent \"" + std::string(agent_id) +
                            "\" changed while it was being taken; retry");
      }));
  leases_.Hold(*taken);
  return *taken;
}

Status PostgresStore::ReleaseLease(std::string_view agent_id) {
  std::optional<AgentLease> held = leases_.Held(agent_id);
  if (!held) return Status::Ok();
  leases_.Forget(agent_id);
  return Run("releasing the lease of agent \"" + std::string(agent_id) + "\"",
             [&](PgConnection& c) -> Status {
               return c
                   .Exec("UPDATE strata_leases SET owner = '', expires_ms = 0 WHERE agent_id = "
                         "$1 AND owner = $2 AND epoch = $3",
                         PgParams().Text(agent_id).Text(leases_.owner()).Int(held->epoch),
                         "releasing a lease")
                   .status();
             });
}

Status PostgresStore::ReleaseAllLeases() {
  Status first;
  for (const AgentLease& lease : leases_.AllHeld()) {
    Status status = ReleaseLease(lease.agent_id);
    if (first.ok()) first = status;
  }
  return first;
}

StatusOr<std::optional<AgentLease>> PostgresStore::GetLease(std::string_view agent_id) {
  std::optional<AgentLease> lease;
  STRATA_RETURN_IF_ERROR(Run("reading the lease of agent \"" + std::string(agent_id) + "\"",
                             [&](PgConnection& c) -> Status {
                               STRATA_ASSIGN_OR_RETURN(lease, ReadLease(c, agent_id));
                               return Status::Ok();
                             }));
  return lease;
}

// ---- Maintenance -----------------------------------------------------------------------------

StatusOr<StoreStats> PostgresStore::Stats() {
  StoreStats stats;
  STRATA_RETURN_IF_ERROR(Read("reading store statistics", [&](PgConnection& c) -> Status {
    STRATA_ASSIGN_OR_RETURN(
        PgResult row,
        c.Exec("SELECT (SELECT count(*) FROM strata_agents), (SELECT count(*) FROM "
               "strata_segments), (SELECT count(*) FROM strata_blobs), (SELECT "
               "coalesce(sum(raw_size), 0) FROM strata_blobs), (SELECT "
               "coalesce(sum(length(data)), 0) FROM strata_blobs), (SELECT count(*) FROM "
               "strata_requests), (SELECT count(*) FROM strata_events), (SELECT "
               "coalesce(sum(pg_total_relation_size(c.oid)), 0) FROM pg_class c WHERE "
               "c.relkind = 'r' AND c.relname LIKE 'strata\\_%' AND "
               "pg_table_is_visible(c.oid)), (SELECT max(version) FROM strata_schema)",
               "counting rows"));
    stats.agents = row.Int(0, 0);
    stats.segments = row.Int(0, 1);
    stats.blobs = row.Int(0, 2);
    stats.blob_raw_bytes = row.Int(0, 3);
    stats.blob_stored_bytes = row.Int(0, 4);
    stats.requests = row.Int(0, 5);
    stats.events = row.Int(0, 6);
    stats.file_bytes = row.Int(0, 7);
    stats.schema_version = row.Int(0, 8);
    return Status::Ok();
  }));
  stats.synchronous = options_.synchronous;
  return stats;
}

Status PostgresStore::CheckFiles() {
  return Run("checking the database", [&](PgConnection& c) -> Status {
    return c.Exec("SELECT 1", "checking the database").status();
  });
}

Status PostgresStore::Backup(const std::string& destination) {
  // A copy of the tables alone would miss what the server keeps beside them (roles, settings,
  // WAL for point-in-time recovery): the server's own tools make a consistent backup.
  return UnimplementedError(
      "Backup to " + destination + ": strata does not copy a PostgreSQL store (" + target_ +
      "), and wrote nothing; back it up with the server's tools: pg_dump --dbname='" + target_ +
      "' --table='strata_*' --file='" + destination +
      "' makes a consistent logical copy (restore it with psql into an empty database), "
      "pg_basebackup or WAL archiving one for point-in-time recovery (docs/postgres.md, Tables)");
}

int64_t BlobLockKey(const std::string& hash) {
  uint64_t key = 0;
  for (size_t i = 0; i < 8 && i < hash.size(); ++i) {
    key = (key << 8) | static_cast<unsigned char>(hash[i]);
  }
  return static_cast<int64_t>(key);
}

}  // namespace strata::store_internal

namespace strata {

bool IsPostgresUrl(std::string_view path_or_url) {
  return path_or_url.rfind("postgresql://", 0) == 0 || path_or_url.rfind("postgres://", 0) == 0;
}

StatusOr<std::unique_ptr<Store>> OpenPostgresStore(const std::string& conninfo,
                                                   StoreOptions options) {
  if (options.exclusive) {
    return InvalidArgumentError(
        "StoreOptions::exclusive applies to SQLite files; a PostgreSQL store is shared by "
        "design (leases keep one writer per agent: Store::AcquireLease)");
  }
  if (options.max_pages != 0) {
    return InvalidArgumentError(
        "StoreOptions::max_pages applies to SQLite files; limit a PostgreSQL store's size with "
        "the server's quotas");
  }
  auto store = std::make_unique<store_internal::PostgresStore>(conninfo, std::move(options));
  STRATA_RETURN_IF_ERROR(store->Open());
  return std::unique_ptr<Store>(std::move(store));
}

StatusOr<std::unique_ptr<Store>> OpenStore(const std::string& path_or_url, StoreOptions options) {
  if (IsPostgresUrl(path_or_url)) {
    options.exclusive = false;
    return OpenPostgresStore(path_or_url, std::move(options));
  }
  return OpenSqliteStore(path_or_url, std::move(options));
}

}  // namespace strata
