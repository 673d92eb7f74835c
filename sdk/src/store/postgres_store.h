// The PostgreSQL implementation of strata::Store (private to strata::store).
//
// postgres_store.cc: opening, the transaction drivers, agents, leases and statistics;
// postgres_context.cc: context changes, snapshots, originals and blobs;
// postgres_records.cc: request records, events, per-agent state, growth and pruning.
//
// Each call takes a connection from the pool for its duration, so calls from several threads run
// in parallel. Every mutation runs in Write(): one transaction whose first statement is the lease
// fence of the agent it writes (strata/store.h, leases), retried when it did not commit;
// every read spanning several statements runs in Read(): one REPEATABLE READ, READ ONLY
// transaction, retried when its connection was lost.
#ifndef STRATA_SRC_STORE_POSTGRES_STORE_H_
#define STRATA_SRC_STORE_POSTGRES_STORE_H_

#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <string_view>

#include "store/agent_journal.h"
#include "store/lease_keeper.h"
#include "store/postgres_connection.h"
#include "strata/store.h"

namespace strata::store_internal {

class PostgresStore final : public Store {
 public:
  PostgresStore(std::string conninfo, StoreOptions options);
  ~PostgresStore() override;

  // Connects and migrates (or, read-only, checks the schema version).
  Status Open();

  const std::string& path() const override { return target_; }

  Status CreateAgent(const ContextOptions& options) override;
  StatusOr<StoredAgent> GetAgent(std::string_view agent_id) override;
  StatusOr<std::vector<StoredAgent>> ListAgents() override;
  Status DeleteAgent(std::string_view agent_id) override;
  Status ReplaceAgent(std::string_view from_id, std::string_view to_id) override;

  Status ApplyChange(std::string_view agent_id, const ContextChange& change) override;
  StatusOr<ContextSnapshot> LoadSnapshot(std::string_view agent_id) override;
  StatusOr<std::string> LoadOriginal(std::string_view agent_id,
                                     std::string_view recall_id) override;
  ContextJournal* Journal(std::string_view agent_id) override;

  Status AppendRequest(const RequestRecord& record) override;
  StatusOr<std::vector<RequestRecord>> RecentRequests(std::string_view agent_id,
                                                      size_t limit) override;
  StatusOr<int64_t> AppendEvent(const StoredEvent& event) override;
  StatusOr<std::vector<StoredEvent>> Events(std::string_view agent_id,
                                            std::string_view type) override;
  Status PutAgentState(std::string_view agent_id, std::string_view key,
                       std::string_view value) override;
  StatusOr<std::optional<std::string>> GetAgentState(std::string_view agent_id,
                                                     std::string_view key) override;
  Status RecordGrowth(const GrowthPoint& point) override;
  Status CommitTurn(const TurnWrites& writes) override;
  StatusOr<std::vector<GrowthPoint>> Growth(std::string_view agent_id) override;
  StatusOr<int64_t> PruneRequests(const RetentionPolicy& policy, int64_t now_unix_ms) override;

  StatusOr<StoreStats> Stats() override;
  Status CheckFiles() override;
  Status Backup(const std::string& destination) override;

  StatusOr<AgentLease> AcquireLease(std::string_view agent_id) override;
  Status ReleaseLease(std::string_view agent_id) override;
  Status ReleaseAllLeases() override;
  StatusOr<std::optional<AgentLease>> GetLease(std::string_view agent_id) override;
  const std::string& lease_owner() const override { return leases_.owner(); }
  bool shared() const override { return true; }

 private:
  using Body = std::function<Status(PgConnection&)>;

