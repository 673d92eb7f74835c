// The SQLite store: context changes, turns, snapshots, recall originals and blobs
// (sqlite_store.h says which file holds what).
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "core/text_util.h"
#include "store/blob_codec.h"
#include "store/row_codec.h"
#include "store/sqlite_store.h"
#include "store/tool_calls_codec.h"

namespace strata::store_internal {

Status SqliteStore::ApplyChange(std::string_view agent_id, const ContextChange& change) {
  internal::MutexLock lock(mu_);
  return Transaction("persisting a change of agent \"" + std::string(agent_id) + "\"",
                     [&]() STRATA_REQUIRES(mu_) -> Status {
                       STRATA_ASSIGN_OR_RETURN(int64_t agent, AgentRow(agent_id));
                       return WriteChange(agent, change);
                     });
}

Status SqliteStore::CommitTurn(const TurnWrites& writes) {
  STRATA_RETURN_IF_ERROR(CheckTurnWrites(writes));  // bad input: nothing is written
  if (writes.empty()) return Status::Ok();
  internal::MutexLock lock(mu_);
  return Transaction("committing a turn of agent \"" + writes.agent_id + "\"",
                     [&]() STRATA_REQUIRES(mu_) -> Status {
                       STRATA_ASSIGN_OR_RETURN(int64_t agent, AgentRow(writes.agent_id));
                       for (const ContextChange& change : writes.changes) {
                         STRATA_RETURN_IF_ERROR(WriteChange(agent, change));
                       }
                       for (const auto& [key, value] : writes.state)
                         STRATA_RETURN_IF_ERROR(WriteState(agent, key, value));
                       for (const StoredEvent& event : writes.events)
                         STRATA_RETURN_IF_ERROR(WriteEvent(agent, event));
                       for (const RequestRecord& r : writes.records)
                         STRATA_RETURN_IF_ERROR(WriteRequest(agent, r));
                       if (writes.growth)
                         STRATA_RETURN_IF_ERROR(WriteGrowth(agent, *writes.growth));
                       return Status::Ok();
                     });
}

StatusOr<ContextSnapshot> SqliteStore::LoadSnapshot(std::string_view agent_id) {
  internal::MutexLock lock(mu_);
  return ReadTransaction<ContextSnapshot>([&]() STRATA_REQUIRES(mu_) -> StatusOr<ContextSnapshot> {
    STRATA_ASSIGN_OR_RETURN(int64_t agent, AgentRow(agent_id));
    ContextSnapshot snapshot;
    {
      STRATA_ASSIGN_OR_RETURN(Stmt select, Prepare("SELECT turn FROM agents WHERE agent = ?1"));
      select.Int(1, agent);
      int rc = select.Step();
      if (rc != SQLITE_ROW) return Error(rc, "reading an agent");
      snapshot.turn = select.ColInt(0);
    }
    // Built once per process: the text is a constant, so the cache key stays valid.
    static const std::string kSql = std::string("SELECT ") + kSegmentColumns +
                                    " FROM segments WHERE agent = ?1 ORDER BY layer, ord, "
                                    "position, seq";
    STRATA_ASSIGN_OR_RETURN(Stmt select, Prepare(kSql.c_str()));
    select.Int(1, agent);
    int rc;
    while ((rc = select.Step()) == SQLITE_ROW) {
      STRATA_ASSIGN_OR_RETURN(Segment s, DecodeSegmentRow(StmtRow(select), agent_id, path_));
      STRATA_ASSIGN_OR_RETURN(
          s.content, ReadContent(select, kSegmentContentColumn, kSegmentContentHashColumn));
      snapshot.segments.push_back(std::move(s));
    }
    if (rc != SQLITE_DONE) return Error(rc, "reading segments");
    STRATA_ASSIGN_OR_RETURN(
        Stmt originals,
        Prepare("SELECT recall_id, content, content_hash FROM originals WHERE agent = ?1 "
                "ORDER BY recall_id"));
    originals.Int(1, agent);
    while ((rc = originals.Step()) == SQLITE_ROW) {
      std::string recall_id = originals.ColText(0);
      STRATA_ASSIGN_OR_RETURN(std::string content, ReadContent(originals, 1, 2));
      snapshot.originals.emplace_back(std::move(recall_id), std::move(content));
    }
    if (rc != SQLITE_DONE) return Error(rc, "reading recall originals");
    return snapshot;
  });
}

StatusOr<std::string> SqliteStore::LoadOriginal(std::string_view agent_id,
                                                std::string_view recall_id) {
  internal::MutexLock lock(mu_);
  return ReadTransaction<std::string>([&]() STRATA_REQUIRES(mu_) -> StatusOr<std::string> {
    STRATA_ASSIGN_OR_RETURN(int64_t agent, AgentRow(agent_id));
    STRATA_ASSIGN_OR_RETURN(
        Stmt select,
        Prepare("SELECT recall_id, content, content_hash FROM originals WHERE agent = ?1 AND "
                "recall_id = ?2"));
    select.Int(1, agent).Text(2, recall_id);
    int rc = select.Step();
    if (rc == SQLITE_DONE) {
      return NotFoundError("no original kept under recall id \"" + std::string(recall_id) +
                           "\" for agent \"" + std::string(agent_id) + "\"");
    }
    if (rc != SQLITE_ROW) return Error(rc, "reading a recall original");
    return ReadContent(select, 1, 2);
  });
}

Status SqliteStore::WriteChange(int64_t agent, const ContextChange& change) {
  std::set<std::string> released;  // blob hashes that may have lost their last reference
  for (const std::string& id : change.removed_ids) {
    STRATA_RETURN_IF_ERROR(DeleteSegment(agent, id, released));
  }
  for (const Segment& s : change.upserted) {
    if (s.layer == Layer::kVolatile) continue;  // the volatile layer is never persisted
    STRATA_RETURN_IF_ERROR(WriteSegment(agent, s, released));
  }
  for (const auto& [recall_id, content] : change.originals) {
    STRATA_RETURN_IF_ERROR(WriteOriginal(agent, recall_id, content, released));
  }
  for (const std::string& recall_id : change.removed_originals) {
    STRATA_RETURN_IF_ERROR(DeleteOriginal(agent, recall_id, released));
  }
  if (change.compaction) {
    // A compaction is an event of the agent's history, written with the change itself.
    STRATA_RETURN_IF_ERROR(WriteCompactionEvent(agent, *change.compaction));
  }
  STRATA_RETURN_IF_ERROR(AdvanceTurn(agent, change.turn));
  for (const std::string& hash : released) STRATA_RETURN_IF_ERROR(CollectBlob(hash));
  return Status::Ok();
}

Status SqliteStore::OldSegmentHash(int64_t agent, const std::string& id,
                                   std::set<std::string>& released) {
  STRATA_ASSIGN_OR_RETURN(
      Stmt old, Prepare("SELECT content_hash FROM segments WHERE agent = ?1 AND id = ?2"));
  old.Int(1, agent).Text(2, id);
  int rc = old.Step();
  if (rc == SQLITE_ROW) {
    if (!old.ColNull(0)) released.insert(old.ColText(0));
    return Status::Ok();
  }
  if (rc != SQLITE_DONE) return Error(rc, "reading a segment");
  return Status::Ok();
}

Status SqliteStore::DeleteSegment(int64_t agent, const std::string& id,
                                  std::set<std::string>& released) {
  STRATA_RETURN_IF_ERROR(OldSegmentHash(agent, id, released));
  STRATA_ASSIGN_OR_RETURN(Stmt del, Prepare("DELETE FROM segments WHERE agent = ?1 AND id = ?2"));
  del.Int(1, agent).Text(2, id);
  int rc = del.Step();
  if (rc != SQLITE_DONE) return Error(rc, "deleting a segment");
  return Status::Ok();
}

Status SqliteStore::WriteSegment(int64_t agent, const Segment& s, std::set<std::string>& released) {
  STRATA_RETURN_IF_ERROR(OldSegmentHash(agent, s.id, released));
  STRATA_ASSIGN_OR_RETURN(
      Stmt insert,
      Prepare("INSERT OR REPLACE INTO segments(agent, id, seq, position, kind, layer, state, "
              "hygiene, turn, tokens, pinned, sensitive, ord, version, name, tool_call_id, "
              "recall_id, duplicate_of, reasoning, tool_calls, content, content_hash, policy) "
              "VALUES(?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, "
              "?17, ?18, ?19, ?20, ?21, ?22, ?23)"));
  insert.Int(1, agent).Text(2, s.id).Int(3, static_cast<int64_t>(s.seq)).Int(4, s.position);
  insert.Int(5, static_cast<int>(s.kind)).Int(6, static_cast<int>(s.layer));
  insert.Int(7, static_cast<int>(s.state)).Int(8, static_cast<int>(s.hygiene));
  insert.Int(9, s.turn).Int(10, static_cast<int64_t>(s.tokens)).Int(11, s.pinned);
  // Column `sensitive` (schema version 1) is unused: always 0.
  insert.Int(12, 0).Int(13, s.order).Text(14, s.version).Text(15, s.name);
  insert.Text(16, s.tool_call_id).Text(17, s.recall_id).Text(18, s.duplicate_of);
  insert.Text(19, s.reasoning).Blob(20, EncodeToolCalls(s.tool_calls));
  STRATA_RETURN_IF_ERROR(BindContent(insert, 21, 22, s.content));
  insert.Text(23, s.policy);
  int rc = insert.Step();
  if (rc != SQLITE_DONE) return Error(rc, "writing a segment");
  return Status::Ok();
}

Status SqliteStore::OldOriginalHash(int64_t agent, const std::string& recall_id,
                                    std::set<std::string>& released) {
  STRATA_ASSIGN_OR_RETURN(
      Stmt old, Prepare("SELECT content_hash FROM originals WHERE agent = ?1 AND recall_id = ?2"));
  old.Int(1, agent).Text(2, recall_id);
  if (old.Step() == SQLITE_ROW && !old.ColNull(0)) released.insert(old.ColText(0));
  return Status::Ok();
}

Status SqliteStore::DeleteOriginal(int64_t agent, const std::string& recall_id,
                                   std::set<std::string>& released) {
  STRATA_RETURN_IF_ERROR(OldOriginalHash(agent, recall_id, released));
  STRATA_ASSIGN_OR_RETURN(Stmt del,
                          Prepare("DELETE FROM originals WHERE agent = ?1 AND recall_id = ?2"));
  del.Int(1, agent).Text(2, recall_id);
  int rc = del.Step();
  if (rc != SQLITE_DONE) return Error(rc, "deleting a recall original");
  return Status::Ok();
}

Status SqliteStore::WriteOriginal(int64_t agent, const std::string& recall_id,
                                  const std::string& content, std::set<std::string>& released) {
  STRATA_RETURN_IF_ERROR(OldOriginalHash(agent, recall_id, released));
  STRATA_ASSIGN_OR_RETURN(Stmt insert,
                          Prepare("INSERT OR REPLACE INTO originals(agent, recall_id, content, "
                                  "content_hash) VALUES(?1, ?2, ?3, ?4)"));
  insert.Int(1, agent).Text(2, recall_id);
  STRATA_RETURN_IF_ERROR(BindContent(insert, 3, 4, content));
  int rc = insert.Step();
  if (rc != SQLITE_DONE) return Error(rc, "writing a recall original");
  return Status::Ok();
}

Status SqliteStore::WriteCompactionEvent(int64_t agent, const CompactionReport& c) {
  STRATA_ASSIGN_OR_RETURN(Stmt event,
                          Prepare("INSERT INTO events(agent, turn, unix_ms, type, payload) "
                                  "VALUES(?1, ?2, ?3, 'compaction', ?4)"));
  event.Int(1, agent).Int(2, c.turn).Int(3, Now()).Text(4, CompactionReportJson(c));
  int rc = event.Step();
  if (rc != SQLITE_DONE) return Error(rc, "writing a compaction event");
  return Status::Ok();
}

Status SqliteStore::AdvanceTurn(int64_t agent, int64_t turn) {
  int64_t old_turn = 0;
  {
    STRATA_ASSIGN_OR_RETURN(Stmt select, Prepare("SELECT turn FROM agents WHERE agent = ?1"));
    select.Int(1, agent);
    int rc = select.Step();
    if (rc != SQLITE_ROW) return Error(rc, "reading an agent's turn");
    old_turn = select.ColInt(0);
  }
  int64_t now = Now();
  if (turn > old_turn) {
    STRATA_ASSIGN_OR_RETURN(
        Stmt insert,
        Prepare("INSERT OR REPLACE INTO turns(agent, turn, started_ms) VALUES(?1, ?2, ?3)"));
    insert.Int(1, agent).Int(2, turn).Int(3, now);
    int rc = insert.Step();
    if (rc != SQLITE_DONE) return Error(rc, "recording a turn");
  } else if (turn < old_turn) {  // a rewound context: its later turns never happened
    STRATA_ASSIGN_OR_RETURN(Stmt del, Prepare("DELETE FROM turns WHERE agent = ?1 AND turn > ?2"));
    del.Int(1, agent).Int(2, turn);
    int rc = del.Step();
    if (rc != SQLITE_DONE) return Error(rc, "deleting rewound turns");
  }
  STRATA_ASSIGN_OR_RETURN(Stmt update,
                          Prepare("UPDATE agents SET turn = ?2, updated_ms = ?3 WHERE agent = ?1"));
  update.Int(1, agent).Int(2, turn).Int(3, now);
  int rc = update.Step();
  if (rc != SQLITE_DONE) return Error(rc, "updating an agent");
  return Status::Ok();
}

Status SqliteStore::BindContent(Stmt& stmt, int inline_col, int hash_col,
                                const std::string& content) {
  if (!options_.deduplicate || content.size() < options_.blob_min_bytes) {
    stmt.Blob(inline_col, content).Null(hash_col);
    return Status::Ok();
  }
  std::string hash = internal::Sha256(content);
  bool exists = false;
  {
    STRATA_ASSIGN_OR_RETURN(Stmt find, Prepare("SELECT 1 FROM blobs WHERE hash = ?1"));
    find.Blob(1, hash);
    int rc = find.Step();
    if (rc == SQLITE_ROW) {
      exists = true;
    } else if (rc != SQLITE_DONE) {
      return Error(rc, "looking up a blob");
    }
  }
  if (!exists) {
    BlobCodec codec = BlobCodec::kRaw;
    std::string compressed;
    if (options_.compression_level > 0 && content.size() >= options_.compress_min_bytes) {
      STRATA_ASSIGN_OR_RETURN(compressed, ZstdCompress(content, options_.compression_level));
      if (compressed.size() < content.size()) codec = BlobCodec::kZstd;
    }
    STRATA_ASSIGN_OR_RETURN(
        Stmt insert,
        Prepare("INSERT INTO blobs(hash, raw_size, codec, data) VALUES(?1, ?2, ?3, ?4)"));
    insert.Blob(1, hash).Int(2, static_cast<int64_t>(content.size()));
    insert.Int(3, static_cast<int>(codec));
    insert.Blob(
        4, codec == BlobCodec::kZstd ? std::string_view(compressed) : std::string_view(content));
    int rc = insert.Step();
    if (rc != SQLITE_DONE) return Error(rc, "writing a blob");
  }
  stmt.Null(inline_col).Blob(hash_col, hash);
  return Status::Ok();
}

StatusOr<std::string> SqliteStore::ReadContent(const Stmt& row, int inline_col, int hash_col) {
  if (row.ColNull(hash_col)) return row.ColText(inline_col);
  std::string hash = row.ColText(hash_col);
  STRATA_ASSIGN_OR_RETURN(Stmt select,
                          Prepare("SELECT raw_size, codec, data FROM blobs WHERE hash = ?1"));
  select.Blob(1, hash);
  int rc = select.Step();
  if (rc == SQLITE_DONE) return DecodeStoredBlob(hash, std::nullopt, 0, "", path_);
  if (rc != SQLITE_ROW) return Error(rc, "reading a blob");
  return DecodeStoredBlob(hash, select.ColInt(0), select.ColInt(1), select.ColText(2), path_);
}

Status SqliteStore::CollectBlob(const std::string& hash) {
  STRATA_ASSIGN_OR_RETURN(
      Stmt del,
      Prepare(
          "DELETE FROM blobs WHERE hash = ?1 AND NOT EXISTS (SELECT 1 FROM segments WHERE "
          "content_hash = ?1) AND NOT EXISTS (SELECT 1 FROM originals WHERE content_hash = ?1)"));
  del.Blob(1, hash);
  int rc = del.Step();
  if (rc != SQLITE_DONE) return Error(rc, "collecting an unused blob");
  return Status::Ok();
}

}  // namespace strata::store_internal
