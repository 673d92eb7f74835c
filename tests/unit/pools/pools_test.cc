// PoolSet: admission by exact tokens, every degradation step, queue bound and timeout, routing
// stickiness and bounded load, replica health and the alerts, with scripted endpoints and a fake
// clock.
#include "strata/pools.h"

#include <atomic>
#include <catch2/catch.hpp>
#include <condition_variable>
#include <map>
#include <mutex>
#include <set>
#include <thread>

#include "testing/fake_clock.h"
#include "testing/scripted_transport.h"

namespace strata {
namespace {

using testing::FakeClock;

// Answers every request; while held, Send() blocks until Release(). Thread-safe.
class GatedTransport : public Transport {
 public:
  explicit GatedTransport(std::string name) : name_(std::move(name)) {}
  void Hold() {
    std::lock_guard<std::mutex> lock(mu_);
    held_ = true;
  }
  void Release() {
    std::lock_guard<std::mutex> lock(mu_);
    held_ = false;
    cv_.notify_all();
  }
  void FailNext(Status status) {
    std::lock_guard<std::mutex> lock(mu_);
    failures_.push_back(std::move(status));
  }
  int calls() const {
    std::lock_guard<std::mutex> lock(mu_);
    return static_cast<int>(bodies_.size());
  }
  int waiting() const {
    std::lock_guard<std::mutex> lock(mu_);
    return waiting_;
  }
  std::vector<std::string> bodies() const {
    std::lock_guard<std::mutex> lock(mu_);
    return bodies_;
  }
  std::vector<CallOptions> options() const {
    std::lock_guard<std::mutex> lock(mu_);
    return options_;
  }
  std::string Name() const override { return "gated"; }
  std::string Endpoint() const override { return name_; }
  Status Send(std::string_view body, const CallOptions& options, Response* response) override {
    std::unique_lock<std::mutex> lock(mu_);
    bodies_.emplace_back(body);
    options_.push_back(options);
    ++waiting_;
    cv_.wait(lock, [&] { return !held_; });
    --waiting_;
    *response = Response();
    response->attempts = 1;
    if (!failures_.empty()) {
      Status s = failures_.front();
      failures_.erase(failures_.begin());
      return s;
    }
    response->content = "ok from " + name_;
    response->finish_reason = "stop";
    response->usage.reported = true;
    response->usage.completion_tokens = 10;
    return Status();
  }
  Status HealthCheck(std::chrono::milliseconds) override {
    std::lock_guard<std::mutex> lock(mu_);
    return health_;
  }
  void SetHealth(Status s) {
    std::lock_guard<std::mutex> lock(mu_);
    health_ = std::move(s);
  }
  Status Abort(const std::string&) override { return Status(); }

