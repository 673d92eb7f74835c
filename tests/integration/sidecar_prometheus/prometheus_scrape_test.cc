// The real consumer of the sidecar's metrics: Debian's Prometheus server scrapes a /metrics
// endpoint serving SidecarMetrics every second, and the test reads the series back through
// Prometheus's HTTP API — values, escaped label values, histogram quantiles, a second scrape after
// a change.
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <memory>
#include <string>
#include <thread>

#include "catch2/catch.hpp"
#include "prometheus_server.h"
#include "sidecar_metrics.h"
#include "strata/pools.h"
#include "testing/scripted_transport.h"
#include "testing/skip.h"

namespace strata::sidecar {
namespace {

using nlohmann::json;

// Serves metrics.RenderPrometheus() on GET /metrics from a thread, on 127.0.0.1 and a free port.
class MetricsEndpoint {
 public:
  explicit MetricsEndpoint(const SidecarMetrics* metrics) {
    server_.Get("/metrics", [metrics](const httplib::Request&, httplib::Response& res) {
      res.set_content(metrics->RenderPrometheus(), "text/plain; version=0.0.4; charset=utf-8");
    });
    port_ = server_.bind_to_any_port("127.0.0.1");
    thread_ = std::thread([this] {
      server_.listen_after_bind();
      ended_ = true;
    });
    // cpp-httplib's stop() does nothing before the listener's loop has begun: the destructor's
    // stop would be lost and its join would wait forever.
    while (!server_.is_running() && !ended_) {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
  }
  ~MetricsEndpoint() {
    server_.stop();
    thread_.join();
  }
  std::string target() const { return "127.0.0.1:" + std::to_string(port_); }

 private:
  httplib::Server server_;
  int port_ = 0;
  std::atomic<bool> ended_{false};
  std::thread thread_;
};

strata::Turn MakeTurn() {
  strata::Turn turn;
  RequestRecord& r = turn.record;
  r.pool = "short";
  r.input_tokens = 5000;
  r.cached_tokens_reported = 4096;
  r.output_tokens = 300;
  r.ttft_ms = 150;
  r.decode_ms = 2500;
  r.total_ms = 2700;
  r.attempts = 1;
  r.finish_reason = "stop";
  CompactionReport report;
  report.tokens_before = 30000;
  report.tokens_after = 12000;
  turn.compactions.push_back(report);
  PrefixBreakEvent e;
  e.reason = "compaction";
  turn.prefix_break = e;
  turn.break_causes = {"compaction"};
  return turn;
}

std::string PrometheusOrSkip() {
  std::string prometheus = testing::FindProgram("prometheus");
  if (prometheus.empty()) {
    STRATA_SKIP(
        "the prometheus binary is not on PATH (Debian package \"prometheus\", installed by "
        "scripts/setup): the scrape by a real Prometheus server cannot run");
  }
  return prometheus;
}

TEST_CASE("a real Prometheus server scrapes SidecarMetrics and reads every kind of series back",
          "[prometheus]") {
  const std::string prometheus = PrometheusOrSkip();

  MetricsConfig config;
  config.kv_capacity_bytes = 1000000;
  config.kv_bytes_per_token = 100;
  config.kv_alert_ratio = 0.5;
  std::vector<std::string> warnings;
  SidecarMetrics metrics(config, nullptr, [&](const std::string& m) { warnings.push_back(m); });
  testing::ScriptedTransport replica;
  PoolSetConfig pool_config;
  PoolConfig short_pool;
  short_pool.name = "short";
  short_pool.max_input_tokens = 32768;
  short_pool.transports = {&replica};
  pool_config.pools.push_back(short_pool);
  std::unique_ptr<PoolSet> pools = PoolSet::Create(pool_config).value();
  metrics.SetPoolSet(pools.get());

  metrics.ObserveTurn("acme", MakeTurn());
  metrics.ObserveTurn("acme", MakeTurn());
  // A label value that needs every escape of the format: backslash, double quote and newline.
  const std::string odd_pool = "we\"ird\\pool\nline two";
  metrics.ObserveError("acme", odd_pool, StatusCode::kResourceExhausted);
  metrics.SetAgents("acme", 3);
  SidecarMetrics::InFlight in_flight = metrics.Begin("acme", 6000, 0);  // 600 kB of 1 MB: alert
  REQUIRE(metrics.kv_alert());

  MetricsEndpoint endpoint(&metrics);
  // The example alert rules are loaded too: the KV watermark alert must go pending on these values.
  testing::PrometheusServer server(
      prometheus, {endpoint.target()},
      {std::string(STRATA_SOURCE_DIR) + "/examples/prometheus/strata-sidecar-alerts.yml"});
  if (!server.Start()) FAIL("prometheus did not start; its log:\n" << server.log());

  // The scrape succeeded (a parse error would make up 0) and samples arrived.
  CHECK(server.WaitForValue("up{job=\"strata\"}", 1) == 1);
  CHECK(server.WaitForValue(
            "strata_sidecar_requests_total{tenant=\"acme\",pool=\"short\",finish_reason=\"stop\"}",
            2) == 2);
  CHECK(server.Value("scrape_samples_scraped{job=\"strata\"}") > 100);

  json errors = server.Query("strata_sidecar_errors_total");
  REQUIRE(errors.size() == 1);
  CHECK(errors[0]["metric"]["pool"] == odd_pool);
  CHECK(errors[0]["metric"]["code"] == "RESOURCE_EXHAUSTED");
  CHECK(errors[0]["value"][1] == "1");

  CHECK(server.Value("strata_sidecar_input_tokens_sum / strata_sidecar_input_tokens_count") ==
        5000);
  CHECK(server.Value("strata_sidecar_cached_tokens_total") == 8192);
  // 150 ms falls in the (0.1, 0.25] bucket: the quantile interpolates inside it.
  const double p50 =
      server.Value("histogram_quantile(0.5, sum by (le) (strata_sidecar_ttft_seconds_bucket))");
  CHECK(p50 > 0.1);
  CHECK(p50 <= 0.25);
  CHECK(server.Value("strata_sidecar_compaction_tokens_saved_total{tenant=\"acme\"}") == 36000);
  CHECK(server.Value("strata_sidecar_prefix_breaks_total{reason=\"compaction\"}") == 2);
  CHECK(server.Value("strata_sidecar_agents{tenant=\"acme\"}") == 3);
  CHECK(server.Value("strata_sidecar_kv_bytes_in_flight") == 600000);
  CHECK(server.Value("strata_sidecar_kv_usage_ratio") == 0.6);
  CHECK(server.Value("strata_sidecar_kv_watermark_alert") == 1);
  CHECK(server.Value("strata_pool_in_flight{pool=\"short\"}") == 0);
  // The rule's `for: 2m` keeps it pending during the test; its value is the usage ratio.
  CHECK(server.WaitForValue("ALERTS{alertname=\"StrataSidecarKvWatermark\",alertstate=\"pending\"}",
                            1) == 1);
  json alerts = server.Get("/api/v1/alerts");
  REQUIRE(alerts.is_object());
  bool found = false;
  for (const json& a : alerts["data"]["alerts"]) {
    if (a["labels"]["alertname"] != "StrataSidecarKvWatermark") continue;
    found = true;
    CHECK(a["annotations"]["summary"] ==
          "KV cache in flight at 60% of capacity on " + endpoint.target());
  }
  CHECK(found);

  // Later scrapes see later values: one more turn, the request ends, the alert clears.
  metrics.ObserveTurn("acme", MakeTurn());
  in_flight.End();
  CHECK(server.WaitForValue("sum(strata_sidecar_requests_total)", 3) == 3);
  CHECK(server.WaitForValue("strata_sidecar_kv_watermark_alert", 0) == 0);
  CHECK(server.Value("strata_sidecar_kv_bytes_in_flight") == 0);
  CHECK(warnings.size() == 1);
}

#if defined(STRATA_SIM_PATH) && defined(STRATA_SIDECAR_PATH)

// A program started by the test with its stdout read line by line; SIGTERM and reaped at the end.
class Program {
 public:
  Program(std::vector<std::string> argv, const std::string& log_path) {
    int out[2];
    REQUIRE(::pipe(out) == 0);
    pid_ = ::fork();
    REQUIRE(pid_ >= 0);
    if (pid_ == 0) {
      ::dup2(out[1], STDOUT_FILENO);
      int log = ::open(log_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
      if (log >= 0) ::dup2(log, STDERR_FILENO);
      ::close(out[0]);
      std::vector<char*> args;
      for (std::string& a : argv) args.push_back(a.data());
      args.push_back(nullptr);
      ::execv(args[0], args.data());
      ::_exit(127);
    }
    ::close(out[1]);
    fd_ = out[0];
  }
  ~Program() {
    ::kill(pid_, SIGTERM);
    ::waitpid(pid_, nullptr, 0);
    ::close(fd_);
  }
  // The rest of the first stdout line starting with `prefix`; "" after 30 s or at end of output.
  std::string WaitForLine(const std::string& prefix) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
    while (std::chrono::steady_clock::now() < deadline) {
      for (size_t nl; (nl = buffer_.find('\n')) != std::string::npos;) {
        std::string line = buffer_.substr(0, nl);
        buffer_.erase(0, nl + 1);
        if (line.rfind(prefix, 0) == 0) return line.substr(prefix.size());
      }
      pollfd p{fd_, POLLIN, 0};
      if (::poll(&p, 1, 100) > 0) {
        char buf[4096];
        ssize_t n = ::read(fd_, buf, sizeof buf);
        if (n <= 0) return "";
        buffer_.append(buf, static_cast<size_t>(n));
      }
    }
    return "";
  }

