// strata/store.h — durable agent state: contexts, recall blobs, request records, events and growth.
//
// A Store keeps many agents in one file. For each agent it holds the identity and the options
// needed to reopen it, every non-volatile segment (with layer, state, version, token counts,
// ordering), the originals kept for recall (deduplicated by SHA-256 content hash, zstd-compressed
// above a size threshold), the turns, the request records (strata/record.h), events (compactions,
// prefix breaks, any application type with a JSON payload) and the growth curve (tokens per layer
// per turn). OpenSqliteStore() is the implementation over SQLite (WAL mode, one transaction per
// mutation, and one for all the writes of a turn: CommitTurn).
//
//   STRATA_ASSIGN_OR_RETURN(std::unique_ptr<strata::Store> store,
//                           strata::OpenSqliteStore("agents.db"));
//   strata::ContextOptions options;
//   options.agent.id = "agent-1";
//   STRATA_ASSIGN_OR_RETURN(auto context, strata::CreateContext(*store, options));
//   STRATA_RETURN_IF_ERROR(context->AppendUser("Fix the failing test.").status());  // durable now
//   ...  // after a restart:
//   STRATA_ASSIGN_OR_RETURN(auto again, strata::OpenContext(*store, "agent-1"));
//   // again->Build() renders byte-identically to what context->Build() rendered.
//
// Durability: every mutation is one transaction. Once a call returns OK its change survives a crash
// of the process (and, with the default StoreOptions::synchronous == kFull, of the machine); a call
// that fails or is interrupted leaves nothing behind. A Context attached to a store (CreateContext,
// OpenContext) persists each change before its mutating call returns; if the store refuses the
// change (disk full, lock timeout) the context rolls it back and the call returns the store's
// error.
//
// Thread safety: a Store is thread-safe: its methods may be called from several threads at once
// (calls are serialized on one connection). Contexts attached to it keep their own contract (one
// thread at a time per Context); distinct contexts of one store may be used from distinct threads.
// Several processes may open the same file: SQLite's locking lets readers run alongside one
// writer; a second writer waits up to StoreOptions::busy_timeout_ms and then gets UNAVAILABLE
// (StoreOptions::exclusive admits one Store per file instead). Open it by one name: SQLite names
// its -wal and -shm files after the path, so processes opening one file through two hard links
// do not see each other's changes (symlinks are resolved and are safe).
// The Store must outlive every Context attached to it.
#ifndef STRATA_STORE_H_
#define STRATA_STORE_H_

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "strata/clock.h"
#include "strata/context.h"
#include "strata/record.h"
#include "strata/segment.h"
#include "strata/status.h"

namespace strata {

// How durable a committed change is (StoreOptions::synchronous; SQLite's synchronous pragma).
enum class StoreSync : int {
  // fsync the WAL at every commit: an acknowledged change survives power loss. Default.
  kFull = 0,
  // fsync only at checkpoints: an acknowledged change survives a crash of the process, but the
  // last commits may be lost on power loss or an OS crash. Several times faster
  // (docs/benchmarks.md).
  kNormal = 1,
};

// What a store is opened with (OpenSqliteStore).
struct StoreOptions {
  // Create the file (and the schema) when it does not exist. Default true. When false, a missing
  // file is NOT_FOUND.
  bool create_if_missing = true;
  // Open without writing anything (inspection tools). Mutations return FAILED_PRECONDITION.
  // Default false.
  bool read_only = false;
  // How long a writer waits for another connection's write lock before UNAVAILABLE. Default 5000
  // ms.
  int busy_timeout_ms = 5000;
  // Admit no other connection to the file while this Store is open: SQLite's lock on the database
  // file itself (its inode, so a symlink or a hard link to it is refused too) is taken at open and
  // held until the Store is destroyed, and the WAL index lives in this process's memory (no -shm
  // file). Another open of the same file, in this process or another, read-only ones (`strata
  // inspect`) included, fails: FAILED_PRECONDITION for another exclusive open, naming the path
  // and the holding process (at once when the holder is exclusive, else after busy_timeout_ms),
  // UNAVAILABLE for a shared one after its busy timeout. For a process that keeps what it stores
  // in memory too (strata-sidecar). Not with read_only. Default false.
  bool exclusive = false;
  // How durable each commit is (StoreSync). Default kFull.
  StoreSync synchronous = StoreSync::kFull;
  // Deduplicate recall originals and large segment contents by SHA-256 of their bytes: identical
  // contents are stored once per file. Default true. When false every content is stored inline.
  bool deduplicate = true;
  // Contents at least this many bytes long go to the blob table (deduplicated, compressed); smaller
  // ones stay inline in their row. Default 512 bytes.
  size_t blob_min_bytes = 512;
  // zstd compression level for blobs at least compress_min_bytes long; 0 stores them raw.
  // Default 3 (fast; about 3-5x on tool outputs).
  int compression_level = 3;
  size_t compress_min_bytes = 1024;  // shorter blobs stay raw. Default 1024
  // Upper bound of the database size in pages of 4096 bytes (SQLite max_page_count); 0: no limit.
  // A mutation that would exceed it fails with RESOURCE_EXHAUSTED and changes nothing. Default 0.
  int64_t max_pages = 0;
  // The wall clock (Clock::UnixMillis) of created/updated times and record timestamps the store
  // sets (strata/clock.h). Not owned; default nullptr: SystemClock().
  Clock* clock = nullptr;

