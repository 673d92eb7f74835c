#include "registry.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <thread>
#include <nlohmann/json.hpp>

#include "core/json_text.h"
#include <set>

namespace strata::sidecar {
namespace {

using json = nlohmann::json;

// The key under which strata::Agent keeps its configuration in the store (store.h PutAgentState).
constexpr char kAgentConfigKey[] = "config";

}  // namespace

bool IsValidAgentId(std::string_view id) {
  if (id.empty() || id.size() > kMaxAgentIdLength) return false;
  for (char c : id) {
    if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
          c == '_' || c == '-')) {
      return false;
    }
  }
  return true;
}

Status CheckAgentId(std::string_view id, std::string_view field) {
  if (IsValidAgentId(id)) return Status::Ok();
  std::string shown(id.substr(0, 80));
  for (char& c : shown) {
    if (static_cast<unsigned char>(c) < 0x20 || static_cast<unsigned char>(c) >= 0x7f) c = '?';
  }
  return InvalidArgumentError(std::string(field) + " \"" + shown + "\"" +
                              (id.empty() ? " is empty" : " is not a valid agent id") +
                              ": use 1-128 characters of A-Z a-z 0-9 . _ -");
}

// ------------------------------------------------------------------------------------ leases

struct AgentLease::Entry {
  std::timed_mutex mu;  // held by the lease
  std::unique_ptr<Agent> agent;
  std::string stored_id;
  std::string local_id;
  std::string tenant;
  // Set (under mu) when the entry left the registry's map: deleted, closed as idle, or a failed
  // open. Whoever then locks it looks the agent up again.
  bool deleted = false;
  std::atomic<uint64_t> last_used{0};  // the registry's use clock at the last lease
  // RegistryOptions::clock, and its NowMicros() when the last lease of the agent began or ended
  // (RegistryOptions::idle_release).
  Clock* clock = nullptr;
  std::atomic<int64_t> active_us{0};
  void MarkActive() {
    if (clock != nullptr) active_us = clock->NowMicros();
  }
};

AgentLease::AgentLease(std::shared_ptr<Entry> entry, std::unique_lock<std::timed_mutex> lock)
    : entry_(std::move(entry)), lock_(std::move(lock)) {}
AgentLease::AgentLease(AgentLease&&) noexcept = default;
AgentLease& AgentLease::operator=(AgentLease&& other) noexcept {
  if (this != &other) {
    if (lock_.owns_lock()) {
      entry_->MarkActive();
      lock_.unlock();
    }
    lock_ = std::move(other.lock_);
    entry_ = std::move(other.entry_);
  }
  return *this;
}
AgentLease::~AgentLease() {
  // The agent's idle time starts now; the lock is released before the entry reference.
  if (lock_.owns_lock()) entry_->MarkActive();
}
Agent& AgentLease::agent() { return *entry_->agent; }
const std::string& AgentLease::id() const { return entry_->local_id; }
const std::string& AgentLease::stored_id() const { return entry_->stored_id; }
const std::string& AgentLease::tenant() const { return entry_->tenant; }

CompletionSlot::CompletionSlot(std::shared_ptr<std::atomic<int64_t>> counter)
    : counter_(std::move(counter)) {}
CompletionSlot::CompletionSlot(CompletionSlot&& other) noexcept
    : counter_(std::move(other.counter_)) {}
CompletionSlot& CompletionSlot::operator=(CompletionSlot&& other) noexcept {
  if (this != &other) {
    if (counter_) counter_->fetch_sub(1);
    counter_ = std::move(other.counter_);
  }
  return *this;
}
CompletionSlot::~CompletionSlot() {
  if (counter_) counter_->fetch_sub(1);
}

// ------------------------------------------------------------------------------------ registry

