#include "store/postgres_schema.h"

#include <string>

namespace strata::store_internal {
namespace {

// Migration i (0-based) takes the schema from version i to version i + 1. Append only: a released
// step is never edited, a change is a new step.
const char* const kPostgresMigrations[] = {
    // 0 -> 1: agents, segments, originals, blobs, turns, request records, events, growth and
    // per-agent state: what SQLite's schema version 5 holds.
    R"sql(
CREATE TABLE strata_agents(
  agent BIGSERIAL PRIMARY KEY,
  id TEXT NOT NULL UNIQUE,
  options TEXT NOT NULL,
  tokenizer TEXT NOT NULL,
  created_ms BIGINT NOT NULL,
  updated_ms BIGINT NOT NULL,
  turn BIGINT NOT NULL DEFAULT 0);
CREATE TABLE strata_blobs(
  hash BYTEA PRIMARY KEY,
  raw_size BIGINT NOT NULL,
  codec INTEGER NOT NULL,
  data BYTEA NOT NULL);
CREATE TABLE strata_segments(
  agent BIGINT NOT NULL,
  id TEXT NOT NULL,
  seq BIGINT NOT NULL,
  position BIGINT NOT NULL,
  kind INTEGER NOT NULL,
  layer INTEGER NOT NULL,
  state INTEGER NOT NULL,
  hygiene INTEGER NOT NULL,
  turn BIGINT NOT NULL,
  tokens BIGINT NOT NULL,
  pinned INTEGER NOT NULL,
  ord BIGINT NOT NULL,
  version TEXT NOT NULL,
  name TEXT NOT NULL,
  tool_call_id TEXT NOT NULL,
  recall_id TEXT NOT NULL,
  duplicate_of TEXT NOT NULL,
  reasoning BYTEA NOT NULL,
  tool_calls BYTEA NOT NULL,
  content BYTEA,
  content_hash BYTEA,
  policy TEXT NOT NULL DEFAULT '',
  PRIMARY KEY(agent, id));
CREATE INDEX strata_segments_by_hash ON strata_segments(content_hash)
  WHERE content_hash IS NOT NULL;
CREATE TABLE strata_originals(
  agent BIGINT NOT NULL,
  recall_id TEXT NOT NULL,
  content BYTEA,
  content_hash BYTEA,
  PRIMARY KEY(agent, recall_id));
CREATE INDEX strata_originals_by_hash ON strata_originals(content_hash)
  WHERE content_hash IS NOT NULL;
CREATE TABLE strata_turns(
  agent BIGINT NOT NULL,
  turn BIGINT NOT NULL,
  started_ms BIGINT NOT NULL,
  PRIMARY KEY(agent, turn));
CREATE TABLE strata_requests(
  id BIGSERIAL PRIMARY KEY,
  agent BIGINT NOT NULL,
  request_id TEXT NOT NULL,
  pool TEXT NOT NULL,
  endpoint TEXT NOT NULL,
  model TEXT NOT NULL,
  started_ms BIGINT NOT NULL,
  input_tokens BIGINT NOT NULL,
  cached_reported BIGINT,
  cached_predicted BIGINT NOT NULL,
  output_tokens BIGINT NOT NULL,
  reasoning_tokens BIGINT NOT NULL,
  queue_wait_ms DOUBLE PRECISION NOT NULL,
  ttft_ms DOUBLE PRECISION NOT NULL,
  decode_ms DOUBLE PRECISION NOT NULL,
  total_ms DOUBLE PRECISION NOT NULL,
  kv_cache_bytes BIGINT NOT NULL,
  finish_reason TEXT NOT NULL,
  attempts INTEGER NOT NULL,
  http_status INTEGER NOT NULL,
  code INTEGER NOT NULL,
  error TEXT NOT NULL,
  degradation TEXT NOT NULL DEFAULT '',
  degradation_notes TEXT NOT NULL DEFAULT '');
CREATE INDEX strata_requests_by_agent ON strata_requests(agent, id);
CREATE INDEX strata_requests_by_start ON strata_requests(started_ms);
CREATE TABLE strata_events(
  id BIGSERIAL PRIMARY KEY,
  agent BIGINT NOT NULL,
  turn BIGINT NOT NULL,
  unix_ms BIGINT NOT NULL,
  type TEXT NOT NULL,
  payload TEXT NOT NULL);
CREATE INDEX strata_events_by_agent ON strata_events(agent, type, id);
CREATE TABLE strata_growth(
  agent BIGINT NOT NULL,
  turn BIGINT NOT NULL,
  unix_ms BIGINT NOT NULL,
  system_tokens BIGINT NOT NULL,
  tools_tokens BIGINT NOT NULL,
  index_tokens BIGINT NOT NULL,
  docs_tokens BIGINT NOT NULL,
  history_tokens BIGINT NOT NULL,
  volatile_tokens BIGINT NOT NULL,
  compactions BIGINT NOT NULL,
  invalidated_tokens BIGINT NOT NULL,
  PRIMARY KEY(agent, turn));
CREATE TABLE strata_agent_state(
  agent BIGINT NOT NULL,
  key TEXT NOT NULL,
  value BYTEA NOT NULL,
  updated_ms BIGINT NOT NULL,
  PRIMARY KEY(agent, key));
)sql",
    // 1 -> 2: write leases, one row per agent id (strata/store.h, AgentLease). The epoch grows by
    // one each time another owner takes the agent; every write checks it (fencing).
    R"sql(
CREATE TABLE strata_leases(
  agent_id TEXT PRIMARY KEY,
  owner TEXT NOT NULL,
  epoch BIGINT NOT NULL,
  expires_ms BIGINT NOT NULL,
  acquired_ms BIGINT NOT NULL);
)sql",
    // 2 -> 3: why each request was sent (RequestRecord::purpose): "turn", or "compaction" for a
    // summarizer's request.
    R"sql(
ALTER TABLE strata_requests ADD COLUMN purpose TEXT NOT NULL DEFAULT 'turn';
)sql",
    // 3 -> 4: the tokens of each turn's summary requests in its growth point
    // (GrowthPoint::summary_input_tokens, summary_cached_tokens, summary_output_tokens).
    R"sql(
