// The SQLite implementation of strata::Store (strata/store.h).
//
// One connection per Store, guarded by mu_; every public method takes the lock for its whole
// duration, so a Store is safe to share across threads. Mutations (and CommitTurn's batch) run in
// one BEGIN IMMEDIATE transaction each (the write lock is taken up front, so a busy writer is reported before anything
// is written). Reads that span several statements run in one read transaction (a consistent view
// while another process writes). Statements are prepared once and cached.
#include <sqlite3.h>
#include <sys/stat.h>

#include <cerrno>
#include <cstring>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "store/blob_codec.h"
#include "store/file_identity.h"
#include "store/lease_keeper.h"
#include "store/open_database.h"
#include "store/options_codec.h"
#include "store/schema.h"
#include "store/sqlite_lease.h"
#include "store/tool_calls_codec.h"
#include "strata/store.h"

namespace strata {
namespace {

using store_internal::BlobCodec;
using store_internal::kApplicationId;
using store_internal::kSchemaVersion;
using store_internal::DecodeToolCalls;
using store_internal::EncodeToolCalls;
using store_internal::SqliteStatus;
using store_internal::OptionsFromJson;
using store_internal::OptionsToJson;

// ---- SQLite statement wrapper ----------------------------------------------------------------

// A cached prepared statement in use; resets it when it goes out of scope.
class Stmt {
 public:
  explicit Stmt(sqlite3_stmt* stmt) : stmt_(stmt) {}
  Stmt(Stmt&& other) noexcept : stmt_(std::exchange(other.stmt_, nullptr)) {}
  Stmt(const Stmt&) = delete;
  Stmt& operator=(const Stmt&) = delete;
  ~Stmt() {
    if (stmt_ != nullptr) {
      sqlite3_reset(stmt_);
      sqlite3_clear_bindings(stmt_);
    }
  }
  Stmt& Int(int i, int64_t v) {
    sqlite3_bind_int64(stmt_, i, v);
    return *this;
  }
  Stmt& Real(int i, double v) {
    sqlite3_bind_double(stmt_, i, v);
    return *this;
  }
  Stmt& Text(int i, std::string_view v) {
    sqlite3_bind_text(stmt_, i, v.data(), static_cast<int>(v.size()), SQLITE_TRANSIENT);
    return *this;
  }
  Stmt& Blob(int i, std::string_view v) {
    sqlite3_bind_blob(stmt_, i, v.data(), static_cast<int>(v.size()), SQLITE_TRANSIENT);
    return *this;
  }
  Stmt& Null(int i) {
    sqlite3_bind_null(stmt_, i);
    return *this;
  }
  int Step() { return sqlite3_step(stmt_); }
  int64_t ColInt(int i) const { return sqlite3_column_int64(stmt_, i); }
  double ColReal(int i) const { return sqlite3_column_double(stmt_, i); }
  bool ColNull(int i) const { return sqlite3_column_type(stmt_, i) == SQLITE_NULL; }
  std::string ColText(int i) const {
    const void* p = sqlite3_column_blob(stmt_, i);
    int n = sqlite3_column_bytes(stmt_, i);
    return p == nullptr ? std::string() : std::string(static_cast<const char*>(p), n);
  }

 private:
  sqlite3_stmt* stmt_;
};

class SqliteStore;

class StoreJournal final : public ContextJournal {
 public:
  StoreJournal(Store* store, std::string agent_id)
      : store_(store), agent_id_(std::move(agent_id)) {}
  Status Record(const ContextChange& change) override {
    return store_->ApplyChange(agent_id_, change);
  }

 private:
  Store* const store_;
  const std::string agent_id_;
};

// Segment states whose content is rendered (their tokens count toward the context's size).
constexpr const char* kRenderedStates = "(0, 1)";

class SqliteStore final : public Store {
 public:
  SqliteStore(std::string path, StoreOptions options, sqlite3* db)
      : path_(std::move(path)),
        options_(std::move(options)),
        db_(db),
        leases_(options_.lease_owner.empty() ? store_internal::DefaultLeaseOwner(TheClock())
                                             : options_.lease_owner,
                options_.lease_ttl_ms, options_.renew_leases, TheClock()) {
    leases_.SetRenew([this](const AgentLease& held) {
      std::lock_guard<std::mutex> lock(mu_);
      return TakeLease(held.agent_id, held.epoch);
    });
    // A file on one host: a lease whose process is gone is dead; with an exclusive store, every
    // other owner's is (the file lock proves its process ended).
    const bool exclusive = options_.exclusive;
    leases_.SetHolderGone([exclusive](const AgentLease& lease) {
      return exclusive || store_internal::LeaseOwnerProcessGone(lease.owner);
    });
    const char* db_file = sqlite3_db_filename(db_, "main");  // "" for an in-memory database
    if (!options_.read_only && db_file != nullptr && *db_file != '\0') {
      files_.Record(path_, db_file, /*uses_shm=*/!options_.exclusive);
    }
  }

