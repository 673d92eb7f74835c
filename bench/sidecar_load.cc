// sidecar_load: strata-sidecar under agent load, against strata-sim as the model server, over
// loopback. The same workload (agents x turns, `concurrency` agents at once, each agent's turns one
// after the other) runs three ways, side by side in one process:
//   direct  the client keeps its message list and POSTs it whole to strata-sim (no sidecar);
//   grpc    CreateAgent, then one ContextService.Complete(user_message) per turn, which asks for
//           its Turn event alone (final_only), as direct and proxy ask for their answers whole
//           ("stream": false); --grpc-deltas asks for the Delta events too;
//   proxy   the client POSTs its whole message list to the sidecar's /v1/chat/completions with
//           X-Strata-Agent (skipped when the sidecar has no HTTP listener).
// Reported: per-request latency p50/p90/p99 of each way, the sidecar's added latency (p50/p99
// against direct, as a difference and a ratio), requests/s, and the sidecar's RSS before and after
// (growth per agent), and CPU per request: the sidecar's (its utime + stime over the run, divided
// by the requests) and strata-sim's, beside the floor measured in the same run in this process
// (one durable append to a SQLite store, one Build of the same conversation, one upstream call
// through strata's HTTP transport, each by its thread's CPU time): the least a managed turn can
// cost; and, measured on the idle sidecar, what it spends on a call that does nothing (a gRPC
// health check, an HTTP GET /healthz), which the turn's floor leaves out. --store-sync full,normal
// runs the sidecar ways once per durability mode (the sidecar's --store-sync; a fresh sidecar and
// store each), after one direct run.
// --soak-minutes N then repeats the gRPC load on the last sidecar (the same agents deleted and
// created again each round) for N minutes and prints the time and the RSS after each round.
// --shared-store URL (a postgresql:// database) then runs the gRPC way on that one database
// twice, side by side: with one sidecar, then with two (agent a served by sidecar a % 2, as a
// load balancer hashing on the agent would route it; new agents each time).
//
// --system-bytes N sets the agents' system prompt (default 4000 bytes): a long one stands for the
// stable content a long context starts with, which the proxy's clients send again every turn.
//
//   sidecar_load [--agents 200] [--turns 30] [--concurrency 32] [--modes direct,grpc,proxy]
//                [--store-sync full] [--soak-minutes 0] [--shared-store URL] [--json FILE]
//                [--system-bytes 4000] [--grpc-deltas] [--sim PATH] [--sidecar PATH]
#include <fcntl.h>
#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/grpcpp.h>
#include <httplib.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iostream>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <numeric>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "bench_paths.h"
#include "strata/context.h"
#include "strata/http_transport.h"
#include "strata/store.h"
#include "strata/transport.h"
#include "strata/v1/context_service.grpc.pb.h"