  // --- PostgreSQL stores (OpenPostgresStore); SQLite ignores these ---
  // Connections the store opens at most; calls beyond them wait for one. Default 4.
  int pool_size = 4;
  // How long opening a connection may take before UNAVAILABLE. Default 5000 ms.
  int connect_timeout_ms = 5000;
  // How many more times a call is tried after its connection was lost (or the server reported a
  // serialization failure or deadlock), waiting 50 ms, 100 ms, ... in between; a write is tried
  // again only once it is known not to have committed. Default 4.
  int retries = 4;

  // --- Write leases (Store::AcquireLease) ---
  // This store's name as a lease owner; other writers' errors name it. "" (default): the host
  // name, the process id and a random suffix, unique per open.
  std::string lease_owner;
  // How long a lease lasts after it was taken or last renewed; another store may take the agent
  // once it has expired. Default 5000 ms.
  int64_t lease_ttl_ms = 5000;
  // Renew the leases this store holds from a background thread, every lease_ttl_ms / 3 (started
  // by the first AcquireLease). Default true; when false, call AcquireLease again to renew.
  bool renew_leases = true;
};

// Who may write an agent (Store::AcquireLease): one owner at a time, until expires_unix_ms.
struct AgentLease {
  std::string agent_id;         // the agent the lease is for
  std::string owner;            // StoreOptions::lease_owner of the holder; "" once released
  int64_t epoch = 0;            // grows by one each time another owner takes the agent
  int64_t expires_unix_ms = 0;  // when the lease lapses unless renewed (the database's clock)
};

// An agent as stored: its options (tokenizer and journal pointers are null; the tokenizer's Name()
// is kept in tokenizer_name) and a summary of its state.
struct StoredAgent {
  ContextOptions options;  // as created (identity, render, hygiene, budget; no pointers)
  std::string tokenizer_name;  // Tokenizer::Name() of the tokenizer that counted its tokens
  int64_t created_unix_ms = 0;  // when CreateAgent() ran (StoreOptions::clock)
  int64_t updated_unix_ms = 0;  // when its last change was applied
  int64_t turn = 0;         // the context's turn counter
  int64_t segments = 0;     // stored non-volatile segments (all states)
  int64_t tokens = 0;       // sum of the rendered (live or masked) segments' token counts
  int64_t requests = 0;     // stored request records
  int64_t compactions = 0;  // events of type "compaction"
};

// A timestamped fact about an agent. Well-known types: "compaction" (payload: {"boundary":...,
// "tokens_before":...,"tokens_after":...,"invalidated_tokens":...}) and "prefix_break" (payload:
// {"segment_id":...,"reason":...}); applications may add their own.
struct StoredEvent {
  int64_t id = 0;  // assigned by the store
  std::string agent_id;  // the agent it is about
  int64_t turn = 0;      // the agent's turn when it happened
  int64_t unix_ms = 0;  // 0 on append: now
  std::string type;     // "compaction", "prefix_break" or an application's own
  std::string payload_json = "{}";  // a JSON object; validated on append
};

// One point of an agent's growth curve: its size after a turn.
struct GrowthPoint {
  std::string agent_id;  // the agent measured
  int64_t turn = 0;      // the turn it was measured after
  int64_t unix_ms = 0;                              // 0 on append: now
  std::array<int64_t, kLayerCount> layer_tokens{};  // indexed by Layer
  int64_t compactions = 0;                          // compactions performed during this turn
  int64_t invalidated_tokens = 0;  // cached tokens the turn's compactions invalidated
  // Prompt tokens of the turn's summary requests (Turn::compaction_requests, input_tokens).
  int64_t summary_input_tokens = 0;
  // Of those, cached: each request's reported cached tokens, else its predicted, at most its input.
  int64_t summary_cached_tokens = 0;
  // Completion tokens of the turn's summary requests (their output_tokens).
  int64_t summary_output_tokens = 0;
  // The sum of layer_tokens.
  int64_t TotalTokens() const;
};

// Which request records PruneRequests deletes. Zero fields do not limit.
struct RetentionPolicy {
  int64_t max_age_ms = 0;             // delete records started before now - max_age_ms. Default 0
  int64_t max_records_per_agent = 0;  // keep only each agent's newest records. Default 0
};

// What a store holds (Store::Stats).
struct StoreStats {
  int64_t schema_version = 0;  // the file's schema version (StoreSchemaVersion() once migrated)
  int64_t file_bytes = 0;  // page_count * page_size (WAL not included)
  int64_t agents = 0;    // stored agents
  int64_t segments = 0;  // stored segment rows, every agent's
  int64_t blobs = 0;     // distinct blob contents
  int64_t blob_raw_bytes = 0;     // uncompressed size of the stored blobs
  int64_t blob_stored_bytes = 0;  // their size on disk (compressed)
  int64_t requests = 0;  // request records
  int64_t events = 0;    // stored events
  // The durability mode in force: PRAGMA synchronous read back on the store's connection.
  StoreSync synchronous = StoreSync::kFull;
  // Write transactions this Store object committed since it was opened (every mutation is one;
  // CommitTurn is one for all its writes). 0 for a store that does not count them.
  int64_t write_transactions = 0;
};

// The writes of one agent turn, committed together by Store::CommitTurn: the context's changes,
// its per-agent state, events, request records and growth point. Every write is agent_id's.
struct TurnWrites {
  std::string agent_id;  // the agent every write below belongs to
  // Applied first, in order, each as ApplyChange applies it.
  std::vector<ContextChange> changes;
  // (key, value) pairs, each as PutAgentState stores it (keys non-empty).
  std::vector<std::pair<std::string, std::string>> state;
  // As AppendEvent appends them (agent_id equal to TurnWrites::agent_id, a type, a JSON object).
  std::vector<StoredEvent> events;
  // As AppendRequest appends them (agent_id equal to TurnWrites::agent_id).
  std::vector<RequestRecord> records;
  // As RecordGrowth records it (agent_id equal to TurnWrites::agent_id).
  std::optional<GrowthPoint> growth;
  // Nothing to write.
  bool empty() const;
};

// INVALID_ARGUMENT, naming the offending write, when `writes` holds a write of another agent, an
// empty state key, an event without a type or with a payload that is not a JSON object, or an
// empty agent_id with something to write. What every CommitTurn checks before writing anything.
Status CheckTurnWrites(const TurnWrites& writes);

// Where agents, their contexts' changes, request records, events and growth are kept (see the
// file comment). OpenSqliteStore() opens the implementation.
class Store {
 public:
  virtual ~Store() = default;