ALTER TABLE strata_growth ADD COLUMN summary_input_tokens BIGINT NOT NULL DEFAULT 0;
ALTER TABLE strata_growth ADD COLUMN summary_cached_tokens BIGINT NOT NULL DEFAULT 0;
ALTER TABLE strata_growth ADD COLUMN summary_output_tokens BIGINT NOT NULL DEFAULT 0;
)sql",
};
static_assert(sizeof(kPostgresMigrations) / sizeof(kPostgresMigrations[0]) ==
                  kPostgresSchemaVersion,
              "one migration per schema version");

// Any 64-bit key: the transaction-scoped advisory lock that serializes schema changes.
constexpr const char* kSchemaLock = "SELECT pg_advisory_xact_lock(5453524154410001)";

Status RunSteps(PgConnection& conn, int64_t from, int64_t to) {
  for (int64_t v = from; v < to; ++v) {
    STRATA_RETURN_IF_ERROR(
        conn.Exec(kPostgresMigrations[v], "migrating the schema to version " + std::to_string(v + 1))
            .status());
  }
  STRATA_RETURN_IF_ERROR(
      conn.Exec("DELETE FROM strata_schema", "recording the schema version").status());
  return conn
      .Exec("INSERT INTO strata_schema(version) VALUES($1)", PgParams().Int(to),
            "recording the schema version")
      .status();
}

StatusOr<int64_t> ReadVersion(PgConnection& conn) {
  STRATA_ASSIGN_OR_RETURN(
      PgResult exists,
      conn.Exec("SELECT to_regclass('strata_schema') IS NOT NULL", "looking for the schema"));
  if (exists.Text(0, 0) != "t") return 0;
  STRATA_ASSIGN_OR_RETURN(PgResult version, conn.Exec("SELECT coalesce(max(version), 0) FROM "
                                                      "strata_schema",
                                                      "reading the schema version"));
  return version.Int(0, 0);
}

Status MigrateLocked(PgConnection& conn, bool create, int64_t target) {
  STRATA_RETURN_IF_ERROR(conn.Exec(kSchemaLock, "locking the schema").status());
  STRATA_ASSIGN_OR_RETURN(int64_t version, ReadVersion(conn));
  if (version > kPostgresSchemaVersion) {
    return FailedPreconditionError(
        "the PostgreSQL store was written by a newer strata (schema version " +
        std::to_string(version) + "; this build reads up to version " +
        std::to_string(kPostgresSchemaVersion) + "): upgrade strata");
  }
  if (version == 0 && !create) {
    return NotFoundError(
        "the database holds no strata store (no strata_schema table) and creation is not "
        "allowed (StoreOptions::create_if_missing)");
  }
  if (version >= target) return Status::Ok();
  if (version == 0) {
    STRATA_RETURN_IF_ERROR(conn.Exec("CREATE TABLE IF NOT EXISTS strata_schema(version BIGINT "
                                     "NOT NULL)",
                                     "creating the schema table")
                               .status());
  }
  return RunSteps(conn, version, target);
}

Status MigrateTo(PgConnection& conn, bool create, int64_t target) {
  STRATA_RETURN_IF_ERROR(conn.Exec("BEGIN", "starting the schema transaction").status());
  Status status = MigrateLocked(conn, create, target);
  if (status.ok()) {
    status = conn.Exec("COMMIT", "committing the schema").status();
  } else if (conn.healthy()) {
    conn.Exec("ROLLBACK", "rolling back the schema").status().IgnoreError();
  }
  return status;
}

}  // namespace

Status MigratePostgres(PgConnection& conn, bool create) {
  return MigrateTo(conn, create, kPostgresSchemaVersion);
}

StatusOr<int64_t> PostgresSchemaVersion(PgConnection& conn) { return ReadVersion(conn); }

Status CreatePostgresSchemaAtVersionForTesting(PgConnection& conn, int64_t version) {
  return MigrateTo(conn, true, version);
}

}  // namespace strata::store_internal