namespace {

using json = nlohmann::json;
using Clock = std::chrono::steady_clock;

struct Options {
  int agents = 200;
  int turns = 30;
  int concurrency = 32;
  std::string modes = "direct,grpc,proxy";
  double soak_minutes = 0;
  std::vector<std::string> store_syncs = {"full"};  // the sidecars' --store-sync, in order
  std::string shared_store;                         // --shared-store: a postgresql:// URL
  std::string json_path;
  std::string sim = STRATA_SIM_PATH;
  std::string sidecar = STRATA_SIDECAR_PATH;
  int system_bytes = 4000;  // the agents' system prompt
  int user_bytes = 600;     // each user message
  bool grpc_deltas = false;  // --grpc-deltas: the gRPC way streams Delta events too
};

[[noreturn]] void Die(const std::string& message) {
  std::cerr << "sidecar_load: " << message << std::endl;
  std::exit(1);
}

// ---- child processes --------------------------------------------------------------------------

class Child {
 public:
  Child(const std::vector<std::string>& argv, const std::string& log_path) {
    int out[2];
    if (::pipe(out) != 0) Die("pipe failed");
    pid_ = ::fork();
    if (pid_ < 0) Die("fork failed");
    if (pid_ == 0) {
      ::dup2(out[1], STDOUT_FILENO);
      int log = ::open(log_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
      if (log >= 0) ::dup2(log, STDERR_FILENO);
      ::close(out[0]);
      std::vector<char*> args;
      for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
      args.push_back(nullptr);
      ::execv(args[0], args.data());
      ::_exit(127);
    }
    ::close(out[1]);
    stdout_fd_ = out[0];
  }
  ~Child() { Stop(); }

  // Reads stdout lines until one starts with `prefix`; the rest of that line. "" after `timeout`.
  std::string WaitForLine(const std::string& prefix, std::chrono::seconds timeout) {
    const auto deadline = Clock::now() + timeout;
    while (Clock::now() < deadline) {
      size_t nl;
      while ((nl = buffer_.find('\n')) != std::string::npos) {
        std::string line = buffer_.substr(0, nl);
        buffer_.erase(0, nl + 1);
        if (line.rfind(prefix, 0) == 0) return line.substr(prefix.size());
      }
      pollfd p{stdout_fd_, POLLIN, 0};
      if (::poll(&p, 1, 100) > 0) {
        char buf[4096];
        ssize_t n = ::read(stdout_fd_, buf, sizeof buf);
        if (n <= 0) return "";
        buffer_.append(buf, static_cast<size_t>(n));
      }
    }
    return "";
  }

  // CPU time (user + system) the process has used so far, in ms; 0 when unknown.
  double CpuMs() const {
    std::ifstream stat("/proc/" + std::to_string(pid_) + "/stat");
    std::string text((std::istreambuf_iterator<char>(stat)), {});
    const size_t end = text.rfind(')');  // the command name may hold spaces
    if (end == std::string::npos) return 0;
    std::istringstream fields(text.substr(end + 2));
    std::string field;
    long long utime = 0, stime = 0;
    for (int i = 3; i <= 15 && fields >> field; ++i) {  // fields 14 and 15 of proc(5)
      if (i == 14) utime = std::atoll(field.c_str());
      if (i == 15) stime = std::atoll(field.c_str());
    }
    return static_cast<double>(utime + stime) * 1000.0 / static_cast<double>(::sysconf(_SC_CLK_TCK));
  }

  // Resident set size in KiB (VmRSS), 0 when unknown.
  int64_t RssKib() const {
    std::ifstream status("/proc/" + std::to_string(pid_) + "/status");
    for (std::string line; std::getline(status, line);) {
      if (line.rfind("VmRSS:", 0) == 0) return std::atoll(line.c_str() + 6);
    }
    return 0;
  }

  void Stop() {
    if (pid_ <= 0) return;
    ::kill(pid_, SIGTERM);
    ::waitpid(pid_, nullptr, 0);
    ::close(stdout_fd_);
    pid_ = -1;
  }

 private:
  pid_t pid_ = -1;
  int stdout_fd_ = -1;
  std::string buffer_;
};

// ---- workload ---------------------------------------------------------------------------------

// Deterministic filler text of about `bytes` bytes.
std::string Words(uint64_t seed, int bytes) {
  static const char* kWords[] = {"context", "cache",   "prefix", "agent",  "token",   "window",
                                 "layer",   "compact", "tool",   "result", "request", "stable",
                                 "segment", "budget",  "record", "replica"};
  std::string out;
  uint64_t x = seed * 6364136223846793005ULL + 1442695040888963407ULL;
  while (static_cast<int>(out.size()) < bytes) {
    x = x * 6364136223846793005ULL + 1442695040888963407ULL;
    out += kWords[(x >> 33) % 16];
    out += ' ';
  }
  return out;
}

struct Sample {
  double ms = 0;
  bool ok = false;
};

// HTTP requests of the current run retried once on a new connection.
std::atomic<int64_t> reconnect_count{0};

struct RunResult {
  std::string mode;
  std::vector<double> ms;  // successful requests
  int64_t errors = 0;
  double sidecar_cpu_ms = 0;  // the sidecar's CPU time during the run (0: no sidecar)
  double sim_cpu_ms = 0;      // strata-sim's
  int64_t reconnects = 0;  // HTTP requests retried once on a new connection
  std::string first_error;
  double seconds = 0;
};

double Percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t i = std::min(v.size() - 1, static_cast<size_t>(p * static_cast<double>(v.size())));
  return v[i];
}

// Runs `agent_fn(agent_index, record)` for every agent on `concurrency` threads.
RunResult RunAgents(const std::string& mode, const Options& o,
                    const std::function<void(int, std::vector<Sample>*, std::string*)>& agent_fn) {
  reconnect_count = 0;
  RunResult result;
  result.mode = mode;
  std::atomic<int> next{0};
  std::mutex mu;
  const auto start = Clock::now();
  std::vector<std::thread> threads;
  for (int t = 0; t < o.concurrency; ++t) {
    threads.emplace_back([&] {
      for (int a; (a = next.fetch_add(1)) < o.agents;) {
        std::vector<Sample> samples;
        std::string error;
        agent_fn(a, &samples, &error);
        std::lock_guard<std::mutex> lock(mu);
        for (const Sample& s : samples) {
          if (s.ok) {
            result.ms.push_back(s.ms);
          } else {
            ++result.errors;
          }
        }
        // An agent stops at its first error: the turns it did not get to are errors too (a
        // failed CreateAgent loses all of them).
        if (!error.empty() && samples.size() < static_cast<size_t>(o.turns)) {
          result.errors += o.turns - static_cast<int64_t>(samples.size());
        }
        if (!error.empty() && result.first_error.empty()) result.first_error = error;
      }
    });
  }
  for (std::thread& t : threads) t.join();
  result.seconds = std::chrono::duration<double>(Clock::now() - start).count();
  result.reconnects = reconnect_count.load();
  return result;
}

double MsSince(Clock::time_point t) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t).count();
}

json ChatBody(const json& messages) {
  return json{
      {"model", "glm-5.3-flash"}, {"messages", messages}, {"max_tokens", 64}, {"stream", false}};
}

