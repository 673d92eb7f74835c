// The SQLite implementation of strata::Store (private to strata::store).
//
// sqlite_store.cc: construction, the transaction drivers and statement cache, agents, leases,
// statistics and backups (and OpenSqliteStore);
// sqlite_context.cc: context changes, turns, snapshots, recall originals and blobs;
// sqlite_records.cc: request records, events, per-agent state, growth and pruning.
// The statement wrapper is sqlite_statement.h; the row decoding shared with the PostgreSQL store
// is row_codec.h, the journals agent_journal.h, the lease rows sqlite_lease.h.
//
// One connection per Store, guarded by mu_; every public method takes the lock for its whole
// duration, so a Store is safe to share across threads. Mutations (and CommitTurn's batch) run in
// one BEGIN IMMEDIATE transaction each (the write lock is taken up front, so a busy writer is
// reported before anything is written). Reads that span several statements run in one read
// transaction (a consistent view while another process writes). Statements are prepared once and
// cached.
#ifndef STRATA_SRC_STORE_SQLITE_STORE_H_
#define STRATA_SRC_STORE_SQLITE_STORE_H_

#include <sqlite3.h>

#include <cstdint>
#include <functional>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "core/thread_annotations.h"
#include "store/agent_journal.h"
#include "store/file_identity.h"
#include "store/lease_keeper.h"
#include "store/sqlite_statement.h"
#include "strata/store.h"

namespace strata::store_internal {

class SqliteStore final : public Store {
 public:
  // Takes ownership of `db`, opened by OpenDatabase.
  SqliteStore(std::string path, StoreOptions options, sqlite3* db);
  ~SqliteStore() override;

  const std::string& path() const override { return path_; }

  // sqlite_store.cc
  Status CreateAgent(const ContextOptions& options) override;
  StatusOr<StoredAgent> GetAgent(std::string_view agent_id) override;
  StatusOr<std::vector<StoredAgent>> ListAgents() override;
  Status DeleteAgent(std::string_view agent_id) override;
  Status ReplaceAgent(std::string_view from_id, std::string_view to_id) override;
  StatusOr<StoreStats> Stats() override;
  Status CheckFiles() override;
  Status Backup(const std::string& destination) override;
  StatusOr<AgentLease> AcquireLease(std::string_view agent_id) override;
  Status ReleaseLease(std::string_view agent_id) override;
  Status ReleaseAllLeases() override;
  StatusOr<std::optional<AgentLease>> GetLease(std::string_view agent_id) override;
  const std::string& lease_owner() const override { return leases_.owner(); }
  ContextJournal* Journal(std::string_view agent_id) override { return journals_.For(agent_id); }

  // sqlite_context.cc
  Status ApplyChange(std::string_view agent_id, const ContextChange& change) override;
  Status CommitTurn(const TurnWrites& writes) override;
  StatusOr<ContextSnapshot> LoadSnapshot(std::string_view agent_id) override;
  StatusOr<std::string> LoadOriginal(std::string_view agent_id,
                                     std::string_view recall_id) override;

  // sqlite_records.cc
  Status AppendRequest(const RequestRecord& r) override;
  StatusOr<std::vector<RequestRecord>> RecentRequests(std::string_view agent_id,
                                                      size_t limit) override;
  StatusOr<int64_t> AppendEvent(const StoredEvent& event) override;
  StatusOr<std::vector<StoredEvent>> Events(std::string_view agent_id,
                                            std::string_view type) override;
  Status PutAgentState(std::string_view agent_id, std::string_view key,
                       std::string_view value) override;
  StatusOr<std::optional<std::string>> GetAgentState(std::string_view agent_id,
                                                     std::string_view key) override;
  Status RecordGrowth(const GrowthPoint& p) override;
  StatusOr<std::vector<GrowthPoint>> Growth(std::string_view agent_id) override;
  StatusOr<int64_t> PruneRequests(const RetentionPolicy& policy, int64_t now_unix_ms) override;

 private:
  // ---- sqlite_store.cc: the drivers every file's methods use.

