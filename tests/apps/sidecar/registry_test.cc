#include "registry.h"

#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <catch2/catch.hpp>
#include <chrono>
#include <cstdio>
#include <future>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "testing/fake_clock.h"
#include "testing/postgres_testing.h"
#include "testing/scripted_transport.h"
#include "testing/status_testing.h"
#include "testing/wait_for.h"

namespace strata::sidecar {
namespace {

std::string TempStore(const std::string& name) {
  std::string path = "/tmp/strata-sidecar-test-" + std::to_string(::getpid()) + "-" + name;
  for (const char* suffix : {"", "-wal", "-shm"}) std::remove((path + suffix).c_str());
  return path;
}

TenantConfig Tenant(const std::string& name, int64_t max_agents = 0, int64_t max_completions = 0) {
  TenantConfig t;
  t.name = name;
  t.limits.max_agents = max_agents;
  t.limits.max_concurrent_completions = max_completions;
  return t;
}

std::unique_ptr<AgentRegistry> OpenRegistry(const std::string& path, Transport* transport = nullptr,
                                            size_t max_open_agents = 1024) {
  RegistryOptions options;
  options.store_path = path;
  options.max_open_agents = max_open_agents;
  options.upstream = "http://127.0.0.1:9/v1";
  options.transport = transport;
  StatusOr<std::unique_ptr<AgentRegistry>> registry = AgentRegistry::Open(options);
  REQUIRE(registry.ok());
  return std::move(registry).value();
}

TEST_CASE("registry: agent ids", "[sidecar][registry]") {
  CHECK(IsValidAgentId("agent-1.v2_x"));
  CHECK_FALSE(IsValidAgentId(""));
  CHECK_FALSE(IsValidAgentId("team/agent"));  // '/' separates the tenant in the store
  CHECK_FALSE(IsValidAgentId("a b"));
  CHECK_FALSE(IsValidAgentId(std::string(129, 'a')));
  Status s = CheckAgentId("a/b");
  CHECK(s.code() == StatusCode::kInvalidArgument);
  CHECK_THAT(s.message(), Catch::Contains("agent_id \"a/b\" is not a valid agent id"));
  CHECK_THAT(CheckAgentId("", "child_id").message(), Catch::Contains("child_id \"\" is empty"));
}

TEST_CASE("registry: agents are namespaced by tenant", "[sidecar][registry]") {
  const std::string path = TempStore("tenants.db");
  auto registry = OpenRegistry(path);
  TenantConfig a = Tenant("team-a");
  TenantConfig b = Tenant("team-b");
  {
    StatusOr<AgentLease> lease =
        registry->Create(a, "shared-name", registry->DefaultConfig(a, "x"));
    REQUIRE(lease.ok());
    CHECK(lease->id() == "shared-name");
    CHECK(lease->stored_id() == "team-a/shared-name");
    CHECK(lease->agent().config().identity.tenant == "team-a");
    REQUIRE(lease->agent().AppendUser("from a").ok());
  }
  // Another tenant may use the same id: a different agent.
  REQUIRE(registry->Create(b, "shared-name", registry->DefaultConfig(b, "x")).ok());
  REQUIRE(registry->Create(a, "only-a", registry->DefaultConfig(a, "x")).ok());

  StatusOr<AgentLease> theirs = registry->Acquire(b, "only-a");
  CHECK(theirs.status().code() == StatusCode::kNotFound);
  CHECK(theirs.status().message() == "no agent \"only-a\"");
  CHECK(registry->Info(b, "only-a").status().code() == StatusCode::kNotFound);
  CHECK(registry->Delete(b, "only-a").code() == StatusCode::kNotFound);
  CHECK(registry->Acquire(a, "only-a").ok());  // still there

  StatusOr<std::vector<StoredAgent>> listed = registry->List(a);
  REQUIRE(listed.ok());
  REQUIRE(listed->size() == 2);
  CHECK((*listed)[0].options.agent.id == "only-a");
  CHECK((*listed)[1].options.agent.id == "shared-name");
  listed = registry->List(b);
  REQUIRE(listed->size() == 1);
  CHECK((*listed)[0].segments == 1);  // b's agent (its tools layer), not a's (plus a message)
  CHECK(registry->Info(a, "shared-name").value().segments == 2);
  CHECK(registry->AgentCount(a) == 2);
  CHECK(registry->AgentCount(b) == 1);
  registry.reset();
}

TEST_CASE("registry: one registry per store", "[sidecar][registry]") {
  const std::string path = TempStore("lock.db");
  auto first = OpenRegistry(path);
  RegistryOptions options;
  options.store_path = path;
  StatusOr<std::unique_ptr<AgentRegistry>> second = AgentRegistry::Open(options);
  CHECK(second.status().code() == StatusCode::kFailedPrecondition);
  CHECK_THAT(second.status().message(), Catch::Contains("in use by another strata-sidecar"));
  first.reset();
  CHECK(AgentRegistry::Open(options).ok());
}

TEST_CASE("registry: a second registry is refused through a symlink or a hard link",
          "[sidecar][registry]") {
  const std::string path = TempStore("linked.db");
  const std::string symlink = TempStore("linked-symlink.db");
  const std::string hard_link = TempStore("linked-hard.db");
  auto first = OpenRegistry(path);
  REQUIRE(::symlink(path.c_str(), symlink.c_str()) == 0);
  REQUIRE(::link(path.c_str(), hard_link.c_str()) == 0);
  for (const std::string& name : {symlink, hard_link}) {
    RegistryOptions options;
    options.store_path = name;
    StatusOr<std::unique_ptr<AgentRegistry>> second = AgentRegistry::Open(options);
    CHECK(second.status().code() == StatusCode::kFailedPrecondition);
    CHECK_THAT(second.status().message(),
               Catch::Contains("in use by another strata-sidecar") && Catch::Contains(name) &&
                   Catch::Contains("this process") && Catch::Contains("another --store"));
  }
  first.reset();
  std::remove(symlink.c_str());
  std::remove(hard_link.c_str());
}

TEST_CASE("registry: the store is opened with the configured durability", "[sidecar][registry]") {
  const std::string path = TempStore("sync.db");
  for (StoreSync sync : {StoreSync::kNormal, StoreSync::kFull}) {
    RegistryOptions options;
    options.store_path = path;
    options.store_sync = sync;
    StatusOr<std::unique_ptr<AgentRegistry>> registry = AgentRegistry::Open(options);
    REQUIRE(registry.ok());
    StatusOr<StoreStats> stats = (*registry)->store().Stats();
    REQUIRE(stats.ok());
    CHECK(stats->synchronous == sync);  // PRAGMA synchronous on the registry's connection
  }
}

TEST_CASE("registry: agents reopen from the store", "[sidecar][registry]") {
  const std::string path = TempStore("reopen.db");
  TenantConfig t = Tenant("t");
  std::string body;
  {
    auto registry = OpenRegistry(path);
    StatusOr<AgentLease> lease = registry->Create(t, "a1", registry->DefaultConfig(t, "a1"));
    REQUIRE(lease.ok());
    REQUIRE(lease->agent().SetSystemPrompt("You are a test agent.").ok());
    REQUIRE(lease->agent().AppendUser("hello").ok());
    body = lease->agent().context().Build().value().body;
  }
  auto registry = OpenRegistry(path);
  CHECK(registry->AgentCount(t) == 1);
  StatusOr<AgentLease> lease = registry->Acquire(t, "a1");
  REQUIRE(lease.ok());
  CHECK(lease->agent().context().Build().value().body == body);
  CHECK(registry->Acquire(t, "a2").status().code() == StatusCode::kNotFound);
}

TEST_CASE("registry: idle agents beyond max_open_agents are closed and reopen as they were",
          "[sidecar][registry]") {
  const std::string path = TempStore("idle.db");
  auto registry = OpenRegistry(path, nullptr, /*max_open_agents=*/2);
  TenantConfig t = Tenant("t");
  std::vector<std::string> bodies;
  for (int i = 0; i < 5; ++i) {
    const std::string id = "a" + std::to_string(i);
    StatusOr<AgentLease> lease = registry->Create(t, id, registry->DefaultConfig(t, id));
    REQUIRE(lease.ok());
    REQUIRE(lease->agent().AppendUser("message of " + id).ok());
    bodies.push_back(lease->agent().context().Build().value().body);
  }
  CHECK(registry->OpenAgents() == 2);
  for (int round = 0; round < 2; ++round) {
    for (int i = 0; i < 5; ++i) {
      StatusOr<AgentLease> lease = registry->Acquire(t, "a" + std::to_string(i));
      REQUIRE(lease.ok());
      CHECK(lease->agent().context().Build().value().body == bodies[i]);
    }
  }
  CHECK(registry->OpenAgents() == 2);
  // A leased agent is never closed: with two leases held, a third open goes beyond the limit.
  StatusOr<AgentLease> a = registry->Acquire(t, "a0");
  StatusOr<AgentLease> b = registry->Acquire(t, "a1");
  StatusOr<AgentLease> c = registry->Acquire(t, "a2");
  REQUIRE((a.ok() && b.ok() && c.ok()));
  CHECK(registry->OpenAgents() == 3);
  REQUIRE(a->agent().AppendUser("still mine").ok());
  CHECK(registry->AgentCount(t) == 5);
}

TEST_CASE("registry: closing idle agents under concurrent use [concurrency]",
          "[sidecar][registry][concurrency]") {
  const std::string path = TempStore("idle-threads.db");
  auto registry = OpenRegistry(path, nullptr, /*max_open_agents=*/1);
  TenantConfig t = Tenant("t");
  for (int i = 0; i < 3; ++i) {
    const std::string id = "a" + std::to_string(i);
    REQUIRE(registry->Create(t, id, registry->DefaultConfig(t, id)).ok());
  }
  std::atomic<int> failures{0};
  std::vector<std::thread> threads;
  for (int n = 0; n < 6; ++n) {
    threads.emplace_back([&, n] {
      for (int k = 0; k < 10; ++k) {
        StatusOr<AgentLease> lease = registry->Acquire(t, "a" + std::to_string((n + k) % 3));
        if (!lease.ok() ||
            !lease->agent().AppendUser(std::to_string(n) + "." + std::to_string(k)).ok()) {
          ++failures;
        }
      }
    });
  }
  for (std::thread& th : threads) th.join();
  CHECK(failures == 0);
  size_t messages = 0;
  for (int i = 0; i < 3; ++i) {
    StatusOr<AgentLease> lease = registry->Acquire(t, "a" + std::to_string(i));
    REQUIRE(lease.ok());
    messages += lease->agent().context().Stats().layers[static_cast<int>(Layer::kHistory)].segments;
  }
  CHECK(messages == 60);  // every append arrived once, whichever instance served it
}

TEST_CASE("registry: waiting for a leased agent is bounded, and ends when waits are cancelled",
          "[sidecar][registry]") {
  const std::string path = TempStore("lease-wait.db");
  RegistryOptions options;
  options.store_path = path;
  options.upstream = "http://127.0.0.1:9/v1";
  options.lease_wait = std::chrono::milliseconds(50);
  auto registry = std::move(AgentRegistry::Open(options)).value();
  const TenantConfig t = Tenant("t");
  StatusOr<AgentLease> held = registry->Create(t, "busy", registry->DefaultConfig(t, "busy"));
  REQUIRE(held.ok());
  // Another thread's call on the held agent gives up after lease_wait, naming it.
  Status waited;
  std::thread other([&] { waited = registry->Acquire(t, "busy").status(); });
  other.join();
  CHECK(waited.code() == StatusCode::kUnavailable);
  CHECK_THAT(waited.message(),
             Catch::Contains("agent \"busy\" is busy: another call has held it for "
                             "lease_wait_ms = 50 ms"));
  // After CancelWaits (a drain's deadline) a wait fails at once, whatever lease_wait is.
  registry->CancelWaits();
  std::thread late([&] { waited = registry->Acquire(t, "busy").status(); });
  late.join();
  CHECK(waited.code() == StatusCode::kUnavailable);
  CHECK_THAT(waited.message(), Catch::Contains("the sidecar is shutting down"));
  held = AgentLease();
  CHECK(registry->Acquire(t, "busy").ok());  // a free agent is still leased
}

TEST_CASE("registry: max_agents per tenant", "[sidecar][registry]") {
  const std::string path = TempStore("limit.db");
  auto registry = OpenRegistry(path);
  TenantConfig t = Tenant("small", /*max_agents=*/2);
  REQUIRE(registry->Create(t, "a", registry->DefaultConfig(t, "a")).ok());
  REQUIRE(registry->AcquireOrCreate(t, "b", nullptr).ok());
  StatusOr<AgentLease> third = registry->Create(t, "c", registry->DefaultConfig(t, "c"));
  CHECK(third.status().code() == StatusCode::kResourceExhausted);
  CHECK_THAT(third.status().message(), Catch::Contains("max_agents = 2"));
  CHECK_THAT(third.status().message(), Catch::Contains("tenant \"small\""));
  CHECK(registry->AcquireOrCreate(t, "c", nullptr).status().code() ==
        StatusCode::kResourceExhausted);
  CHECK(registry->AcquireOrCreate(t, "a", nullptr).ok());  // existing agents still open
  REQUIRE(registry->Delete(t, "a").ok());
  CHECK(registry->Create(t, "c", registry->DefaultConfig(t, "c")).ok());
  CHECK(registry->Create(t, "b", registry->DefaultConfig(t, "b")).status().code() ==
        StatusCode::kAlreadyExists);
  // Other tenants are not affected.
  TenantConfig other = Tenant("other", 1);
  CHECK(registry->Create(other, "a", registry->DefaultConfig(other, "a")).ok());
}

TEST_CASE("registry: concurrent completions per tenant", "[sidecar][registry]") {
  const std::string path = TempStore("slots.db");
  auto registry = OpenRegistry(path);
  TenantConfig t = Tenant("t", 0, /*max_completions=*/2);
  TenantConfig other = Tenant("u", 0, 1);
  StatusOr<CompletionSlot> one = registry->BeginCompletion(t);
  StatusOr<CompletionSlot> two = registry->BeginCompletion(t);
  REQUIRE(one.ok());
  REQUIRE(two.ok());
  CHECK(registry->CompletionsInFlight(t) == 2);
  StatusOr<CompletionSlot> three = registry->BeginCompletion(t);
  CHECK(three.status().code() == StatusCode::kResourceExhausted);
  CHECK_THAT(three.status().message(), Catch::Contains("max_concurrent_completions = 2"));
  CHECK(registry->BeginCompletion(other).ok());  // per tenant
  { CompletionSlot released = std::move(one).value(); }
  CHECK(registry->CompletionsInFlight(t) == 1);
  CHECK(registry->BeginCompletion(t).ok());
}

TEST_CASE("registry: a client's configuration never sets the endpoint or the store",
          "[sidecar][registry]") {
  const std::string path = TempStore("adopt.db");
  auto registry = OpenRegistry(path);
  TenantConfig t = Tenant("t");
  struct Case {
    std::string json;
    std::string message;
  };
  const Case refused[] = {
      {R"({"store_path": "/tmp/x.db"})", "store_path is the sidecar's"},
      {R"({"endpoint": {"base_url": "http://evil.example/v1"}})", "endpoint.base_url"},
      {R"({"endpoint": {"api_key_env": "HOME"}})", "endpoint.api_key_env"},
      {R"({"endpoint": {"deployment_secret_env": "X"}})", "endpoint.deployment_secret_env"},
      {R"({"endpoint": {"backend": "openai"}})", "differs from the sidecar's backend \"vllm\""},
      {R"({"identity": {"id": "other"}})", "identity.id \"other\" differs from agent_id"},
      {R"({"identity": {"tenant": "someone-else"}})", "identity.tenant"},
      {R"({"budget": {"window": "big"}})", "config_json: budget.window"},
      {R"([])", "not a JSON object"},
  };
  for (const Case& c : refused) {
    INFO(c.json);
    StatusOr<AgentConfig> config = registry->AdoptClientConfig(t, "a", c.json);
    REQUIRE_FALSE(config.ok());
    CHECK(config.status().code() == StatusCode::kInvalidArgument);
    CHECK_THAT(config.status().message(), Catch::Contains(c.message));
  }
  StatusOr<AgentConfig> config =
      registry->AdoptClientConfig(t, "a", R"({"identity": {"id": "a"}, "budget": {"window": 65536},
                  "endpoint": {"backend": "vllm", "max_output_tokens": 128}})");
  REQUIRE(config.ok());
  CHECK(config->identity.id == "t/a");
  CHECK(config->identity.tenant == "t");
  CHECK(config->budget.window == 65536);
  CHECK(config->endpoint.max_output_tokens == 128);
  CHECK(config->endpoint.base_url == "http://127.0.0.1:9/v1");
}

// Threads racing for two agents, for ThreadSanitizer; that a held lease keeps another call out is
// shown deterministically by the lease_wait case above (a call on a held agent fails after the
// wait).
TEST_CASE("registry: one agent's operations are serialized [concurrency]",
          "[sidecar][registry][concurrency]") {
  const std::string path = TempStore("serial.db");
  auto registry = OpenRegistry(path);
  TenantConfig t = Tenant("t");
  REQUIRE(registry->Create(t, "a", registry->DefaultConfig(t, "a")).ok());
  REQUIRE(registry->Create(t, "b", registry->DefaultConfig(t, "b")).ok());
  std::atomic<int> inside_a{0};
  std::atomic<int> max_inside_a{0};
  std::atomic<int> failures{0};
  std::vector<std::thread> threads;
  for (int i = 0; i < 6; ++i) {
    threads.emplace_back([&, i] {
      for (int k = 0; k < 5; ++k) {
        const char* id = (i % 2 == 0) ? "a" : "b";
        StatusOr<AgentLease> lease = registry->Acquire(t, id);
        if (!lease.ok()) {
          ++failures;
          continue;
        }
        if (i % 2 == 0) {
          int now = ++inside_a;
          int seen = max_inside_a.load();
          while (now > seen && !max_inside_a.compare_exchange_weak(seen, now)) {
          }
        }
        if (!lease->agent()
                 .AppendUser("message " + std::to_string(i) + "." + std::to_string(k))
                 .ok()) {
          ++failures;
        }
        if (i % 2 == 0) --inside_a;
      }
    });
  }
  for (std::thread& th : threads) th.join();
  CHECK(failures == 0);
  CHECK(max_inside_a == 1);
  StatusOr<AgentLease> a = registry->Acquire(t, "a");
  REQUIRE(a.ok());
  CHECK(a->agent().context().Stats().layers[static_cast<int>(Layer::kHistory)].segments == 15);
}

TEST_CASE("registry: agents complete through the injected transport", "[sidecar][registry]") {
  const std::string path = TempStore("complete.db");
  strata::testing::ScriptedTransport transport;
  transport.Reply("Hello from upstream.");
  auto registry = OpenRegistry(path, &transport);
  TenantConfig t = Tenant("t");
  StatusOr<AgentLease> lease = registry->AcquireOrCreate(t, "a", nullptr);
  REQUIRE(lease.ok());
  REQUIRE(lease->agent().AppendUser("hi").ok());
  StatusOr<Turn> turn = lease->agent().Complete();
  REQUIRE(turn.ok());
  CHECK(turn->response.content == "Hello from upstream.");
  CHECK(turn->record.agent_id == "t/a");
  StatusOr<std::vector<RequestRecord>> records = registry->store().RecentRequests("t/a", 10);
  REQUIRE(records.ok());
  CHECK(records->size() == 1);
}

TEST_CASE("registry: tenants name tokenizers from the operator's allow-list",
          "[sidecar][registry][tokenizers]") {
  const std::string path = TempStore("allowlist.db");
  RegistryOptions options;
  options.store_path = path;
  options.upstream = "http://127.0.0.1:9/v1";
  options.tokenizers = {{"fast", "estimate:3"}, {"glm", "hf:/srv/glm/tokenizer.json"}};
  options.tokenizer = "fast";
  StatusOr<std::unique_ptr<AgentRegistry>> opened = AgentRegistry::Open(options);
  REQUIRE(opened.ok());
  AgentRegistry& registry = **opened;
  TenantConfig t = Tenant("t");
  CHECK(registry.DefaultConfig(t, "a").tokenizer == "estimate:3");
  StatusOr<AgentConfig> named = registry.AdoptClientConfig(t, "a", R"({"tokenizer": "fast"})");
  REQUIRE(named.ok());
  CHECK(named->tokenizer == "estimate:3");
  REQUIRE(registry.Create(t, "a", *named).ok());
  CHECK(registry.ShownTokenizer("hf:/srv/glm/tokenizer.json") == "glm");

  // A readable file, a missing one and one only the sidecar's user may read (mode 0600) are
  // refused alike: nothing tells them apart, no hash of their bytes.
  const std::string secret = path + ".secret";
  {
    std::FILE* f = std::fopen(secret.c_str(), "w");
    REQUIRE(f != nullptr);
    std::fputs("{\"model\": {\"type\": \"BPE\"}}", f);
    std::fclose(f);
    REQUIRE(::chmod(secret.c_str(), 0600) == 0);
  }
  std::vector<std::string> messages;
  for (const std::string& file : {std::string("/etc/passwd"), std::string("/nonexistent/t.json"),
                                 secret}) {
    for (const std::string& prefix : {std::string("hf:"), std::string("spm:")}) {
      const std::string spec = prefix + file;
      StatusOr<AgentConfig> refused =
          registry.AdoptClientConfig(t, "b", nlohmann::json{{"tokenizer", spec}}.dump());
      REQUIRE_FALSE(refused.ok());
      CHECK(refused.status().code() == StatusCode::kInvalidArgument);
      std::string message = refused.status().message();
      message.replace(message.find(spec), spec.size(), "X");
      messages.push_back(message);
      StatusOr<std::string> resolved = registry.ResolveTokenizer(spec);
      REQUIRE_FALSE(resolved.ok());
      CHECK("config_json: " + resolved.status().message() == refused.status().message());
    }
  }
  for (const std::string& m : messages) {
    CHECK(m == "config_json: tokenizer \"X\" is not one of the allowed tokenizers: fast, glm (or "
               "a spec that reads no file: estimate, estimate:BYTES_PER_TOKEN, estimate:FAMILY)");
  }
  std::remove(secret.c_str());
  CHECK_FALSE(registry.Info(t, "b").ok());  // nothing was made
}

TEST_CASE("registry: a slow creation blocks no other tenant's create or delete [concurrency]",
          "[sidecar][registry][concurrency]") {
  const std::string path = TempStore("slow-create.db");
  std::promise<void> entered;
  std::promise<void> release;
  std::shared_future<void> released = release.get_future().share();
  RegistryOptions options;
  options.store_path = path;
  options.upstream = "http://127.0.0.1:9/v1";
  options.before_create = [&](const std::string& stored_id) {
    if (stored_id != "slow/a") return;
    entered.set_value();
    released.wait();  // a tokenizer file that takes long to read
  };
  StatusOr<std::unique_ptr<AgentRegistry>> opened = AgentRegistry::Open(options);
  REQUIRE(opened.ok());
  AgentRegistry& registry = **opened;
  TenantConfig slow = Tenant("slow", /*max_agents=*/1);
  TenantConfig other = Tenant("other");
  Status slow_created;
  std::thread creating([&] {
    slow_created = registry.Create(slow, "a", registry.DefaultConfig(slow, "a")).status();
  });
  entered.get_future().wait();
  // The other tenant's calls finish while "slow/a" is still being made. A watchdog (not a timing
  // assertion): if they wait for it, the test fails after a minute instead of hanging.
  std::future<Status> others = std::async(std::launch::async, [&]() -> Status {
    STRATA_RETURN_IF_ERROR(registry.Create(other, "b", registry.DefaultConfig(other, "b")).status());
    STRATA_RETURN_IF_ERROR(registry.Delete(other, "b"));
    return registry.Create(other, "c", registry.DefaultConfig(other, "c")).status();
  });
  const bool finished = others.wait_for(std::chrono::seconds(60)) == std::future_status::ready;
  // The slow tenant's reserved slot counts against its max_agents while it is being made.
  Status over_limit = registry.CheckCanAdd(slow);
  release.set_value();
  creating.join();
  REQUIRE(finished);
  CHECK(others.get().ok());
  CHECK(over_limit.code() == StatusCode::kResourceExhausted);
  CHECK(slow_created.ok());
  CHECK(registry.AgentCount(slow) == 1);
  CHECK(registry.AgentCount(other) == 1);
}

// Two registries on one PostgreSQL database, as two sidecars would be; the first times its
// agents' idleness on a fake clock.
TEST_CASE("registry: an agent idle for idle_release gives its lease up, so another sidecar serves it at once",
          "[sidecar][registry]") {
  const std::string url = testing::SharedPostgres().NewDatabase();
  testing::FakeClock clock;
  auto open = [&](Clock* idle_clock) {
    RegistryOptions options;
    options.store_path = url;
    options.upstream = "http://127.0.0.1:9/v1";
    options.owner_wait = std::chrono::milliseconds(0);  // a call for the other's agent fails at once
    options.lease_ttl_ms = 600000;  // never lapses here: only a release frees an agent
    options.idle_release = std::chrono::milliseconds(60000);
    options.clock = idle_clock;
    return testing::Must(AgentRegistry::Open(options));
  };
  std::unique_ptr<AgentRegistry> first = open(&clock);
  std::unique_ptr<AgentRegistry> second = open(nullptr);
  const TenantConfig t = Tenant("team");
  REQUIRE(first->Create(t, "a1", first->DefaultConfig(t, "a1")).ok());

  StatusOr<AgentLease> refused = second->Acquire(t, "a1");
  CHECK(refused.status().code() == StatusCode::kUnavailable);
  CHECK_THAT(refused.status().message(), Catch::Contains("is served by"));

  // Used again before the period ends: the period starts over, and the agent stays.
  clock.Advance(59'000'000);
  CHECK(first->ReleaseIdle() == 0);
  REQUIRE(first->Acquire(t, "a1").ok());
  clock.Advance(59'000'000);
  CHECK(first->ReleaseIdle() == 0);
  CHECK(first->OpenAgents() == 1);
  CHECK(second->Acquire(t, "a1").status().code() == StatusCode::kUnavailable);

  // A call in progress keeps its agent however long it takes.
  {
    AgentLease in_use = testing::Must(first->Acquire(t, "a1"));
    clock.Advance(120'000'000);
    CHECK(first->ReleaseIdle() == 0);
    CHECK(first->OpenAgents() == 1);
  }

  // Idle for the whole period: the first's background thread closes the agent and releases its
  // lease (no call to the first needed), and the second serves it without waiting for the TTL.
  clock.Advance(60'000'000);
  REQUIRE(testing::WaitFor([&] { return first->OpenAgents() == 0; }));
  // The agent leaves the first's registry before its lease is released in the store: the second
  // may be refused for that moment, never until the TTL.
  std::optional<AgentLease> taken;
  REQUIRE(testing::WaitFor([&] {
    StatusOr<AgentLease> acquired = second->Acquire(t, "a1");
    if (acquired.ok()) taken.emplace(std::move(acquired).value());
    return taken.has_value();
  }));
  CHECK(taken->id() == "a1");
  StatusOr<AgentLease> now_refused = first->Acquire(t, "a1");
  CHECK(now_refused.status().code() == StatusCode::kUnavailable);
  CHECK_THAT(now_refused.status().message(), Catch::Contains(second->store().lease_owner()));
}

TEST_CASE("registry: idle_release leaves a SQLite store's agents open", "[sidecar][registry]") {
  testing::FakeClock clock;
  RegistryOptions options;
  options.store_path = TempStore("idle.db");
  options.upstream = "http://127.0.0.1:9/v1";
  options.idle_release = std::chrono::milliseconds(1000);
  options.clock = &clock;
  std::unique_ptr<AgentRegistry> registry = testing::Must(AgentRegistry::Open(options));
  const TenantConfig t = Tenant("team");
  REQUIRE(registry->Create(t, "a1", registry->DefaultConfig(t, "a1")).ok());
  clock.Advance(10'000'000);
  CHECK(registry->ReleaseIdle() == 0);  // the sidecar's alone: nobody else could serve it
  CHECK(registry->OpenAgents() == 1);
}

}  // namespace
}  // namespace strata::sidecar