// One agent's conversation POSTed whole every turn to `host:port` (strata-sim or the proxy).
void HttpAgent(const std::string& host, int port, const std::string& agent_id, int agent,
               const Options& o, std::vector<Sample>* samples, std::string* error) {
  std::atomic<int64_t>* reconnects = &reconnect_count;
  httplib::Client client(host, port);
  client.set_keep_alive(true);
  client.set_tcp_nodelay(true);
  client.set_read_timeout(std::chrono::seconds(120));
  httplib::Headers headers;
  if (!agent_id.empty()) headers.emplace("X-Strata-Agent", agent_id);
  json messages = json::array();
  messages.push_back({{"role", "system"}, {"content", Words(1, o.system_bytes)}});
  for (int turn = 0; turn < o.turns; ++turn) {
    messages.push_back(
        {{"role", "user"},
         {"content", "turn " + std::to_string(turn) + ": " +
                         Words(static_cast<uint64_t>(agent) * 1000 + turn, o.user_bytes)}});
    const std::string body = ChatBody(messages).dump();
    const auto t0 = Clock::now();
    auto r = client.Post("/v1/chat/completions", headers, body, "application/json");
    if (!r) {
      // No response at all (e.g. the server closed a kept-alive connection as the request went
      // out): retry once on a new connection, as HTTP clients such as the openai SDK do, and
      // count it.
      ++*reconnects;
      r = client.Post("/v1/chat/completions", headers, body, "application/json");
    }
    Sample s{MsSince(t0), r && r->status == 200};
    samples->push_back(s);
    if (!s.ok) {
      if (error->empty()) {
        *error = r ? "HTTP " + std::to_string(r->status) + ": " + r->body.substr(0, 300)
                   : "HTTP request failed: " + httplib::to_string(r.error());
      }
      return;
    }
    json reply = json::parse(r->body, nullptr, false);
    std::string content;
    if (reply.is_object() && reply.contains("choices")) {
      content = reply["choices"][0]["message"].value("content", "");
    }
    messages.push_back({{"role", "assistant"}, {"content", content}});
  }
}

void GrpcAgent(strata::v1::ContextService::Stub* stub, const std::string& agent_id, int agent,
               const Options& o, std::vector<Sample>* samples, std::string* error) {
  {
    grpc::ClientContext ctx;
    strata::v1::CreateAgentRequest req;
    req.set_agent_id(agent_id);
    req.mutable_spec()->set_max_output_tokens(64);
    req.mutable_spec()->add_system_prompts(Words(1, o.system_bytes));
    strata::v1::AgentInfo info;
    grpc::Status s = stub->CreateAgent(&ctx, req, &info);
    if (!s.ok()) {
      *error = "CreateAgent: " + s.error_message();
      return;
    }
  }
  for (int turn = 0; turn < o.turns; ++turn) {
    grpc::ClientContext ctx;
    strata::v1::CompleteRequest req;
    req.set_agent_id(agent_id);
    req.set_user_message("turn " + std::to_string(turn) + ": " +
                         Words(static_cast<uint64_t>(agent) * 1000 + turn, o.user_bytes));
    req.set_final_only(!o.grpc_deltas);
    const auto t0 = Clock::now();
    auto reader = stub->Complete(&ctx, req);
    strata::v1::CompleteEvent event;
    bool got_turn = false;
    while (reader->Read(&event)) got_turn = got_turn || event.has_turn();
    grpc::Status s = reader->Finish();
    Sample sample{MsSince(t0), s.ok() && got_turn};
    samples->push_back(sample);
    if (!sample.ok) {
      if (error->empty()) *error = "Complete: " + s.error_message();
      return;
    }
  }
}

double ThreadCpuUs() {
  timespec t{};
  ::clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return static_cast<double>(t.tv_sec) * 1e6 + static_cast<double>(t.tv_nsec) / 1e3;
}

// The least a managed turn costs, measured here on one thread, in microseconds of CPU per turn:
// one durable append of the user message (a Context attached to a SQLite store with the sidecar's
// durability), one Build of the conversation, one upstream call (strata's HTTP transport to the
// same strata-sim), over the same workload as the agents (system prompt, user messages, turns).
struct Floor {
  double append_us = 0, build_us = 0, upstream_us = 0;
  double total_us() const { return append_us + build_us + upstream_us; }
};

