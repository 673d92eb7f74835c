// strata-sim's KV-memory model: prefill time, admission that queues, preemption, /metrics.
#include "sim_kv.h"

#include <atomic>
#include <catch2/catch.hpp>
#include <mutex>
#include <thread>
#include <vector>

#include "sim_server.h"
#include "strata/http_transport.h"
#include "strata/transport.h"
#include "testing/sim_testing.h"

namespace strata::sim {
namespace {

using testing::HttpGet;
using testing::StartSim;

// Records the sleeps instead of sleeping.
struct Sleeps {
  std::mutex mu;
  std::vector<int64_t> us;
  std::function<bool(int64_t)> fn() {
    return [this](int64_t micros) {
      std::lock_guard<std::mutex> lock(mu);
      us.push_back(micros);
      return true;
    };
  }
};

template <typename Pred>
void WaitFor(Pred done) {
  auto limit = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (!done()) {
    REQUIRE(std::chrono::steady_clock::now() < limit);
    std::this_thread::yield();
  }
}

TEST_CASE("prefill time: linear in uncached tokens plus an attention term over the context",
          "[sim][kv]") {
  Sleeps sleeps;
  KvSimOptions o;
  o.prefill_us_per_token = 2;
  o.prefill_attention_us = 0.5;
  KvSim kv(o, sleeps.fn());
  // 1000 uncached, nothing cached: 2 x 1000 + 0.5 x 1000 x (500 / 1000) = 2250.
  CHECK(kv.PrefillMicros(1000, 0) == 2250);
  // 4000 tokens of which 2000 cached: 2 x 2000 + 0.5 x 2000 x ((2000 + 1000) / 1000) = 7000.
  CHECK(kv.PrefillMicros(4000, 2000) == 7000);
  // Doubling a cold prompt more than doubles its prefill (the quadratic term).
  CHECK(kv.PrefillMicros(200000, 0) > 2 * kv.PrefillMicros(100000, 0));
  CHECK(kv.PrefillMicros(100, 100) == 0);
}

TEST_CASE("admission queues FIFO when the KV blocks run out and resumes on release",
          "[sim][kv][concurrency]") {
  Sleeps sleeps;
  KvSimOptions o;
  o.capacity_tokens = 100;
  o.block_tokens = 10;
  KvSim kv(o, sleeps.fn());
  uint64_t a = 0, b = 0;
  int64_t wait = 0;
  // Without preemption the prompt and the whole output are reserved: 50 + 10 -> 6 blocks.
  REQUIRE(kv.Admit(50, 10, &a, &wait) == KvSim::Admission::kAdmitted);
  CHECK(kv.stats().used_blocks == 6);
  std::atomic<bool> b_admitted{false};
  KvSim::Admission b_admission = KvSim::Admission::kTooLarge;  // checked after join (Catch2
                                                               // assertions are not thread-safe)
  std::thread t([&] {
    int64_t w = 0;
    b_admission = kv.Admit(50, 10, &b, &w);
    b_admitted = true;
  });
  WaitFor([&] { return kv.stats().waiting == 1; });
  CHECK_FALSE(b_admitted);
  kv.Release(a);
  t.join();
  CHECK(b_admitted);
  CHECK(b_admission == KvSim::Admission::kAdmitted);
  KvSim::Stats s = kv.stats();
  CHECK(s.used_blocks == 6);
  CHECK(s.admitted_total == 2);
  CHECK(s.waiting == 0);
  // A prompt that can never fit is refused at once.
  uint64_t c = 0;
  CHECK(kv.Admit(200, 1, &c, &wait) == KvSim::Admission::kTooLarge);
  CHECK(kv.stats().rejected_too_large_total == 1);
}

TEST_CASE("preemption: a growing sequence evicts the youngest, which re-queues and re-prefills",
          "[sim][kv][concurrency]") {
  Sleeps sleeps;
  KvSimOptions o;
  o.capacity_tokens = 100;
  o.block_tokens = 10;
  o.preempt = true;
  KvSim kv(o, sleeps.fn());
  uint64_t a = 0, b = 0;
  int64_t wait = 0;
  REQUIRE(kv.Admit(40, 1000, &a, &wait) == KvSim::Admission::kAdmitted);  // 5 blocks (prompt + 1)
  REQUIRE(kv.Admit(40, 1000, &b, &wait) == KvSim::Admission::kAdmitted);  // 5 blocks: full
  CHECK(kv.stats().used_blocks == 10);
  REQUIRE(kv.Grow(a, 60, 111));  // needs a 6th block: b (younger) is preempted
  KvSim::Stats s = kv.stats();
  CHECK(s.preemptions_total == 1);
  CHECK(s.used_blocks == 6);
  CHECK(s.running == 1);
  std::atomic<bool> resumed{false};
  bool grew = false;  // checked after join: Catch2 assertions are not thread-safe
  std::thread t([&] {
    grew = kv.Grow(b, 45, 222);  // b notices, waits for 5 blocks, then prefills again
    resumed = true;
  });
  WaitFor([&] { return kv.stats().waiting == 1; });
  CHECK_FALSE(resumed);
  kv.Release(a);
  t.join();
  CHECK(resumed);
  CHECK(grew);
  std::lock_guard<std::mutex> lock(sleeps.mu);
  REQUIRE(sleeps.us.size() == 1);
  CHECK(sleeps.us[0] == 222);  // the recompute prefill
  CHECK(kv.stats().used_blocks == 5);
}

TEST_CASE(
    "strata-sim reports KV usage, queue wait and preemptions at /metrics and refuses prompts "
    "over its KV capacity",
    "[sim][kv]") {
  SimOptions options;
  options.kv.capacity_tokens = 4096;
  options.kv.block_tokens = 16;
  options.generated_output_tokens = 8;
  auto sim = StartSim(options);
  HttpTransportOptions http;
  http.base_url = sim->base_url();
  http.retry.max_attempts = 1;
  auto transport = std::move(MakeHttpTransport(http)).value();
  Response response;
  REQUIRE(transport
              ->Send(R"({"model":"m","messages":[{"role":"user","content":"hello"}]})",
                     CallOptions(), &response)
              .ok());
  std::string big(4 * 8000, 'x');  // 8000 estimated tokens > 4096
  Status s =
      transport->Send(R"({"model":"m","messages":[{"role":"user","content":")" + big + R"("}]})",
                      CallOptions(), &response);
  CHECK(s.code() == StatusCode::kInvalidArgument);
  CHECK_THAT(s.message(), Catch::Contains("does not fit the KV cache of 4096 tokens"));
  std::string metrics = HttpGet(sim->http_port(), "/metrics");
  CHECK_THAT(metrics, Catch::Contains("200 OK"));
  CHECK_THAT(metrics, Catch::Contains("strata_sim_kv_capacity_blocks 256"));
  CHECK_THAT(metrics, Catch::Contains("strata_sim_admitted_total 1"));
  CHECK_THAT(metrics, Catch::Contains("strata_sim_rejected_too_large_total 1"));
  CHECK_THAT(metrics, Catch::Contains("strata_sim_preemptions_total 0"));
  CHECK_THAT(metrics, Catch::Contains("strata_sim_queue_wait_seconds_total"));
  CHECK_THAT(metrics, Catch::Contains("strata_sim_kv_used_blocks 0"));
}

}  // namespace
}  // namespace strata::sim