  // The file this store was opened on.
  virtual const std::string& path() const = 0;

  // --- Agents ---------------------------------------------------------------------------------

  // Registers a new agent with its options (identity, render, hygiene, keep_originals and the
  // tokenizer's name; the pointers are not stored). ALREADY_EXISTS if the id is taken;
  // INVALID_ARGUMENT for an empty id.
  virtual Status CreateAgent(const ContextOptions& options) = 0;
  // NOT_FOUND (listing a few known ids) for an unknown agent.
  virtual StatusOr<StoredAgent> GetAgent(std::string_view agent_id) = 0;
  // Every agent, ordered by id.
  virtual StatusOr<std::vector<StoredAgent>> ListAgents() = 0;
  // Deletes an agent and everything stored for it (blobs no other agent uses included).
  virtual Status DeleteAgent(std::string_view agent_id) = 0;
  // Gives agent `from_id` the id `to_id` in one transaction, first deleting an agent stored under
  // `to_id` (as DeleteAgent does). A complete replacement is built under a temporary id and swapped
  // in with this, so readers see either the old agent or the new one, never a partial copy.
  // NOT_FOUND when `from_id` is unknown; INVALID_ARGUMENT when the ids are empty or equal.
  virtual Status ReplaceAgent(std::string_view from_id, std::string_view to_id) = 0;