Floor MeasureFloor(const Options& o, const std::string& dir, const std::string& sim_url,
                   const std::string& sync) {
  strata::StoreOptions store_options;
  store_options.synchronous = sync == "normal" ? strata::StoreSync::kNormal : strata::StoreSync::kFull;
  auto store = strata::OpenSqliteStore(dir + "/floor-" + sync + ".db", store_options);
  if (!store.ok()) Die("floor: " + store.status().ToString());
  strata::HttpTransportOptions http;
  http.base_url = sim_url;
  auto transport = strata::MakeHttpTransport(http);
  if (!transport.ok()) Die("floor: " + transport.status().ToString());
  Floor sum;
  int64_t turns = 0;
  const int agents = std::min(o.agents, 20);
  for (int a = 0; a < agents; ++a) {
    strata::ContextOptions options;
    options.agent.id = "floor-" + std::to_string(a);
    auto context = strata::CreateContext(**store, options);
    if (!context.ok()) Die("floor: " + context.status().ToString());
    strata::Context& c = **context;
    if (!c.SetSystemPrompt(Words(1, o.system_bytes)).ok()) Die("floor: SetSystemPrompt failed");
    for (int turn = 0; turn < o.turns; ++turn) {
      const std::string user = "turn " + std::to_string(turn) + ": " +
                               Words(static_cast<uint64_t>(a) * 1000 + turn, o.user_bytes);
      const double t0 = ThreadCpuUs();
      auto appended = c.AppendUser(user);
      const double t1 = ThreadCpuUs();
      auto built = c.Build();
      const double t2 = ThreadCpuUs();
      if (!appended.ok() || !built.ok()) Die("floor: append or Build failed");
      strata::Response response;
      strata::Status sent = (*transport)->Send(built->body, strata::CallOptions(), &response);
      const double t3 = ThreadCpuUs();
      if (!sent.ok()) Die("floor: " + sent.ToString());
      strata::AssistantMessage reply;
      reply.content = response.content;
      if (!c.AppendAssistant(reply).ok()) Die("floor: AppendAssistant failed");
      sum.append_us += t1 - t0;
      sum.build_us += t2 - t1;
      sum.upstream_us += t3 - t2;
      ++turns;
    }
  }
  sum.append_us /= static_cast<double>(turns);
  sum.build_us /= static_cast<double>(turns);
  sum.upstream_us /= static_cast<double>(turns);
  return sum;
}

// What the sidecar spends on a call that does nothing, in microseconds of its CPU per call,
// measured on the idle sidecar: a gRPC health check (unary, on one channel) and an HTTP GET
// /healthz (on one kept-alive connection). The turn's floor leaves out receiving the call and
// answering it; these are the least of that for each way (a turn's call also carries its
// messages, and streams its answer).
struct CallFloor {
  double grpc_us = 0, http_us = 0;
};

CallFloor MeasureCallFloor(const Child& sidecar, const std::string& grpc_address,
                           const std::string& http_address, int calls) {
  CallFloor floor;
  {
    grpc::GenericStub stub(grpc::CreateChannel(grpc_address, grpc::InsecureChannelCredentials()));
    grpc::CompletionQueue cq;
    grpc::Slice empty("");  // an empty grpc.health.v1.HealthCheckRequest: the whole server
    const grpc::ByteBuffer request(&empty, 1);
    auto check = [&] {
      grpc::ClientContext context;
      grpc::ByteBuffer response;
      grpc::Status status;
      auto call = stub.PrepareUnaryCall(&context, "/grpc.health.v1.Health/Check", request, &cq);
      call->StartCall();
      call->Finish(&response, &status, reinterpret_cast<void*>(1));
      void* tag = nullptr;
      bool ok = false;
      if (!cq.Next(&tag, &ok) || !ok || !status.ok()) {
        Die("call floor: the gRPC health check failed: " + status.error_message());
      }
    };
    check();  // connects
    const double cpu = sidecar.CpuMs();
    for (int i = 0; i < calls; ++i) check();
    floor.grpc_us = (sidecar.CpuMs() - cpu) * 1000 / calls;
    cq.Shutdown();
    void* tag = nullptr;
    bool ok = false;
    while (cq.Next(&tag, &ok)) {
    }
  }
  if (!http_address.empty()) {
    const auto colon = http_address.rfind(':');
    httplib::Client client(http_address.substr(0, colon),
                           std::atoi(http_address.c_str() + colon + 1));
    client.set_keep_alive(true);
    client.set_tcp_nodelay(true);
    auto get = [&] {
      auto r = client.Get("/healthz");
      if (!r || r->status != 200) Die("call floor: GET /healthz failed");
    };
    get();
    const double cpu = sidecar.CpuMs();
    for (int i = 0; i < calls; ++i) get();
    floor.http_us = (sidecar.CpuMs() - cpu) * 1000 / calls;
  }
  return floor;
}

void DeleteAgent(strata::v1::ContextService::Stub* stub, const std::string& agent_id) {
  grpc::ClientContext ctx;
  strata::v1::DeleteAgentRequest req;
  req.set_agent_id(agent_id);
  strata::v1::DeleteAgentResponse resp;
  (void)stub->DeleteAgent(&ctx, req, &resp);
}

std::pair<std::string, int> SplitHostPort(const std::string& hp) {
  const size_t colon = hp.rfind(':');
  return {hp.substr(0, colon), std::atoi(hp.c_str() + colon + 1)};
}

