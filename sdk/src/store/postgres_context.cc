// The PostgreSQL store: context changes, snapshots, recall originals and blobs
// (postgres_store.h says which file holds what).
#include <algorithm>
#include <climits>
#include <string>
#include <vector>

#include "core/text_util.h"
#include "store/blob_codec.h"
#include "store/postgres_store.h"
#include "store/row_codec.h"
#include "store/tool_calls_codec.h"

namespace strata::store_internal {
namespace {

// The upsert of one segment row: every column replaced when the id exists.
std::string SegmentUpsert() {
  std::string sql =
      std::string("INSERT INTO strata_segments(agent, ") + kSegmentColumns + ") VALUES($1";
  for (int i = 2; i <= 22; ++i) sql += ", $" + std::to_string(i);
  sql += ") ON CONFLICT (agent, id) DO UPDATE SET ";
  std::string columns = kSegmentColumns;
  bool first = true;
  size_t start = 0;
  while (start < columns.size()) {
    size_t end = columns.find(',', start);
    if (end == std::string::npos) end = columns.size();
    std::string column = columns.substr(start, end - start);
    column.erase(0, column.find_first_not_of(' '));
    if (column != "id") {
      sql += (first ? "" : ", ") + column + " = excluded." + column;
      first = false;
    }
    start = end + 1;
  }
  return sql;
}

}  // namespace

Status PostgresStore::ApplyChange(std::string_view agent_id, const ContextChange& change) {
  return Write("persisting a change of agent \"" + std::string(agent_id) + "\"", agent_id,
               [&](PgConnection& c) { return ApplyChangeIn(c, agent_id, change); });
}

Status PostgresStore::ApplyChangeIn(PgConnection& c, std::string_view agent_id,
                                    const ContextChange& change) {
  STRATA_ASSIGN_OR_RETURN(int64_t agent, AgentRow(c, agent_id));
  std::set<std::string> released;
  for (const std::string& id : change.removed_ids) {
    STRATA_RETURN_IF_ERROR(DeleteSegment(c, agent, id, released));
  }
  for (const Segment& s : change.upserted) {
    if (s.layer == Layer::kVolatile) continue;  // the volatile layer is never persisted
    STRATA_RETURN_IF_ERROR(WriteSegment(c, agent, s, released));
  }
  for (const auto& [recall_id, content] : change.originals) {
    STRATA_RETURN_IF_ERROR(WriteOriginal(c, agent, recall_id, content, released));
  }
  for (const std::string& recall_id : change.removed_originals) {
    STRATA_RETURN_IF_ERROR(DeleteOriginal(c, agent, recall_id, released));
  }
  if (change.compaction) {
    STRATA_RETURN_IF_ERROR(c.Exec("INSERT INTO strata_events(agent, turn, unix_ms, type, payload) "
                                  "VALUES($1, $2, $3, 'compaction', $4)",
                                  PgParams()
                                      .Int(agent)
                                      .Int(change.compaction->turn)
                                      .Int(Now())
                                      .Text(CompactionReportJson(*change.compaction)),
                                  "writing a compaction event")
                               .status());
  }
  STRATA_RETURN_IF_ERROR(AdvanceTurn(c, agent, change.turn));
  return CollectBlobs(c, released);
}

Status PostgresStore::DeleteSegment(PgConnection& c, int64_t agent, const std::string& id,
                                    std::set<std::string>& released) {
  STRATA_ASSIGN_OR_RETURN(
      PgResult rows,
      c.Exec("DELETE FROM strata_segments WHERE agent = $1 AND id = $2 RETURNING content_hash",
             PgParams().Int(agent).Text(id), "deleting a segment"));
  for (int i = 0; i < rows.rows(); ++i) {
    if (!rows.IsNull(i, 0)) released.insert(rows.Bytes(i, 0));
  }
  return Status::Ok();
}

Status PostgresStore::WriteSegment(PgConnection& c, int64_t agent, const Segment& s,
                                   std::set<std::string>& released) {
  STRATA_ASSIGN_OR_RETURN(
      PgResult old, c.Exec("SELECT content_hash FROM strata_segments WHERE agent = $1 AND id = $2",
                           PgParams().Int(agent).Text(s.id), "reading a segment"));
  if (old.rows() > 0 && !old.IsNull(0, 0)) released.insert(old.Bytes(0, 0));
  PgParams params;
  params.Int(agent).Text(s.id).Int(static_cast<int64_t>(s.seq)).Int(s.position);
  params.Int(static_cast<int>(s.kind)).Int(static_cast<int>(s.layer));
  params.Int(static_cast<int>(s.state)).Int(static_cast<int>(s.hygiene));
  params.Int(s.turn).Int(static_cast<int64_t>(s.tokens)).Int(s.pinned ? 1 : 0);
  params.Int(s.order).Text(s.version).Text(s.name).Text(s.tool_call_id).Text(s.recall_id);
  params.Text(s.duplicate_of).Bytes(s.reasoning).Bytes(EncodeToolCalls(s.tool_calls));
  STRATA_RETURN_IF_ERROR(AddContent(c, params, s.content));
  params.Text(s.policy);
  static const std::string kUpsert = SegmentUpsert();
  return c.Exec(kUpsert.c_str(), params, "writing a segment").status();
}

Status PostgresStore::WriteOriginal(PgConnection& c, int64_t agent, const std::string& recall_id,
                                    const std::string& content, std::set<std::string>& released) {
  STRATA_ASSIGN_OR_RETURN(
      PgResult old,
      c.Exec("SELECT content_hash FROM strata_originals WHERE agent = $1 AND recall_id = $2",
             PgParams().Int(agent).Text(recall_id), "reading a recall original"));
  if (old.rows() > 0 && !old.IsNull(0, 0)) released.insert(old.Bytes(0, 0));
  PgParams params;
  params.Int(agent).Text(recall_id);
  STRATA_RETURN_IF_ERROR(AddContent(c, params, content));
  return c
      .Exec(
          "INSERT INTO strata_originals(agent, recall_id, content, content_hash) "
          "VALUES($1, $2, $3, $4) ON CONFLICT (agent, recall_id) DO UPDATE SET content = "
          "excluded.content, content_hash = excluded.content_hash",
          params, "writing a recall original")
      .status();
}

Status PostgresStore::DeleteOriginal(PgConnection& c, int64_t agent, const std::string& recall_id,
                                     std::set<std::string>& released) {
  STRATA_ASSIGN_OR_RETURN(
      PgResult rows,
      c.Exec("DELETE FROM strata_originals WHERE agent = $1 AND recall_id = $2 RETURNING "
             "content_hash",
             PgParams().Int(agent).Text(recall_id), "deleting a recall original"));
  for (int i = 0; i < rows.rows(); ++i) {
    if (!rows.IsNull(i, 0)) released.insert(rows.Bytes(i, 0));
  }
  return Status::Ok();
}

Status PostgresStore::AdvanceTurn(PgConnection& c, int64_t agent, int64_t turn) {
  // FOR UPDATE: writers of one agent (several threads of one store) take turns on its row.
  STRATA_ASSIGN_OR_RETURN(PgResult row,
                          c.Exec("SELECT turn FROM strata_agents WHERE agent = $1 FOR UPDATE",
                                 PgParams().Int(agent), "reading an agent's turn"));
  if (row.rows() == 0) return InternalError("agent row " + std::to_string(agent) + " vanished");
  const int64_t old_turn = row.Int(0, 0);
  const int64_t now = Now();
  if (turn > old_turn) {
    STRATA_RETURN_IF_ERROR(
        c.Exec("INSERT INTO strata_turns(agent, turn, started_ms) VALUES($1, $2, $3) ON "
               "CONFLICT (agent, turn) DO UPDATE SET started_ms = excluded.started_ms",
               PgParams().Int(agent).Int(turn).Int(now), "recording a turn")
            .status());
  } else if (turn < old_turn) {  // a rewound context: its later turns never happened
    STRATA_RETURN_IF_ERROR(c.Exec("DELETE FROM strata_turns WHERE agent = $1 AND turn > $2",
                                  PgParams().Int(agent).Int(turn), "deleting rewound turns")
                               .status());
  }
  return c
      .Exec("UPDATE strata_agents SET turn = $2, updated_ms = $3 WHERE agent = $1",
            PgParams().Int(agent).Int(turn).Int(now), "updating an agent")
      .status();
}

Status PostgresStore::AddContent(PgConnection& c, PgParams& params, const std::string& content) {
  if (!options_.deduplicate || content.size() < options_.blob_min_bytes) {
    params.Bytes(content).Null();
    return Status::Ok();
  }
  std::string hash = internal::Sha256(content);
  // Shared until the transaction ends: a collector of this blob waits for the reference to be
  // committed (and then sees it), or has deleted it already (and the insert below writes it).
  STRATA_RETURN_IF_ERROR(c.Exec("SELECT pg_advisory_xact_lock_shared($1)",
                                PgParams().Int(BlobLockKey(hash)), "locking a blob")
                             .status());
  STRATA_ASSIGN_OR_RETURN(PgResult exists, c.Exec("SELECT 1 FROM strata_blobs WHERE hash = $1",
                                                  PgParams().Bytes(hash), "looking up a blob"));
  if (exists.rows() == 0) {
    BlobCodec codec = BlobCodec::kRaw;
    std::string compressed;
    if (options_.compression_level > 0 && content.size() >= options_.compress_min_bytes) {
      STRATA_ASSIGN_OR_RETURN(compressed, ZstdCompress(content, options_.compression_level));
      if (compressed.size() < content.size()) codec = BlobCodec::kZstd;
    }
    STRATA_RETURN_IF_ERROR(
        c.Exec("INSERT INTO strata_blobs(hash, raw_size, codec, data) VALUES($1, $2, $3, $4) "
               "ON CONFLICT (hash) DO NOTHING",
               PgParams()
                   .Bytes(hash)
                   .Int(static_cast<int64_t>(content.size()))
                   .Int(static_cast<int>(codec))
                   .Bytes(codec == BlobCodec::kZstd ? std::string_view(compressed)
                                                    : std::string_view(content)),
               "writing a blob")
            .status());
  }
  params.Null().Bytes(hash);
  return Status::Ok();
}

StatusOr<std::string> PostgresStore::ReadContent(PgConnection& c, const PgResult& rows, int row,
                                                 int inline_col, int hash_col) {
  if (rows.IsNull(row, hash_col)) return rows.Bytes(row, inline_col);
  std::string hash = rows.Bytes(row, hash_col);
  STRATA_ASSIGN_OR_RETURN(PgResult blob,
                          c.Exec("SELECT raw_size, codec, data FROM strata_blobs WHERE hash = $1",
                                 PgParams().Bytes(hash), "reading a blob"));
  if (blob.rows() == 0) return DataLossError("blob " + Hex(hash) + " is missing from " + target_);
  return DecodeBlob(hash, blob, 0, 0);
}

StatusOr<std::string> PostgresStore::DecodeBlob(const std::string& hash, const PgResult& rows,
                                                int row, int raw_size_col) {
  std::optional<int64_t> raw_size;
  if (!rows.IsNull(row, raw_size_col)) raw_size = rows.Int(row, raw_size_col);
  return DecodeStoredBlob(hash, raw_size, rows.Int(row, raw_size_col + 1),
                          rows.Bytes(row, raw_size_col + 2), target_);
}

Status PostgresStore::CollectBlobs(PgConnection& c, const std::set<std::string>& hashes) {
  // In hash order, so that two collectors take the exclusive locks in one order.
  for (const std::string& hash : hashes) {
    STRATA_RETURN_IF_ERROR(c.Exec("SELECT pg_advisory_xact_lock($1)",
                                  PgParams().Int(BlobLockKey(hash)), "locking a blob")
                               .status());
    // A new statement, so a new snapshot: it sees every reference committed before the lock.
    STRATA_RETURN_IF_ERROR(
        c.Exec("DELETE FROM strata_blobs WHERE hash = $1 AND NOT EXISTS (SELECT 1 FROM "
               "strata_segments WHERE content_hash = $1) AND NOT EXISTS (SELECT 1 FROM "
               "strata_originals WHERE content_hash = $1)",
               PgParams().Bytes(hash), "collecting an unused blob")
            .status());
  }
  return Status::Ok();
}

StatusOr<std::vector<Segment>> PostgresStore::ReadSegments(PgConnection& c, int64_t agent,
                                                           std::string_view agent_id) {
  // The blobs in the same query (one round trip, not one per blob).
  static const std::string kSql = std::string("SELECT ") + kSegmentColumns +
                                  ", b.raw_size, b.codec, b.data FROM strata_segments s LEFT JOIN "
                                  "strata_blobs b ON b.hash = s.content_hash WHERE s.agent = $1 "
                                  "ORDER BY layer, ord, position, seq";
  STRATA_ASSIGN_OR_RETURN(PgResult rows,
                          c.Exec(kSql.c_str(), PgParams().Int(agent), "reading segments"));
  std::vector<Segment> segments;
  for (int r = 0; r < rows.rows(); ++r) {
    STRATA_ASSIGN_OR_RETURN(Segment s, DecodeSegmentRow(PgRow(rows, r), agent_id, target_));
    if (rows.IsNull(r, kSegmentContentHashColumn)) {
      s.content = rows.Bytes(r, kSegmentContentColumn);
    } else {
      STRATA_ASSIGN_OR_RETURN(
          s.content, DecodeBlob(rows.Bytes(r, kSegmentContentHashColumn), rows, r, 21));
    }
    segments.push_back(std::move(s));
  }
  return segments;
}

StatusOr<ContextSnapshot> PostgresStore::LoadSnapshot(std::string_view agent_id) {
  ContextSnapshot snapshot;
  STRATA_RETURN_IF_ERROR(
      Read("loading agent \"" + std::string(agent_id) + "\"", [&](PgConnection& c) -> Status {
        snapshot = ContextSnapshot();
        STRATA_ASSIGN_OR_RETURN(PgResult agent,
                                c.Exec("SELECT agent, turn FROM strata_agents WHERE id = $1",
                                       PgParams().Text(agent_id), "reading an agent"));
        if (agent.rows() == 0) return UnknownAgent(c, agent_id);
        snapshot.turn = agent.Int(0, 1);
        STRATA_ASSIGN_OR_RETURN(snapshot.segments, ReadSegments(c, agent.Int(0, 0), agent_id));
        STRATA_ASSIGN_OR_RETURN(
            PgResult originals,
            c.Exec("SELECT recall_id, content, content_hash FROM strata_originals WHERE agent = "
                   "$1 ORDER BY recall_id",
                   PgParams().Int(agent.Int(0, 0)), "reading recall originals"));
        for (int r = 0; r < originals.rows(); ++r) {
          STRATA_ASSIGN_OR_RETURN(std::string content, ReadContent(c, originals, r, 1, 2));
          snapshot.originals.emplace_back(originals.Text(r, 0), std::move(content));
        }
        return Status::Ok();
      }));
  return snapshot;
}

StatusOr<std::string> PostgresStore::LoadOriginal(std::string_view agent_id,
                                                  std::string_view recall_id) {
  std::string content;
  STRATA_RETURN_IF_ERROR(Read(
      "reading a recall original of agent \"" + std::string(agent_id) + "\"",
      [&](PgConnection& c) -> Status {
        STRATA_ASSIGN_OR_RETURN(int64_t agent, AgentRow(c, agent_id));
        STRATA_ASSIGN_OR_RETURN(
            PgResult row,
            c.Exec("SELECT recall_id, content, content_hash FROM strata_originals WHERE agent = "
                   "$1 AND recall_id = $2",
                   PgParams().Int(agent).Text(recall_id), "reading a recall original"));
        if (row.rows() == 0) {
          return NotFoundError("no original kept under recall id \"" + std::string(recall_id) +
                               "\" for agent \"" + std::string(agent_id) + "\"");
        }
        STRATA_ASSIGN_OR_RETURN(content, ReadContent(c, row, 0, 1, 2));
        return Status::Ok();
      }));
  return content;
}

}  // namespace strata::store_internal