  // Runs `body` in one write transaction that first checks the lease fence of `agent_id` (none
  // when empty). Tried again, with backoff, while it is known not to have committed.
  Status Write(const std::string& what, std::string_view agent_id, const Body& body);
  // Runs `body` in one read-only snapshot transaction, tried again when the connection is lost.
  Status Read(const std::string& what, const Body& body);
  // Runs `body` without a transaction (single idempotent statements), tried again likewise.
  Status Run(const std::string& what, const Body& body);
  // One attempt of Write; `retry` says whether another may follow.
  Status TryWrite(std::string_view agent_id, const Body& body, bool& retry);
  // Whether transaction `txid` committed, asked on new connections: true, false, or UNAVAILABLE
  // when that cannot be learned.
  StatusOr<bool> Committed(int64_t txid);
  void Backoff(int attempt);
  int64_t Now() const;

  // The fence of a write about `agent_id` (locks its lease row until the transaction ends).
  Status Fence(PgConnection& c, std::string_view agent_id);
  StatusOr<std::optional<AgentLease>> ReadLease(PgConnection& c, std::string_view agent_id);
  StatusOr<AgentLease> RenewHeld(const AgentLease& held);

  // Shared steps, run inside a transaction.
  StatusOr<int64_t> AgentRow(PgConnection& c, std::string_view agent_id);
  Status UnknownAgent(PgConnection& c, std::string_view agent_id);
  StatusOr<std::vector<StoredAgent>> ReadAgents(PgConnection& c, std::string_view only,
                                                bool filter);
  Status DeleteAgentRow(PgConnection& c, int64_t agent);

  // The bodies of the single writes, run inside Write's transaction (CommitTurn runs several in
  // one): postgres_context.cc and postgres_records.cc.
  Status ApplyChangeIn(PgConnection& c, std::string_view agent_id, const ContextChange& change);
  Status AppendRequestIn(PgConnection& c, const RequestRecord& r);
  StatusOr<int64_t> AppendEventIn(PgConnection& c, const StoredEvent& event);
  Status PutAgentStateIn(PgConnection& c, std::string_view agent_id, std::string_view key,
                         std::string_view value);
  Status RecordGrowthIn(PgConnection& c, const GrowthPoint& p);

  // postgres_context.cc: ApplyChange's steps; `released` collects blob hashes that may have lost
  // their last reference (collected at the end).
  Status DeleteSegment(PgConnection& c, int64_t agent, const std::string& id,
                       std::set<std::string>& released);
  Status WriteSegment(PgConnection& c, int64_t agent, const Segment& s,
                      std::set<std::string>& released);
  Status WriteOriginal(PgConnection& c, int64_t agent, const std::string& recall_id,
                       const std::string& content, std::set<std::string>& released);
  Status DeleteOriginal(PgConnection& c, int64_t agent, const std::string& recall_id,
                        std::set<std::string>& released);
  Status AdvanceTurn(PgConnection& c, int64_t agent, int64_t turn);
  // Adds `content` to `params` as two parameters: inline bytes and NULL, or NULL and the hash of
  // the blob holding it (written when no identical content is stored yet).
  Status AddContent(PgConnection& c, PgParams& params, const std::string& content);
  StatusOr<std::string> ReadContent(PgConnection& c, const PgResult& rows, int row, int inline_col,
                                    int hash_col);
  // The content of blob `hash` from columns raw_size, codec, data at `raw_size_col` of `row`
  // (raw_size NULL: the blob is missing).
  StatusOr<std::string> DecodeBlob(const std::string& hash, const PgResult& rows, int row,
                                   int raw_size_col);
  Status CollectBlobs(PgConnection& c, const std::set<std::string>& hashes);
  StatusOr<std::vector<Segment>> ReadSegments(PgConnection& c, int64_t agent,
                                              std::string_view agent_id);

  const std::string conninfo_;
  const std::string target_;  // conninfo_ without its password
  const StoreOptions options_;
  PgPool pool_;
  AgentJournals journals_;
  LeaseKeeper leases_;
};

// The 64-bit key of the transaction-scoped advisory lock that guards blob `hash` (its first 8
// bytes): referencing a blob takes it shared, collecting one takes it exclusive.
int64_t BlobLockKey(const std::string& hash);

}  // namespace strata::store_internal

#endif  // STRATA_SRC_STORE_POSTGRES_STORE_H_