json Summary(const RunResult& r, const RunResult* direct, const Floor* floor = nullptr,
             double call_floor_us = 0) {
  json j{{"mode", r.mode},
         {"requests", r.ms.size()},
         {"errors", r.errors},
         {"reconnects", r.reconnects},
         {"seconds", r.seconds},
         {"requests_per_s", r.seconds > 0 ? static_cast<double>(r.ms.size()) / r.seconds : 0},
         {"p50_ms", Percentile(r.ms, 0.50)},
         {"p90_ms", Percentile(r.ms, 0.90)},
         {"p99_ms", Percentile(r.ms, 0.99)}};
  if (!r.first_error.empty()) j["first_error"] = r.first_error;
  const double requests = static_cast<double>(std::max<size_t>(1, r.ms.size()));
  j["sim_cpu_us_per_request"] = r.sim_cpu_ms * 1000 / requests;
  if (r.sidecar_cpu_ms > 0) {
    j["sidecar_cpu_us_per_request"] = r.sidecar_cpu_ms * 1000 / requests;
    if (floor != nullptr && floor->total_us() > 0) {
      j["floor_us"] = floor->total_us();
      j["sidecar_cpu_ratio_to_floor"] = r.sidecar_cpu_ms * 1000 / requests / floor->total_us();
      if (call_floor_us > 0) {
        j["call_floor_us"] = call_floor_us;
        j["sidecar_cpu_ratio_to_floor_with_call"] =
            r.sidecar_cpu_ms * 1000 / requests / (floor->total_us() + call_floor_us);
      }
    }
  }
  if (direct != nullptr && r.mode != "direct" && !direct->ms.empty()) {
    const double d50 = Percentile(direct->ms, 0.50), d99 = Percentile(direct->ms, 0.99);
    j["added_p50_ms"] = Percentile(r.ms, 0.50) - d50;
    j["added_p99_ms"] = Percentile(r.ms, 0.99) - d99;
    j["p50_ratio_to_direct"] = d50 > 0 ? Percentile(r.ms, 0.50) / d50 : 0;
    j["p99_ratio_to_direct"] = d99 > 0 ? Percentile(r.ms, 0.99) / d99 : 0;
    j["throughput_ratio_to_direct"] =
        direct->seconds > 0 && r.seconds > 0
            ? (static_cast<double>(r.ms.size()) / r.seconds) /
                  (static_cast<double>(direct->ms.size()) / direct->seconds)
            : 0;
  }
  return j;
}

void Print(const json& s) {
  std::printf("%-12s %6lld req %4lld err %8.1f req/s  p50 %7.2f ms  p90 %7.2f ms  p99 %7.2f ms",
              s["mode"].get<std::string>().c_str(), static_cast<long long>(s["requests"]),
              static_cast<long long>(s["errors"]), s["requests_per_s"].get<double>(),
              s["p50_ms"].get<double>(), s["p90_ms"].get<double>(), s["p99_ms"].get<double>());
  if (s.contains("added_p50_ms")) {
    std::printf("  added p50 %+.2f ms (x%.2f)  p99 %+.2f ms (x%.2f)",
                s["added_p50_ms"].get<double>(), s["p50_ratio_to_direct"].get<double>(),
                s["added_p99_ms"].get<double>(), s["p99_ratio_to_direct"].get<double>());
  }
  if (s.contains("sidecar_cpu_us_per_request")) {
    std::printf("  sidecar CPU %.0f us/req", s["sidecar_cpu_us_per_request"].get<double>());
    if (s.contains("sidecar_cpu_ratio_to_floor")) {
      std::printf(" (x%.2f the floor", s["sidecar_cpu_ratio_to_floor"].get<double>());
      if (s.contains("sidecar_cpu_ratio_to_floor_with_call")) {
        std::printf(", x%.2f with the call's",
                    s["sidecar_cpu_ratio_to_floor_with_call"].get<double>());
      }
      std::printf(")");
    }
  }
  std::printf("  sim CPU %.0f us/req", s["sim_cpu_us_per_request"].get<double>());
  if (s["reconnects"].get<int64_t>() > 0) {
    std::printf("  (%lld retried on a new connection)", static_cast<long long>(s["reconnects"]));
  }
  std::printf("\n");
  if (s.contains("first_error")) {
    std::printf("        first error: %s\n", s["first_error"].get<std::string>().c_str());
  }
  std::fflush(stdout);
}

}  // namespace

// A sidecar process on `store`, started and listening (gRPC only); `address` is its HOST:PORT.
std::unique_ptr<Child> StartSidecar(const Options& o, const std::string& dir,
                                    const std::string& upstream, const std::string& store,
                                    const std::string& name, std::string& address) {
  auto sidecar = std::make_unique<Child>(
      std::vector<std::string>{o.sidecar, "--config", dir + "/sidecar.json", "--grpc-listen",
                               "127.0.0.1:0", "--store", store, "--upstream", upstream},
      dir + "/" + name + ".log");
  address = sidecar->WaitForLine("grpc listening on ", std::chrono::seconds(30));
  if (address.empty()) Die("strata-sidecar did not start (log: " + dir + "/" + name + ".log)");
  return sidecar;
}