 private:
  std::string name_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  bool held_ = false;
  int waiting_ = 0;
  std::vector<Status> failures_;
  std::vector<std::string> bodies_;
  std::vector<CallOptions> options_;
  Status health_;
};

// Spins (yielding, never sleeping on time) until `done` holds; fails after a generous real-time
// safety limit so that a bug cannot hang the suite.
template <typename Pred>
void WaitFor(Pred done) {
  auto limit = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (!done()) {
    REQUIRE(std::chrono::steady_clock::now() < limit);
    std::this_thread::yield();
  }
}

class FakeHandler : public DegradationHandler {
 public:
  StatusOr<DegradedRequest> Compact(std::string_view, int64_t input, int64_t target,
                                    const std::string& pool) override {
    compact_calls.push_back({input, target, pool});
    if (!compact_status.ok()) return compact_status;
    return DegradedRequest{"compacted-body", compact_result > 0 ? compact_result : target};
  }
  StatusOr<DegradedRequest> Fork(std::string_view, int64_t input, int64_t target,
                                 const std::string& pool) override {
    fork_calls.push_back({input, target, pool});
    return DegradedRequest{"forked-body", target / 2};
  }
  struct Call {
    int64_t input, target;
    std::string pool;
  };
  void OnDecision(const RequestRecord& decision) override { decisions.push_back(decision); }
  std::vector<Call> compact_calls, fork_calls;
  std::vector<RequestRecord> decisions;
  Status compact_status;
  int64_t compact_result = 0;
};

struct Fixture {
  FakeClock clock;
  GatedTransport short_a{"short-a"}, medium_a{"medium-a"}, long_a{"long-a"};
  PoolSetConfig config;
  Fixture() {
    config.clock = &clock;
    PoolConfig s{"short", 32768, {}, {&short_a}, 4, 4, std::chrono::milliseconds(1000), 1000};
    PoolConfig m{"medium", 131072, {}, {&medium_a}, 2, 2, std::chrono::milliseconds(1000), 1000};
    PoolConfig l{"long", 1048576, {}, {&long_a}, 1, 1, std::chrono::milliseconds(1000), 4000};
    config.pools = {l, s, m};  // sorted by Create
  }
  std::unique_ptr<PoolSet> Make() {
    StatusOr<std::unique_ptr<PoolSet>> made = PoolSet::Create(config);
    REQUIRE(made.ok());
    return std::move(made).value();
  }
};

Status SendTokens(PoolSet& pools, int64_t tokens, RequestRecord* record, const std::string& id = "",
                  const std::string& prefix = "") {
  CallOptions call;
  call.prompt_tokens = tokens;
  call.request_id = id;
  if (!prefix.empty()) call.headers.push_back({kPrefixHashHeader, prefix});
  Response response;
  return pools.Send("{\"messages\":[]}", call, &response, record);
}

TEST_CASE("admission picks the smallest pool that holds the exact input plus the turn reserve",
          "[pools]") {
  Fixture f;
  f.config.turn_reserve_tokens = 1000;
  auto pools = f.Make();
  RequestRecord r;
  REQUIRE(SendTokens(*pools, 31768, &r, "a", "prefix-1").ok());  // 31768 + 1000 = 32768
  CHECK(r.pool == "short");
  CHECK(r.endpoint == "short-a");
  CHECK(r.degradation.empty());
  CHECK(r.input_tokens == 31768);
  REQUIRE(SendTokens(*pools, 31769, &r).ok());
  CHECK(r.pool == "medium");
  REQUIRE(SendTokens(*pools, 500000, &r).ok());
  CHECK(r.pool == "long");
  // The routing header is consumed; the exact count is forwarded.
  CallOptions sent = f.short_a.options()[0];
  CHECK(sent.prompt_tokens == 31768);
  for (const auto& h : sent.headers) CHECK(h.first != kPrefixHashHeader);
  CHECK(pools->Metrics().pools[0].admitted_total == 1);
}

TEST_CASE("without a token count the input is estimated from the body as bytes / 4", "[pools]") {
  Fixture f;
  auto pools = f.Make();
  std::string body(4 * 40000, 'x');  // 40000 estimated tokens: over the short pool
  Response response;
  RequestRecord record;
  REQUIRE(pools->Send(body, CallOptions(), &response, &record).ok());
  CHECK(record.pool == "medium");
}

TEST_CASE("a request over every pool is refused naming the largest pool and why steps were skipped",
          "[pools]") {
  Fixture f;
  auto pools = f.Make();
  RequestRecord r;
  Status s = SendTokens(*pools, 2000000, &r);
  REQUIRE(s.code() == StatusCode::kResourceExhausted);
  CHECK_THAT(s.message(), Catch::Contains("\"long\", admits 1048576"));
  CHECK_THAT(s.message(), Catch::Contains("compact skipped: no degradation handler set"));
  CHECK_THAT(s.message(), Catch::Contains("wait skipped: no pool admits 2000000 tokens"));
  CHECK(r.degradation == "refuse");
  CHECK(r.code == StatusCode::kResourceExhausted);
  CHECK(f.long_a.calls() == 0);
}

TEST_CASE("a call's own handler degrades that call and is told every decision", "[pools]") {
  Fixture f;
  auto pools = f.Make();
  FakeHandler shared, own;
  pools->SetDegradationHandler(&shared);
  CallOptions call;
  call.prompt_tokens = 2000000;  // over every pool: compacted into the largest
  call.degradation = &own;
  Response response;
  RequestRecord r;
  REQUIRE(pools->Send("{\"messages\":[]}", call, &response, &r).ok());
  CHECK(shared.compact_calls.empty());
  REQUIRE(own.compact_calls.size() == 1);
  REQUIRE(own.decisions.size() == 1);
  CHECK(own.decisions[0].pool == "long");
  CHECK(own.decisions[0].endpoint == "long-a");
  CHECK(own.decisions[0].degradation == "compact");
  CHECK(own.decisions[0].code == StatusCode::kOk);
  CHECK(f.long_a.options().back().degradation == nullptr);  // not forwarded to the replica
  // A refusal is told too: the handler's compaction fails, nothing else applies.
  own.compact_status = ResourceExhaustedError("cannot shrink");
  f.config.ladder = {DegradationStep::kCompact, DegradationStep::kRefuse};
  auto strict = f.Make();
  own.decisions.clear();
  REQUIRE(strict->Send("{\"messages\":[]}", call, &response, &r).code() ==
          StatusCode::kResourceExhausted);
  REQUIRE(own.decisions.size() == 1);
  CHECK(own.decisions[0].degradation == "refuse");
  CHECK(own.decisions[0].code == StatusCode::kResourceExhausted);
  CHECK_THAT(own.decisions[0].degradation_notes, Catch::Contains("cannot shrink"));
  // Without a handler of its own, a call is told nothing and uses the PoolSet's.
  call.degradation = nullptr;
  REQUIRE(pools->Send("{\"messages\":[]}", call, &response, &r).ok());
  CHECK(shared.compact_calls.size() == 1);
  CHECK(shared.decisions.empty());
}

TEST_CASE("compact: an over-long request is compacted by the handler to fit the largest pool",
          "[pools]") {
  Fixture f;
  auto pools = f.Make();
  FakeHandler handler;
  pools->SetDegradationHandler(&handler);
  RequestRecord r;
  REQUIRE(SendTokens(*pools, 2000000, &r).ok());
  REQUIRE(handler.compact_calls.size() == 1);
  CHECK(handler.compact_calls[0].target == 1048576);
  CHECK(handler.compact_calls[0].pool == "long");
  CHECK(r.pool == "long");
  CHECK(r.degradation == "compact");
  CHECK(f.long_a.bodies()[0] == "compacted-body");
  CHECK(f.long_a.options()[0].prompt_tokens == 1048576);
  CHECK(pools->Metrics().pools[2].compacted_total == 1);
}

TEST_CASE("compact: a full long pool degrades to a smaller pool with a free slot",
          "[pools][concurrency]") {
  Fixture f;
  auto pools = f.Make();
  FakeHandler handler;
  pools->SetDegradationHandler(&handler);
  f.long_a.Hold();
  Status held;  // checked after join: Catch2 assertions are not thread-safe
  std::thread holder([&] {
    RequestRecord r;
    held = SendTokens(*pools, 600000, &r);
  });
  WaitFor([&] { return f.long_a.waiting() == 1; });
  RequestRecord r;
  handler.compact_result = 100000;
  REQUIRE(SendTokens(*pools, 700000, &r).ok());
  CHECK(r.pool == "medium");
  CHECK(r.degradation == "compact");
  CHECK(handler.compact_calls[0].target == 131072);
  CHECK(f.medium_a.bodies()[0] == "compacted-body");
  f.long_a.Release();
  holder.join();
  CHECK(held.ok());
}

TEST_CASE("a failed or insufficient compaction is recorded and the ladder goes on to fork",
          "[pools]") {
  Fixture f;
  auto pools = f.Make();
  FakeHandler handler;
  handler.compact_status = FailedPreconditionError("nothing left to compact");
  pools->SetDegradationHandler(&handler);
  RequestRecord r;
  REQUIRE(SendTokens(*pools, 2000000, &r).ok());
  CHECK(r.degradation == "fork");
  CHECK_THAT(r.degradation_notes,
             Catch::Contains("compact failed: FAILED_PRECONDITION: nothing left"));
  CHECK(f.long_a.bodies()[0] == "forked-body");
  CHECK(pools->Metrics().pools[2].forked_total == 1);

  handler.compact_status = Status();
  handler.compact_result = 2000000;  // "compacted" but still too long
  f.config.ladder = {DegradationStep::kCompact, DegradationStep::kRefuse};
  auto strict = f.Make();
  strict->SetDegradationHandler(&handler);
  Status s = SendTokens(*strict, 2000000, &r);
  CHECK(s.code() == StatusCode::kResourceExhausted);
  CHECK_THAT(s.message(), Catch::Contains("compact left 2000000 tokens"));
}

TEST_CASE("wait: a request queues for the pool's slot and is admitted when it frees",
          "[pools][concurrency]") {
  Fixture f;
  auto pools = f.Make();
  f.long_a.Hold();
  Status held;  // checked after join: Catch2 assertions are not thread-safe
  std::thread holder([&] {
    RequestRecord r;
    held = SendTokens(*pools, 600000, &r);
  });
  WaitFor([&] { return f.long_a.waiting() == 1; });
  RequestRecord waited;
  Status waiter_status;
  std::thread waiter([&] { waiter_status = SendTokens(*pools, 700000, &waited, "w"); });
  WaitFor([&] { return pools->Metrics().pools[2].queued == 1; });
  f.clock.Advance(250000);  // 250 ms in the queue
  f.long_a.Release();
  holder.join();
  CHECK(held.ok());
  waiter.join();
  CHECK(waiter_status.ok());
  CHECK(waited.pool == "long");
  CHECK(waited.degradation == "wait");
  CHECK(waited.queue_wait_ms >= 250);
  CHECK_THAT(waited.degradation_notes,
             Catch::Contains("compact skipped: no degradation handler set"));
  CHECK(pools->Metrics().pools[2].waited_total == 1);
  RequestRecord annotated;
  annotated.request_id = "w";
  REQUIRE(pools->Annotate(&annotated).ok());
  CHECK(annotated.degradation == "wait");
  CHECK(annotated.queue_wait_ms == waited.queue_wait_ms);
}

TEST_CASE(
    "queue bound: with the slot taken and the queue full, the request is refused with cap "
    "and depth",
    "[pools][concurrency]") {
  Fixture f;
  auto pools = f.Make();
  f.long_a.Hold();
  Status held;  // checked after join: Catch2 assertions are not thread-safe
  std::thread holder([&] {
    RequestRecord r;
    held = SendTokens(*pools, 600000, &r);
  });
  WaitFor([&] { return f.long_a.waiting() == 1; });
  Status queued;
  std::thread waiter([&] {
    RequestRecord r;
    queued = SendTokens(*pools, 600000, &r);
  });
  WaitFor([&] { return pools->Metrics().pools[2].queued == 1; });
  RequestRecord r;
  Status s = SendTokens(*pools, 600000, &r);
  CHECK(s.code() == StatusCode::kResourceExhausted);
  CHECK_THAT(s.message(), Catch::Contains("pool \"long\" is full: 1 in flight of cap 1"));
  CHECK_THAT(s.message(), Catch::Contains("queue depth 1 of 1"));
  CHECK_THAT(s.message(), Catch::Contains("queue of pool \"long\" is full (1 of 1)"));
  CHECK(pools->Metrics().pools[2].refused_total == 1);
  f.long_a.Release();
  holder.join();
  CHECK(held.ok());
  waiter.join();
  CHECK(queued.ok());
}

TEST_CASE("queue timeout: a waiter gives up after the pool's timeout on the injected clock",
          "[pools][concurrency]") {
  Fixture f;
  auto pools = f.Make();
  f.long_a.Hold();
  Status held;  // checked after join: Catch2 assertions are not thread-safe
  std::thread holder([&] {
    RequestRecord r;
    held = SendTokens(*pools, 600000, &r);
  });
  WaitFor([&] { return f.long_a.waiting() == 1; });
  RequestRecord r;
  Status s;
  std::thread waiter([&] { s = SendTokens(*pools, 600000, &r); });
  WaitFor([&] { return pools->Metrics().pools[2].queued == 1; });
  f.clock.Advance(1000001);
  waiter.join();
  CHECK(s.code() == StatusCode::kResourceExhausted);
  CHECK_THAT(s.message(), Catch::Contains("in the queue of pool \"long\" (timeout 1000 ms)"));
  CHECK(r.queue_wait_ms >= 1000);
  PoolSetMetrics m = pools->Metrics();
  CHECK(m.pools[2].queue_timeouts_total == 1);
  CHECK(m.pools[2].queued == 0);
  f.long_a.Release();
  holder.join();
  CHECK(held.ok());
}

TEST_CASE("routing: the same prefix hash always reaches the same replica, different ones spread",
          "[pools]") {
  std::vector<std::unique_ptr<testing::ScriptedTransport>> replicas;
  PoolConfig pool{"short", 32768, {}, {}, 0, 0, std::chrono::milliseconds(0), 0};
  for (int i = 0; i < 4; ++i) {
    replicas.push_back(std::make_unique<testing::ScriptedTransport>());
    for (int k = 0; k < 200; ++k) replicas.back()->Reply("ok");
    pool.transports.push_back(replicas.back().get());
  }
  // ScriptedTransport names every replica the same; a factory-free pool keys the ring by index too.
  PoolSetConfig config;
  config.pools = {pool};
  auto pools = std::move(PoolSet::Create(config)).value();
  std::map<std::string, std::set<size_t>> replicas_of;
  for (int round = 0; round < 3; ++round) {
    for (int key = 0; key < 40; ++key) {
      std::string prefix = "prefix-" + std::to_string(key);
      std::vector<size_t> before;
      for (auto& r : replicas) before.push_back(r->bodies().size());
      RequestRecord record;
      REQUIRE(SendTokens(*pools, 100, &record, "", prefix).ok());
      for (size_t i = 0; i < replicas.size(); ++i) {
        if (replicas[i]->bodies().size() > before[i]) replicas_of[prefix].insert(i);
      }
    }
  }
  std::set<size_t> used;
  for (const auto& [prefix, set] : replicas_of) {
    CHECK(set.size() == 1);  // sticky
    used.insert(*set.begin());
  }
  CHECK(used.size() >= 3);  // 40 keys over 4 replicas
}

TEST_CASE("bounded load: a hot prefix spills to other replicas instead of overloading one",
          "[pools]") {
  std::vector<std::unique_ptr<GatedTransport>> replicas;
  PoolConfig pool{"short", 32768, {}, {}, 0, 0, std::chrono::milliseconds(0), 0};
  for (int i = 0; i < 4; ++i) {
    replicas.push_back(std::make_unique<GatedTransport>("r" + std::to_string(i)));
    replicas.back()->Hold();
    pool.transports.push_back(replicas.back().get());
  }
  PoolSetConfig config;
  config.pools = {pool};
  config.load_factor = 1.25;
  auto pools = std::move(PoolSet::Create(config)).value();
  std::vector<std::thread> threads;
  std::vector<Status> sent(8);  // checked after join: Catch2 assertions are not thread-safe
  for (int i = 0; i < 8; ++i) {
    threads.emplace_back([&, i] {
      RequestRecord r;
      sent[i] = SendTokens(*pools, 100, &r, "", "hot-prefix");
    });
    // One at a time, so each sees the loads of the ones before.
    WaitFor([&] {
      int sum = 0;
      for (auto& r : replicas) sum += r->waiting();
      return sum == i + 1;
    });
  }
  int max_load = 0, used = 0;
  for (auto& r : replicas) {
    max_load = std::max(max_load, r->waiting());
    used += r->waiting() > 0 ? 1 : 0;
  }
  // ceil(1.25 * 8 / 4) = 3 at most on any replica; without the bound all 8 would share one.
  CHECK(max_load <= 3);
  CHECK(used >= 3);
  for (auto& r : replicas) r->Release();
  for (auto& t : threads) t.join();
  for (const Status& status : sent) CHECK(status.ok());
}

TEST_CASE("health: failing replicas are avoided until a health check or a cooldown probe",
          "[pools]") {
  FakeClock clock;
  GatedTransport a("a"), b("b");
  PoolConfig pool{"short", 32768, {}, {&a, &b}, 0, 0, std::chrono::milliseconds(0), 0};
  PoolSetConfig config;
  config.pools = {pool};
  config.clock = &clock;
  config.unhealthy_after_failures = 2;
  config.unhealthy_cooldown = std::chrono::milliseconds(5000);
  auto pools = std::move(PoolSet::Create(config)).value();
  // Find the replica this key prefers, then make it fail twice.
  RequestRecord r;
  REQUIRE(SendTokens(*pools, 10, &r, "", "k").ok());
  GatedTransport& preferred = r.endpoint == "a" ? a : b;
  GatedTransport& other = r.endpoint == "a" ? b : a;
  preferred.FailNext(UnavailableError("down"));
  preferred.FailNext(UnavailableError("down"));
  CHECK(SendTokens(*pools, 10, &r, "", "k").code() == StatusCode::kUnavailable);
  CHECK(SendTokens(*pools, 10, &r, "", "k").code() == StatusCode::kUnavailable);
  CHECK(pools->Metrics().pools[0].healthy_replicas == 1);
  const int before = other.calls();
  REQUIRE(SendTokens(*pools, 10, &r, "", "k").ok());
  CHECK(r.endpoint == other.Endpoint());
  CHECK(other.calls() == before + 1);
  // After the cooldown one probe goes back to the preferred replica; its success heals it.
  clock.Advance(5000001);
  REQUIRE(SendTokens(*pools, 10, &r, "", "k").ok());
  CHECK(r.endpoint == preferred.Endpoint());
  CHECK(pools->Metrics().pools[0].healthy_replicas == 2);
  // A failed health check marks a replica unhealthy; a passing one restores it.
  preferred.SetHealth(UnavailableError("no"));
  CHECK(pools->RunHealthChecks(std::chrono::milliseconds(100)) == 1);
  REQUIRE(SendTokens(*pools, 10, &r, "", "k").ok());
  CHECK(r.endpoint == other.Endpoint());
  preferred.SetHealth(Status());
  CHECK(pools->RunHealthChecks(std::chrono::milliseconds(100)) == 2);
  REQUIRE(SendTokens(*pools, 10, &r, "", "k").ok());
  CHECK(r.endpoint == preferred.Endpoint());
}

TEST_CASE("KV watermark alert lowers the long pool's cap and switches its ladder", "[pools]") {
  Fixture f;
  f.config.pools[0].max_concurrency = 4;  // long
  f.config.pools[0].max_queue = 4;
  f.config.kv_capacity_tokens = 1000000;
  f.config.kv_watermark = 0.5;
  f.config.long_share_watermark = 1.0;  // only the KV alert here
  auto pools = f.Make();
  f.long_a.Hold();
  Status held;  // checked after join: Catch2 assertions are not thread-safe
  std::thread holder([&] {
    RequestRecord r;
    held = SendTokens(*pools, 600000, &r);  // 600000 + 4000 reserve in flight
  });
  WaitFor([&] { return f.long_a.waiting() == 1; });
  PoolSetMetrics m = pools->Metrics();
  CHECK(m.kv_in_flight_tokens == 604000);
  CHECK(m.kv_alert);
  CHECK(m.pools[2].effective_concurrency == 1);
  CHECK_THAT(pools->PrometheusText(),
             Catch::Contains("strata_alert_active{alert=\"kv_watermark\"} 1"));
  CHECK_THAT(pools->PrometheusText(),
             Catch::Contains("strata_pool_concurrency_cap{pool=\"long\"} 1"));
  RequestRecord r;
  Status s = SendTokens(*pools, 600000, &r);
  // The alert ladder (compact, refuse) replaced waiting: refused at once, not queued.
  CHECK(s.code() == StatusCode::kResourceExhausted);
  CHECK_THAT(s.message(), Catch::Contains("lowered from 4 by an alert"));
  CHECK_THAT(r.degradation_notes, Catch::Contains("long-pool alert active"));
  // Short requests are untouched by the alert.
  REQUIRE(SendTokens(*pools, 1000, &r).ok());
  CHECK(r.pool == "short");
  f.long_a.Release();
  holder.join();
  CHECK(held.ok());
  m = pools->Metrics();
  CHECK_FALSE(m.kv_alert);
  CHECK(m.pools[2].effective_concurrency == 4);
}

TEST_CASE("long-share alert: too many recent long admissions lower the long pool's cap",
          "[pools]") {
  Fixture f;
  f.config.pools[0].max_concurrency = 4;
  f.config.long_share_window = 4;
  f.config.long_share_watermark = 0.25;
  auto pools = f.Make();
  RequestRecord r;
  REQUIRE(SendTokens(*pools, 600000, &r).ok());
  CHECK_FALSE(pools->Metrics().long_share_alert);  // 1 of 4
  REQUIRE(SendTokens(*pools, 600000, &r).ok());
  PoolSetMetrics m = pools->Metrics();
  CHECK(m.long_share == Approx(0.5));
  CHECK(m.long_share_alert);
  CHECK(m.pools[2].effective_concurrency == 1);
  // Short admissions push the long ones out of the window.
  for (int i = 0; i < 3; ++i) REQUIRE(SendTokens(*pools, 100, &r).ok());
  CHECK_FALSE(pools->Metrics().long_share_alert);
}

TEST_CASE("pool config from JSON, with errors naming the field", "[pools]") {
  StatusOr<PoolSetConfig> config = ParsePoolSetConfig(R"({
    "pools": [{"name": "long", "max_input_tokens": 1048576, "endpoints": ["http://127.0.0.1:1/v1"],
               "max_concurrency": 2, "max_queue": 3, "queue_timeout_ms": 500,
               "output_reserve_tokens": 8192},
              {"name": "short", "max_input_tokens": 32768, "endpoints": ["grpc://127.0.0.1:2"]}],
    "ladder": ["wait", "refuse"], "turn_reserve_tokens": 2048, "kv_capacity_tokens": 4356448,
    "kv_watermark": 0.8, "alert_ladder": ["refuse"], "alert_long_max_concurrency": 1})");
  REQUIRE(config.ok());
  CHECK(config->pools.size() == 2);
  CHECK(config->pools[0].queue_timeout == std::chrono::milliseconds(500));
  CHECK(config->pools[0].output_reserve_tokens == 8192);
  CHECK(config->ladder ==
        std::vector<DegradationStep>{DegradationStep::kWait, DegradationStep::kRefuse});
  CHECK(config->kv_capacity_tokens == 4356448);
  auto pools = PoolSet::Create(*config);
  REQUIRE(pools.ok());
  CHECK((*pools)->Endpoint() == "pools:short,long");

  CHECK_THAT(
      ParsePoolSetConfig(R"({"pools": [{"name": "a", "max_tokens": 5}]})").status().message(),
      Catch::Contains("pools[0].max_tokens"));
  CHECK_THAT(ParsePoolSetConfig(R"({"ladder": ["retry"]})").status().message(),
             Catch::Contains("unknown degradation step \"retry\""));
  CHECK_THAT(ParsePoolSetConfig(R"({"pools": 3})").status().message(), Catch::Contains("array"));
  PoolSetConfig empty;
  CHECK(PoolSet::Create(empty).status().code() == StatusCode::kInvalidArgument);
  PoolSetConfig no_replicas;
  no_replicas.pools.push_back(PoolConfig{"x", 10, {}, {}, 0, 0, std::chrono::milliseconds(0), 0});
  CHECK_THAT(PoolSet::Create(no_replicas).status().message(),
             Catch::Contains("\"x\" has no endpoints"));
}

}  // namespace
}  // namespace strata
