// AgentRegistry: the agents strata-sidecar serves, persisted in one SQLite store.
//
// Every agent lives in the store under "<tenant>/<agent id>" (tenant names and agent ids never
// contain '/'), so one file holds every tenant's agents and a tenant only ever sees its own: an id
// of another tenant is NOT_FOUND, exactly like an id that does not exist. Agents are opened from
// the store on first use (Agent::Open) and kept open; after a restart, even one after SIGKILL,
// each agent reopens as it was after its last acknowledged operation (the store commits each
// change before the call returns).
//
// Serialization: an AgentLease holds its agent's mutex while alive, so the operations on one
// agent run one after the other while distinct agents run concurrently. A lease must not be held
// while acquiring another lease, except through AcquirePair (which locks in a fixed order).
//
// Limits (RESOURCE_EXHAUSTED naming the limit and the tenant): TenantLimits::max_agents when
// creating or forking, TenantLimits::max_concurrent_completions in BeginCompletion. A call waits
// for an agent another call holds for at most RegistryOptions::lease_wait (then UNAVAILABLE).
//
// Thread safety: every method may be called from any thread.
#ifndef STRATA_APPS_STRATA_SIDECAR_REGISTRY_H_
#define STRATA_APPS_STRATA_SIDECAR_REGISTRY_H_

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "sidecar_config.h"
#include "strata/agent.h"
#include "strata/clock.h"
#include "strata/status.h"
#include "strata/store.h"
#include "strata/transport.h"
#include "tokenizer_allowlist.h"

namespace strata::sidecar {

// How the registry makes and opens agents.
struct RegistryOptions {
  // The store (created if missing): a SQLite file, or a postgresql:// URL that several sidecars
  // share (each agent is then served by the one sidecar holding its lease, Store::AcquireLease).
  std::string store_path;
  StoreSync store_sync = StoreSync::kFull;  // its StoreOptions::synchronous
  // Defaults of new agents and the endpoint every agent uses (the sidecar's, never the client's).
  std::string upstream;  // endpoint.base_url
  std::string backend = "vllm";
  std::string api_key_env;             // endpoint.api_key_env
  std::string tokenizer = "estimate";  // a name of `tokenizers`, or a spec
  // The operator's allow-list of tokenizers tenants may name (tokenizer_allowlist.h): name -> spec.
  std::map<std::string, std::string> tokenizers;
  std::string chat_template = "glm5";
  int64_t window = 0;  // 0: AgentBudgetConfig's default
  // Agents kept open in memory at most (0: no limit). Beyond it, the least recently used idle
  // agents are closed; they reopen from the store, exactly as they were, on their next call.
  size_t max_open_agents = 1024;
  // Injected instead of an HTTP transport per agent (tests, pools). Not owned.
  Transport* transport = nullptr;
  // How long a call waits for an agent another call holds (Acquire and the calls that lease):
  // then UNAVAILABLE naming lease_wait_ms. 0: no limit.
  std::chrono::milliseconds lease_wait{0};
  // A shared (PostgreSQL) store: how long an agent's lease lasts unless renewed
  // (StoreOptions::lease_ttl_ms): a crashed sidecar's agents are taken over after it.
  int64_t lease_ttl_ms = 5000;
  // A shared store: how long a call waits for an agent another live sidecar serves (its lease
  // is released when that sidecar closes the agent or drains, or lapses when it dies), then
  // UNAVAILABLE naming that sidecar.
  std::chrono::milliseconds owner_wait{10000};
  // A shared store: an open agent no call has used for this long is closed (it reopens from the
  // store on its next call) and its lease released, so that another sidecar may serve it at once
  // instead of waiting for this one (owner_wait). Timed on `clock` from the end of the agent's
  // last call; checked by a background thread at least every second (and every
  // idle_release / 4). 0: agents keep their lease while open (max_open_agents still closes them).
  std::chrono::milliseconds idle_release{60000};
  // The clock idle_release is timed on. nullptr: SystemClock(). Not owned.
  Clock* clock = nullptr;
  // Called with the stored id just before an agent is made (tokenizer loaded, store written), with
  // none of the registry's locks held (tests: a creation that takes long). Empty: none.
  std::function<void(const std::string& stored_id)> before_create;
};

// The longest agent id a tenant may use (IsValidAgentId), without the tenant prefix of the
// stored id.
inline constexpr size_t kMaxAgentIdLength = 128;

// True when `id` is a valid agent id: 1-128 characters of [A-Za-z0-9._-].
bool IsValidAgentId(std::string_view id);
// INVALID_ARGUMENT naming `field` and the offending value when !IsValidAgentId(id).
Status CheckAgentId(std::string_view id, std::string_view field = "agent_id");

class AgentRegistry;

// Exclusive use of one agent while alive (movable, not copyable).
class AgentLease {
 public:
  AgentLease() = default;
  AgentLease(AgentLease&&) noexcept;
  AgentLease& operator=(AgentLease&&) noexcept;
  AgentLease(const AgentLease&) = delete;
  AgentLease& operator=(const AgentLease&) = delete;
  ~AgentLease();

