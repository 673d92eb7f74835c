// strata-sim's gRPC side (sdk/apps/strata-sim/sim_grpc.cc) under the KV-memory model: a gRPC call
// is admitted like an HTTP request: it queues for KV blocks, holds them while it decodes, and a
// prompt over the whole cache is a serving error; the shared /metrics counts both protocols.
#include "sim_grpc.h"

#include <catch2/catch.hpp>
#include <string>
#include <thread>

#include "sim_server.h"
#include "strata/grpc_transport.h"
#include "strata/transport.h"
#include "testing/sim_testing.h"
#include "testing/wait_for.h"

namespace strata::sim {
namespace {

using testing::HttpGet;
using testing::StartSim;

// The value of a metric line "name value" in Prometheus text; -1 when absent.
double Metric(const std::string& text, const std::string& name) {
  size_t at = text.find("\n" + name + " ");
  if (at == std::string::npos) return -1;
  return std::stod(text.substr(at + name.size() + 2));
}

std::string Body(size_t content_bytes, bool stream) {
  return R"({"model":"m","stream":)" + std::string(stream ? "true" : "false") +
         R"(,"max_tokens":8,"messages":[{"role":"user","content":")" +
         std::string(content_bytes, 'x') + R"("}]})";
}

std::unique_ptr<Transport> Grpc(const SimServer& sim) {
  GrpcTransportOptions options;
  options.target = sim.grpc_target();
  options.retry.max_attempts = 1;
  return std::move(MakeGrpcTransport(options)).value();
}

TEST_CASE("gRPC calls wait for KV blocks like HTTP requests and report it at /metrics",
          "[sim][kv][grpc][concurrency]") {
  SimOptions options;
  options.grpc_port = 0;
  options.kv.capacity_tokens = 1024;  // one ~600-token sequence at a time
  options.kv.block_tokens = 16;
  options.generated_output_tokens = 8;
  options.decode_us_per_token = 40000;  // the first call holds its blocks ~300 ms
  auto sim = StartSim(options);
  auto first = Grpc(*sim);
  auto second = Grpc(*sim);
  Status a, b;
  Response ra, rb;
  std::thread t([&] { a = first->Send(Body(4 * 600, true), CallOptions(), &ra); });
  // The second call starts once the first holds the cache.
  REQUIRE(testing::WaitFor(
      [&] { return Metric(HttpGet(sim->http_port(), "/metrics"), "strata_sim_running") == 1; }));
  b = second->Send(Body(4 * 600, false), CallOptions(), &rb);
  t.join();
  REQUIRE(a.ok());
  REQUIRE(b.ok());
  CHECK(rb.usage.completion_tokens > 0);
  std::string metrics = HttpGet(sim->http_port(), "/metrics");
  CHECK(Metric(metrics, "strata_sim_admitted_total") == 2);
  // The second waited for the first's blocks: most of its decode time.
  CHECK(Metric(metrics, "strata_sim_queue_wait_seconds_max") >= 0.1);
  CHECK(Metric(metrics, "strata_sim_kv_used_blocks") == 0);  // both released
  CHECK(Metric(metrics, "strata_sim_running") == 0);
}

TEST_CASE("a gRPC prompt over the KV capacity is a serving error naming the capacity",
          "[sim][kv][grpc]") {
  SimOptions options;
  options.grpc_port = 0;
  options.kv.capacity_tokens = 4096;
  auto sim = StartSim(options);
  auto grpc = Grpc(*sim);
  Response response;
  REQUIRE(grpc->Send(Body(100, true), CallOptions(), &response).ok());
  for (bool stream : {true, false}) {
    Status s = grpc->Send(Body(4 * 8000, stream), CallOptions(), &response);  // ~8000 tokens
    REQUIRE_FALSE(s.ok());
    CHECK(s.code() == StatusCode::kInvalidArgument);
    CHECK_THAT(s.message(), Catch::Contains("does not fit the KV cache of 4096 tokens"));
  }
  std::string metrics = HttpGet(sim->http_port(), "/metrics");
  CHECK(Metric(metrics, "strata_sim_admitted_total") == 1);
  CHECK(Metric(metrics, "strata_sim_rejected_too_large_total") == 2);
}

}  // namespace
}  // namespace strata::sim
