// The PostgreSQL store: request records, events, per-agent state, growth and pruning
// (postgres_store.h says which file holds what).
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "store/postgres_store.h"
#include "store/row_codec.h"

namespace strata::store_internal {

Status PostgresStore::AppendRequest(const RequestRecord& r) {
  return Write("recording a request of agent \"" + r.agent_id + "\"", r.agent_id,
               [&](PgConnection& c) { return AppendRequestIn(c, r); });
}

Status PostgresStore::AppendRequestIn(PgConnection& c, const RequestRecord& r) {
  STRATA_ASSIGN_OR_RETURN(int64_t agent, AgentRow(c, r.agent_id));
  PgParams p;
  p.Int(agent).Text(r.request_id).Text(r.pool).Text(r.endpoint).Text(r.model);
  p.Int(r.started_unix_ms).Int(r.input_tokens);
  if (r.cached_tokens_reported) {
    p.Int(*r.cached_tokens_reported);
  } else {
    p.Null();
  }
  p.Int(r.cached_tokens_predicted).Int(r.output_tokens).Int(r.reasoning_tokens);
  p.Real(r.queue_wait_ms).Real(r.ttft_ms).Real(r.decode_ms).Real(r.total_ms);
  p.Int(r.kv_cache_bytes).Text(r.finish_reason).Int(r.attempts).Int(r.http_status);
  p.Int(static_cast<int>(r.code)).Text(r.error).Text(r.degradation);
  p.Text(r.degradation_notes).Text(r.purpose);
  static const std::string kInsert =
      std::string("INSERT INTO strata_requests(agent, ") + kRequestColumns + ") VALUES(" +
      RequestInsertParameters('$') + ")";
  return c
      .Exec(kInsert.c_str(), p, "writing a request record")
      .status();
}

StatusOr<std::vector<RequestRecord>> PostgresStore::RecentRequests(std::string_view agent_id,
                                                                   size_t limit) {
  std::vector<RequestRecord> records;
  STRATA_RETURN_IF_ERROR(Read(
      "reading request records of agent \"" + std::string(agent_id) + "\"",
      [&](PgConnection& c) -> Status {
        records.clear();
        STRATA_ASSIGN_OR_RETURN(int64_t agent, AgentRow(c, agent_id));
        static const std::string kSql = std::string("SELECT ") + kRequestColumns +
                                        " FROM strata_requests WHERE agent = $1 ORDER BY id "
                                        "DESC LIMIT $2";
        STRATA_ASSIGN_OR_RETURN(PgResult rows,
                                c.Exec(kSql.c_str(),
                                       PgParams().Int(agent).Int(static_cast<int64_t>(limit)),
                                       "reading request records"));
        for (int i = 0; i < rows.rows(); ++i) {
          STRATA_ASSIGN_OR_RETURN(RequestRecord r,
                                  DecodeRequestRow(PgRow(rows, i), agent_id, target_));
          records.push_back(std::move(r));
        }
        return Status::Ok();
      }));
  return records;
}

StatusOr<int64_t> PostgresStore::AppendEvent(const StoredEvent& event) {
  if (event.type.empty()) return InvalidArgumentError("event type must not be empty");
  nlohmann::json payload = nlohmann::json::parse(event.payload_json, nullptr, false);
  if (payload.is_discarded() || !payload.is_object()) {
    return InvalidArgumentError("event payload must be a JSON object, got: " +
                                event.payload_json.substr(0, 80));
  }
  int64_t id = 0;
  STRATA_RETURN_IF_ERROR(Write("recording an event of agent \"" + event.agent_id + "\"",
                               event.agent_id, [&](PgConnection& c) -> Status {
                                 STRATA_ASSIGN_OR_RETURN(id, AppendEventIn(c, event));
                                 return Status::Ok();
                               }));
  return id;
}

StatusOr<int64_t> PostgresStore::AppendEventIn(PgConnection& c, const StoredEvent& event) {
  STRATA_ASSIGN_OR_RETURN(int64_t agent, AgentRow(c, event.agent_id));
  STRATA_ASSIGN_OR_RETURN(
      PgResult row,
      c.Exec("INSERT INTO strata_events(agent, turn, unix_ms, type, payload) VALUES($1, "
             "$2, $3, $4, $5) RETURNING id",
             PgParams()
                 .Int(agent)
                 .Int(event.turn)
                 .Int(event.unix_ms != 0 ? event.unix_ms : Now())
                 .Text(event.type)
                 .Text(event.payload_json),
             "writing an event"));
  return row.Int(0, 0);
}

StatusOr<std::vector<StoredEvent>> PostgresStore::Events(std::string_view agent_id,
                                                         std::string_view type) {
  std::vector<StoredEvent> events;
  STRATA_RETURN_IF_ERROR(Read(
      "reading events of agent \"" + std::string(agent_id) + "\"", [&](PgConnection& c) -> Status {
        events.clear();
        STRATA_ASSIGN_OR_RETURN(int64_t agent, AgentRow(c, agent_id));
        STRATA_ASSIGN_OR_RETURN(
            PgResult rows,
            c.Exec("SELECT id, turn, unix_ms, type, payload FROM strata_events WHERE agent = $1 "
                   "AND ($2::text = '' OR type = $2::text) ORDER BY id",
                   PgParams().Int(agent).Text(type), "reading events"));
        for (int i = 0; i < rows.rows(); ++i) {
          StoredEvent e;
          e.id = rows.Int(i, 0);
          e.agent_id = std::string(agent_id);
          e.turn = rows.Int(i, 1);
          e.unix_ms = rows.Int(i, 2);
          e.type = rows.Text(i, 3);
          e.payload_json = rows.Text(i, 4);
          events.push_back(std::move(e));
        }
        return Status::Ok();
      }));
  return events;
}

Status PostgresStore::PutAgentState(std::string_view agent_id, std::string_view key,
                                    std::string_view value) {
  if (key.empty()) return InvalidArgumentError("agent state key must not be empty");
  return Write(
      "storing state \"" + std::string(key) + "\" of agent \"" + std::string(agent_id) + "\"",
      agent_id, [&](PgConnection& c) { return PutAgentStateIn(c, agent_id, key, value); });
}

Status PostgresStore::PutAgentStateIn(PgConnection& c, std::string_view agent_id,
                                      std::string_view key, std::string_view value) {
  STRATA_ASSIGN_OR_RETURN(int64_t agent, AgentRow(c, agent_id));
  return c
      .Exec(
          "INSERT INTO strata_agent_state(agent, key, value, updated_ms) VALUES($1, $2, "
          "$3, $4) ON CONFLICT (agent, key) DO UPDATE SET value = excluded.value, "
          "updated_ms = excluded.updated_ms",
          PgParams().Int(agent).Text(key).Bytes(value).Int(Now()), "writing agent state")
      .status();
}

StatusOr<std::optional<std::string>> PostgresStore::GetAgentState(std::string_view agent_id,
                                                                  std::string_view key) {
  std::optional<std::string> value;
  STRATA_RETURN_IF_ERROR(
      Read("reading state \"" + std::string(key) + "\" of agent \"" + std::string(agent_id) + "\"",
           [&](PgConnection& c) -> Status {
             value.reset();
             STRATA_ASSIGN_OR_RETURN(int64_t agent, AgentRow(c, agent_id));
             STRATA_ASSIGN_OR_RETURN(
                 PgResult row,
                 c.Exec("SELECT value FROM strata_agent_state WHERE agent = $1 AND key = $2",
                        PgParams().Int(agent).Text(key), "reading agent state"));
             if (row.rows() > 0) value = row.Bytes(0, 0);
             return Status::Ok();
           }));
  return value;
}

Status PostgresStore::RecordGrowth(const GrowthPoint& p) {
  return Write("recording growth of agent \"" + p.agent_id + "\"", p.agent_id,
               [&](PgConnection& c) { return RecordGrowthIn(c, p); });
}

Status PostgresStore::RecordGrowthIn(PgConnection& c, const GrowthPoint& p) {
  STRATA_ASSIGN_OR_RETURN(int64_t agent, AgentRow(c, p.agent_id));
  PgParams params;
  params.Int(agent).Int(p.turn).Int(p.unix_ms != 0 ? p.unix_ms : Now());
  for (int i = 0; i < kLayerCount; ++i) params.Int(p.layer_tokens[i]);
  params.Int(p.compactions).Int(p.invalidated_tokens);
  params.Int(p.summary_input_tokens).Int(p.summary_cached_tokens).Int(p.summary_output_tokens);
  return c
      .Exec(
          "INSERT INTO strata_growth(agent, turn, unix_ms, system_tokens, "
          "tools_tokens, index_tokens, docs_tokens, history_tokens, volatile_tokens, "
          "compactions, invalidated_tokens, summary_input_tokens, summary_cached_tokens, "
          "summary_output_tokens) VALUES($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, "
          "$13, $14) ON CONFLICT (agent, turn) DO UPDATE SET unix_ms = excluded.unix_ms, "
          "system_tokens = excluded.system_tokens, tools_tokens = "
          "excluded.tools_tokens, index_tokens = excluded.index_tokens, docs_tokens = "
          "excluded.docs_tokens, history_tokens = excluded.history_tokens, "
          "volatile_tokens = excluded.volatile_tokens, compactions = "
          "excluded.compactions, invalidated_tokens = excluded.invalidated_tokens, "
          "summary_input_tokens = excluded.summary_input_tokens, summary_cached_tokens = "
          "excluded.summary_cached_tokens, summary_output_tokens = "
          "excluded.summary_output_tokens",
          params, "writing a growth point")
      .status();
}

StatusOr<std::vector<GrowthPoint>> PostgresStore::Growth(std::string_view agent_id) {
  std::vector<GrowthPoint> points;
  STRATA_RETURN_IF_ERROR(Read(
      "reading growth of agent \"" + std::string(agent_id) + "\"", [&](PgConnection& c) -> Status {
        points.clear();
        STRATA_ASSIGN_OR_RETURN(int64_t agent, AgentRow(c, agent_id));
        STRATA_ASSIGN_OR_RETURN(
            PgResult rows,
            c.Exec("SELECT turn, unix_ms, system_tokens, tools_tokens, index_tokens, "
                   "docs_tokens, history_tokens, volatile_tokens, compactions, "
                   "invalidated_tokens, summary_input_tokens, summary_cached_tokens, "
                   "summary_output_tokens FROM strata_growth WHERE agent = $1 ORDER BY turn",
                   PgParams().Int(agent), "reading growth points"));
        for (int i = 0; i < rows.rows(); ++i) {
          GrowthPoint p;
          p.agent_id = std::string(agent_id);
          p.turn = rows.Int(i, 0);
          p.unix_ms = rows.Int(i, 1);
          for (int l = 0; l < kLayerCount; ++l) p.layer_tokens[l] = rows.Int(i, 2 + l);
          p.compactions = rows.Int(i, 8);
          p.invalidated_tokens = rows.Int(i, 9);
          p.summary_input_tokens = rows.Int(i, 10);
          p.summary_cached_tokens = rows.Int(i, 11);
          p.summary_output_tokens = rows.Int(i, 12);
          points.push_back(p);
        }
        return Status::Ok();
      }));
  return points;
}

StatusOr<int64_t> PostgresStore::PruneRequests(const RetentionPolicy& policy, int64_t now_unix_ms) {
  int64_t deleted = 0;
  STRATA_RETURN_IF_ERROR(Write("pruning request records", "", [&](PgConnection& c) -> Status {
    deleted = 0;
    if (policy.max_age_ms > 0) {
      STRATA_ASSIGN_OR_RETURN(PgResult rows,
                              c.Exec("DELETE FROM strata_requests WHERE started_ms < $1",
                                     PgParams().Int(now_unix_ms - policy.max_age_ms),
                                     "pruning request records by age"));
      deleted += rows.Affected();
    }
    if (policy.max_records_per_agent > 0) {
      STRATA_ASSIGN_OR_RETURN(
          PgResult rows,
          c.Exec("DELETE FROM strata_requests WHERE id IN (SELECT id FROM (SELECT id, "
                 "ROW_NUMBER() OVER (PARTITION BY agent ORDER BY id DESC) AS n FROM "
                 "strata_requests) ranked WHERE n > $1)",
                 PgParams().Int(policy.max_records_per_agent), "pruning request records by count"));
      deleted += rows.Affected();
    }
    return Status::Ok();
  }));
  return deleted;
}

// One transaction for the whole turn: Write's fence first, then each write as its own method
// does it, in TurnWrites' order; any failure rolls all of it back.
Status PostgresStore::CommitTurn(const TurnWrites& writes) {
  STRATA_RETURN_IF_ERROR(CheckTurnWrites(writes));
  if (writes.empty()) return Status::Ok();
  return Write("committing a turn of agent \"" + writes.agent_id + "\"", writes.agent_id,
               [&](PgConnection& c) -> Status {
                 for (const ContextChange& change : writes.changes) {
                   STRATA_RETURN_IF_ERROR(ApplyChangeIn(c, writes.agent_id, change));
                 }
                 for (const auto& [key, value] : writes.state) {
                   STRATA_RETURN_IF_ERROR(PutAgentStateIn(c, writes.agent_id, key, value));
                 }
                 for (const StoredEvent& event : writes.events) {
                   STRATA_RETURN_IF_ERROR(AppendEventIn(c, event).status());
                 }
                 for (const RequestRecord& record : writes.records) {
                   STRATA_RETURN_IF_ERROR(AppendRequestIn(c, record));
                 }
                 if (writes.growth) STRATA_RETURN_IF_ERROR(RecordGrowthIn(c, *writes.growth));
                 return Status::Ok();
               });
}

}  // namespace strata::store_internal