  strata::Agent& agent();
  const std::string& id() const;         // the id within the tenant
  const std::string& stored_id() const;  // "<tenant>/<id>"
  const std::string& tenant() const;
  explicit operator bool() const { return entry_ != nullptr; }

  struct Entry;  // private to the registry

 private:
  friend class AgentRegistry;
  AgentLease(std::shared_ptr<Entry> entry, std::unique_lock<std::timed_mutex> lock);
  std::shared_ptr<Entry> entry_;
  std::unique_lock<std::timed_mutex> lock_;
};

// A slot of the tenant's concurrent completions, released when destroyed (movable).
class CompletionSlot {
 public:
  CompletionSlot() = default;
  CompletionSlot(CompletionSlot&& other) noexcept;
  CompletionSlot& operator=(CompletionSlot&& other) noexcept;
  CompletionSlot(const CompletionSlot&) = delete;
  CompletionSlot& operator=(const CompletionSlot&) = delete;
  ~CompletionSlot();

 private:
  friend class AgentRegistry;
  explicit CompletionSlot(std::shared_ptr<std::atomic<int64_t>> counter);
  std::shared_ptr<std::atomic<int64_t>> counter_;
};

class AgentRegistry {
 public:
  // Opens (creating if missing) the store with StoreOptions::exclusive, which locks the database
  // file itself: FAILED_PRECONDITION, naming the holding process, while another registry (another
  // strata-sidecar) or any other program has the file open, through whatever path;
  // INVALID_ARGUMENT for a wrong tokenizer allow-list (TokenizerAllowList::Make).
  static StatusOr<std::unique_ptr<AgentRegistry>> Open(RegistryOptions options);
  ~AgentRegistry();
  AgentRegistry(const AgentRegistry&) = delete;
  AgentRegistry& operator=(const AgentRegistry&) = delete;

  // The configuration a new agent of `tenant` gets by default: the sidecar's tokenizer, template,
  // window and endpoint, identity {stored id, tenant}.
  AgentConfig DefaultConfig(const TenantConfig& tenant, std::string_view agent_id) const;

  // Checks a client's configuration and makes it the agent's: refuses (INVALID_ARGUMENT, naming
  // the key) endpoint.base_url, endpoint.api_key_env, endpoint.deployment_secret_env, store_path
  // and a backend other than the sidecar's, an identity.id other than `agent_id`, and a tokenizer
  // that is not allowed (ResolveTokenizer); then sets the identity, the sidecar's endpoint and the
  // tokenizer's spec.
  StatusOr<AgentConfig> AdoptClientConfig(const TenantConfig& tenant, std::string_view agent_id,
                                          std::string_view config_json) const;

  // The spec of a tokenizer a tenant asked for (TokenizerAllowList::Resolve): INVALID_ARGUMENT,
  // the same message for every refused value, when it is neither an allowed name nor a spec that
  // reads no file.
  StatusOr<std::string> ResolveTokenizer(std::string_view requested) const;
  // What tenants are shown as an agent's tokenizer (TokenizerAllowList::Shown): never a path of
  // the allow-list.
  std::string ShownTokenizer(std::string_view spec) const;