  // --- Context data ---------------------------------------------------------------------------

  // Applies one ContextChange in one transaction: upserts segments, deletes removed ones, stores
  // new originals, advances the turn counter (a new turn gets a row in the turns table).
  // NOT_FOUND for an unknown agent; RESOURCE_EXHAUSTED when the disk or max_pages is full;
  // UNAVAILABLE when another writer holds the lock beyond the busy timeout. On error nothing
  // changed.
  virtual Status ApplyChange(std::string_view agent_id, const ContextChange& change) = 0;
  // Everything Context::Restore needs for this agent.
  virtual StatusOr<ContextSnapshot> LoadSnapshot(std::string_view agent_id) = 0;
  // The original content kept under `recall_id` (works after the segment itself was removed).
  virtual StatusOr<std::string> LoadOriginal(std::string_view agent_id,
                                             std::string_view recall_id) = 0;
  // A journal that writes every change of `agent_id` with ApplyChange. Owned by the store and
  // valid as long as it; the same pointer is returned for the same id.
  virtual ContextJournal* Journal(std::string_view agent_id) = 0;

  // --- Observability --------------------------------------------------------------------------

  // Appends a request record. NOT_FOUND for an unknown agent_id.
  virtual Status AppendRequest(const RequestRecord& record) = 0;
  // The agent's newest `limit` records, newest first.
  virtual StatusOr<std::vector<RequestRecord>> RecentRequests(std::string_view agent_id,
                                                              size_t limit) = 0;
  // Appends an event; returns its id. INVALID_ARGUMENT for an empty type or a payload that is not
  // a JSON object.
  virtual StatusOr<int64_t> AppendEvent(const StoredEvent& event) = 0;
  // The agent's events in append order; `type` "" for every type.
  virtual StatusOr<std::vector<StoredEvent>> Events(std::string_view agent_id,
                                                    std::string_view type = "") = 0;
  // --- Per-agent state ------------------------------------------------------------------------

  // Stores (or replaces) `value` under `key` for an agent, in one transaction (strata::Agent keeps
  // its configuration and its prefix-cache state here). NOT_FOUND for an unknown agent;
  // INVALID_ARGUMENT for an empty key.
  virtual Status PutAgentState(std::string_view agent_id, std::string_view key,
                               std::string_view value) = 0;
  // The value under `key`, std::nullopt when none. NOT_FOUND for an unknown agent.
  virtual StatusOr<std::optional<std::string>> GetAgentState(std::string_view agent_id,
                                                             std::string_view key) = 0;

  // Records (or replaces) the growth point of (agent_id, turn).
  virtual Status RecordGrowth(const GrowthPoint& point) = 0;
  // The agent's growth curve ordered by turn.
  virtual StatusOr<std::vector<GrowthPoint>> Growth(std::string_view agent_id) = 0;

  // --- Turns -----------------------------------------------------------------------------------