 private:
  pid_t pid_ = -1;
  int fd_ = -1;
  std::string buffer_;
};

TEST_CASE("a real Prometheus server scrapes strata-sidecar's /metrics", "[prometheus]") {
  const std::string prometheus = PrometheusOrSkip();
  const testing::TempDir temp("strata-sidecar-scrape-");
  REQUIRE(!temp.path().empty());
  const std::string& dir = temp.path();
  Program sim({STRATA_SIM_PATH, "--host", "127.0.0.1", "--port", "0"}, dir + "/sim.log");
  const std::string sim_line = sim.WaitForLine("strata-sim http=");
  REQUIRE(!sim_line.empty());
  const std::string sim_address = sim_line.substr(0, sim_line.find(' '));
  {
    std::ofstream config(dir + "/sidecar.json");
    config << R"({"metrics": {"kv_capacity_bytes": 1000000000, "long_request_tokens": 100000}})";
  }
  Program sidecar({STRATA_SIDECAR_PATH, "--config", dir + "/sidecar.json", "--grpc-listen",
                   "127.0.0.1:0", "--http-listen", "127.0.0.1:0", "--store", dir + "/sidecar.db",
                   "--upstream", "http://" + sim_address + "/v1"},
                  dir + "/sidecar.log");
  REQUIRE(!sidecar.WaitForLine("grpc listening on ").empty());
  const std::string http_address = sidecar.WaitForLine("http listening on ");
  REQUIRE(!http_address.empty());
  const size_t colon = http_address.rfind(':');
  httplib::Client client(http_address.substr(0, colon), std::stoi(http_address.substr(colon + 1)));

  // Three turns of one agent and two of another through the OpenAI-compatible proxy.
  for (const auto& [agent, turns] :
       std::vector<std::pair<std::string, int>>{{"a1", 3}, {"a2", 2}}) {
    json messages = json::array({{{"role", "system"}, {"content", "You are terse."}}});
    for (int i = 0; i < turns; ++i) {
      messages.push_back({{"role", "user"}, {"content", "question " + std::to_string(i)}});
      json body{{"model", "glm-5.3-flash"}, {"messages", messages}};
      auto r = client.Post("/v1/chat/completions", {{"X-Strata-Agent", agent}}, body.dump(),
                           "application/json");
      REQUIRE(r);
      REQUIRE(r->status == 200);
      messages.push_back(json::parse(r->body)["choices"][0]["message"]);
    }
  }

  testing::PrometheusServer server(prometheus, {http_address});
  if (!server.Start()) FAIL("prometheus did not start; its log:\n" << server.log());
  CHECK(server.WaitForValue("up{job=\"strata\"}", 1) == 1);
  CHECK(server.WaitForValue("sum(strata_sidecar_requests_total{tenant=\"default\",pool=\"none\","
                            "finish_reason=\"stop\"})",
                            5) == 5);
  CHECK(server.Value("strata_sidecar_input_tokens_count{tenant=\"default\"}") == 5);
  CHECK(server.Value("strata_sidecar_output_tokens_sum{tenant=\"default\"}") > 0);
  CHECK(server.Value("strata_sidecar_ttft_seconds_count{tenant=\"default\"}") == 5);
  CHECK(server.Value("strata_sidecar_agents{tenant=\"default\"}") == 2);
  CHECK(server.Value("strata_sidecar_kv_capacity_bytes") == 1e9);
  CHECK(server.Value("strata_sidecar_kv_bytes_in_flight") == 0);
  CHECK(server.Value("strata_sidecar_requests_in_flight{tenant=\"default\"}") == 0);
  CHECK(server.Value("strata_sidecar_kv_watermark_alert") == 0);

  // An error reaches the errors series: the proxy refuses a body that is not JSON (400,
  // INVALID_ARGUMENT).
  auto bad = client.Post("/v1/chat/completions", {{"X-Strata-Agent", "a1"}}, "{not json",
                         "application/json");
  REQUIRE(bad);
  CHECK(bad->status == 400);
  CHECK(server.WaitForValue(
            "strata_sidecar_errors_total{tenant=\"default\",code=\"INVALID_ARGUMENT\"}", 1) == 1);
}

#endif  // STRATA_SIM_PATH && STRATA_SIDECAR_PATH

}  // namespace
}  // namespace strata::sidecar