struct AgentRegistry::State {
  RegistryOptions options;
  std::unique_ptr<Store> store;
  std::mutex mu;  // entries, agent_counts, completions
  std::map<std::string, std::shared_ptr<AgentLease::Entry>, std::less<>> entries;
  std::map<std::string, int64_t, std::less<>> agent_counts;  // tenant -> stored agents
  std::map<std::string, std::shared_ptr<std::atomic<int64_t>>, std::less<>> completions;
  TokenizerAllowList tokenizers;  // immutable after Open
  // Guards `creating`. A creation reserves its id and its tenant's slot (pending) under it, makes
  // the agent with no lock held, then registers it under it again.
  std::mutex create_mu;
  std::condition_variable created;                      // a reservation of `creating` ended
  std::set<std::string, std::less<>> creating;          // stored ids being made
  std::map<std::string, int64_t, std::less<>> pending;  // tenant -> agents being made (under mu)
  std::atomic<uint64_t> clock{0};                       // counts leases: Entry::last_used
  std::atomic<bool> waits_cancelled{false};  // CancelWaits(): waiting for a lease fails at once
  Clock* time = nullptr;                     // options.clock, or SystemClock()
  // The background thread that calls ReleaseIdle() (a shared store with idle_release > 0).
  std::thread idle_releaser;
  std::mutex idle_mu;
  std::condition_variable idle_wake;
  bool stopping = false;  // guarded by idle_mu: the registry is being destroyed
};

AgentRegistry::AgentRegistry(std::unique_ptr<State> state) : state_(std::move(state)) {}
AgentRegistry::~AgentRegistry() {
  if (state_->idle_releaser.joinable()) {
    {
      std::lock_guard<std::mutex> lock(state_->idle_mu);
      state_->stopping = true;
    }
    state_->idle_wake.notify_all();
    state_->idle_releaser.join();
  }
  // Agents first: they write to the store until they are destroyed. Each entry's mutex is taken
  // after the registry's is released: the lock order is entry, then registry (Adopt, CloseIdle).
  std::map<std::string, std::shared_ptr<AgentLease::Entry>, std::less<>> entries;
  {
    std::lock_guard<std::mutex> lock(state_->mu);
    entries.swap(state_->entries);
  }
  for (auto& [id, entry] : entries) {
    std::lock_guard<std::timed_mutex> agent_lock(entry->mu);
    entry->agent.reset();
  }
  // Then the leases, so that other sidecars serve these agents at once, not after the TTL.
  if (state_->store) state_->store->ReleaseAllLeases().IgnoreError();
}

StatusOr<std::unique_ptr<AgentRegistry>> AgentRegistry::Open(RegistryOptions options) {
  auto state = std::make_unique<State>();
  STRATA_ASSIGN_OR_RETURN(state->tokenizers,
                          TokenizerAllowList::Make(options.tokenizers, options.tokenizer));
  StoreOptions store_options;
  store_options.synchronous = options.store_sync;
  // Agents are cached in memory, so two registries on one store would diverge: the store is
  // opened exclusively (SQLite's lock on the database file itself, whatever path names it: a
  // symlink, a hard link), and a second registry is refused. The kernel drops the lock when the
  // process ends, SIGKILL included.
  // A PostgreSQL store (a postgresql:// URL) is shared by several sidecars instead: each agent
  // is served by the one holding its lease (Store::AcquireLease).
  store_options.exclusive = true;
  store_options.lease_ttl_ms = options.lease_ttl_ms;
  StatusOr<std::unique_ptr<Store>> store = OpenStore(options.store_path, store_options);
  if (store.status().code() == StatusCode::kFailedPrecondition &&
      store.status().message().find(" is in use by ") != std::string::npos) {
    return FailedPreconditionError("the store is in use by another strata-sidecar or another "
                                   "program: " + store.status().message() +
                                   "; or give this one another --store");
  }
  STRATA_ASSIGN_OR_RETURN(state->store, std::move(store));
  STRATA_ASSIGN_OR_RETURN(std::vector<StoredAgent> agents, state->store->ListAgents());
  for (const StoredAgent& a : agents) {
    const std::string& id = a.options.agent.id;
    size_t slash = id.find('/');
    if (slash != std::string::npos) ++state->agent_counts[id.substr(0, slash)];
  }
  state->options = std::move(options);
  state->time = state->options.clock != nullptr ? state->options.clock : SystemClock();
  std::unique_ptr<AgentRegistry> registry(new AgentRegistry(std::move(state)));
  registry->StartIdleReleaser();
  return registry;
}