  // Commits all of `writes` in one transaction (strata::Agent commits each turn with it): when it
  // returns OK every write is durable, as each single mutation above is; on error none of them
  // was made. Writes are applied in the order of TurnWrites' fields (changes, state, events,
  // records, growth). Errors: INVALID_ARGUMENT from CheckTurnWrites (nothing written), then those
  // of the single mutations (NOT_FOUND for an unknown agent, RESOURCE_EXHAUSTED, UNAVAILABLE).
  // An empty `writes` is OK and writes nothing.
  // The default implementation, for a store that cannot group writes, checks `writes` and then
  // calls the single mutations one by one: each is durable, but a failure part way leaves the
  // earlier ones written. A store that has transactions overrides it (the SQLite store does).
  virtual Status CommitTurn(const TurnWrites& writes);

  // Deletes request records per `policy` relative to `now_unix_ms`; returns how many. Never
  // touches segments, originals, events or growth points (what a context needs to reopen).
  virtual StatusOr<int64_t> PruneRequests(const RetentionPolicy& policy, int64_t now_unix_ms) = 0;

  // --- Maintenance ----------------------------------------------------------------------------

  // Counts of what the store holds and the file's size.
  virtual StatusOr<StoreStats> Stats() = 0;
  // OK while the files this store opened are still in place and writable: UNAVAILABLE, saying
  // what happened and what to do, once the database file was removed or replaced by another file
  // (its path names another inode or none), SQLite's -wal or -shm file was, or one of them was
  // made immutable or append-only (chattr +i, +a). Every mutation makes this check before it
  // writes and refuses with this status, so nothing is acknowledged that a reopen would not find.
  // Cheap (one stat per file). Read-only stores, and stores that keep no files, return OK.
  virtual Status CheckFiles() { return Status::Ok(); }
  // Writes a consistent copy of the whole database to `destination` (a new file) while the store
  // stays usable (SQLite's VACUUM INTO). ALREADY_EXISTS if the file exists.
  virtual Status Backup(const std::string& destination) = 0;

  // --- Write leases: one writer per agent ------------------------------------------------------
  //
  // A store that holds an agent's lease is its only writer: every write transaction about the
  // agent first checks, in the transaction itself, that the lease row still names this store and
  // the epoch it took (fencing). A store that lost the lease (it was paused or cut off past the
  // TTL and another store took the agent) gets ABORTED, "agent X is now served by OWNER since
  // epoch E", and writes nothing. A store that holds no lease on an agent may write it while no
  // other store holds a live lease on it (ABORTED naming the holder otherwise).