  ~SqliteStore() override {
    leases_.Stop();
    for (auto& [sql, stmt] : statements_) sqlite3_finalize(stmt);
    // Closing checkpoints the WAL: with a file made immutable that would raise SIGBUS in the -shm
    // mapping. The WAL then stays, and the next open applies it.
    if (files_.AnyLocked()) sqlite3_db_config(db_, SQLITE_DBCONFIG_NO_CKPT_ON_CLOSE, 1, nullptr);
    sqlite3_close_v2(db_);
  }

  const std::string& path() const override { return path_; }

  Status CreateAgent(const ContextOptions& options) override {
    if (options.agent.id.empty()) return InvalidArgumentError("agent id must not be empty");
    std::lock_guard<std::mutex> lock(mu_);
    return Transaction("creating agent \"" + options.agent.id + "\"", [&]() -> Status {
      STRATA_RETURN_IF_ERROR(Fence(options.agent.id));
      STRATA_ASSIGN_OR_RETURN(Stmt find, Prepare("SELECT agent FROM agents WHERE id = ?1"));
      find.Text(1, options.agent.id);
      int rc = find.Step();
      if (rc == SQLITE_ROW) {
        return AlreadyExistsError("agent \"" + options.agent.id + "\" already exists in " + path_ +
                                  " (use OpenContext to continue it, or DeleteAgent first)");
      }
      if (rc != SQLITE_DONE) return Error(rc, "looking up an agent");
      STRATA_ASSIGN_OR_RETURN(
          Stmt insert, Prepare("INSERT INTO agents(id, options, tokenizer, created_ms, updated_ms, "
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

  StatusOr<StoredAgent> GetAgent(std::string_view agent_id) override {
    std::lock_guard<std::mutex> lock(mu_);
    StatusOr<std::vector<StoredAgent>> agents = ReadAgents(agent_id, true);
    if (!agents.ok()) return agents.status();
    if (agents->empty()) return UnknownAgent(agent_id);
    return std::move(agents->front());
  }

  StatusOr<std::vector<StoredAgent>> ListAgents() override {
    std::lock_guard<std::mutex> lock(mu_);
    return ReadAgents("", false);
  }

  Status DeleteAgent(std::string_view agent_id) override {
    std::lock_guard<std::mutex> lock(mu_);
    return Transaction("deleting agent \"" + std::string(agent_id) + "\"", [&]() -> Status {
      STRATA_ASSIGN_OR_RETURN(int64_t agent, AgentRow(agent_id));
      return DeleteAgentRow(agent);
    });
  }

  Status ReplaceAgent(std::string_view from_id, std::string_view to_id) override {
    if (from_id.empty() || to_id.empty() || from_id == to_id) {
      return InvalidArgumentError("ReplaceAgent needs two different, non-empty ids (got \"" +
                                  std::string(from_id) + "\" and \"" + std::string(to_id) + "\")");
    }
    std::lock_guard<std::mutex> lock(mu_);
    return Transaction(
        "replacing agent \"" + std::string(to_id) + "\" with \"" + std::string(from_id) + "\"",
        [&]() -> Status {
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

  // Deletes agent row `agent` and its data; call inside a write transaction.
  Status DeleteAgentRow(int64_t agent) {
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
            "DELETE FROM agent_state WHERE agent = ?1",
            "DELETE FROM agents WHERE agent = ?1"}) {
        STRATA_ASSIGN_OR_RETURN(Stmt del, Prepare(sql));
        del.Int(1, agent);
        int rc = del.Step();
        if (rc != SQLITE_DONE) return Error(rc, "deleting an agent");
      }
      for (const std::string& hash : hashes) STRATA_RETURN_IF_ERROR(CollectBlob(hash));
      return Status::Ok();
    }
  }

  Status ApplyChange(std::string_view agent_id, const ContextChange& change) override {
    std::lock_guard<std::mutex> lock(mu_);
    return Transaction(
        "persisting a change of agent \"" + std::string(agent_id) + "\"", [&]() -> Status {
          STRATA_ASSIGN_OR_RETURN(int64_t agent, AgentRow(agent_id));
          return WriteChange(agent, change);
        });
  }

  Status CommitTurn(const TurnWrites& writes) override {
    STRATA_RETURN_IF_ERROR(CheckTurnWrites(writes));  // bad input: nothing is written
    if (writes.empty()) return Status::Ok();
    std::lock_guard<std::mutex> lock(mu_);
    return Transaction("committing a turn of agent \"" + writes.agent_id + "\"", [&]() -> Status {
      STRATA_ASSIGN_OR_RETURN(int64_t agent, AgentRow(writes.agent_id));
      for (const ContextChange& change : writes.changes) {
        STRATA_RETURN_IF_ERROR(WriteChange(agent, change));
      }
      for (const auto& [key, value] : writes.state) STRATA_RETURN_IF_ERROR(WriteState(agent, key, value));
      for (const StoredEvent& event : writes.events) STRATA_RETURN_IF_ERROR(WriteEvent(agent, event));
      for (const RequestRecord& r : writes.records) STRATA_RETURN_IF_ERROR(WriteRequest(agent, r));
      if (writes.growth) STRATA_RETURN_IF_ERROR(WriteGrowth(agent, *writes.growth));
      return Status::Ok();
    });
  }

  StatusOr<ContextSnapshot> LoadSnapshot(std::string_view agent_id) override {
    std::lock_guard<std::mutex> lock(mu_);
    return ReadTransaction<ContextSnapshot>([&]() -> StatusOr<ContextSnapshot> {
      STRATA_ASSIGN_OR_RETURN(int64_t agent, AgentRow(agent_id));
      ContextSnapshot snapshot;
      {
        STRATA_ASSIGN_OR_RETURN(Stmt select, Prepare("SELECT turn FROM agents WHERE agent = ?1"));
        select.Int(1, agent);
        int rc = select.Step();
        if (rc != SQLITE_ROW) return Error(rc, "reading an agent");
        snapshot.turn = select.ColInt(0);
      }
      STRATA_ASSIGN_OR_RETURN(
          Stmt select,
          Prepare(
              "SELECT id, seq, position, kind, layer, state, hygiene, turn, tokens, pinned, "
              "sensitive, "
              "ord, version, name, tool_call_id, recall_id, duplicate_of, reasoning, tool_calls, "
              "content, content_hash, policy FROM segments WHERE agent = ?1 ORDER BY layer, ord, position, "
              "seq"));
      select.Int(1, agent);
      int rc;
      while ((rc = select.Step()) == SQLITE_ROW) {
        Segment s;
        s.id = select.ColText(0);
        // Enum and count columns index arrays and switch statements downstream: a damaged row is
        // refused here, naming it, rather than cast into an out-of-range value.
        STRATA_RETURN_IF_ERROR(CheckSegmentRow(select, s.id, agent_id));
        s.seq = static_cast<uint64_t>(select.ColInt(1));
        s.position = select.ColInt(2);
        s.kind = static_cast<SegmentKind>(select.ColInt(3));
        s.layer = static_cast<Layer>(select.ColInt(4));
        s.state = static_cast<SegmentState>(select.ColInt(5));
        s.hygiene = static_cast<HygieneAction>(select.ColInt(6));
        s.turn = select.ColInt(7);
        s.tokens = static_cast<size_t>(select.ColInt(8));
        s.pinned = select.ColInt(9) != 0;
        // Column 10 (`sensitive`) is unused.
        s.order = select.ColInt(11);
        s.version = select.ColText(12);
        s.name = select.ColText(13);
        s.tool_call_id = select.ColText(14);
        s.recall_id = select.ColText(15);
        s.duplicate_of = select.ColText(16);
        s.reasoning = select.ColText(17);
        if (!DecodeToolCalls(select.ColText(18), s.tool_calls)) {
          return DataLossError("segment " + s.id + " of agent \"" + std::string(agent_id) +
                               "\" has damaged tool calls in " + path_);
        }
        STRATA_ASSIGN_OR_RETURN(s.content, ReadContent(select, 19, 20));
        s.policy = select.ColText(21);
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

  StatusOr<std::string> LoadOriginal(std::string_view agent_id,
                                     std::string_view recall_id) override {
    std::lock_guard<std::mutex> lock(mu_);
    return ReadTransaction<std::string>([&]() -> StatusOr<std::string> {
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

  ContextJournal* Journal(std::string_view agent_id) override {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = journals_.find(std::string(agent_id));
    if (it == journals_.end()) {
      it = journals_
               .emplace(std::string(agent_id),
                        std::make_unique<StoreJournal>(this, std::string(agent_id)))
               .first;
    }
    return it->second.get();
  }

  Status AppendRequest(const RequestRecord& r) override {
    std::lock_guard<std::mutex> lock(mu_);
    return Transaction("recording a request of agent \"" + r.agent_id + "\"", [&]() -> Status {
      STRATA_ASSIGN_OR_RETURN(int64_t agent, AgentRow(r.agent_id));
      return WriteRequest(agent, r);
    });
  }

  // Inserts request record `r` of agent row `agent` (inside a write transaction).
  Status WriteRequest(int64_t agent, const RequestRecord& r) {
      STRATA_ASSIGN_OR_RETURN(
          Stmt insert,
          Prepare(
              "INSERT INTO requests(agent, request_id, pool, endpoint, model, started_ms, "
              "input_tokens, cached_reported, cached_predicted, output_tokens, reasoning_tokens, "
              "queue_wait_ms, ttft_ms, decode_ms, total_ms, kv_cache_bytes, finish_reason, "
              "attempts, "
              "http_status, code, error, degradation, degradation_notes, purpose) VALUES(?1, ?2, ?3, "
              "?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17, ?18, ?19, ?20, "
              "?21, ?22, ?23, ?24)"));
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

  StatusOr<std::vector<RequestRecord>> RecentRequests(std::string_view agent_id,
                                                      size_t limit) override {
    std::lock_guard<std::mutex> lock(mu_);
    STRATA_ASSIGN_OR_RETURN(int64_t agent, AgentRow(agent_id));
    STRATA_ASSIGN_OR_RETURN(
        Stmt select,
        Prepare(
            "SELECT request_id, pool, endpoint, model, started_ms, input_tokens, cached_reported, "
            "cached_predicted, output_tokens, reasoning_tokens, queue_wait_ms, ttft_ms, decode_ms, "
            "total_ms, kv_cache_bytes, finish_reason, attempts, http_status, code, error, "
            "degradation, "
            "degradation_notes, purpose FROM "
            "requests "
            "WHERE agent = ?1 ORDER BY id DESC LIMIT ?2"));
    select.Int(1, agent).Int(2, static_cast<int64_t>(limit));
    std::vector<RequestRecord> records;
    int rc;
    while ((rc = select.Step()) == SQLITE_ROW) {
      RequestRecord r;
      r.agent_id = std::string(agent_id);
      r.request_id = select.ColText(0);
      r.pool = select.ColText(1);
      r.endpoint = select.ColText(2);
      r.model = select.ColText(3);
      r.started_unix_ms = select.ColInt(4);
      r.input_tokens = select.ColInt(5);
      if (!select.ColNull(6)) r.cached_tokens_reported = select.ColInt(6);
      r.cached_tokens_predicted = select.ColInt(7);
      r.output_tokens = select.ColInt(8);
      r.reasoning_tokens = select.ColInt(9);
      r.queue_wait_ms = select.ColReal(10);
      r.ttft_ms = select.ColReal(11);
      r.decode_ms = select.ColReal(12);
      r.total_ms = select.ColReal(13);
      r.kv_cache_bytes = select.ColInt(14);
      r.finish_reason = select.ColText(15);
      r.attempts = static_cast<int>(select.ColInt(16));
      r.http_status = static_cast<int>(select.ColInt(17));
      const int64_t code = select.ColInt(18);
      if (code < 0 || code > static_cast<int>(StatusCode::kUnauthenticated)) {
        return DataLossError("request record \"" + r.request_id + "\" of agent \"" + std::string(agent_id) +
                             "\" in " + path_ + " is damaged: column code holds " + std::to_string(code) +
                             " (valid: 0.." + std::to_string(static_cast<int>(StatusCode::kUnauthenticated)) +
                             ")");
      }
      r.code = static_cast<StatusCode>(code);
      r.error = select.ColText(19);
      r.degradation = select.ColText(20);
      r.degradation_notes = select.ColText(21);
      r.purpose = select.ColText(22);
      records.push_back(std::move(r));
    }
    if (rc != SQLITE_DONE) return Error(rc, "reading request records");
    return records;
  }

  StatusOr<int64_t> AppendEvent(const StoredEvent& event) override {
    if (event.type.empty()) return InvalidArgumentError("event type must not be empty");
    nlohmann::json payload = nlohmann::json::parse(event.payload_json, nullptr, false);
    if (payload.is_discarded() || !payload.is_object()) {
      return InvalidArgumentError("event payload must be a JSON object, got: " +
                                  event.payload_json.substr(0, 80));
    }
    std::lock_guard<std::mutex> lock(mu_);
    int64_t id = 0;
    STRATA_RETURN_IF_ERROR(
        Transaction("recording an event of agent \"" + event.agent_id + "\"", [&]() -> Status {
          STRATA_ASSIGN_OR_RETURN(int64_t agent, AgentRow(event.agent_id));
          STRATA_RETURN_IF_ERROR(WriteEvent(agent, event));
          id = sqlite3_last_insert_rowid(db_);
          return Status::Ok();
        }));
    return id;
  }

  // Inserts `event` for agent row `agent` (inside a write transaction; payload validated).
  Status WriteEvent(int64_t agent, const StoredEvent& event) {
    STRATA_ASSIGN_OR_RETURN(Stmt insert, Prepare("INSERT INTO events(agent, turn, unix_ms, type, payload) "
                                                 "VALUES(?1, ?2, ?3, ?4, ?5)"));
    insert.Int(1, agent).Int(2, event.turn).Int(3, event.unix_ms != 0 ? event.unix_ms : Now());
    insert.Text(4, event.type).Text(5, event.payload_json);
    int rc = insert.Step();
    if (rc != SQLITE_DONE) return Error(rc, "writing an event");
    return Status::Ok();
  }

  StatusOr<std::vector<StoredEvent>> Events(std::string_view agent_id,
                                            std::string_view type) override {
    std::lock_guard<std::mutex> lock(mu_);
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

  Status PutAgentState(std::string_view agent_id, std::string_view key,
                       std::string_view value) override {
    if (key.empty()) return InvalidArgumentError("agent state key must not be empty");
    std::lock_guard<std::mutex> lock(mu_);
    return Transaction("storing state \"" + std::string(key) + "\" of agent \"" +
                           std::string(agent_id) + "\"",
                       [&]() -> Status {
                         STRATA_ASSIGN_OR_RETURN(int64_t agent, AgentRow(agent_id));
                         return WriteState(agent, key, value);
                       });
  }

  // Stores `value` under `key` for agent row `agent` (inside a write transaction).
  Status WriteState(int64_t agent, std::string_view key, std::string_view value) {
    STRATA_ASSIGN_OR_RETURN(Stmt insert, Prepare("INSERT OR REPLACE INTO agent_state(agent, key, value, "
                                                 "updated_ms) VALUES(?1, ?2, ?3, ?4)"));
    insert.Int(1, agent).Text(2, key).Blob(3, value).Int(4, Now());
    int rc = insert.Step();
    if (rc != SQLITE_DONE) return Error(rc, "writing agent state");
    return Status::Ok();
  }

  StatusOr<std::optional<std::string>> GetAgentState(std::string_view agent_id,
                                                     std::string_view key) override {
    std::lock_guard<std::mutex> lock(mu_);
    STRATA_ASSIGN_OR_RETURN(int64_t agent, AgentRow(agent_id));
    STRATA_ASSIGN_OR_RETURN(
        Stmt select, Prepare("SELECT value FROM agent_state WHERE agent = ?1 AND key = ?2"));
    select.Int(1, agent).Text(2, key);
    int rc = select.Step();
    if (rc == SQLITE_DONE) return std::optional<std::string>();
    if (rc != SQLITE_ROW) return Error(rc, "reading agent state");
    return std::optional<std::string>(select.ColText(0));
  }

  Status RecordGrowth(const GrowthPoint& p) override {
    std::lock_guard<std::mutex> lock(mu_);
    return Transaction("recording growth of agent \"" + p.agent_id + "\"", [&]() -> Status {
      STRATA_ASSIGN_OR_RETURN(int64_t agent, AgentRow(p.agent_id));
      return WriteGrowth(agent, p);
    });
  }

  // Records growth point `p` of agent row `agent` (inside a write transaction).
  Status WriteGrowth(int64_t agent, const GrowthPoint& p) {
      STRATA_ASSIGN_OR_RETURN(
          Stmt insert,
          Prepare(
              "INSERT OR REPLACE INTO growth(agent, turn, unix_ms, system_tokens, tools_tokens, "
              "index_tokens, docs_tokens, history_tokens, volatile_tokens, compactions, "
              "invalidated_tokens) VALUES(?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11)"));
      insert.Int(1, agent).Int(2, p.turn).Int(3, p.unix_ms != 0 ? p.unix_ms : Now());
      for (int i = 0; i < kLayerCount; ++i) insert.Int(4 + i, p.layer_tokens[i]);
      insert.Int(10, p.compactions).Int(11, p.invalidated_tokens);
      int rc = insert.Step();
      if (rc != SQLITE_DONE) return Error(rc, "writing a growth point");
      return Status::Ok();
  }

  StatusOr<std::vector<GrowthPoint>> Growth(std::string_view agent_id) override {
    std::lock_guard<std::mutex> lock(mu_);
    STRATA_ASSIGN_OR_RETURN(int64_t agent, AgentRow(agent_id));
    STRATA_ASSIGN_OR_RETURN(
        Stmt select,
        Prepare("SELECT turn, unix_ms, system_tokens, tools_tokens, index_tokens, docs_tokens, "
                "history_tokens, volatile_tokens, compactions, invalidated_tokens FROM growth "
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
      points.push_back(p);
    }
    if (rc != SQLITE_DONE) return Error(rc, "reading growth points");
    return points;
  }

  StatusOr<int64_t> PruneRequests(const RetentionPolicy& policy, int64_t now_unix_ms) override {
    std::lock_guard<std::mutex> lock(mu_);
    int64_t deleted = 0;
    STRATA_RETURN_IF_ERROR(Transaction("pruning request records", [&]() -> Status {
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

  StatusOr<StoreStats> Stats() override {
    std::lock_guard<std::mutex> lock(mu_);
    return ReadTransaction<StoreStats>([&]() -> StatusOr<StoreStats> {
      StoreStats stats;
      stats.schema_version = kSchemaVersion;
      STRATA_ASSIGN_OR_RETURN(int64_t pages, store_internal::PragmaInt(db_, "page_count", path_));
      STRATA_ASSIGN_OR_RETURN(int64_t page_size,
                              store_internal::PragmaInt(db_, "page_size", path_));
      stats.file_bytes = pages * page_size;
      STRATA_ASSIGN_OR_RETURN(int64_t sync, store_internal::PragmaInt(db_, "synchronous", path_));
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

  Status CheckFiles() override {
    std::lock_guard<std::mutex> lock(mu_);
    return files_.CheckBeforeWrite();
  }

  Status Backup(const std::string& destination) override {
    struct stat st;
    if (::stat(destination.c_str(), &st) == 0) {
      return AlreadyExistsError("backup destination " + destination +
                                " exists; choose a new file name");
    }
    std::lock_guard<std::mutex> lock(mu_);
    STRATA_RETURN_IF_ERROR(files_.CheckBeforeRead());
    STRATA_ASSIGN_OR_RETURN(Stmt vacuum, Prepare("VACUUM INTO ?1"));
    vacuum.Text(1, destination);
    int rc = vacuum.Step();
    if (rc != SQLITE_DONE) return Error(rc, "writing a backup to " + destination);
    return Status::Ok();
  }

 // ---- Leases (strata/store.h); the rows are sqlite_lease.cc's.

  StatusOr<AgentLease> AcquireLease(std::string_view agent_id) override {
    if (agent_id.empty()) return InvalidArgumentError("AcquireLease needs an agent id");
    if (options_.read_only) {
      return FailedPreconditionError("cannot lease agent \"" + std::string(agent_id) +
                                     "\": the store " + path_ + " was opened read-only");
    }
    std::lock_guard<std::mutex> lock(mu_);
    std::optional<AgentLease> held = leases_.Held(agent_id);
    return TakeLease(agent_id, held ? std::optional<int64_t>(held->epoch) : std::nullopt);
  }

  Status ReleaseLease(std::string_view agent_id) override {
    std::lock_guard<std::mutex> lock(mu_);
    std::optional<AgentLease> held = leases_.Held(agent_id);
    if (!held) return Status::Ok();
    leases_.Forget(agent_id);
    return store_internal::SqliteReleaseLease(db_, agent_id, leases_.owner(), held->epoch, path_,
                                              options_.busy_timeout_ms);
  }

  Status ReleaseAllLeases() override {
    Status first;
    for (const AgentLease& lease : leases_.AllHeld()) {
      Status status = ReleaseLease(lease.agent_id);
      if (first.ok()) first = status;
    }
    return first;
  }

  StatusOr<std::optional<AgentLease>> GetLease(std::string_view agent_id) override {
    std::lock_guard<std::mutex> lock(mu_);
    return store_internal::SqliteReadLease(db_, agent_id, path_);
  }

  const std::string& lease_owner() const override { return leases_.owner(); }

 private:
  Clock* TheClock() const { return options_.clock != nullptr ? options_.clock : SystemClock(); }

  // Takes (held_epoch empty) or renews the lease of `agent_id`; call with mu_ held.
  StatusOr<AgentLease> TakeLease(std::string_view agent_id, std::optional<int64_t> held_epoch) {
    std::optional<AgentLease> holder;
    const int64_t now = Now();
    STRATA_ASSIGN_OR_RETURN(
        std::optional<AgentLease> taken,
        store_internal::SqliteTakeLease(db_, agent_id, leases_.owner(), leases_.ttl_ms(), now,
                                        held_epoch, holder, path_, options_.busy_timeout_ms,
                                        leases_));
    if (taken) {
      leases_.Hold(*taken);
      return *taken;
    }
    if (held_epoch) return leases_.Check(agent_id, holder, now);  // lost: ABORTED, forgotten
    return store_internal::LeaseHeldElsewhere(*holder, now);
  }

  // The lease fence of a write about `agent_id`; call inside the write transaction.
  Status Fence(std::string_view agent_id) {
    STRATA_ASSIGN_OR_RETURN(std::optional<AgentLease> row,
                            store_internal::SqliteReadLease(db_, agent_id, path_));
    return leases_.Check(agent_id, row, Now());
  }

  int64_t Now() const {
    return (options_.clock != nullptr ? options_.clock : SystemClock())->UnixMillis();
  }

  Status Error(int rc, std::string_view what) {
    return SqliteStatus(db_, rc, what, path_, options_.busy_timeout_ms);
  }

  // DATA_LOSS unless the enum columns of a segment row (kind 3, layer 4, state 5, hygiene 6 of the
  // LoadSnapshot query) hold values this build defines and seq (1) and tokens (8) are not negative.
  Status CheckSegmentRow(const Stmt& row, const std::string& segment_id, std::string_view agent_id) {
    struct Column {
      int index;
      const char* name;
      int64_t max;  // valid values: 0..max
    };
    // The volatile layer and kind are never persisted (ApplyChange skips them).
    static constexpr Column kColumns[] = {{1, "seq", INT64_MAX},
                                          {3, "kind", static_cast<int>(SegmentKind::kSummary)},
                                          {4, "layer", static_cast<int>(Layer::kHistory)},
                                          {5, "state", static_cast<int>(SegmentState::kEvicted)},
                                          {6, "hygiene", static_cast<int>(HygieneAction::kFolded)},
                                          {8, "tokens", INT64_MAX}};
    for (const Column& column : kColumns) {
      const int64_t value = row.ColInt(column.index);
      if (row.ColNull(column.index) || value < 0 || value > column.max) {
        return DataLossError("segment \"" + segment_id + "\" of agent \"" + std::string(agent_id) +
                             "\" in " + path_ + " is damaged: column " + column.name + " holds " +
                             (row.ColNull(column.index) ? std::string("NULL") : std::to_string(value)) +
                             (column.max == INT64_MAX ? std::string(" (must not be negative)")
                                                      : " (valid: 0.." + std::to_string(column.max) + ")") +
                             "; restore the store from a backup or delete the agent");
      }
    }
    return Status::Ok();
  }

  StatusOr<Stmt> Prepare(const char* sql) {
    auto it = statements_.find(sql);
    if (it != statements_.end()) return Stmt(it->second);
    sqlite3_stmt* stmt = nullptr;
    int rc = sqlite3_prepare_v3(db_, sql, -1, SQLITE_PREPARE_PERSISTENT, &stmt, nullptr);
    if (rc != SQLITE_OK) return Error(rc, std::string("preparing: ") + sql);
    statements_.emplace(sql, stmt);
    return Stmt(stmt);
  }

  // Runs `body` in one write transaction; rolls back whatever it did when it fails.
  Status Transaction(const std::string& what, const std::function<Status()>& body) {
    if (options_.read_only) {
      return FailedPreconditionError(what + ": the store " + path_ + " was opened read-only");
    }
    Status files = files_.CheckBeforeWrite();  // removed, replaced or immutable files
    if (!files.ok()) return Status(files.code(), what + ": " + files.message());
    int rc = sqlite3_exec(db_, "BEGIN IMMEDIATE", nullptr, nullptr, nullptr);
    if (rc != SQLITE_OK) return Error(rc, what + ": taking the write lock");
    Status status = body();
    if (status.ok()) {
      rc = sqlite3_exec(db_, "COMMIT", nullptr, nullptr, nullptr);
      if (rc != SQLITE_OK) {
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

  template <typename T>
  StatusOr<T> ReadTransaction(const std::function<StatusOr<T>()>& body) {
    STRATA_RETURN_IF_ERROR(files_.CheckBeforeRead());
    int rc = sqlite3_exec(db_, "BEGIN", nullptr, nullptr, nullptr);
    if (rc != SQLITE_OK) return Error(rc, "starting a read transaction");
    StatusOr<T> result = body();
    sqlite3_exec(db_, result.ok() ? "COMMIT" : "ROLLBACK", nullptr, nullptr, nullptr);
    return result;
  }

  Status UnknownAgent(std::string_view agent_id) {
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

  // Looked up inside every transaction, never cached: another process may delete and re-create
  // an agent under the same id (a new row), and a stale row number would write to nowhere.
  StatusOr<int64_t> AgentRow(std::string_view agent_id) {
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

  StatusOr<std::vector<StoredAgent>> ReadAgents(std::string_view only, bool filter) {
    return ReadTransaction<std::vector<StoredAgent>>([&]() -> StatusOr<std::vector<StoredAgent>> {
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

  Status OldSegmentHash(int64_t agent, const std::string& id, std::set<std::string>& released) {
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

  // Applies `change` to agent row `agent` (inside a write transaction): ApplyChange's body.
  Status WriteChange(int64_t agent, const ContextChange& change) {
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

  // ---- ApplyChange's steps; each runs inside its write transaction. `released` collects the
  // blob hashes a step may have taken the last reference from (collected at the end).

  // Deletes segment `id` of agent row `agent`.
  Status DeleteSegment(int64_t agent, const std::string& id, std::set<std::string>& released) {
    STRATA_RETURN_IF_ERROR(OldSegmentHash(agent, id, released));
    STRATA_ASSIGN_OR_RETURN(Stmt del, Prepare("DELETE FROM segments WHERE agent = ?1 AND id = ?2"));
    del.Int(1, agent).Text(2, id);
    int rc = del.Step();
    if (rc != SQLITE_DONE) return Error(rc, "deleting a segment");
    return Status::Ok();
  }

  // Writes segment `s` of agent row `agent`, replacing the row with its id if there is one.
  Status WriteSegment(int64_t agent, const Segment& s, std::set<std::string>& released) {
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

  // The blob hash of the original stored under `recall_id` into `released`, if it has one.
  Status OldOriginalHash(int64_t agent, const std::string& recall_id,
                         std::set<std::string>& released) {
    STRATA_ASSIGN_OR_RETURN(
        Stmt old, Prepare("SELECT content_hash FROM originals WHERE agent = ?1 AND recall_id = ?2"));
    old.Int(1, agent).Text(2, recall_id);
    if (old.Step() == SQLITE_ROW && !old.ColNull(0)) released.insert(old.ColText(0));
    return Status::Ok();
  }

  // Drops the original stored under `recall_id` (a context rewound to before it was kept).
  Status DeleteOriginal(int64_t agent, const std::string& recall_id,
                        std::set<std::string>& released) {
    STRATA_RETURN_IF_ERROR(OldOriginalHash(agent, recall_id, released));
    STRATA_ASSIGN_OR_RETURN(
        Stmt del, Prepare("DELETE FROM originals WHERE agent = ?1 AND recall_id = ?2"));
    del.Int(1, agent).Text(2, recall_id);
    int rc = del.Step();
    if (rc != SQLITE_DONE) return Error(rc, "deleting a recall original");
    return Status::Ok();
  }

  // Writes the original content a recall id gives back, replacing the one stored under that id.
  Status WriteOriginal(int64_t agent, const std::string& recall_id, const std::string& content,
                       std::set<std::string>& released) {
    STRATA_RETURN_IF_ERROR(OldOriginalHash(agent, recall_id, released));
    STRATA_ASSIGN_OR_RETURN(
        Stmt insert, Prepare("INSERT OR REPLACE INTO originals(agent, recall_id, content, "
                             "content_hash) VALUES(?1, ?2, ?3, ?4)"));
    insert.Int(1, agent).Text(2, recall_id);
    STRATA_RETURN_IF_ERROR(BindContent(insert, 3, 4, content));
    int rc = insert.Step();
    if (rc != SQLITE_DONE) return Error(rc, "writing a recall original");
    return Status::Ok();
  }

  // Writes compaction report `c` as a 'compaction' event of agent row `agent`.
  Status WriteCompactionEvent(int64_t agent, const CompactionReport& c) {
    STRATA_ASSIGN_OR_RETURN(Stmt event,
                            Prepare("INSERT INTO events(agent, turn, unix_ms, type, payload) "
                                    "VALUES(?1, ?2, ?3, 'compaction', ?4)"));
    event.Int(1, agent).Int(2, c.turn).Int(3, Now()).Text(4, CompactionReportJson(c));
    int rc = event.Step();
    if (rc != SQLITE_DONE) return Error(rc, "writing a compaction event");
    return Status::Ok();
  }

  // Sets the agent's turn to `turn` and its update time to now; a turn beyond the stored one is
  // recorded as started now.
  Status AdvanceTurn(int64_t agent, int64_t turn) {
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
      STRATA_ASSIGN_OR_RETURN(Stmt del,
                              Prepare("DELETE FROM turns WHERE agent = ?1 AND turn > ?2"));
      del.Int(1, agent).Int(2, turn);
      int rc = del.Step();
      if (rc != SQLITE_DONE) return Error(rc, "deleting rewound turns");
    }
    STRATA_ASSIGN_OR_RETURN(
        Stmt update, Prepare("UPDATE agents SET turn = ?2, updated_ms = ?3 WHERE agent = ?1"));
    update.Int(1, agent).Int(2, turn).Int(3, now);
    int rc = update.Step();
    if (rc != SQLITE_DONE) return Error(rc, "updating an agent");
    return Status::Ok();
  }

  // Binds `content` either inline (column `inline_col`) or as a reference to a blob
  // (`hash_col`), writing the blob if no identical content is stored yet.
  Status BindContent(Stmt& stmt, int inline_col, int hash_col, const std::string& content) {
    if (!options_.deduplicate || content.size() < options_.blob_min_bytes) {
      stmt.Blob(inline_col, content).Null(hash_col);
      return Status::Ok();
    }
    std::string hash = store_internal::Sha256(content);
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
        STRATA_ASSIGN_OR_RETURN(compressed,
                                store_internal::ZstdCompress(content, options_.compression_level));
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

  StatusOr<std::string> ReadContent(const Stmt& row, int inline_col, int hash_col) {
    if (row.ColNull(hash_col)) return row.ColText(inline_col);
    std::string hash = row.ColText(hash_col);
    STRATA_ASSIGN_OR_RETURN(Stmt select,
                            Prepare("SELECT raw_size, codec, data FROM blobs WHERE hash = ?1"));
    select.Blob(1, hash);
    int rc = select.Step();
    if (rc == SQLITE_DONE) {
      return DataLossError("blob " + store_internal::Hex(hash) + " is missing from " + path_);
    }
    if (rc != SQLITE_ROW) return Error(rc, "reading a blob");
    if (select.ColInt(0) < 0) {
      return DataLossError("blob " + store_internal::Hex(hash) + " has a negative size " +
                           std::to_string(select.ColInt(0)));
    }
    size_t raw_size = static_cast<size_t>(select.ColInt(0));
    auto codec = static_cast<BlobCodec>(select.ColInt(1));
    std::string data = select.ColText(2);
    if (codec == BlobCodec::kRaw) {
      if (data.size() != raw_size) {
        return DataLossError("blob " + store_internal::Hex(hash) + " has the wrong size");
      }
      return data;
    }
    if (codec != BlobCodec::kZstd) {
      return DataLossError("blob " + store_internal::Hex(hash) + " has unknown codec " +
                           std::to_string(static_cast<int>(codec)));
    }
    return store_internal::ZstdDecompress(data, raw_size);
  }

  // Deletes the blob `hash` if no segment or original refers to it any more.
  Status CollectBlob(const std::string& hash) {
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

  const std::string path_;
  const StoreOptions options_;

  std::mutex mu_;
  sqlite3* const db_;                                          // guarded by mu_
  std::unordered_map<std::string, sqlite3_stmt*> statements_;  // guarded by mu_; key: SQL text
  std::map<std::string, std::unique_ptr<StoreJournal>, std::less<>> journals_;  // guarded by mu_
  store_internal::StoreFiles files_;  // guarded by mu_; checked before every write
  int64_t write_transactions_ = 0;    // guarded by mu_: committed write transactions
  store_internal::LeaseKeeper leases_;  // the leases this store holds (its own lock)
};

}  // namespace

int64_t GrowthPoint::TotalTokens() const {
  int64_t total = 0;
  for (int64_t t : layer_tokens) total += t;
  return total;
}

int64_t StoreSchemaVersion() { return kSchemaVersion; }

StatusOr<std::unique_ptr<Store>> OpenSqliteStore(const std::string& path, StoreOptions options) {
  STRATA_ASSIGN_OR_RETURN(sqlite3* db, store_internal::OpenDatabase(path, options));
  return std::unique_ptr<Store>(new SqliteStore(path, std::move(options), db));
}

}  // namespace strata