void AgentRegistry::StartIdleReleaser() {
  State& s = *state_;
  const std::chrono::milliseconds idle = s.options.idle_release;
  if (!shared_store() || idle.count() <= 0) return;
  // Checked often enough that an agent is released within a quarter of the period (and a second)
  // after it became idle.
  const auto period =
      std::clamp(idle / 4, std::chrono::milliseconds(10), std::chrono::milliseconds(1000));
  s.idle_releaser = std::thread([this, period] {
    State& s = *state_;
    std::unique_lock<std::mutex> lock(s.idle_mu);
    while (!s.idle_wake.wait_for(lock, period, [&s] { return s.stopping; })) {
      lock.unlock();
      ReleaseIdle();
      lock.lock();
    }
  });
}

Store& AgentRegistry::store() { return *state_->store; }
const RegistryOptions& AgentRegistry::options() const { return state_->options; }

std::string AgentRegistry::StoredId(const TenantConfig& tenant, std::string_view agent_id) {
  return tenant.name + "/" + std::string(agent_id);
}

std::string AgentRegistry::LocalId(const TenantConfig& tenant, std::string_view stored_id) {
  if (stored_id.size() <= tenant.name.size() + 1 ||
      stored_id.compare(0, tenant.name.size(), tenant.name) != 0 ||
      stored_id[tenant.name.size()] != '/') {
    return "";
  }
  return std::string(stored_id.substr(tenant.name.size() + 1));
}

AgentConfig AgentRegistry::DefaultConfig(const TenantConfig& tenant,
                                         std::string_view agent_id) const {
  const RegistryOptions& o = state_->options;
  AgentConfig config;
  config.identity.id = StoredId(tenant, agent_id);
  config.identity.tenant = tenant.name;
  config.tokenizer = state_->tokenizers.default_spec();
  config.chat_template = o.chat_template;
  if (o.window > 0) config.budget.window = o.window;
  config.endpoint.base_url = o.upstream;
  config.endpoint.backend = o.backend;
  config.endpoint.api_key_env = o.api_key_env;
  return config;
}

StatusOr<AgentConfig> AgentRegistry::AdoptClientConfig(const TenantConfig& tenant,
                                                       std::string_view agent_id,
                                                       std::string_view config_json) const {
  STRATA_RETURN_IF_ERROR(internal::CheckJsonDepth(config_json, "config_json"));
  json doc = json::parse(config_json.begin(), config_json.end(), nullptr, false);
  if (doc.is_discarded() || !doc.is_object()) {
    return InvalidArgumentError("config_json is not a JSON object (an AgentConfig document)");
  }
  auto refuse = [](const std::string& key, const std::string& why) {
    return InvalidArgumentError("config_json: " + key + " " + why);
  };
  if (doc.contains("store_path")) {
    return refuse("store_path", "is the sidecar's (--store): remove it from the document");
  }
  const RegistryOptions& o = state_->options;
  if (doc.contains("endpoint") && doc["endpoint"].is_object()) {
    const json& e = doc["endpoint"];
    for (const char* key : {"base_url", "api_key_env", "deployment_secret_env"}) {
      if (e.contains(key)) {
        return refuse(std::string("endpoint.") + key,
                      "is the sidecar's (--upstream, --config): remove it from the document");
      }
    }
    if (e.contains("backend") && e["backend"] != o.backend) {
      return refuse("endpoint.backend", e["backend"].dump() +
                                            " differs from the sidecar's backend \"" + o.backend +
                                            "\": remove it or start the sidecar with --backend");
    }
  }
  if (doc.contains("identity") && doc["identity"].is_object()) {
    const json& identity = doc["identity"];
    if (identity.contains("id") && identity["id"] != std::string(agent_id)) {
      return refuse("identity.id", identity["id"].dump() + " differs from agent_id \"" +
                                       std::string(agent_id) + "\": omit it or make them equal");
    }
    if (identity.contains("tenant")) {
      return refuse("identity.tenant", "is set by the sidecar from the caller's token: remove it");
    }
  }
  StatusOr<AgentConfig> parsed = AgentConfigFromJson(config_json);
  if (!parsed.ok()) {
    return InvalidArgumentError("config_json: " + parsed.status().message());
  }
  AgentConfig config = std::move(parsed).value();
  StatusOr<std::string> tokenizer = ResolveTokenizer(config.tokenizer);
  if (!tokenizer.ok()) return InvalidArgumentError("config_json: " + tokenizer.status().message());
  config.tokenizer = std::move(tokenizer).value();
  config.identity.id = StoredId(tenant, agent_id);
  config.identity.tenant = tenant.name;
  config.endpoint.base_url = o.upstream;
  config.endpoint.backend = o.backend;
  config.endpoint.api_key_env = o.api_key_env;
  config.store_path.clear();
  return config;
}