  // Takes the write lease of `agent_id` for StoreOptions::lease_owner (or renews it when this
  // store holds it). The agent need not exist yet. UNAVAILABLE naming the holder and when its
  // lease expires when another store holds a live lease; ABORTED when this store held it and
  // lost it. The default implementation returns UNIMPLEMENTED.
  virtual StatusOr<AgentLease> AcquireLease(std::string_view agent_id);
  // Gives the lease up at once (so another store need not wait for it to expire); OK when this
  // store does not hold it.
  virtual Status ReleaseLease(std::string_view agent_id);
  // Releases every lease this store holds (before a process exits).
  virtual Status ReleaseAllLeases();
  // The lease row of `agent_id` as the database holds it; std::nullopt when it was never leased.
  virtual StatusOr<std::optional<AgentLease>> GetLease(std::string_view agent_id);
  // StoreOptions::lease_owner, or the name generated when it was empty.
  virtual const std::string& lease_owner() const;
  // True when processes on several hosts may write this store at once (PostgreSQL): Agent::Open
  // then takes the agent's lease before it reads it. False for SQLite (one host; its leases are
  // taken only by callers that ask, e.g. strata-sidecar).
  virtual bool shared() const { return false; }
};

// Opens (creating if allowed) the SQLite store at `path`.
// Errors: NOT_FOUND (missing file, create_if_missing false); PERMISSION_DENIED (read-only
// directory or file); FAILED_PRECONDITION (written by a newer strata schema: upgrade strata;
// or a SQLite file of another application); DATA_LOSS (not a database, or corrupt);
// RESOURCE_EXHAUSTED (disk full); UNAVAILABLE (locked by another writer beyond the busy timeout;
// the message names the processes holding locks on the file when the system says);
// FAILED_PRECONDITION also when another Store has the file open with StoreOptions::exclusive, or
// this one is exclusive and another connection has the file open; INVALID_ARGUMENT for exclusive
// with read_only.
StatusOr<std::unique_ptr<Store>> OpenSqliteStore(const std::string& path,
                                                 StoreOptions options = {});

// The newest schema version this build writes and reads.
int64_t StoreSchemaVersion();

// Opens (creating its tables if allowed) the PostgreSQL store at `conninfo`: a postgresql:// (or
// postgres://) URL or a libpq key=value string. Same interface and promises as the SQLite store:
// one transaction per mutation, acknowledged means committed (StoreSync::kNormal turns
// synchronous_commit off for the store's transactions), a failed call leaves nothing. Any number
// of processes may open one database; leases (Store::AcquireLease) keep one writer per agent.
// Keeps at most StoreOptions::pool_size connections; works through PgBouncer in transaction
// pooling mode. A call whose connection is lost is tried again (StoreOptions::retries) when it
// is a read or a write that did not commit, which is checked on a new connection; UNAVAILABLE
// when the server stays unreachable (for a write whose outcome could not be learned, the message
// says so: reopen the context before continuing). Errors: UNAVAILABLE (server unreachable);
// UNAUTHENTICATED (login refused); NOT_FOUND (no such database, or no store and
// create_if_missing false); FAILED_PRECONDITION (written by a newer strata, naming both
// versions); INVALID_ARGUMENT for exclusive or max_pages, which apply to SQLite files only.
StatusOr<std::unique_ptr<Store>> OpenPostgresStore(const std::string& conninfo,
                                                   StoreOptions options = {});

// True when `path_or_url` names a PostgreSQL store (it starts with postgresql:// or
// postgres://).
bool IsPostgresUrl(std::string_view path_or_url);

// Opens the store `path_or_url` names: OpenPostgresStore for a postgresql:// or postgres:// URL,
// OpenSqliteStore for anything else (a file path). With a URL, StoreOptions::exclusive is
// ignored (several processes share the database; leases keep one writer per agent).
StatusOr<std::unique_ptr<Store>> OpenStore(const std::string& path_or_url,
                                           StoreOptions options = {});

// --- Contexts attached to a store -------------------------------------------------------------

// Registers `options.agent.id` in `store` and returns an empty context whose every change is
// persisted (options.journal is replaced by store.Journal(id)). ALREADY_EXISTS if the agent exists.
StatusOr<std::unique_ptr<Context>> CreateContext(Store& store, ContextOptions options);

// Restores a stored agent with the options it was created with; `tokenizer` (not owned, may be
// null for the estimator) should be the one it was created with, whose Name() the store kept.
// The context renders byte-identically to the one that wrote the store and stays attached to it.
// NOT_FOUND for an unknown agent; DATA_LOSS if the stored segments are inconsistent.
StatusOr<std::unique_ptr<Context>> OpenContext(Store& store, std::string_view agent_id,
                                               const Tokenizer* tokenizer = nullptr);

// Restores with caller-given options (agent.id must equal agent_id or be empty). Render and hygiene
// options that differ from the stored ones change the rendering; use the overload above to keep it.
StatusOr<std::unique_ptr<Context>> OpenContext(Store& store, std::string_view agent_id,
                                               ContextOptions options);

class RecordSink;  // strata/client.h

// A RecordSink for strata::Client (strata/client.h) that writes every RequestRecord to `store`
// (AppendRequest) and every PrefixBreakEvent as an event of type "prefix_break" whose payload holds
// the event's fields. The agent must exist in the store (CreateContext). Thread-safe; `store` must
// outlive the sink. Include strata/client.h where the sink is used or destroyed.
std::unique_ptr<RecordSink> MakeStoreRecordSink(Store& store);

// The growth point of `context` now (layer tokens from Context::Stats(), its turn counter).
GrowthPoint GrowthPointOf(const Context& context, int64_t compactions = 0,
                          int64_t invalidated_tokens = 0);

}  // namespace strata

#endif  // STRATA_STORE_H_