  // The agent `agent_id` of `tenant`. NOT_FOUND when the tenant has no such agent.
  StatusOr<AgentLease> Acquire(const TenantConfig& tenant, std::string_view agent_id);
  // Acquire, or create it with `config` (nullptr: DefaultConfig) when it does not exist.
  // `config`'s identity and endpoint are replaced by the registry's.
  StatusOr<AgentLease> AcquireOrCreate(const TenantConfig& tenant, std::string_view agent_id,
                                       const strata::AgentConfig* config);
  // Creates a new agent. ALREADY_EXISTS when the id is taken; RESOURCE_EXHAUSTED at max_agents.
  // The agent is made (its tokenizer loaded, its rows written) outside the registry's locks: a
  // slow creation delays only another creation of the same id, never other agents or tenants.
  StatusOr<AgentLease> Create(const TenantConfig& tenant, std::string_view agent_id,
                              strata::AgentConfig config);
  // Two distinct agents at once, locked in a fixed order (Join). INVALID_ARGUMENT when equal.
  StatusOr<std::pair<AgentLease, AgentLease>> AcquirePair(const TenantConfig& tenant,
                                                          std::string_view first,
                                                          std::string_view second);
  // Registers an agent made from a leased one (Agent::Fork), counting against max_agents (checked
  // by CheckCanAdd first). Its id must be "<tenant>/<id>".
  Status CheckCanAdd(const TenantConfig& tenant);
  StatusOr<AgentLease> Adopt(const TenantConfig& tenant, std::unique_ptr<strata::Agent> agent);

  // Reopens the leased agent from the store, after a change made below the Agent (its tools
  // replaced through its context), so that its in-memory state is what is stored.
  Status Reopen(AgentLease& lease);

  // Deletes the agent and everything stored for it (waits for its operation in progress).
  Status Delete(const TenantConfig& tenant, std::string_view agent_id);
  // The tenant's agents ordered by id, ids within the tenant (StoredAgent::options.agent.id).
  StatusOr<std::vector<StoredAgent>> List(const TenantConfig& tenant);
  // One agent's stored summary (id within the tenant).
  StatusOr<StoredAgent> Info(const TenantConfig& tenant, std::string_view agent_id);
  int64_t AgentCount(const TenantConfig& tenant);

  // A slot of the tenant's max_concurrent_completions, or RESOURCE_EXHAUSTED.
  StatusOr<CompletionSlot> BeginCompletion(const TenantConfig& tenant);
  // Completions in progress for the tenant.
  int64_t CompletionsInFlight(const TenantConfig& tenant);
  // Agents open in memory now (at most max_open_agents, plus those leased at once).
  size_t OpenAgents();
  // A shared store: closes the open agents no call has used for options().idle_release (on
  // options().clock) and releases their leases; how many it closed. The registry's background
  // thread calls it; an agent in use (leased) is never closed. 0 at once for a SQLite store.
  size_t ReleaseIdle();
  // From now on, every call waiting for an agent's lease, and every later one that would have to
  // wait (the agent is leased), fails at once with UNAVAILABLE (the sidecar is shutting down).
  void CancelWaits();

  // The id within the tenant of a stored id ("" when it is not the tenant's).
  static std::string LocalId(const TenantConfig& tenant, std::string_view stored_id);
  static std::string StoredId(const TenantConfig& tenant, std::string_view agent_id);

  Store& store();
  const RegistryOptions& options() const;

 private:
  struct State;
  explicit AgentRegistry(std::unique_ptr<State> state);
  StatusOr<AgentLease> AcquireStored(const std::string& stored_id);
  // Locks `lock` (an agent's) within options().lease_wait; UNAVAILABLE otherwise.
  Status LockWithin(std::unique_lock<std::timed_mutex>& lock, const std::string& stored_id);
  StatusOr<std::unique_ptr<Agent>> OpenStored(const std::string& stored_id);
  // A shared store: takes the agent's lease, waiting up to owner_wait while another sidecar
  // holds it. OK at once for a SQLite store (the sidecar's alone: StoreOptions::exclusive).
  Status TakeLease(const std::string& stored_id);
  // A shared store: OK while this sidecar still holds the lease of a cached agent; otherwise
  // (another sidecar took it over) the cached agent is stale and must be reopened.
  bool StillLeased(const std::string& stored_id);
  bool shared_store() const;
  // Starts the thread that calls ReleaseIdle() (a shared store with idle_release > 0).
  void StartIdleReleaser();
  // Closes least recently used idle agents beyond max_open_agents (never `keep`).
  void CloseIdle(const AgentLease::Entry* keep);
  std::unique_ptr<State> state_;
};

}  // namespace strata::sidecar

#endif  // STRATA_APPS_STRATA_SIDECAR_REGISTRY_H_