  Clock* TheClock() const { return options_.clock != nullptr ? options_.clock : SystemClock(); }
  int64_t Now() const { return TheClock()->UnixMillis(); }
  Status Error(int rc, std::string_view what) STRATA_REQUIRES(mu_);
  // The cached statement of `sql` (a constant: its text is the cache key), prepared on first use.
  StatusOr<Stmt> Prepare(const char* sql) STRATA_REQUIRES(mu_);
  // Runs `body` in one write transaction; rolls back whatever it did when it fails.
  Status Transaction(const std::string& what, const std::function<Status()>& body)
      STRATA_REQUIRES(mu_);
  // Runs `body` in one read transaction (a consistent view while another process writes).
  template <typename T>
  StatusOr<T> ReadTransaction(const std::function<StatusOr<T>()>& body) STRATA_REQUIRES(mu_) {
    STRATA_RETURN_IF_ERROR(files_.CheckBeforeRead());
    int rc = sqlite3_exec(db_, "BEGIN", nullptr, nullptr, nullptr);
    if (rc != SQLITE_OK) return Error(rc, "starting a read transaction");
    StatusOr<T> result = body();
    sqlite3_exec(db_, result.ok() ? "COMMIT" : "ROLLBACK", nullptr, nullptr, nullptr);
    return result;
  }
  // NOT_FOUND naming `agent_id` and a few of the agents the store holds.
  Status UnknownAgent(std::string_view agent_id) STRATA_REQUIRES(mu_);
  // The row of `agent_id`, looked up inside every transaction, never cached: another process may
  // delete and re-create an agent under the same id (a new row), and a stale row number would
  // write to nowhere. Inside a write transaction, checks the lease fence first.
  StatusOr<int64_t> AgentRow(std::string_view agent_id) STRATA_REQUIRES(mu_);
  // Every agent, or (`filter`) only `only`.
  StatusOr<std::vector<StoredAgent>> ReadAgents(std::string_view only, bool filter)
      STRATA_REQUIRES(mu_);
  // Deletes agent row `agent` and its data; call inside a write transaction.
  Status DeleteAgentRow(int64_t agent) STRATA_REQUIRES(mu_);
  // Takes (held_epoch empty) or renews the lease of `agent_id`.
  StatusOr<AgentLease> TakeLease(std::string_view agent_id, std::optional<int64_t> held_epoch)
      STRATA_REQUIRES(mu_);
  // The lease fence of a write about `agent_id`; call inside the write transaction.
  Status Fence(std::string_view agent_id) STRATA_REQUIRES(mu_);

  // ---- sqlite_context.cc: ApplyChange's steps, each inside its write transaction. `released`
  // collects the blob hashes a step may have taken the last reference from (collected at the end).

  Status WriteChange(int64_t agent, const ContextChange& change) STRATA_REQUIRES(mu_);
  Status OldSegmentHash(int64_t agent, const std::string& id, std::set<std::string>& released)
      STRATA_REQUIRES(mu_);
  Status DeleteSegment(int64_t agent, const std::string& id, std::set<std::string>& released)
      STRATA_REQUIRES(mu_);
  Status WriteSegment(int64_t agent, const Segment& s, std::set<std::string>& released)
      STRATA_REQUIRES(mu_);
  Status OldOriginalHash(int64_t agent, const std::string& recall_id,
                         std::set<std::string>& released) STRATA_REQUIRES(mu_);
  Status DeleteOriginal(int64_t agent, const std::string& recall_id,
                        std::set<std::string>& released) STRATA_REQUIRES(mu_);
  Status WriteOriginal(int64_t agent, const std::string& recall_id, const std::string& content,
                       std::set<std::string>& released) STRATA_REQUIRES(mu_);
  Status WriteCompactionEvent(int64_t agent, const CompactionReport& c) STRATA_REQUIRES(mu_);
  Status AdvanceTurn(int64_t agent, int64_t turn) STRATA_REQUIRES(mu_);
  // Binds `content` either inline (column `inline_col`) or as a reference to a blob
  // (`hash_col`), writing the blob if no identical content is stored yet.
  Status BindContent(Stmt& stmt, int inline_col, int hash_col, const std::string& content)
      STRATA_REQUIRES(mu_);
  // The content of a row bound by BindContent: inline, or read from its blob.
  StatusOr<std::string> ReadContent(const Stmt& row, int inline_col, int hash_col)
      STRATA_REQUIRES(mu_);
  // Deletes the blob `hash` if no segment or original refers to it any more.
  Status CollectBlob(const std::string& hash) STRATA_REQUIRES(mu_);

  // ---- sqlite_records.cc: the single writes CommitTurn batches, inside its transaction.

  Status WriteRequest(int64_t agent, const RequestRecord& r) STRATA_REQUIRES(mu_);
  Status WriteEvent(int64_t agent, const StoredEvent& event) STRATA_REQUIRES(mu_);
  Status WriteState(int64_t agent, std::string_view key, std::string_view value)
      STRATA_REQUIRES(mu_);
  Status WriteGrowth(int64_t agent, const GrowthPoint& p) STRATA_REQUIRES(mu_);

  const std::string path_;
  const StoreOptions options_;

  internal::Mutex mu_;
  sqlite3* const db_ STRATA_GUARDED_BY(mu_);
  std::unordered_map<std::string, sqlite3_stmt*> statements_ STRATA_GUARDED_BY(mu_);  // by SQL
  StoreFiles files_ STRATA_GUARDED_BY(mu_);                // checked before every write
  int64_t write_transactions_ STRATA_GUARDED_BY(mu_) = 0;  // committed write transactions
  AgentJournals journals_;                                 // its own lock
  LeaseKeeper leases_;  // the leases this store holds (its own lock)
};

}  // namespace strata::store_internal

#endif  // STRATA_SRC_STORE_SQLITE_STORE_H_
