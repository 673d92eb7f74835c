// `strata bench`: the agent-shaped load tester (bench_run.h). Against strata-sim by default
// (started as a child process) or any OpenAI-compatible endpoint (--endpoint URL), directly or
// through a pool set (--pools FILE); results as JSON and as a self-contained HTML report. `--mixed`
// runs the headline comparison: one undivided pool against strata's length pools on the same
// simulated hardware.
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <fstream>
#include <iostream>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "bench_run.h"
#include "commands.h"
#include "strata/http_transport.h"
#include "strata/pools.h"
#include "strata/transport.h"

extern char** environ;

namespace strata::cli {
namespace {

using bench::CellResult;
using bench::CellSpec;

// Default time and memory model of the simulator the bench starts: prefill 0.5 us per token plus
// an attention term, one prefill at a time, 512-token blocks, GLM-5.3-Flash's KV capacity on 8 x
// H100 (strata plan), 16 output tokens at 1 ms each.
constexpr char kDefaultSimArgs[] =
    "--prefill-us 0.5 --prefill-attention-us 0.001 --serial-prefill --decode-us 1000 "
    "--output-tokens 16 --block-size 512 --kv-block-tokens 512 --kv-capacity-tokens 4356448";

struct BenchArgs {
  std::string endpoint;
  std::string sim_path;
  std::string sim_args = kDefaultSimArgs;
  std::string lengths = "32k,128k,512k,1m";
  std::string concurrency = "1,4";
  std::string cache = "cold,warm";
  int requests = 2;
  int64_t output_tokens = 16;
  std::string pools_file;
  std::string json_file;
  std::string html_file;
  std::string model = "glm-5.3-flash";
  bool no_progress = false;
  bool mixed = false;
  int mixed_short_clients = 2;
  int mixed_short_requests = 40;
  std::string mixed_short_length = "16k";
  std::string mixed_long_lengths = "512k,1m,512k,1m";
  int64_t mixed_kv_capacity = 1100000;
  int affinity_replicas = 0;
  double affinity_load_factor = 1.25;  // PoolSetConfig::load_factor of the affinity arms
  uint64_t seed = 1;
  std::vector<std::string> traces;  // --traces DIR...: workloads cut from these trajectories
};

// The trajectories of --traces, loaded once (nullptr without --traces).
std::shared_ptr<const bench::TraceCorpus> Corpus(const BenchArgs& args) {
  if (args.traces.empty()) return nullptr;
  StatusOr<bench::TraceCorpus> corpus = bench::LoadTraceCorpus(args.traces);
  if (!corpus.ok()) throw CLI::ValidationError("--traces", corpus.status().message());
  return std::make_shared<const bench::TraceCorpus>(std::move(corpus).value());
}

// What the requests were made of, for the results.
nlohmann::ordered_json WorkloadJson(const bench::TraceCorpus* corpus) {
  nlohmann::ordered_json j;
  j["kind"] = corpus != nullptr ? "traces" : "synthetic";
  if (corpus != nullptr) {
    j["trace_files"] = corpus->files;
    j["trace_bytes"] = corpus->bytes;
  }
  return j;
}

StatusOr<int64_t> ParseLength(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  int64_t multiplier = 1;
  if (!s.empty() && s.back() == 'k') multiplier = 1024;
  if (!s.empty() && s.back() == 'm') multiplier = 1048576;
  if (multiplier != 1) s.pop_back();
  char* end = nullptr;
  long long value = std::strtoll(s.c_str(), &end, 10);
  if (s.empty() || end == nullptr || *end != '\0' || value <= 0) {
    return InvalidArgumentError("\"" + s + "\" is not a length (e.g. 32k, 1m, 4096)");
  }
  return value * multiplier;
}

std::vector<std::string> Split(const std::string& s, char sep = ',') {
  std::vector<std::string> out;
  std::stringstream in(s);
  std::string item;
  while (std::getline(in, item, sep)) {
    if (!item.empty()) out.push_back(item);
  }
  return out;
}

std::string LengthName(int64_t n) {
  if (n % 1048576 == 0) return std::to_string(n / 1048576) + "M";
  if (n % 1024 == 0) return std::to_string(n / 1024) + "K";
  return std::to_string(n);
}

// A strata-sim child process; stopped (SIGTERM, then waited for) on destruction.
class SimProcess {
 public:
  static std::unique_ptr<SimProcess> Start(const std::string& path, const std::string& args) {
    int out[2];
    if (pipe(out) != 0) throw CommandFailed{"pipe() failed"};
    std::vector<std::string> argv_s = {path, "--port", "0"};
    for (const std::string& a : Split(args, ' ')) argv_s.push_back(a);
    std::vector<char*> argv;
    for (std::string& a : argv_s) argv.push_back(a.data());
    argv.push_back(nullptr);
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_adddup2(&actions, out[1], STDOUT_FILENO);
    posix_spawn_file_actions_addclose(&actions, out[0]);
    pid_t pid = 0;
    int rc = posix_spawn(&pid, path.c_str(), &actions, nullptr, argv.data(), environ);
    posix_spawn_file_actions_destroy(&actions);
    close(out[1]);
    if (rc != 0) {
      close(out[0]);
      throw CommandFailed{"cannot start strata-sim at \"" + path + "\": " + std::strerror(rc) +
                          " (give its path with --sim, or an endpoint with --endpoint)"};
    }
    auto sim = std::unique_ptr<SimProcess>(new SimProcess(pid));
    std::string line;
    char c;
    while (read(out[0], &c, 1) == 1 && c != '\n') line += c;
    close(out[0]);
    size_t at = line.find("http=");
    if (at == std::string::npos) {
      throw CommandFailed{"strata-sim did not report its port (printed \"" + line +
                          "\"); check --sim-args"};
    }
    std::string host_port = line.substr(at + 5);
    host_port = host_port.substr(0, host_port.find(' '));
    sim->base_url_ = "http://" + host_port + "/v1";
    return sim;
  }
  ~SimProcess() {
    kill(pid_, SIGTERM);
    int status = 0;
    waitpid(pid_, &status, 0);
  }
  const std::string& base_url() const { return base_url_; }

