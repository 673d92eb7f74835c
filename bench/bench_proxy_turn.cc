// bench_proxy_turn: what strata-sidecar's OpenAI-compatible proxy costs per turn on top of the
// agent's own turn, in-process and without a network: Proxy::ChatCompletions over the registry's
// SQLite store with an upstream that answers at once, against the same turns through the agent
// (AppendUser, Complete and RecycleUnchanged on a leased agent: what the gRPC Complete does).
//
//   BM_ProxyTurn/S/H/T  a conversation whose system prompt has S bytes and T tools (about 750
//                       bytes each), H turns sent before the timed ones; each iteration is one
//                       turn: the client's whole message list (system prompt, every user message
//                       and reply so far, one new user message of about 600 bytes) and its tools
//                       POSTed, without streaming
//   BM_AgentTurn/S/H/T  the same conversation and turns, each one user message appended and sent
//
// The proxy's client sends everything again every turn; what the proxy does with the part it has
// seen is the difference between the two. The store is a fresh file under TMPDIR per benchmark.
//
//   build/bench/bench_proxy_turn
#include <benchmark/benchmark.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "instant_transport.h"
#include "proxy.h"
#include "registry.h"
#include "sidecar_config.h"
#include "tool_schemas.h"

namespace {

using json = nlohmann::json;
using strata::sidecar::AgentLease;
using strata::sidecar::AgentRegistry;
using strata::sidecar::Proxy;
using strata::sidecar::ProxyOptions;
using strata::sidecar::RegistryOptions;
using strata::sidecar::TenantConfig;

constexpr char kAgent[] = "bench-agent";

// About `bytes` bytes of words, different for each seed.
std::string Words(uint64_t seed, size_t bytes) {
  static const char* kWords[] = {"context", "cache", "prefix", "agent",  "token",
                                 "window",  "layer", "tool",   "result", "stable"};
  std::string out;
  uint64_t x = seed * 6364136223846793005ULL + 1442695040888963407ULL;
  while (out.size() < bytes) {
    x = x * 6364136223846793005ULL + 1442695040888963407ULL;
    out += kWords[(x >> 33) % 10];
    out += ' ';
  }
  return out;
}

std::string UserMessage(int turn) {
  return "turn " + std::to_string(turn) + ": " + Words(turn, 600);
}

// A registry over a fresh SQLite file, removed with it.
struct Sidecar {
  strata::bench::InstantTransport transport;
  std::string store;
  std::unique_ptr<AgentRegistry> registry;
  TenantConfig tenant;

  Sidecar() {
    const char* tmp = std::getenv("TMPDIR");
    store = std::string(tmp != nullptr ? tmp : "/tmp") + "/strata-bench-proxy-" +
            std::to_string(::getpid()) + ".db";
    Remove();
    RegistryOptions options;
    options.store_path = store;
    options.transport = &transport;
    auto opened = AgentRegistry::Open(options);
    if (!opened.ok()) {
      std::fprintf(stderr, "bench_proxy_turn: %s\n", opened.status().message().c_str());
      std::exit(1);
    }
    registry = std::move(opened).value();
    tenant.name = "bench";
    tenant.limits.max_request_bytes = int64_t{64} << 20;
  }
  ~Sidecar() {
    registry.reset();
    Remove();
  }
  void Remove() {
    for (const char* suffix : {"", "-wal", "-shm"}) std::remove((store + suffix).c_str());
  }
};

void BM_ProxyTurn(benchmark::State& state) {
  Sidecar sidecar;
  ProxyOptions options;
  options.registry = sidecar.registry.get();
  Proxy proxy(options);
  json messages = json::array({{{"role", "system"}, {"content", Words(1, state.range(0))}}});
  const json tools = json::parse(strata::bench::ToolSchemas(static_cast<int>(state.range(2))));
  int turn = 0;
  // The client's body is written outside the timing: the client's work, not the proxy's.
  std::string body;
  auto next_body = [&] {
    messages.push_back({{"role", "user"}, {"content", UserMessage(turn++)}});
    json request = {{"messages", messages}, {"model", "glm-5.3-flash"}};
    if (!tools.empty()) request["tools"] = tools;
    body = request.dump();
    messages.push_back({{"role", "assistant"}, {"content", "ok"}});
  };
  auto send = [&] {
    strata::sidecar::HttpReply reply = proxy.ChatCompletions(sidecar.tenant, kAgent, body);
    if (reply.status != 200) {
      state.SkipWithError(("proxy answered " + std::to_string(reply.status)).c_str());
      return false;
    }
    return true;
  };
  for (int64_t i = 0; i < state.range(1); ++i) {
    next_body();
    if (!send()) return;
  }
  next_body();
  for (auto _ : state) {
    if (!send()) return;
    state.PauseTiming();
    next_body();
    state.ResumeTiming();
  }
}

void BM_AgentTurn(benchmark::State& state) {
  Sidecar sidecar;
  auto lease = sidecar.registry->AcquireOrCreate(sidecar.tenant, kAgent, nullptr);
  if (!lease.ok()) return state.SkipWithError(lease.status().message().c_str());
  strata::Agent& agent = lease->agent();
  if (!agent.SetSystemPrompts({Words(1, state.range(0))}).ok()) {
    return state.SkipWithError("SetSystemPrompts failed");
  }
  if (state.range(2) > 0 &&
      !agent.context()
           .SetTools(strata::bench::ToolSchemas(static_cast<int>(state.range(2))))
           .ok()) {
    return state.SkipWithError("SetTools failed");
  }
  int turn = 0;
  auto send = [&] {
    if (!agent.context().AppendUser(UserMessage(turn++)).ok()) return false;
    strata::StatusOr<strata::Turn> done = agent.Complete();
    if (!done.ok()) {
      state.SkipWithError(done.status().message().c_str());
      return false;
    }
    agent.RecycleUnchanged(std::move(done).value());
    return true;
  };
  for (int64_t i = 0; i < state.range(1); ++i) {
    if (!send()) return;
  }
  for (auto _ : state) {
    if (!send()) return;
  }
}

// A fixed number of timed turns: each turn grows the conversation, so two builds compared side by
// side must measure the same turns.
#define STRATA_PROXY_SHAPES    \
  Args({4000, 40, 0})          \
      ->Args({4000, 200, 0})   \
      ->Args({4000, 1000, 0})  \
      ->Args({1000000, 40, 0}) \
      ->Args({4000, 40, 32})   \
      ->Unit(benchmark::kMicrosecond)
BENCHMARK(BM_ProxyTurn)->STRATA_PROXY_SHAPES->Iterations(40);
BENCHMARK(BM_AgentTurn)->STRATA_PROXY_SHAPES->Iterations(40);

}  // namespace

BENCHMARK_MAIN();