StatusOr<std::string> AgentRegistry::ResolveTokenizer(std::string_view requested) const {
  return state_->tokenizers.Resolve(requested);
}

std::string AgentRegistry::ShownTokenizer(std::string_view spec) const {
  return state_->tokenizers.Shown(spec);
}

StatusOr<std::unique_ptr<Agent>> AgentRegistry::OpenStored(const std::string& stored_id) {
  State& s = *state_;
  const std::string local = stored_id.substr(stored_id.find('/') + 1);
  StatusOr<std::optional<std::string>> stored = s.store->GetAgentState(stored_id, kAgentConfigKey);
  if (!stored.ok()) {
    if (stored.status().code() == StatusCode::kNotFound) {
      return NotFoundError("no agent \"" + local + "\"");
    }
    return stored.status();
  }
  OpenOptions open;
  open.services.store = s.store.get();
  open.services.transport = s.options.transport;
  if (*stored) {
    // The endpoint is the sidecar's now (its --upstream may have changed since the agent was
    // made); the agent's other endpoint settings stay as stored.
    StatusOr<AgentConfig> config = AgentConfigFromJson(**stored);
    if (config.ok()) {
      AgentEndpointConfig endpoint = config->endpoint;
      if (endpoint.base_url != s.options.upstream || endpoint.backend != s.options.backend ||
          endpoint.api_key_env != s.options.api_key_env) {
        endpoint.base_url = s.options.upstream;
        endpoint.backend = s.options.backend;
        endpoint.api_key_env = s.options.api_key_env;
        open.endpoint = endpoint;
      }
    }
  }
  STRATA_RETURN_IF_ERROR(TakeLease(stored_id));
  StatusOr<std::unique_ptr<Agent>> agent = Agent::Open(*s.store, stored_id, std::move(open));
  if (!agent.ok()) {
    if (agent.status().code() == StatusCode::kNotFound) {
      return NotFoundError("no agent \"" + local + "\"");
    }
    return Status(agent.status().code(),
                  "agent \"" + local + "\" does not open: " + agent.status().message());
  }
  return agent;
}

bool AgentRegistry::shared_store() const { return state_->store->shared(); }