 private:
  explicit SimProcess(pid_t pid) : pid_(pid) {}
  pid_t pid_;
  std::string base_url_;
};

std::string DefaultSimPath() {
  char buffer[4096];
  ssize_t n = readlink("/proc/self/exe", buffer, sizeof(buffer) - 1);
  std::string dir = ".";
  if (n > 0) {
    std::string self(buffer, static_cast<size_t>(n));
    dir = self.substr(0, self.rfind('/'));
  }
  for (const std::string& candidate : {dir + "/strata-sim", dir + "/../strata-sim/strata-sim"}) {
    if (access(candidate.c_str(), X_OK) == 0) return candidate;
  }
  return dir + "/strata-sim";
}

class Progress {
 public:
  Progress(int64_t total, bool enabled)
      : total_(total), enabled_(enabled && isatty(STDERR_FILENO)) {}
  void SetLabel(const std::string& label) {
    std::lock_guard<std::mutex> lock(mu_);
    label_ = label;
    DrawLocked();
  }
  void Tick() {
    std::lock_guard<std::mutex> lock(mu_);
    ++done_;
    DrawLocked();
  }
  void Finish() {
    if (enabled_) std::fprintf(stderr, "\n");
  }

 private:
  void DrawLocked() {
    if (!enabled_) return;
    const int width = 30;
    int filled = total_ > 0 ? static_cast<int>(width * done_ / total_) : width;
    std::string bar(static_cast<size_t>(filled), '#');
    bar.resize(width, '.');
    std::fprintf(stderr, "\r[%s] %lld/%lld %s\033[K", bar.c_str(), static_cast<long long>(done_),
                 static_cast<long long>(total_), label_.c_str());
    std::fflush(stderr);
  }
  std::mutex mu_;
  int64_t total_, done_ = 0;
  bool enabled_;
  std::string label_;
};

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw CommandFailed{"cannot read \"" + path + "\""};
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

void WriteFile(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << text;
  out.close();
  if (!out) throw CommandFailed{"cannot write \"" + path + "\""};
}

std::string NowIso() {
  std::time_t t = std::time(nullptr);
  char out[32];
  std::strftime(out, sizeof(out), "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&t));
  return out;
}

std::unique_ptr<Transport> MakeTransport(const std::string& url) {
  HttpTransportOptions http;
  http.base_url = url;
  http.retry.max_attempts = 1;  // a load test measures, it does not hide failures
  StatusOr<std::unique_ptr<Transport>> t = MakeHttpTransport(http);
  if (!t.ok()) throw CLI::ValidationError("--endpoint", t.status().message());
  return std::move(t).value();
}

// Endpoint "sim" in a pool config means the simulator the bench started.
std::unique_ptr<PoolSet> MakePools(const std::string& file, const std::string& sim_url) {
  StatusOr<PoolSetConfig> config = ParsePoolSetConfig(ReadFile(file));
  if (!config.ok()) throw CLI::ValidationError("--pools", file + ": " + config.status().message());
  for (PoolConfig& pool : config->pools) {
    for (std::string& e : pool.endpoints) {
      if (e == "sim") {
        if (sim_url.empty())
          throw CLI::ValidationError(
              "--pools", "endpoint \"sim\" needs the started simulator (no --endpoint)");
        e = sim_url;
      }
    }
  }
  config->transport_factory = [](const std::string& url) -> StatusOr<std::unique_ptr<Transport>> {
    HttpTransportOptions http;
    http.base_url = url;
    http.retry.max_attempts = 1;
    return MakeHttpTransport(http);
  };
  StatusOr<std::unique_ptr<PoolSet>> pools = PoolSet::Create(*config);
  if (!pools.ok()) throw CLI::ValidationError("--pools", file + ": " + pools.status().message());
  return std::move(pools).value();
}

// --- The headline: one undivided pool vs length pools on the same two simulated replicas. ---

struct MixedArm {
  std::string name;
  std::vector<double> short_ttft, long_e2e;
  std::vector<double> short_client_ms;  // the bench's own CPU time per short request
  int64_t short_ok = 0, short_total = 0, long_ok = 0, long_total = 0, tokens = 0;
  double wall_s = 0;
  std::vector<std::string> errors;
};

// --sim-args with the KV capacity replaced by --mixed-kv-capacity.
std::string MixedSimArgs(const BenchArgs& args) {
  std::string out;
  std::vector<std::string> words = Split(args.sim_args, ' ');
  for (size_t i = 0; i < words.size(); ++i) {
    if (words[i] == "--kv-capacity-tokens") {
      ++i;
      continue;
    }
    out += words[i] + " ";
  }
  return out + "--kv-capacity-tokens " + std::to_string(args.mixed_kv_capacity);
}

// The arm's pools over the two replicas: length pools (short requests to A; long ones to B, one at
// a time, waiting in strata's queue), or one undivided pool over both.
PoolSetConfig MixedPools(bool with_pools, Transport* a, Transport* b) {
  PoolSetConfig config;
  if (with_pools) {
    // Short requests get replica A; long ones replica B, one at a time, waiting in strata's queue.
    config.pools.push_back(PoolConfig{
        "short", 131072, {}, {a}, 0, 0, std::chrono::milliseconds(0), 16});
    config.pools.push_back(PoolConfig{"long",
                                      1048576 + 4096,
                                      {},
                                      {b},
                                      1,
                                      64,
                                      std::chrono::milliseconds(600000),
                                      16});
    config.ladder = {DegradationStep::kWait, DegradationStep::kRefuse};
  } else {
    config.pools.push_back(PoolConfig{"all",
                                      1048576 + 4096,
                                      {},
                                      {a, b},
                                      0,
                                      0,
                                      std::chrono::milliseconds(0),
                                      16});
  }
  return config;
}

MixedArm RunMixedArm(const BenchArgs& args, bool with_pools, Progress& progress,
                     const bench::TraceCorpus* corpus) {
  const std::string sim_args = MixedSimArgs(args);
  const std::string sim_path = args.sim_path.empty() ? DefaultSimPath() : args.sim_path;
  auto sim_a = SimProcess::Start(sim_path, sim_args);
  auto sim_b = SimProcess::Start(sim_path, sim_args);
  auto transport_a = MakeTransport(sim_a->base_url());
  auto transport_b = MakeTransport(sim_b->base_url());
  auto pools = std::move(PoolSet::Create(MixedPools(with_pools, transport_a.get(), transport_b.get()))).value();
  MixedArm arm;
  arm.name = with_pools ? "strata pools (short: A; long: B, cap 1)" : "one undivided pool (A+B)";
  std::mutex mu;
  CellSpec short_spec;
  short_spec.length = *ParseLength(args.mixed_short_length);
  short_spec.output_tokens = args.output_tokens;
  short_spec.traces = corpus;
  std::vector<int64_t> long_lengths;
  for (const std::string& l : Split(args.mixed_long_lengths))
    long_lengths.push_back(*ParseLength(l));
  std::atomic<uint64_t> ids{0};
  auto send = [&](const std::string& body, Response* response) {
    CallOptions call;
    call.prompt_tokens = static_cast<int64_t>(body.size()) / 4;
    call.request_id = "mixed-" + std::to_string(++ids);
    RequestRecord record;
    return pools->Send(body, call, response, &record);
  };
  const auto start = std::chrono::steady_clock::now();
  std::vector<std::thread> threads;
  for (size_t i = 0; i < long_lengths.size(); ++i) {
    threads.emplace_back([&, i] {
      CellSpec spec = short_spec;
      spec.length = long_lengths[i];
      std::string body = bench::AgentBody(spec, 900000 + i + (with_pools ? 0 : 50000), 0);
      Response response;
      Status s = send(body, &response);
      std::lock_guard<std::mutex> lock(mu);
      ++arm.long_total;
      if (s.ok()) {
        ++arm.long_ok;
        arm.long_e2e.push_back(response.timings.total_ms);
        arm.tokens += response.usage.prompt_tokens + response.usage.completion_tokens;
      } else if (arm.errors.size() < 5) {
        arm.errors.push_back(s.ToString());
      }
      progress.Tick();
    });
  }
  for (int c = 0; c < args.mixed_short_clients; ++c) {
    threads.emplace_back([&, c] {
      for (int r = 0; r < args.mixed_short_requests; ++r) {
        const double cpu_start = bench::ThreadCpuMs();
        std::string body = bench::AgentBody(
            short_spec, 1000 + static_cast<uint64_t>(c) * 1000 + r + (with_pools ? 0 : 500000), 0);
        Response response;
        Status s = send(body, &response);
        const double client_ms = bench::ThreadCpuMs() - cpu_start;
        std::lock_guard<std::mutex> lock(mu);
        ++arm.short_total;
        if (s.ok()) {
          ++arm.short_ok;
          arm.short_ttft.push_back(response.timings.ttft_ms);
          arm.short_client_ms.push_back(client_ms);
          arm.tokens += response.usage.prompt_tokens + response.usage.completion_tokens;
        } else if (arm.errors.size() < 5) {
          arm.errors.push_back(s.ToString());
        }
        progress.Tick();
      }
    });
  }
  for (std::thread& t : threads) t.join();
  arm.wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return arm;
}

nlohmann::ordered_json MixedArmJson(const MixedArm& arm) {
  bench::Percentiles ttft = bench::ComputePercentiles(arm.short_ttft);
  bench::Percentiles e2e = bench::ComputePercentiles(arm.long_e2e);
  nlohmann::ordered_json j;
  j["arm"] = arm.name;
  j["short_ttft_ms"] = {{"p50", ttft.p50}, {"p90", ttft.p90}, {"p99", ttft.p99}};
  bench::Percentiles client = bench::ComputePercentiles(arm.short_client_ms);
  j["short_client_ms"] = {{"p50", client.p50}, {"p99", client.p99}};
  j["short_ok"] = arm.short_ok;
  j["short_total"] = arm.short_total;
  j["long_ok"] = arm.long_ok;
  j["long_total"] = arm.long_total;
  j["long_e2e_ms"] = {{"p50", e2e.p50}, {"p99", e2e.p99}};
  j["throughput_tokens_per_s"] = arm.wall_s > 0 ? static_cast<double>(arm.tokens) / arm.wall_s : 0;
  j["wall_s"] = arm.wall_s;
  if (!arm.errors.empty()) j["error_samples"] = arm.errors;
  return j;
}

void RunMixed(const BenchArgs& args) {
  if (!args.endpoint.empty())
    throw CLI::ValidationError("--mixed", "--mixed starts its own simulators; drop --endpoint");
  const int64_t per_arm = args.mixed_short_clients * args.mixed_short_requests +
                          static_cast<int64_t>(Split(args.mixed_long_lengths).size());
  Progress progress(2 * per_arm, !args.no_progress);
  std::shared_ptr<const bench::TraceCorpus> corpus = Corpus(args);
  progress.SetLabel("undivided pool");
  MixedArm undivided = RunMixedArm(args, false, progress, corpus.get());
  progress.SetLabel("strata pools");
  MixedArm pooled = RunMixedArm(args, true, progress, corpus.get());
  progress.Finish();
  nlohmann::ordered_json out;
  out["scenario"] = "mixed";
  out["started"] = NowIso();
  out["sim_args"] = MixedSimArgs(args);
  out["workload"] = WorkloadJson(corpus.get());
  out["short"] = {{"clients", args.mixed_short_clients},
                  {"requests_per_client", args.mixed_short_requests},
                  {"length", *ParseLength(args.mixed_short_length)}};
  out["long_lengths"] = Split(args.mixed_long_lengths);
  out["arms"] = {MixedArmJson(undivided), MixedArmJson(pooled)};
  std::printf("%-40s %12s %12s %12s %10s %14s\n", "arm", "short p50", "short p99", "client p50",
              "long ok", "tokens/s");
  for (const auto& arm : out["arms"]) {
    std::printf("%-40s %9.1f ms %9.1f ms %9.2f ms %5lld/%-4lld %14.0f\n",
                arm["arm"].get<std::string>().c_str(), arm["short_ttft_ms"]["p50"].get<double>(),
                arm["short_ttft_ms"]["p99"].get<double>(), arm["short_client_ms"]["p50"].get<double>(),
                static_cast<long long>(arm["long_ok"].get<int64_t>()),
                static_cast<long long>(arm["long_total"].get<int64_t>()),
                arm["throughput_tokens_per_s"].get<double>());
  }
  if (!args.json_file.empty()) WriteFile(args.json_file, out.dump(2) + "\n");
}

// --- Prefix affinity: cached share of agents' turns across several replicas. ---

nlohmann::ordered_json RunAffinityArm(const BenchArgs& args, int64_t length, bool affinity,
                                      const bench::TraceCorpus* corpus) {
  const std::string sim_path = args.sim_path.empty() ? DefaultSimPath() : args.sim_path;
  std::vector<std::unique_ptr<SimProcess>> sims;
  std::vector<std::unique_ptr<Transport>> transports;
  PoolConfig pool{"all", 1048576 + 4096, {}, {}, 0, 0, std::chrono::milliseconds(0), 16};
  for (int i = 0; i < args.affinity_replicas; ++i) {
    sims.push_back(SimProcess::Start(sim_path, args.sim_args));
    transports.push_back(MakeTransport(sims.back()->base_url()));
    pool.transports.push_back(transports.back().get());
  }
  PoolSetConfig config;
  config.pools = {pool};
  config.load_factor = args.affinity_load_factor;
  auto pools = std::move(PoolSet::Create(config)).value();
  const int agents = 4 * args.affinity_replicas;
  const int turns = 4;
  CellSpec spec;
  spec.length = length;
  spec.output_tokens = args.output_tokens;
  spec.traces = corpus;
  std::mutex mu;
  int64_t prompt = 0, cached = 0, errors = 0;
  std::vector<double> ttft;
  std::atomic<uint64_t> ids{0};
  std::vector<std::thread> threads;
  for (int a = 0; a < agents; ++a) {
    threads.emplace_back([&, a] {
      for (int turn = 0; turn <= turns; ++turn) {
        const std::string body = bench::AgentBody(spec, 424242 + static_cast<uint64_t>(a), turn);
        CallOptions call;
        call.prompt_tokens = static_cast<int64_t>(body.size()) / 4;
        const uint64_t id = ++ids;
        call.request_id = "affinity-" + std::to_string(id);
        // With affinity the agent's stable-prefix hash is the key; without, every request gets
        // its own key, so requests spread over the replicas as random routing would.
        call.headers.push_back({kPrefixHashHeader, affinity ? "agent-" + std::to_string(a)
                                                            : "request-" + std::to_string(id)});
        Response response;
        Status s = pools->Send(body, call, &response);
        std::lock_guard<std::mutex> lock(mu);
        if (!s.ok()) {
          ++errors;
          continue;
        }
        if (turn == 0) continue;  // the first turn of an agent is cold either way
        prompt += response.usage.prompt_tokens;
        cached += response.usage.cached_tokens.value_or(0);
        ttft.push_back(response.timings.ttft_ms);
      }
    });
  }
  for (std::thread& t : threads) t.join();
  bench::Percentiles p = bench::ComputePercentiles(ttft);
  nlohmann::ordered_json j;
  j["routing"] = affinity ? "prefix affinity" : "no affinity (a key per request)";
  j["replicas"] = args.affinity_replicas;
  j["load_factor"] = args.affinity_load_factor;
  j["agents"] = agents;
  j["turns_measured"] = agents * turns;
  j["cached_share"] = prompt > 0 ? static_cast<double>(cached) / static_cast<double>(prompt) : 0.0;
  j["ttft_ms"] = {{"p50", p.p50}, {"p90", p.p90}, {"p99", p.p99}};
  j["errors"] = errors;
  return j;
}

void RunAffinity(const BenchArgs& args) {
  if (!args.endpoint.empty()) {
    throw CLI::ValidationError("--affinity-replicas", "starts its own simulators; drop --endpoint");
  }
  StatusOr<int64_t> length = ParseLength(Split(args.lengths).at(0));
  if (!length.ok()) throw CLI::ValidationError("--lengths", length.status().message());
  nlohmann::ordered_json out;
  out["scenario"] = "affinity";
  out["started"] = NowIso();
  out["sim_args"] = args.sim_args;
  out["length"] = *length;
  std::shared_ptr<const bench::TraceCorpus> corpus = Corpus(args);
  out["workload"] = WorkloadJson(corpus.get());
  out["arms"] = {RunAffinityArm(args, *length, true, corpus.get()),
                 RunAffinityArm(args, *length, false, corpus.get())};
  std::printf("%-34s %9s %9s %12s %12s %7s\n", "routing", "replicas", "turns", "cached share",
              "TTFT p50", "errors");
  for (const auto& arm : out["arms"]) {
    std::printf("%-34s %9d %9d %11.1f%% %9.1f ms %7lld\n",
                arm["routing"].get<std::string>().c_str(), arm["replicas"].get<int>(),
                arm["turns_measured"].get<int>(), 100 * arm["cached_share"].get<double>(),
                arm["ttft_ms"]["p50"].get<double>(),
                static_cast<long long>(arm["errors"].get<int64_t>()));
  }
  if (!args.json_file.empty()) WriteFile(args.json_file, out.dump(2) + "\n");
}

// The cells of the matrix: --lengths x --concurrency x --cache.
struct BenchMatrix {
  std::vector<int64_t> lengths;
  std::vector<int> concurrency;
  std::vector<bool> states;  // warm?
};

// The matrix from the command line; CLI::ValidationError naming the option for a bad value.
BenchMatrix ParseMatrix(const BenchArgs& args) {
  BenchMatrix matrix;
  std::vector<int64_t>& lengths = matrix.lengths;
  std::vector<int>& concurrency = matrix.concurrency;
  std::vector<bool>& states = matrix.states;
  for (const std::string& l : Split(args.lengths)) {
    StatusOr<int64_t> n = ParseLength(l);
    if (!n.ok()) throw CLI::ValidationError("--lengths", n.status().message());
    lengths.push_back(*n);
  }
  for (const std::string& c : Split(args.concurrency)) {
    int n = std::atoi(c.c_str());
    if (n < 1)
      throw CLI::ValidationError("--concurrency", "\"" + c + "\" is not a positive number");
    concurrency.push_back(n);
  }
  for (const std::string& c : Split(args.cache)) {
    if (c != "cold" && c != "warm")
      throw CLI::ValidationError("--cache", "\"" + c + "\" is neither cold nor warm");
    states.push_back(c == "warm");
  }
  if (lengths.empty() || concurrency.empty() || states.empty()) {
    throw CLI::ValidationError("bench",
                               "--lengths, --concurrency and --cache need at least one value each");
  }
  return matrix;
}

// The matrix's results as a table on stdout, one line per cell.
void PrintCells(const nlohmann::ordered_json& cells) {
  std::printf("%-6s %4s %-5s %5s %6s %10s %10s %10s %10s %10s %12s %7s\n", "length", "conc",
              "cache", "reqs", "errors", "TTFT p50", "TTFT p99", "client p50", "TPOT p50", "E2E p99",
              "tokens/s", "cached");
  for (const auto& cell : cells) {
    std::string cached =
        cell["cached_share"].is_null()
            ? "-"
            : std::to_string(static_cast<int>(cell["cached_share"].get<double>() * 100)) + "%";
    std::printf("%-6s %4d %-5s %5lld %6lld %7.1f ms %7.1f ms %7.2f ms %7.2f ms %7.1f ms %12.0f %7s\n",
                LengthName(cell["length"].get<int64_t>()).c_str(), cell["concurrency"].get<int>(),
                cell["cache"].get<std::string>().c_str(),
                static_cast<long long>(cell["requests"].get<int64_t>()),
                static_cast<long long>(cell["errors"].get<int64_t>()),
                cell["ttft_ms"]["p50"].get<double>(), cell["ttft_ms"]["p99"].get<double>(),
                cell["client_ms"]["p50"].get<double>(), cell["tpot_ms"]["p50"].get<double>(), cell["e2e_ms"]["p99"].get<double>(),
                cell["throughput_tokens_per_s"].get<double>(), cached.c_str());
  }
}

void Run(const BenchArgs& args) {
  if (args.mixed) {
    RunMixed(args);
    return;
  }
  if (args.affinity_replicas > 0) {
    RunAffinity(args);
    return;
  }
  const BenchMatrix matrix = ParseMatrix(args);
  const std::vector<int64_t>& lengths = matrix.lengths;
  const std::vector<int>& concurrency = matrix.concurrency;
  const std::vector<bool>& states = matrix.states;
  if (!args.html_file.empty() && bench::ChartJsBundle().empty()) {
    throw CommandFailed{
        "this strata was built without Chart.js, so --html cannot draw charts: run "
        "scripts/setup (npm package chart.js) and reconfigure, or use --json"};
  }
  std::shared_ptr<const bench::TraceCorpus> corpus = Corpus(args);
  std::unique_ptr<SimProcess> sim;
  std::string endpoint = args.endpoint;
  if (endpoint.empty()) {
    sim =
        SimProcess::Start(args.sim_path.empty() ? DefaultSimPath() : args.sim_path, args.sim_args);
    endpoint = sim->base_url();
  }
  std::unique_ptr<Transport> transport = MakeTransport(endpoint);
  std::unique_ptr<PoolSet> pools;
  if (!args.pools_file.empty()) pools = MakePools(args.pools_file, sim ? sim->base_url() : "");

  int64_t total = 0;
  for (int c : concurrency)
    total += static_cast<int64_t>(c) * args.requests *
             static_cast<int64_t>(lengths.size() * states.size());
  Progress progress(total, !args.no_progress);
  nlohmann::ordered_json results;
  results["endpoint"] = sim ? "strata-sim " + args.sim_args : endpoint;
  results["model"] = args.model;
  results["workload"] = WorkloadJson(corpus.get());
  results["started"] = NowIso();
  results["cells"] = nlohmann::ordered_json::array();
  uint64_t seed = args.seed * 7777;
  for (int64_t length : lengths) {
    for (int c : concurrency) {
      for (bool warm : states) {
        CellSpec spec;
        spec.length = length;
        spec.concurrency = c;
        spec.warm = warm;
        spec.requests_per_agent = args.requests;
        spec.output_tokens = args.output_tokens;
        spec.model = args.model;
        spec.seed = ++seed;
        spec.traces = corpus.get();
        progress.SetLabel(LengthName(length) + " c=" + std::to_string(c) +
                          (warm ? " warm" : " cold"));
        CellResult cell =
            bench::RunCell(spec, transport.get(), pools.get(), [&] { progress.Tick(); });
        results["cells"].push_back(bench::CellToJson(cell));
      }
    }
  }
  progress.Finish();
  PrintCells(results["cells"]);
  if (!args.json_file.empty()) WriteFile(args.json_file, results.dump(2) + "\n");
  if (!args.html_file.empty())
    WriteFile(args.html_file, bench::RenderHtmlReport(results, bench::ChartJsBundle()));
}

}  // namespace

void RegisterBench(CLI::App& app) {
  auto args = std::make_shared<BenchArgs>();
  CLI::App* cmd =
      app.add_subcommand("bench", "Load-test an endpoint with agent-shaped long-context workloads");
  cmd->add_option("--endpoint", args->endpoint,
                  "Base URL of an OpenAI-compatible endpoint (default: start strata-sim)");
  cmd->add_option("--sim", args->sim_path,
                  "Path of the strata-sim program (default: next to strata)");
  cmd->add_option("--sim-args", args->sim_args, "Arguments of the started strata-sim")
      ->capture_default_str();
  cmd->add_option("--lengths", args->lengths, "Input lengths, e.g. 32k,128k,512k,1m")
      ->capture_default_str();
  cmd->add_option("--concurrency", args->concurrency, "Concurrent agents per cell, e.g. 1,8")
      ->capture_default_str();
  cmd->add_option("--cache", args->cache, "Prefix cache states: cold, warm or both")
      ->capture_default_str();
  cmd->add_option("--requests", args->requests, "Measured requests per agent per cell")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  cmd->add_option("--output-tokens", args->output_tokens, "max_tokens of each request")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  cmd->add_option(
      "--pools", args->pools_file,
      "Send through a pool set (strata/pools.h JSON; endpoint \"sim\" = the started simulator)");
  cmd->add_option("--traces", args->traces,
                  "Cut the agents' contexts from the trajectories (*.jsonl, strata/replay/trace.h) "
                  "under "
                  "these directories, e.g. tests/data/traces, instead of synthetic documents")
      ->type_name("DIR");
  cmd->add_option("--json", args->json_file, "Write the results as JSON");
  cmd->add_option("--html", args->html_file, "Write a self-contained HTML report with charts");
  cmd->add_option("--model", args->model, "model field of the requests")->capture_default_str();
  cmd->add_flag("--no-progress", args->no_progress,
                "No progress bar (it is drawn only on a terminal anyway)");
  cmd->add_flag("--mixed", args->mixed,
                "Headline: many short + a few long requests, one undivided pool vs strata's pools");
  cmd->add_option("--mixed-short-clients", args->mixed_short_clients,
                  "--mixed: concurrent short clients")
      ->capture_default_str();
  cmd->add_option("--mixed-short-requests", args->mixed_short_requests,
                  "--mixed: requests per short client")
      ->capture_default_str();
  cmd->add_option("--mixed-short-length", args->mixed_short_length, "--mixed: short input length")
      ->capture_default_str();
  cmd->add_option("--mixed-long-lengths", args->mixed_long_lengths, "--mixed: the long requests")
      ->capture_default_str();
  cmd->add_option("--mixed-kv-capacity", args->mixed_kv_capacity,
                  "--mixed: KV capacity of each simulated replica (tokens)")
      ->capture_default_str();
  cmd->add_option("--affinity-replicas", args->affinity_replicas,
                  "Measure prefix-affinity routing: cached share of agents' turns over N simulated "
                  "replicas, with and without affinity (length: the first of --lengths)")
      ->check(CLI::PositiveNumber);
  cmd->add_option(
         "--affinity-load-factor", args->affinity_load_factor,
         "--affinity-replicas: the pool's bounded-load factor (a replica takes a request "
         "while it has fewer than factor x (in flight + 1) / replicas; others go on to the "
         "next replica of the ring). A factor at least the number of replicas sends every "
         "request to its key's replica")
      ->check(CLI::Range(1.0, 1000.0))
      ->capture_default_str();
  cmd->footer(
      "Exit status: 0 ok (request errors are counted in the results), 2 usage error, 1 failure.");
  cmd->callback([args] { Run(*args); });
}

}  // namespace strata::cli
