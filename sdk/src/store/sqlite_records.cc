// The SQLite store: request records, events, per-agent state, growth and pruning
// (sqlite_store.h says which file holds what).
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "store/row_codec.h"
#include "store/sqlite_store.h"

namespace strata::store_internal {

Status SqliteStore::AppendRequest(const RequestRecord& r) {
  internal::MutexLock lock(mu_);
  return Transaction("recording a request of agent \"" + r.agent_id + "\"",
                     [&]() STRATA_REQUIRES(mu_) -> Status {
                       STRATA_ASSIGN_OR_RETURN(int64_t agent, AgentRow(r.agent_id));
                       return WriteRequest(agent, r);
                     });
}

Status SqliteStore::WriteRequest(int64_t agent, const RequestRecord& r) {
  // Built once per process: the text is a constant, so the cache key stays valid.
  static const std::string kInsert = std::string("INSERT INTO requests(agent, ") +
                                     kRequestColumns + ") VALUES(" +
                                     RequestInsertParameters('?') + ")";
  STRATA_ASSIGN_OR_RETURN(Stmt insert, Prepare(kInsert.c_str()));
  insert.Int(1, agent).Text(2, r.request_id).Text(3, r.pool).Text(4, r.endpoint);
  insert.Text(5, r.model).Int(6, r.started_unix_ms).Int(7, r.input_tokens);
  if (r.cached_tokens_reported) {
    insert.Int(8, *r.cached_tokens_reported);
  } else {
    insert.Null(8);
  }
  insert.Int(9, r.cached_tokens_predicted).Int(10, r.output_tokens).Int(11, r.reasoning_tokens);
  insert.Real(12, r.queue_wait_ms).Real(13, r.ttft_ms).Real(14, r.decode_ms);
  insert.Real(15, r.total_ms).Int(16, r.kv_cache_bytes).Text(17, r.finish_reason);
  insert.Int(18, r.attempts).Int(19, r.http_status).Int(20, static_cast<int>(r.code));
  insert.Text(21, r.error).Text(22, r.degradation).Text(23, r.degradation_notes);
  insert.Text(24, r.purpose);
  int rc = insert.Step();
  if (rc != SQLITE_DONE) return Error(rc, "writing a request record");
  return Status::Ok();
}

StatusOr<std::vector<RequestRecord>> SqliteStore::RecentRequests(std::string_view agent_id,
                                                                 size_t limit) {
  internal::MutexLock lock(mu_);
  STRATA_ASSIGN_OR_RETURN(int64_t agent, AgentRow(agent_id));
  // Built once per process: the text is a constant, so the cache key stays valid.
  static const std::string kSql = std::string("SELECT ") + kRequestColumns +
                                  " FROM requests WHERE agent = ?1 ORDER BY id DESC LIMIT ?2";
  STRATA_ASSIGN_OR_RETURN(Stmt select, Prepare(kSql.c_str()));
  select.Int(1, agent).Int(2, static_cast<int64_t>(limit));
  std::vector<RequestRecord> records;
  int rc;
  while ((rc = select.Step()) == SQLITE_ROW) {
    STRATA_ASSIGN_OR_RETURN(RequestRecord r, DecodeRequestRow(StmtRow(select), agent_id, path_));
    records.push_back(std::move(r));
  }
  if (rc != SQLITE_DONE) return Error(rc, "reading request records");
  return records;
}

StatusOr<int64_t> SqliteStore::AppendEvent(const StoredEvent& event) {
  if (event.type.empty()) return InvalidArgumentError("event type must not be empty");
  nlohmann::json payload = nlohmann::json::parse(event.payload_json, nullptr, false);
  if (payload.is_discarded() || !payload.is_object()) {
    return InvalidArgumentError("event payload must be a JSON object, got: " +
                                event.payload_json.substr(0, 80));
  }
  internal::MutexLock lock(mu_);
  int64_t id = 0;
  STRATA_RETURN_IF_ERROR(Transaction("recording an event of agent \"" + event.agent_id + "\"",
                                     [&]() STRATA_REQUIRES(mu_) -> Status {
                                       STRATA_ASSIGN_OR_RETURN(int64_t agent,
                                                               AgentRow(event.agent_id));
                                       STRATA_RETURN_IF_ERROR(WriteEvent(agent, event));
                                       id = sqlite3_last_insert_rowid(db_);
                                       return Status::Ok();
                                     }));
  return id;
}

Status SqliteStore::WriteEvent(int64_t agent, const StoredEvent& event) {
  STRATA_ASSIGN_OR_RETURN(Stmt insert,
                          Prepare("INSERT INTO events(agent, turn, unix_ms, type, payload) "
                                  "VALUES(?1, ?2, ?3, ?4, ?5)"));
  insert.Int(1, agent).Int(2, event.turn).Int(3, event.unix_ms != 0 ? event.unix_ms : Now());
  insert.Text(4, event.type).Text(5, event.payload_json);
  int rc = insert.Step();
  if (rc != SQLITE_DONE) return Error(rc, "writing an event");
  return Status::Ok();
}

StatusOr<std::vector<StoredEvent>> SqliteStore::Events(std::string_view agent_id,
                                                       std::string_view type) {
  internal::MutexLock lock(mu_);
  STRATA_ASSIGN_OR_RETURN(int64_t agent, AgentRow(agent_id));
  STRATA_ASSIGN_OR_RETURN(
      Stmt select,
      Prepare("SELECT id, turn, unix_ms, type, payload FROM events WHERE agent = ?1 AND "
              "(?2 = '' OR type = ?2) ORDER BY id"));
  select.Int(1, agent).Text(2, type);
  std::vector<StoredEvent> events;
  int rc;
  while ((rc = select.Step()) == SQLITE_ROW) {
    StoredEvent e;
    e.id = select.ColInt(0);
    e.agent_id = std::string(agent_id);
    e.turn = select.ColInt(1);
    e.unix_ms = select.ColInt(2);
    e.type = select.ColText(3);
    e.payload_json = select.ColText(4);
    events.push_back(std::move(e));
  }
  if (rc != SQLITE_DONE) return Error(rc, "reading events");
  return events;
}

Status SqliteStore::PutAgentState(std::string_view agent_id, std::string_view key,
                                  std::string_view value) {
  if (key.empty()) return InvalidArgumentError("agent state key must not be empty");
  internal::MutexLock lock(mu_);
  return Transaction(
      "storing state \"" + std::string(key) + "\" of agent \"" + std::string(agent_id) + "\"",
      [&]() STRATA_REQUIRES(mu_) -> Status {
        STRATA_ASSIGN_OR_RETURN(int64_t agent, AgentRow(agent_id));
        return WriteState(agent, key, value);
      });
}

Status SqliteStore::WriteState(int64_t agent, std::string_view key, std::string_view value) {
  STRATA_ASSIGN_OR_RETURN(Stmt insert,
                          Prepare("INSERT OR REPLACE INTO agent_state(agent, key, value, "
                                  "updated_ms) VALUES(?1, ?2, ?3, ?4)"));
  insert.Int(1, agent).Text(2, key).Blob(3, value).Int(4, Now());
  int rc = insert.Step();
  if (rc != SQLITE_DONE) return Error(rc, "writing agent state");
  return Status::Ok();
}

StatusOr<std::optional<std::string>> SqliteStore::GetAgentState(std::string_view agent_id,
                                                                std::string_view key) {
  internal::MutexLock lock(mu_);
  STRATA_ASSIGN_OR_RETURN(int64_t agent, AgentRow(agent_id));
  STRATA_ASSIGN_OR_RETURN(Stmt select,
                          Prepare("SELECT value FROM agent_state WHERE agent = ?1 AND key = ?2"));
  select.Int(1, agent).Text(2, key);
  int rc = select.Step();
  if (rc == SQLITE_DONE) return std::optional<std::string>();
  if (rc != SQLITE_ROW) return Error(rc, "reading agent state");
  return std::optional<std::string>(select.ColText(0));
}

Status SqliteStore::RecordGrowth(const GrowthPoint& p) {
  internal::MutexLock lock(mu_);
  return Transaction("recording growth of agent \"" + p.agent_id + "\"",
                     [&]() STRATA_REQUIRES(mu_) -> Status {
                       STRATA_ASSIGN_OR_RETURN(int64_t agent, AgentRow(p.agent_id));
                       return WriteGrowth(agent, p);
                     });
}

Status SqliteStore::WriteGrowth(int64_t agent, const GrowthPoint& p) {
  STRATA_ASSIGN_OR_RETURN(
      Stmt insert,
      Prepare("INSERT OR REPLACE INTO growth(agent, turn, unix_ms, system_tokens, tools_tokens, "
              "index_tokens, docs_tokens, history_tokens, volatile_tokens, compactions, "
              "invalidated_tokens, summary_input_tokens, summary_cached_tokens, "
              "summary_output_tokens) VALUES(?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, "
              "?13, ?14)"));
  insert.Int(1, agent).Int(2, p.turn).Int(3, p.unix_ms != 0 ? p.unix_ms : Now());
  for (int i = 0; i < kLayerCount; ++i) insert.Int(4 + i, p.layer_tokens[i]);
  insert.Int(10, p.compactions).Int(11, p.invalidated_tokens);
  insert.Int(12, p.summary_input_tokens)
      .Int(13, p.summary_cached_tokens)
      .Int(14, p.summary_output_tokens);
  int rc = insert.Step();
  if (rc != SQLITE_DONE) return Error(rc, "writing a growth point");
  return Status::Ok();
}

StatusOr<std::vector<GrowthPoint>> SqliteStore::Growth(std::string_view agent_id) {
  internal::MutexLock lock(mu_);
  STRATA_ASSIGN_OR_RETURN(int64_t agent, AgentRow(agent_id));
  STRATA_ASSIGN_OR_RETURN(
      Stmt select,
      Prepare("SELECT turn, unix_ms, system_tokens, tools_tokens, index_tokens, docs_tokens, "
              "history_tokens, volatile_tokens, compactions, invalidated_tokens, "
              "summary_input_tokens, summary_cached_tokens, summary_output_tokens FROM growth "
              "WHERE agent = ?1 ORDER BY turn"));
  select.Int(1, agent);
  std::vector<GrowthPoint> points;
  int rc;
  while ((rc = select.Step()) == SQLITE_ROW) {
    GrowthPoint p;
    p.agent_id = std::string(agent_id);
    p.turn = select.ColInt(0);
    p.unix_ms = select.ColInt(1);
    for (int i = 0; i < kLayerCount; ++i) p.layer_tokens[i] = select.ColInt(2 + i);
    p.compactions = select.ColInt(8);
    p.invalidated_tokens = select.ColInt(9);
    p.summary_input_tokens = select.ColInt(10);
    p.summary_cached_tokens = select.ColInt(11);
    p.summary_output_tokens = select.ColInt(12);
    points.push_back(p);
  }
  if (rc != SQLITE_DONE) return Error(rc, "reading growth points");
  return points;
}

StatusOr<int64_t> SqliteStore::PruneRequests(const RetentionPolicy& policy, int64_t now_unix_ms) {
  internal::MutexLock lock(mu_);
  int64_t deleted = 0;
  STRATA_RETURN_IF_ERROR(
      Transaction("pruning request records", [&]() STRATA_REQUIRES(mu_) -> Status {
        if (policy.max_age_ms > 0) {
          STRATA_ASSIGN_OR_RETURN(Stmt del, Prepare("DELETE FROM requests WHERE started_ms < ?1"));
          del.Int(1, now_unix_ms - policy.max_age_ms);
          int rc = del.Step();
          if (rc != SQLITE_DONE) return Error(rc, "pruning request records by age");
          deleted += sqlite3_changes(db_);
        }
        if (policy.max_records_per_agent > 0) {
          STRATA_ASSIGN_OR_RETURN(
              Stmt del,
              Prepare(
                  "DELETE FROM requests WHERE id IN (SELECT id FROM (SELECT id, ROW_NUMBER() OVER "
                  "(PARTITION BY agent ORDER BY id DESC) AS n FROM requests) WHERE n > ?1)"));
          del.Int(1, policy.max_records_per_agent);
          int rc = del.Step();
          if (rc != SQLITE_DONE) return Error(rc, "pruning request records by count");
          deleted += sqlite3_changes(db_);
        }
        return Status::Ok();
      }));
  return deleted;
}

}  // namespace strata::store_internal