// --shared-store: the gRPC way with 1, then 2 sidecars on one database (see the file comment).
void RunSharedStore(const Options& o, const std::string& dir, const std::string& upstream,
                    Child& sim, const RunResult* direct, json& report) {
  for (int n = 1; n <= 2; ++n) {
    std::vector<std::unique_ptr<Child>> sidecars;
    std::vector<std::vector<std::unique_ptr<strata::v1::ContextService::Stub>>> stubs(n);
    std::vector<std::shared_ptr<grpc::Channel>> channels;
    for (int i = 0; i < n; ++i) {
      std::string address;
      sidecars.push_back(StartSidecar(o, dir, upstream, o.shared_store,
                                      "shared-" + std::to_string(n) + "-" + std::to_string(i),
                                      address));
      for (int t = 0; t < o.concurrency; ++t) {
        grpc::ChannelArguments args;
        args.SetInt("grpc.channel_id", t);
        channels.push_back(
            grpc::CreateCustomChannel(address, grpc::InsecureChannelCredentials(), args));
        stubs[i].push_back(strata::v1::ContextService::NewStub(channels.back()));
      }
    }
    auto cpu = [&] {
      double total = 0;
      for (const auto& sidecar : sidecars) total += sidecar->CpuMs();
      return total;
    };
    const std::string mode = "grpc/pg x" + std::to_string(n);
    const double sidecar_cpu = cpu(), sim_cpu = sim.CpuMs();
    RunResult r = RunAgents(mode, o, [&](int a, std::vector<Sample>* s, std::string* e) {
      auto* stub = stubs[static_cast<size_t>(a % n)][static_cast<size_t>(a % o.concurrency)].get();
      // The process id in the agent ids: a database kept from an earlier run holds its agents.
      GrpcAgent(stub, "pg" + std::to_string(::getpid()) + "x" + std::to_string(n) + "-" +
                          std::to_string(a),
                a, o, s, e);
    });
    r.sidecar_cpu_ms = std::max(1e-3, cpu() - sidecar_cpu);
    r.sim_cpu_ms = sim.CpuMs() - sim_cpu;
    json summary = Summary(r, direct);
    summary["sidecars"] = n;
    summary["store"] = "postgresql";
    Print(summary);
    report["runs"].push_back(summary);
    for (auto& sidecar : sidecars) sidecar->Stop();
  }
}

