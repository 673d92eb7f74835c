// strata-sim reports what it received and what it cost: the --request-log file (one JSON line per
// chat completion request, HTTP and gRPC alike), the processing time of each request (response
// header, request log, /metrics), and the request shape it parses (long texts left out) agreeing
// with a whole parse.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <catch2/catch.hpp>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "sim_impl.h"
#include "sim_server.h"
#include "strata/http_transport.h"
#include "strata/transport.h"
#include "testing/sim_testing.h"

namespace strata::sim {
namespace {

using json = nlohmann::json;
using testing::HttpGet;
using testing::StartSim;

// Each reading of the time is 250 us after the one before: a request's processing time is
// exactly 250 us (read once when planning starts and once when it ends).
class SteppingClock : public Clock {
 public:
  int64_t NowMicros() override { return now_.fetch_add(250) + 250; }
  int64_t UnixMillis() override { return 1700000000000; }
  void SleepForMicros(int64_t) override {}
  uint64_t Random64() override { return 4; }

 private:
  std::atomic<int64_t> now_{0};
};

std::vector<json> ReadLines(const std::string& path) {
  std::vector<json> lines;
  std::ifstream in(path);
  for (std::string line; std::getline(in, line);) lines.push_back(json::parse(line));
  return lines;
}

Status Send(const SimServer& sim, const std::string& body, Response* response,
            CallOptions call = {}) {
  HttpTransportOptions options;
  options.base_url = sim.base_url();
  options.retry.max_attempts = 1;
  auto transport = MakeHttpTransport(options);
  REQUIRE(transport.ok());
  return (*transport)->Send(body, call, response);
}

// A raw POST on its own connection (Connection: close): the whole answer, head and body.
std::string RawPost(int port, const std::string& body) {
  const std::string request = "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nConnection: close\r\n"
                              "Content-Type: application/json\r\nContent-Length: " +
                              std::to_string(body.size()) + "\r\n\r\n" + body;
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  REQUIRE(::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0);
  REQUIRE(::write(fd, request.data(), request.size()) == static_cast<ssize_t>(request.size()));
  std::string out;
  char buf[4096];
  ssize_t n;
  while ((n = ::read(fd, buf, sizeof(buf))) > 0) out.append(buf, static_cast<size_t>(n));
  ::close(fd);
  return out;
}

int StatusOfRaw(const std::string& response) {
  return response.rfind("HTTP/1.1 ", 0) == 0 ? std::atoi(response.c_str() + 9) : 0;
}

TEST_CASE("strata-sim --request-log appends one JSON line per request it received", "[sim]") {
  const std::string path = "/tmp/strata-sim-request-log-" + std::to_string(::getpid()) + ".jsonl";
  std::remove(path.c_str());
  SteppingClock clock;
  SimOptions options;
  options.request_log_path = path;
  options.clock = &clock;
  {
    auto sim = StartSim(options);
    const std::string body =
        R"({"model":"m","messages":[{"role":"user","content":"caf\u00e9 \u2603"}],"cache_salt":"s1"})";
    Response response;
    CallOptions call;
    call.request_id = "req-1";
    REQUIRE(Send(*sim, body, &response, call).ok());
    // A refused body is logged with its status; one that is not UTF-8 too, its bad byte replaced.
    CHECK(Send(*sim, R"({"messages":[]})", &response).code() == StatusCode::kInvalidArgument);
    CHECK(StatusOfRaw(RawPost(sim->http_port(), "{\"x\":\"\xff\"}")) == 400);
    std::vector<json> lines = ReadLines(path);
    REQUIRE(lines.size() == 3);
    const json& first = lines[0];
    CHECK(first["protocol"] == "http");
    CHECK(first["path"] == "/v1/chat/completions");
    CHECK(first["body"] == body);  // the whole body, byte for byte
    CHECK(first["body_bytes"] == body.size());
    CHECK(first["headers"]["x-request-id"] == "req-1");
    CHECK(first["status"] == 200);
    CHECK(first["cache_salt"] == "s1");
    CHECK(first["prompt_tokens"].get<int64_t>() > 0);
    CHECK(first["processing_us"] == 250);
    CHECK(first["unix_ms"] == 1700000000000);
    CHECK(lines[1]["status"] == 400);
    CHECK(lines[2]["status"] == 400);
    CHECK(lines[2]["body"] == "{\"x\":\"\xef\xbf\xbd\"}");
    CHECK(lines[2]["body_bytes"] == 9);
  }
  {
    // A restarted simulator appends to the same file.
    auto sim = StartSim(options);
    Response response;
    REQUIRE(Send(*sim, R"({"messages":[{"role":"user","content":"again"}]})", &response).ok());
    CHECK(ReadLines(path).size() == 4);
  }
  std::remove(path.c_str());
}

TEST_CASE("strata-sim refuses a request log it cannot open", "[sim]") {
  SimOptions options;
  options.request_log_path = "/nonexistent-dir/requests.jsonl";
  auto sim = SimServer::Start(options);
  REQUIRE_FALSE(sim.ok());
  CHECK(sim.status().code() == StatusCode::kInvalidArgument);
  CHECK(sim.status().message().find("/nonexistent-dir/requests.jsonl") != std::string::npos);
}

TEST_CASE("strata-sim reports its own processing time per request", "[sim]") {
  SteppingClock clock;
  SimOptions options;
  options.clock = &clock;
  auto sim = StartSim(options);
  const std::string whole = RawPost(sim->http_port(), R"({"messages":[{"role":"user","content":"x"}]})");
  CHECK(whole.find("X-Strata-Sim-Processing-Us: 250\r\n") != std::string::npos);
  const std::string streamed =
      RawPost(sim->http_port(), R"({"stream":true,"messages":[{"role":"user","content":"x"}]})");
  CHECK(streamed.find("X-Strata-Sim-Processing-Us: 250\r\n") != std::string::npos);
  const std::string refused = RawPost(sim->http_port(), R"({"messages":"no"})");
  CHECK(refused.find("X-Strata-Sim-Processing-Us: 250\r\n") != std::string::npos);
  std::vector<SimRequestLog> log = sim->requests();
  REQUIRE(log.size() == 3);
  for (const SimRequestLog& r : log) CHECK(r.processing_us == 250);
  const std::string metrics = HttpGet(sim->http_port(), "/metrics");
  CHECK(metrics.find("strata_sim_requests_processed_total 3\n") != std::string::npos);
  CHECK(metrics.find("strata_sim_processing_seconds_total 0.000750\n") != std::string::npos);
}

TEST_CASE("the request shape the engine parses agrees with a whole parse", "[sim]") {
  using sim_internal::ParseRequestShape;
  const std::string long_text(5000, 'a');
  const std::string long_model(5000, 'm');
  // Long message texts become "", everything else stays: types, structure, the fields read.
  const std::string body = R"({"model":")" + long_model + R"(","messages":[{"role":"user","content":")" +
                           long_text + R"("},{"role":"assistant","content":null,"tool_calls":[)" +
                           R"({"id":"c","type":"function","function":{"name":"f","arguments":")" +
                           long_text + R"("}}]}],"max_tokens":5,"stream":false})";
  json full = json::parse(body);
  json shape = ParseRequestShape(body);
  REQUIRE_FALSE(shape.is_discarded());
  CHECK(shape["model"] == long_model);
  CHECK(shape["messages"][0]["content"] == "");
  CHECK(shape["messages"][1]["tool_calls"][0]["function"]["arguments"] == "");
  full["messages"][0]["content"] = "";
  full["messages"][1]["tool_calls"][0]["function"]["arguments"] = "";
  CHECK(shape == full);
  // Whatever the parser refuses inside a long string, the shape refuses too.
  for (const std::string& bad :
       {std::string("\x01"), std::string("\\x"), std::string("\\ud800"), std::string("\\udc00x"),
        std::string("\xc3"), std::string("\xed\xa0\x80"), std::string("\\u12g4")}) {
    const std::string text = long_text + bad + long_text;
    const std::string doc = R"({"messages":[{"role":"user","content":")" + text + R"("}]})";
    INFO(bad);
    CHECK(json::parse(doc, nullptr, false).is_discarded());
    CHECK(ParseRequestShape(doc).is_discarded());
  }
  // What it accepts, the parser accepts: escapes, a surrogate pair, UTF-8, a quote inside.
  const std::string good = long_text + R"(\"\\\/\b\f\n\r\t\u00e9\ud83d\ude00)" + "\xc3\xa9\xf0\x9f\x98\x80";
  const std::string doc = R"({"messages":[{"role":"user","content":")" + good + R"("}]})";
  REQUIRE_FALSE(json::parse(doc, nullptr, false).is_discarded());
  CHECK(ParseRequestShape(doc)["messages"][0]["content"] == "");
  // Not JSON outside the strings: discarded, as the parser says.
  CHECK(ParseRequestShape(R"({"messages":[{"role":"user","content":")" + long_text + R"("}]}x)")
            .is_discarded());
  CHECK(ParseRequestShape("{\"a\":\"" + long_text).is_discarded());
}

}  // namespace
}  // namespace strata::sim