Status AgentRegistry::TakeLease(const std::string& stored_id) {
  State& s = *state_;
  if (!shared_store()) return Status::Ok();
  const auto deadline = std::chrono::steady_clock::now() + s.options.owner_wait;
  for (;;) {
    StatusOr<strata::AgentLease> lease = s.store->AcquireLease(stored_id);
    if (lease.ok()) return Status::Ok();
    const bool held_elsewhere = lease.status().code() == StatusCode::kUnavailable &&
                                lease.status().message().find(" is served by ") != std::string::npos;
    if (!held_elsewhere || s.waits_cancelled.load() ||
        std::chrono::steady_clock::now() >= deadline) {
      if (!held_elsewhere) return lease.status();
      return UnavailableError(lease.status().message() + " (waited " +
                              std::to_string(s.options.owner_wait.count()) + " ms)");
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
}

bool AgentRegistry::StillLeased(const std::string& stored_id) {
  if (!shared_store()) return true;
  // Renews it too; a store that cannot be reached keeps the agent (its writes fail on their own).
  StatusOr<strata::AgentLease> lease = state_->store->AcquireLease(stored_id);
  return lease.ok() || (lease.status().code() != StatusCode::kAborted &&
                        lease.status().message().find(" is served by ") == std::string::npos);
}

void AgentRegistry::CloseIdle(const AgentLease::Entry* keep) {
  State& s = *state_;
  const size_t max = s.options.max_open_agents;
  if (max == 0) return;
  std::vector<std::unique_ptr<Agent>> closed;  // destroyed after the registry's mutex is released
  std::vector<std::string> released;           // their leases, released after that
  {
    std::lock_guard<std::mutex> lock(s.mu);
    if (s.entries.size() <= max) return;
    std::vector<std::pair<uint64_t, std::shared_ptr<AgentLease::Entry>>> idle;
    for (const auto& [id, entry] : s.entries) {
      if (entry.get() != keep) idle.emplace_back(entry->last_used.load(), entry);
    }
    std::sort(idle.begin(), idle.end(),
              [](const auto& a, const auto& b) { return a.first < b.first; });
    size_t excess = s.entries.size() - max;
    for (auto& [used, entry] : idle) {
      if (excess == 0) break;
      // try_lock: never waits while holding the registry's mutex; a leased agent is not idle.
      std::unique_lock<std::timed_mutex> agent_lock(entry->mu, std::try_to_lock);
      if (!agent_lock.owns_lock() || entry->deleted || !entry->agent) continue;
      entry->deleted = true;
      closed.push_back(std::move(entry->agent));
      released.push_back(entry->stored_id);
      s.entries.erase(entry->stored_id);
      --excess;
    }
  }
  closed.clear();
  // A closed agent's lease goes too: another sidecar may serve it at once.
  for (const std::string& id : released) s.store->ReleaseLease(id).IgnoreError();
}

size_t AgentRegistry::ReleaseIdle() {
  State& s = *state_;
  if (!shared_store() || s.options.idle_release.count() <= 0) return 0;
  const int64_t idle_us = s.options.idle_release.count() * 1000;
  const int64_t now_us = s.time->NowMicros();
  std::vector<std::unique_ptr<Agent>> closed;  // destroyed after the registry's mutex is released
  std::vector<std::string> released;           // their leases, released after that
  {
    std::lock_guard<std::mutex> lock(s.mu);
    for (auto it = s.entries.begin(); it != s.entries.end();) {
      const std::shared_ptr<AgentLease::Entry> entry = it->second;  // outlives agent_lock
      if (now_us - entry->active_us.load() < idle_us) {
        ++it;
        continue;
      }
      // try_lock: never waits while holding the registry's mutex; a leased agent is not idle.
      std::unique_lock<std::timed_mutex> agent_lock(entry->mu, std::try_to_lock);
      if (!agent_lock.owns_lock() || entry->deleted || !entry->agent) {
        ++it;
        continue;
      }
      entry->deleted = true;
      closed.push_back(std::move(entry->agent));
      released.push_back(entry->stored_id);
      it = s.entries.erase(it);
    }
  }
  closed.clear();
  for (const std::string& id : released) s.store->ReleaseLease(id).IgnoreError();
  return released.size();
}

size_t AgentRegistry::OpenAgents() {
  std::lock_guard<std::mutex> lock(state_->mu);
  size_t n = 0;
  for (const auto& [id, entry] : state_->entries) n += entry->agent != nullptr ? 1 : 0;
  return n;
}

Status AgentRegistry::Reopen(AgentLease& lease) {
  STRATA_ASSIGN_OR_RETURN(std::unique_ptr<Agent> agent, OpenStored(lease.stored_id()));
  lease.entry_->agent = std::move(agent);
  return Status::Ok();
}

Status AgentRegistry::LockWithin(std::unique_lock<std::timed_mutex>& lock,
                                 const std::string& stored_id) {
  const State& s = *state_;
  const auto wait = s.options.lease_wait;
  const auto deadline = std::chrono::steady_clock::now() + wait;
  if (lock.try_lock()) return Status::Ok();
  // In slices, so that CancelWaits() is noticed while waiting.
  while (!s.waits_cancelled.load()) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (wait.count() > 0 && left.count() <= 0) {
      return UnavailableError("agent \"" + stored_id.substr(stored_id.find('/') + 1) +
                              "\" is busy: another call has held it for lease_wait_ms = " +
                              std::to_string(wait.count()) +
                              " ms (a Complete holds its agent until its answer ends): retry "
                              "later, or raise the sidecar's lease_wait_ms");
    }
    const auto slice = wait.count() > 0 ? std::min(left, std::chrono::milliseconds(100))
                                        : std::chrono::milliseconds(100);
    if (lock.try_lock_for(slice)) return Status::Ok();
  }
  return UnavailableError("the sidecar is shutting down: this call waited for agent \"" +
                          stored_id.substr(stored_id.find('/') + 1) +
                          "\" past the drain deadline (retry on another instance)");
}

void AgentRegistry::CancelWaits() { state_->waits_cancelled.store(true); }

StatusOr<AgentLease> AgentRegistry::AcquireStored(const std::string& stored_id) {
  State& s = *state_;
  for (int attempt = 0; attempt < 8; ++attempt) {
    std::shared_ptr<AgentLease::Entry> entry;
    {
      std::lock_guard<std::mutex> lock(s.mu);
      auto it = s.entries.find(stored_id);
      if (it != s.entries.end()) {
        entry = it->second;
      } else {
        entry = std::make_shared<AgentLease::Entry>();
        entry->clock = s.time;
        entry->stored_id = stored_id;
        size_t slash = stored_id.find('/');
        entry->tenant = stored_id.substr(0, slash);
        entry->local_id = stored_id.substr(slash + 1);
        s.entries.emplace(stored_id, entry);
      }
    }
    std::unique_lock<std::timed_mutex> agent_lock(entry->mu, std::defer_lock);
    STRATA_RETURN_IF_ERROR(LockWithin(agent_lock, stored_id));
    if (entry->deleted) continue;  // deleted while we waited: look again (it may be recreated)
    // Taken over by another sidecar since it was opened here: reopen from the store.
    if (entry->agent && !StillLeased(stored_id)) entry->agent.reset();
    if (!entry->agent) {
      auto forget = [&]() {
        entry->deleted = true;
        std::lock_guard<std::mutex> lock(s.mu);
        auto it = s.entries.find(stored_id);
        if (it != s.entries.end() && it->second == entry) s.entries.erase(it);
      };
      StatusOr<std::unique_ptr<Agent>> agent = OpenStored(stored_id);
      if (!agent.ok()) {
        forget();
        return agent.status();
      }
      entry->agent = std::move(agent).value();
      CloseIdle(entry.get());
    }
    entry->last_used = ++s.clock;
    entry->MarkActive();
    return AgentLease(std::move(entry), std::move(agent_lock));
  }
  return NotFoundError("no agent \"" + stored_id.substr(stored_id.find('/') + 1) +
                       "\" (it was deleted)");
}

StatusOr<AgentLease> AgentRegistry::Acquire(const TenantConfig& tenant, std::string_view agent_id) {
  STRATA_RETURN_IF_ERROR(CheckAgentId(agent_id));
  return AcquireStored(StoredId(tenant, agent_id));
}

StatusOr<AgentLease> AgentRegistry::AcquireOrCreate(const TenantConfig& tenant,
                                                    std::string_view agent_id,
                                                    const AgentConfig* config) {
  STRATA_RETURN_IF_ERROR(CheckAgentId(agent_id));
  StatusOr<AgentLease> lease = AcquireStored(StoredId(tenant, agent_id));
  if (lease.ok() || lease.status().code() != StatusCode::kNotFound) return lease;
  AgentConfig made = config != nullptr ? *config : DefaultConfig(tenant, agent_id);
  lease = Create(tenant, agent_id, std::move(made));
  if (lease.status().code() == StatusCode::kAlreadyExists) {  // created by a concurrent call
    return AcquireStored(StoredId(tenant, agent_id));
  }
  return lease;
}

Status AgentRegistry::CheckCanAdd(const TenantConfig& tenant) {
  const int64_t max = tenant.limits.max_agents;
  if (max <= 0) return Status::Ok();
  std::lock_guard<std::mutex> lock(state_->mu);
  auto it = state_->agent_counts.find(tenant.name);
  int64_t n = it == state_->agent_counts.end() ? 0 : it->second;
  auto pending = state_->pending.find(tenant.name);  // being made now: they count already
  if (pending != state_->pending.end()) n += pending->second;
  if (n >= max) {
    return ResourceExhaustedError("tenant \"" + tenant.name + "\" has " + std::to_string(n) +
                                  " agents, its limit max_agents = " + std::to_string(max) +
                                  ": delete agents or raise the tenant's limits.max_agents");
  }
  return Status::Ok();
}

StatusOr<AgentLease> AgentRegistry::Create(const TenantConfig& tenant, std::string_view agent_id,
                                           AgentConfig config) {
  STRATA_RETURN_IF_ERROR(CheckAgentId(agent_id));
  STRATA_RETURN_IF_ERROR(CheckAgentConfigRanges(config));  // e.g. an AgentSpec's window
  State& s = *state_;
  const RegistryOptions& o = s.options;
  config.identity.id = StoredId(tenant, agent_id);
  config.identity.tenant = tenant.name;
  config.endpoint.base_url = o.upstream;
  config.endpoint.backend = o.backend;
  config.endpoint.api_key_env = o.api_key_env;
  config.store_path.clear();
  auto taken = [&]() {
    return AlreadyExistsError("agent \"" + std::string(agent_id) +
                              "\" exists: open it, or delete it first");
  };
  const std::string stored_id = config.identity.id;
  std::unique_lock<std::mutex> create_lock(s.create_mu);
  // Another creation of the same id: wait for its end (it is this tenant's own call).
  s.created.wait(create_lock, [&] { return s.creating.count(stored_id) == 0; });
  if (s.store->GetAgent(stored_id).ok()) return taken();
  STRATA_RETURN_IF_ERROR(CheckCanAdd(tenant));
  s.creating.insert(stored_id);
  {
    std::lock_guard<std::mutex> lock(s.mu);
    ++s.pending[tenant.name];
  }
  create_lock.unlock();
  // Loading the tokenizer and writing the store take time (a large tokenizer.json): no lock held.
  if (o.before_create) o.before_create(stored_id);
  AgentServices services;
  services.store = s.store.get();
  services.transport = o.transport;
  Status leased = TakeLease(stored_id);  // a new agent is served by the sidecar that made it
  StatusOr<std::unique_ptr<Agent>> agent =
      leased.ok() ? Agent::Create(std::move(config), services) : StatusOr<std::unique_ptr<Agent>>(leased);
  // Registered (counted) before its reservation ends, so that max_agents never lets one more in;
  // with no lock held, since Adopt locks agents' mutexes (the lock order is entry, then registry).
  StatusOr<AgentLease> lease =
      !agent.ok() ? StatusOr<AgentLease>(agent.status()) : Adopt(tenant, std::move(agent).value());
  {
    std::lock_guard<std::mutex> lock(s.mu);
    if (--s.pending[tenant.name] == 0) s.pending.erase(tenant.name);
  }
  create_lock.lock();
  s.creating.erase(stored_id);
  create_lock.unlock();
  s.created.notify_all();
  if (!lease.ok() && lease.status().code() == StatusCode::kAlreadyExists) return taken();
  return lease;
}

StatusOr<AgentLease> AgentRegistry::Adopt(const TenantConfig& tenant,
                                          std::unique_ptr<Agent> agent) {
  State& s = *state_;
  const std::string stored_id = agent->id();
  std::string local = LocalId(tenant, stored_id);
  if (local.empty()) {
    return InternalError("agent id \"" + stored_id + "\" is not within tenant \"" + tenant.name +
                         "\"");
  }
  auto entry = std::make_shared<AgentLease::Entry>();
  entry->clock = s.time;
  entry->stored_id = stored_id;
  entry->local_id = local;
  entry->tenant = tenant.name;
  entry->agent = std::move(agent);
  std::unique_lock<std::timed_mutex> agent_lock(entry->mu);
  std::shared_ptr<AgentLease::Entry> stale;
  {
    std::lock_guard<std::mutex> lock(s.mu);
    auto it = s.entries.find(stored_id);
    if (it != s.entries.end()) stale = it->second;
    s.entries[stored_id] = entry;
    ++s.agent_counts[tenant.name];
  }
  if (stale) {
    // An entry of a failed open still in the map: whoever waits on it looks again and finds this
    // one. Locked after s.mu is released (the lock order is entry, then registry).
    std::lock_guard<std::timed_mutex> old(stale->mu);
    stale->deleted = true;
  }
  entry->last_used = ++s.clock;
  entry->MarkActive();
  CloseIdle(entry.get());
  return AgentLease(std::move(entry), std::move(agent_lock));
}

StatusOr<std::pair<AgentLease, AgentLease>> AgentRegistry::AcquirePair(const TenantConfig& tenant,
                                                                       std::string_view first,
                                                                       std::string_view second) {
  STRATA_RETURN_IF_ERROR(CheckAgentId(first));
  STRATA_RETURN_IF_ERROR(CheckAgentId(second, "child_id"));
  if (first == second) {
    return InvalidArgumentError("agent_id and child_id are both \"" + std::string(first) +
                                "\": an agent cannot join itself");
  }
  const bool in_order = first < second;
  STRATA_ASSIGN_OR_RETURN(AgentLease a, Acquire(tenant, in_order ? first : second));
  STRATA_ASSIGN_OR_RETURN(AgentLease b, Acquire(tenant, in_order ? second : first));
  if (in_order) return std::make_pair(std::move(a), std::move(b));
  return std::make_pair(std::move(b), std::move(a));
}

Status AgentRegistry::Delete(const TenantConfig& tenant, std::string_view agent_id) {
  STRATA_ASSIGN_OR_RETURN(AgentLease lease, Acquire(tenant, agent_id));
  State& s = *state_;
  std::lock_guard<std::mutex> create_lock(s.create_mu);
  lease.entry_->agent.reset();  // stop writing before deleting its rows
  Status deleted = s.store->DeleteAgent(lease.stored_id());
  lease.entry_->deleted = true;
  {
    std::lock_guard<std::mutex> lock(s.mu);
    auto it = s.entries.find(lease.stored_id());
    if (it != s.entries.end() && it->second == lease.entry_) s.entries.erase(it);
    if (deleted.ok()) --s.agent_counts[tenant.name];
  }
  return deleted;
}

StatusOr<std::vector<StoredAgent>> AgentRegistry::List(const TenantConfig& tenant) {
  STRATA_ASSIGN_OR_RETURN(std::vector<StoredAgent> all, state_->store->ListAgents());
  std::vector<StoredAgent> mine;
  for (StoredAgent& a : all) {
    std::string local = LocalId(tenant, a.options.agent.id);
    if (local.empty()) continue;
    a.options.agent.id = local;
    mine.push_back(std::move(a));
  }
  return mine;
}

StatusOr<StoredAgent> AgentRegistry::Info(const TenantConfig& tenant, std::string_view agent_id) {
  STRATA_RETURN_IF_ERROR(CheckAgentId(agent_id));
  StatusOr<StoredAgent> a = state_->store->GetAgent(StoredId(tenant, agent_id));
  if (!a.ok()) {
    // The store's message lists other agents' ids: never show it across tenants.
    if (a.status().code() == StatusCode::kNotFound) {
      return NotFoundError("no agent \"" + std::string(agent_id) + "\"");
    }
    return a.status();
  }
  a->options.agent.id = std::string(agent_id);
  return a;
}

int64_t AgentRegistry::AgentCount(const TenantConfig& tenant) {
  std::lock_guard<std::mutex> lock(state_->mu);
  auto it = state_->agent_counts.find(tenant.name);
  return it == state_->agent_counts.end() ? 0 : it->second;
}

StatusOr<CompletionSlot> AgentRegistry::BeginCompletion(const TenantConfig& tenant) {
  std::shared_ptr<std::atomic<int64_t>> counter;
  {
    std::lock_guard<std::mutex> lock(state_->mu);
    auto& c = state_->completions[tenant.name];
    if (!c) c = std::make_shared<std::atomic<int64_t>>(0);
    counter = c;
  }
  const int64_t max = tenant.limits.max_concurrent_completions;
  int64_t n = counter->fetch_add(1) + 1;
  if (max > 0 && n > max) {
    counter->fetch_sub(1);
    return ResourceExhaustedError(
        "tenant \"" + tenant.name + "\" has " + std::to_string(max) +
        " completions in progress, its limit max_concurrent_completions = " + std::to_string(max) +
        ": retry when one ends, or raise the tenant's limits.max_concurrent_completions");
  }
  return CompletionSlot(std::move(counter));
}

int64_t AgentRegistry::CompletionsInFlight(const TenantConfig& tenant) {
  std::lock_guard<std::mutex> lock(state_->mu);
  auto it = state_->completions.find(tenant.name);
  return it == state_->completions.end() ? 0 : it->second->load();
}

}  // namespace strata::sidecar