int main(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) Die(a + " needs a value");
      return argv[++i];
    };
    if (a == "--agents") {
      o.agents = std::stoi(value());
    } else if (a == "--turns") {
      o.turns = std::stoi(value());
    } else if (a == "--concurrency") {
      o.concurrency = std::stoi(value());
    } else if (a == "--modes") {
      o.modes = value();
    } else if (a == "--store-sync") {
      o.store_syncs.clear();
      std::stringstream list(value());
      for (std::string item; std::getline(list, item, ',');) {
        if (item != "full" && item != "normal") {
          Die("--store-sync: \"" + item + "\" is not full or normal (a list: full,normal)");
        }
        o.store_syncs.push_back(item);
      }
      if (o.store_syncs.empty()) Die("--store-sync needs full, normal or full,normal");
    } else if (a == "--soak-minutes") {
      o.soak_minutes = std::stod(value());
    } else if (a == "--shared-store") {
      o.shared_store = value();
    } else if (a == "--json") {
      o.json_path = value();
    } else if (a == "--system-bytes") {
      o.system_bytes = std::stoi(value());
    } else if (a == "--grpc-deltas") {
      o.grpc_deltas = true;
    } else if (a == "--sim") {
      o.sim = value();
    } else if (a == "--sidecar") {
      o.sidecar = value();
    } else {
      Die("unknown flag " + a +
          " (known: --agents --turns --concurrency --modes --store-sync --soak-minutes "
          "--shared-store --json "
          "--system-bytes --grpc-deltas --sim --sidecar)");
    }
  }
  if (o.agents < 1 || o.turns < 1 || o.concurrency < 1) {
    Die("--agents, --turns and --concurrency must be >= 1");
  }
  if (o.system_bytes < 1 || o.system_bytes > (3 << 20)) {
    Die("--system-bytes must be between 1 and 3145728 (the proxy's request limit is 4 MiB)");
  }
  auto has_mode = [&](const char* m) {
    return ("," + o.modes + ",").find(std::string(",") + m + ",") != std::string::npos;
  };

  const std::string dir = (std::filesystem::temp_directory_path() /
                           ("strata-sidecar-load-" + std::to_string(::getpid())))
                              .string();
  std::filesystem::create_directories(dir);
  std::signal(SIGPIPE, SIG_IGN);

  Child sim({o.sim, "--host", "127.0.0.1", "--port", "0"}, dir + "/sim.log");
  const std::string sim_line = sim.WaitForLine("strata-sim http=", std::chrono::seconds(30));
  if (sim_line.empty()) Die("strata-sim did not start (log: " + dir + "/sim.log)");
  const auto [sim_host, sim_port] = SplitHostPort(sim_line.substr(0, sim_line.find(' ')));

  {
    std::ofstream config(dir + "/sidecar.json");
    // Every client here has the one address 127.0.0.1, and a new agent's connection can arrive
    // before the sidecar has released the one the previous agent closed: the per-client limit is
    // set above what the clients hold, so that it does not refuse them (429) under load.
    config << R"({"default_limits": {"max_agents": 0, "max_concurrent_completions": 0},)"
           << R"( "max_threads": )" << (o.concurrency * 2 + 8)
           << R"(, "http_max_connections_per_client": )" << (o.concurrency * 2 + 8) << "}";
  }
  std::printf("sidecar_load: %d agents x %d turns, concurrency %d; strata-sim %s:%d\n", o.agents,
              o.turns, o.concurrency, sim_host.c_str(), sim_port);

  json report{{"agents", o.agents},
              {"turns", o.turns},
              {"concurrency", o.concurrency},
              {"store_dir", std::filesystem::temp_directory_path().string()},
              {"runs", json::array()},
              {"sidecars", json::array()}};
  RunResult direct;
  bool have_direct = false;
  if (has_mode("direct")) {
    const double sim_cpu = sim.CpuMs();
    direct = RunAgents("direct", o, [&](int a, std::vector<Sample>* s, std::string* e) {
      HttpAgent(sim_host, sim_port, "", a, o, s, e);
    });
    direct.sim_cpu_ms = sim.CpuMs() - sim_cpu;
    have_direct = true;
    json s = Summary(direct, nullptr);
    Print(s);
    report["runs"].push_back(s);
  }

  // One sidecar per durability mode, each on its own store, run one after the other.
  for (size_t k = 0; k < o.store_syncs.size(); ++k) {
    const std::string& sync = o.store_syncs[k];
    const bool last = k + 1 == o.store_syncs.size();
    // Mode names carry the durability mode when several are compared ("grpc/normal").
    const std::string suffix = o.store_syncs.size() > 1 ? "/" + sync : "";
    Child sidecar({o.sidecar, "--config", dir + "/sidecar.json", "--grpc-listen", "127.0.0.1:0",
                   "--http-listen", "127.0.0.1:0", "--store", dir + "/sidecar-" + sync + ".db",
                   "--store-sync", sync, "--upstream",
                   "http://" + sim_host + ":" + std::to_string(sim_port) + "/v1"},
                  dir + "/sidecar-" + sync + ".log");
    const std::string grpc_address =
        sidecar.WaitForLine("grpc listening on ", std::chrono::seconds(30));
    if (grpc_address.empty()) {
      Die("strata-sidecar did not start (log: " + dir + "/sidecar-" + sync + ".log)");
    }
    const std::string http_address =
        sidecar.WaitForLine("http listening on ", std::chrono::seconds(2));
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    const int64_t rss_start = sidecar.RssKib();
    std::printf("sidecar (--store-sync %s): grpc %s, http %s\n", sync.c_str(), grpc_address.c_str(),
                http_address.empty() ? "(none)" : http_address.c_str());

    std::vector<std::shared_ptr<grpc::Channel>> channels;
    std::vector<std::unique_ptr<strata::v1::ContextService::Stub>> stubs;
    for (int t = 0; t < o.concurrency; ++t) {
      grpc::ChannelArguments args;
      args.SetInt("grpc.channel_id",
                  t);  // distinct connections, one per worker, like separate agents
      channels.push_back(
          grpc::CreateCustomChannel(grpc_address, grpc::InsecureChannelCredentials(), args));
      stubs.push_back(strata::v1::ContextService::NewStub(channels.back()));
    }
    auto stub_for = [&](int agent) {
      return stubs[static_cast<size_t>(agent % o.concurrency)].get();
    };

    // The floor, measured with this sidecar's durability before its load (the sidecar is idle).
    const Floor floor =
        MeasureFloor(o, dir, "http://" + sim_host + ":" + std::to_string(sim_port) + "/v1", sync);
    std::printf(
        "floor (--store-sync %s): %.0f us CPU per turn = append %.0f + Build %.0f + upstream call "
        "%.0f\n",
        sync.c_str(), floor.total_us(), floor.append_us, floor.build_us, floor.upstream_us);
    const CallFloor call_floor = MeasureCallFloor(sidecar, grpc_address, http_address, 2000);
    std::printf(
        "a call that does nothing (--store-sync %s): the sidecar's CPU per gRPC health check %.0f "
        "us, per HTTP GET /healthz %.0f us\n",
        sync.c_str(), call_floor.grpc_us, call_floor.http_us);
    json sidecar_report{{"store_sync", sync},
                        {"call_floor_grpc_us", call_floor.grpc_us},
                        {"call_floor_http_us", call_floor.http_us},
                        {"rss_start_kib", rss_start},
                        {"floor_us", floor.total_us()},
                        {"floor_append_us", floor.append_us},
                        {"floor_build_us", floor.build_us},
                        {"floor_upstream_us", floor.upstream_us}};
    // A sidecar way's run with the CPU time the sidecar and strata-sim used during it.
    auto measured = [&](const std::string& mode,
                        const std::function<void(int, std::vector<Sample>*, std::string*)>& fn) {
      const double sidecar_cpu = sidecar.CpuMs(), sim_cpu = sim.CpuMs();
      RunResult r = RunAgents(mode, o, fn);
      r.sidecar_cpu_ms = std::max(1e-3, sidecar.CpuMs() - sidecar_cpu);
      r.sim_cpu_ms = sim.CpuMs() - sim_cpu;
      return r;
    };
    int64_t rss_after_grpc = 0;
    if (has_mode("grpc")) {
      RunResult r =
          measured("grpc" + suffix, [&](int a, std::vector<Sample>* s, std::string* e) {
            GrpcAgent(stub_for(a), "grpc-" + std::to_string(a), a, o, s, e);
          });
      rss_after_grpc = sidecar.RssKib();
      json s = Summary(r, have_direct ? &direct : nullptr, &floor, call_floor.grpc_us);
      s["store_sync"] = sync;
      Print(s);
      report["runs"].push_back(s);
    }
    int64_t rss_after_proxy = 0;
    if (has_mode("proxy")) {
      if (http_address.empty()) {
        std::printf("proxy   skipped: the sidecar printed no \"http listening on\" line\n");
      } else {
        const auto [http_host, http_port] = SplitHostPort(http_address);
        RunResult r =
            measured("proxy" + suffix, [&](int a, std::vector<Sample>* s, std::string* e) {
              HttpAgent(http_host, http_port, "proxy-" + std::to_string(a), a, o, s, e);
            });
        rss_after_proxy = sidecar.RssKib();
        json s = Summary(r, have_direct ? &direct : nullptr, &floor, call_floor.http_us);
        s["store_sync"] = sync;
        Print(s);
        report["runs"].push_back(s);
      }
    }
    std::printf("sidecar RSS (--store-sync %s): start %.1f MiB", sync.c_str(), rss_start / 1024.0);
    if (rss_after_grpc > 0) {
      std::printf(", after grpc %.1f MiB (%+.1f KiB per agent)", rss_after_grpc / 1024.0,
                  static_cast<double>(rss_after_grpc - rss_start) / o.agents);
      sidecar_report["rss_after_grpc_kib"] = rss_after_grpc;
      sidecar_report["rss_growth_per_agent_grpc_kib"] =
          static_cast<double>(rss_after_grpc - rss_start) / o.agents;
    }
    if (rss_after_proxy > 0) {
      const int64_t base = rss_after_grpc > 0 ? rss_after_grpc : rss_start;
      std::printf(", after proxy %.1f MiB (%+.1f KiB per agent)", rss_after_proxy / 1024.0,
                  static_cast<double>(rss_after_proxy - base) / o.agents);
      sidecar_report["rss_after_proxy_kib"] = rss_after_proxy;
      sidecar_report["rss_growth_per_agent_proxy_kib"] =
          static_cast<double>(rss_after_proxy - base) / o.agents;
    }
    std::printf("\n");
    std::fflush(stdout);

    if (last && o.soak_minutes > 0) {
      // The same load again and again on the last sidecar: the soak agents are deleted after each
      // round and created again by the next, so a flat RSS means nothing is kept per request or
      // per deleted agent. Each round prints the time since the soak began and the RSS then.
      json rounds = json::array();
      const auto soak_start = Clock::now();
      const auto soak_end =
          soak_start + std::chrono::duration<double, std::ratio<60>>(o.soak_minutes);
      for (int round = 1; Clock::now() < soak_end; ++round) {
        RunResult r = RunAgents("soak", o, [&](int a, std::vector<Sample>* s, std::string* e) {
          GrpcAgent(stub_for(a), "soak-" + std::to_string(a), a, o, s, e);
          DeleteAgent(stub_for(a), "soak-" + std::to_string(a));
        });
        const int64_t rss = sidecar.RssKib();
        const double elapsed = std::chrono::duration<double>(Clock::now() - soak_start).count();
        std::printf(
            "soak round %2d at %6.1f s: %6zu req %3lld err %8.1f req/s p50 %6.2f ms p99 %6.2f ms"
            "  RSS %.1f MiB\n",
            round, elapsed, r.ms.size(), static_cast<long long>(r.errors),
            static_cast<double>(r.ms.size()) / r.seconds, Percentile(r.ms, 0.5),
            Percentile(r.ms, 0.99), rss / 1024.0);
        std::fflush(stdout);
        rounds.push_back({{"round", round},
                          {"elapsed_s", elapsed},
                          {"requests", r.ms.size()},
                          {"errors", r.errors},
                          {"requests_per_s", static_cast<double>(r.ms.size()) / r.seconds},
                          {"p50_ms", Percentile(r.ms, 0.5)},
                          {"p99_ms", Percentile(r.ms, 0.99)},
                          {"rss_kib", rss}});
      }
      sidecar_report["soak_minutes"] = o.soak_minutes;
      sidecar_report["soak"] = rounds;
    }
    report["sidecars"].push_back(sidecar_report);
    sidecar.Stop();
  }

  if (!o.shared_store.empty()) {
    RunSharedStore(o, dir, "http://" + sim_host + ":" + std::to_string(sim_port) + "/v1", sim,
                   have_direct ? &direct : nullptr, report);
  }
  if (!o.json_path.empty()) std::ofstream(o.json_path) << report.dump(2) << "\n";
  sim.Stop();
  std::error_code ignored;
  std::filesystem::remove_all(dir, ignored);
  return 0;
}
