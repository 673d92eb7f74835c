// A real Prometheus server (Debian's `prometheus`) started by a test: a generated configuration
// that scrapes given targets every second (and evaluates rule files every second), a private data
// directory, a free loopback port, and queries through its HTTP API.
#ifndef STRATA_TESTS_INTEGRATION_SIDECAR_PROMETHEUS_PROMETHEUS_SERVER_H_
#define STRATA_TESTS_INTEGRATION_SIDECAR_PROMETHEUS_PROMETHEUS_SERVER_H_

#include <httplib.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "testing/command.h"
#include "testing/temp_dir.h"

namespace strata::testing {

// The path of `program` on PATH, "" when absent.
inline std::string FindProgram(const std::string& program) {
  CommandResult r = RunCommand("command -v " + program + " 2>/dev/null");
  std::string path = r.output;
  while (!path.empty() && (path.back() == '\n' || path.back() == '\r')) path.pop_back();
  return r.exit_code == 0 ? path : "";
}

// A port that was free a moment ago on 127.0.0.1 (for a child process that cannot bind port 0 and
// report it).
inline int FreeLoopbackPort() {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  if (fd < 0 || ::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    if (fd >= 0) ::close(fd);
    return 0;
  }
  socklen_t len = sizeof addr;
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  ::close(fd);
  return ntohs(addr.sin_port);
}

class PrometheusServer {
 public:
  // `binary`: the prometheus executable; `targets`: "127.0.0.1:PORT" of each scrape target (job
  // "strata"); `rule_files`: rule files to load.
  PrometheusServer(std::string binary, std::vector<std::string> targets,
                   std::vector<std::string> rule_files = {})
      : binary_(std::move(binary)), temp_("strata-prometheus-"), dir_(temp_.path()) {
    std::ofstream config(dir_ + "/prometheus.yml");
    config << "global:\n  scrape_interval: 1s\n  scrape_timeout: 900ms\n"
           << "  evaluation_interval: 1s\n";
    if (!rule_files.empty()) {
      config << "rule_files:\n";
      for (const std::string& f : rule_files) config << "  - '" << f << "'\n";
    }
    config << "scrape_configs:\n  - job_name: strata\n    static_configs:\n      - targets:\n";
    for (const std::string& t : targets) config << "          - '" << t << "'\n";
  }

  ~PrometheusServer() { Stop(); }

  // Starts the server and waits (up to 30 s) until it reports ready. False on failure (log() says
  // why).
  bool Start() {
    port_ = FreeLoopbackPort();
    if (port_ == 0 || dir_.empty()) return false;
    const std::string listen = "--web.listen-address=127.0.0.1:" + std::to_string(port_);
    const std::string config = "--config.file=" + dir_ + "/prometheus.yml";
    const std::string data = "--storage.tsdb.path=" + dir_ + "/data";
    const std::string log = dir_ + "/prometheus.log";
    pid_ = ::fork();
    if (pid_ < 0) return false;
    if (pid_ == 0) {
      FILE* out = std::freopen(log.c_str(), "w", stderr);
      if (out != nullptr) ::dup2(::fileno(out), STDOUT_FILENO);
      ::execl(binary_.c_str(), binary_.c_str(), config.c_str(), data.c_str(), listen.c_str(),
              "--log.level=warn", static_cast<char*>(nullptr));
      ::_exit(127);
    }
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
    while (std::chrono::steady_clock::now() < deadline) {
      if (auto r = Client().Get("/-/ready"); r && r->status == 200) return true;
      int status = 0;
      if (::waitpid(pid_, &status, WNOHANG) == pid_) {
        pid_ = -1;
        return false;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    return false;
  }

  void Stop() {
    if (pid_ <= 0) return;
    ::kill(pid_, SIGTERM);
    for (int i = 0; i < 100; ++i) {
      if (::waitpid(pid_, nullptr, WNOHANG) == pid_) {
        pid_ = -1;
        return;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    ::kill(pid_, SIGKILL);
    ::waitpid(pid_, nullptr, 0);
    pid_ = -1;
  }

  // GET `path` with `params`; the parsed JSON body, or a json null when the request failed.
  nlohmann::json Get(const std::string& path, const httplib::Params& params = {}) {
    auto r = Client().Get(path.c_str(), params, httplib::Headers{});
    if (!r || r->status != 200) return nullptr;
    return nlohmann::json::parse(r->body, nullptr, /*allow_exceptions=*/false);
  }

  // /api/v1/query: the result vector (an empty array when the query failed or matched nothing).
  nlohmann::json Query(const std::string& expression) {
    nlohmann::json j = Get("/api/v1/query", {{"query", expression}});
    if (!j.is_object() || j.value("status", "") != "success") return nlohmann::json::array();
    return j["data"]["result"];
  }

  // The value of the first sample `expression` returns; NaN when none.
  double Value(const std::string& expression) {
    nlohmann::json result = Query(expression);
    if (!result.is_array() || result.empty()) return std::nan("");
    return std::stod(result[0]["value"][1].get<std::string>());
  }

  // Polls `expression` until `accept(result)` holds or `timeout` passes; the last result.
  nlohmann::json WaitFor(const std::string& expression,
                         const std::function<bool(const nlohmann::json&)>& accept,
                         std::chrono::seconds timeout = std::chrono::seconds(60)) {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    nlohmann::json result = Query(expression);
    while (!accept(result) && std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(250));
      result = Query(expression);
    }
    return result;
  }

  // Waits until the first sample of `expression` equals `value`; its last value.
  double WaitForValue(const std::string& expression, double value,
                      std::chrono::seconds timeout = std::chrono::seconds(60)) {
    nlohmann::json r = WaitFor(
        expression,
        [&](const nlohmann::json& result) {
          return result.is_array() && !result.empty() &&
                 std::stod(result[0]["value"][1].get<std::string>()) == value;
        },
        timeout);
    if (!r.is_array() || r.empty()) return std::nan("");
    return std::stod(r[0]["value"][1].get<std::string>());
  }

  std::string log() const { return ReadFile(dir_ + "/prometheus.log"); }
  const std::string& dir() const { return dir_; }
  int port() const { return port_; }

 private:
  httplib::Client Client() const {
    httplib::Client c("127.0.0.1", port_);
    c.set_connection_timeout(std::chrono::seconds(2));
    c.set_read_timeout(std::chrono::seconds(10));
    return c;
  }

  std::string binary_;
  TempDir temp_;  // removed after Stop()
  std::string dir_;
  int port_ = 0;
  pid_t pid_ = -1;
};

}  // namespace strata::testing

#endif  // STRATA_TESTS_INTEGRATION_SIDECAR_PROMETHEUS_PROMETHEUS_SERVER_H_
