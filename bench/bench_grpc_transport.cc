// gRPC transport benchmark: the gRPC++ transport (strata::transport_grpc) against a strata-sim that
// runs in its own process (so that getrusage() counts the client only): requests/s at concurrency
// 1, 16 and 64 (threads sharing one Transport), and the client's CPU time (user + system) per
// request. Each cell is repeated --rounds times; the table gives the median of the rounds. (The
// first version of this file also ran the hand-encoded libcurl HTTP/2 client that the gRPC++
// transport replaced, side by side; its figures are in docs/benchmarks.md.)
//
//   build/sdk/apps/strata-sim/strata-sim --port -1 --grpc-port 0 &   # prints grpc=127.0.0.1:PORT
//   build/bench/bench_grpc_transport --target=127.0.0.1:PORT --seconds=2 --rounds=3
#include <sys/resource.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "strata/grpc_transport.h"
#include "strata/transport.h"

namespace {

double CpuSeconds() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  auto seconds = [](const timeval& tv) {
    return static_cast<double>(tv.tv_sec) + tv.tv_usec / 1e6;
  };
  return seconds(usage.ru_utime) + seconds(usage.ru_stime);
}

struct Cell {
  double requests_per_s = 0;
  double cpu_us_per_request = 0;
  int64_t errors = 0;
};

// `threads` threads send the body back to back on one transport for `seconds`.
Cell Run(strata::Transport& transport, const std::string& body, int threads, double seconds) {
  std::atomic<bool> stop{false};
  std::atomic<int64_t> done{0}, errors{0};
  const double cpu0 = CpuSeconds();
  const auto t0 = std::chrono::steady_clock::now();
  std::vector<std::thread> workers;
  for (int i = 0; i < threads; ++i) {
    workers.emplace_back([&] {
      while (!stop.load(std::memory_order_relaxed)) {
        strata::Response response;
        strata::Status s = transport.Send(body, strata::CallOptions(), &response);
        if (s.ok() && !response.content.empty()) {
          done.fetch_add(1, std::memory_order_relaxed);
        } else {
          if (errors.fetch_add(1) == 0) std::fprintf(stderr, "error: %s\n", s.ToString().c_str());
        }
      }
    });
  }
  std::this_thread::sleep_for(std::chrono::duration<double>(seconds));
  stop = true;
  for (auto& w : workers) w.join();
  const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const double cpu = CpuSeconds() - cpu0;
  Cell cell;
  const int64_t n = done.load();
  cell.requests_per_s = static_cast<double>(n) / wall;
  cell.cpu_us_per_request = n > 0 ? cpu * 1e6 / static_cast<double>(n) : 0;
  cell.errors = errors.load();
  return cell;
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  std::string target;
  double seconds = 2;
  int rounds = 3;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg.rfind("--target=", 0) == 0)
      target = arg.substr(9);
    else if (arg.rfind("--seconds=", 0) == 0)
      seconds = std::atof(arg.c_str() + 10);
    else if (arg.rfind("--rounds=", 0) == 0)
      rounds = std::atoi(arg.c_str() + 9);
    else {
      std::fprintf(stderr,
                   "unknown argument %s\nusage: %s --target=HOST:PORT [--seconds=2] [--rounds=3]\n",
                   arg.c_str(), argv[0]);
      return 2;
    }
  }
  if (target.empty() || seconds <= 0 || rounds <= 0) {
    std::fprintf(
        stderr,
        "usage: %s --target=HOST:PORT (strata-sim --grpc-port) [--seconds=2] [--rounds=3]\n",
        argv[0]);
    return 2;
  }
  // A small agent turn, streamed (strata-sim answers 16 tokens in 16-byte deltas plus usage).
  const std::string body =
      R"({"model":"glm-5.3-flash","messages":[{"role":"system","content":"You are a coding agent."},)"
      R"({"role":"user","content":"List the files of the repository and summarise the build."}],)"
      R"("stream":true,"stream_options":{"include_usage":true},"max_completion_tokens":64})";

  strata::GrpcTransportOptions grpcpp;
  grpcpp.target = target;
  grpcpp.retry.retry_enabled = false;
  std::map<std::string, std::unique_ptr<strata::Transport>> transports;
  transports["grpc++"] = strata::MakeGrpcTransport(grpcpp).value();
  for (auto& [name, t] : transports) {
    strata::Status health = t->HealthCheck(std::chrono::seconds(5));
    if (!health.ok()) {
      std::fprintf(stderr, "%s: %s\n", name.c_str(), health.ToString().c_str());
      return 1;
    }
  }
  const std::vector<int> concurrency = {1, 16, 64};
  std::map<std::pair<std::string, int>, std::vector<Cell>> cells;
  for (int round = 0; round < rounds; ++round) {
    for (int c : concurrency) {
      for (auto& [name, t] : transports) {
        Run(*t, body, c, std::min(0.3, seconds));  // warm-up (connections, allocator)
        cells[{name, c}].push_back(Run(*t, body, c, seconds));
      }
    }
  }
  std::printf("| transport | concurrency | requests/s | client CPU per request (us) | errors |\n");
  std::printf("|---|---|---|---|---|\n");
  for (int c : concurrency) {
    for (auto& [name, t] : transports) {
      const auto& runs = cells[{name, c}];
      std::vector<double> rps, cpu;
      int64_t errors = 0;
      for (const Cell& cell : runs) {
        rps.push_back(cell.requests_per_s);
        cpu.push_back(cell.cpu_us_per_request);
        errors += cell.errors;
      }
      std::printf("| %s | %d | %.0f | %.0f | %lld |\n", name.c_str(), c, Median(rps), Median(cpu),
                  static_cast<long long>(errors));
    }
  }
  return 0;
}
