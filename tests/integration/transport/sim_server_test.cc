// strata-sim over HTTP as vLLM and SGLang behave: request validation (400 with a nested error
// body), the output cap, headers before the prefill, and the connection limits that keep one bad
// client from exhausting the simulator.
#include "sim_server.h"

#include <poll.h>
#include <sys/socket.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>

#include "raw_http_server.h"
#include "strata/http_transport.h"
#include "strata/transport.h"
#include "testing/sim_testing.h"
#include "testing/wait_for.h"

namespace strata {
namespace {

using nlohmann::json;
using strata::testing::RawHttpServer;
using strata::testing::StartSim;

std::string Post(const std::string& body, const std::string& extra_headers = "") {
  return "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: "
         "application/json\r\nConnection: close\r\n" +
         extra_headers + "Content-Length: " + std::to_string(body.size()) + "\r\n\r\n" + body;
}

int StatusOf(const std::string& response) {
  if (response.rfind("HTTP/1.1 ", 0) != 0) return 0;
  return std::atoi(response.c_str() + 9);
}

json BodyOf(const std::string& response) {
  size_t at = response.find("\r\n\r\n");
  if (at == std::string::npos) return json();
  return json::parse(response.substr(at + 4), nullptr, false);
}

TEST_CASE("strata-sim refuses what vLLM refuses, with a nested error naming the field", "[sim]") {
  auto sim = StartSim();
  struct Case {
    const char* body;
    const char* message;
    const char* param;
  };
  const Case cases[] = {
      {R"({"messages":[{"role":"wizard","content":"x"}]})", R"(role "wizard" is not one of)",
       "messages[0].role"},
      {R"({"messages":[{"role":5,"content":"x"}]})",
       "messages[0].role must be a string, got an integer", "messages[0].role"},
      {R"({"model":5,"messages":[{"role":"user","content":"x"}]})", R"("model" must be a string)",
       "model"},
      {R"({"stream":"yes","messages":[{"role":"user","content":"x"}]})",
       R"("stream" must be a boolean)", "stream"},
      {R"({"max_completion_tokens":-1,"messages":[{"role":"user","content":"x"}]})",
       "max_completion_tokens must be at least 1, got -1", "max_completion_tokens"},
      {R"({"max_tokens":0,"messages":[{"role":"user","content":"x"}]})",
       "max_tokens must be at least 1, got 0", "max_tokens"},
      {R"({"max_tokens":2.5,"messages":[{"role":"user","content":"x"}]})",
       R"("max_tokens" must be an integer, got 2.5)", "max_tokens"},
      {R"({"max_completion_tokens":"5","messages":[{"role":"user","content":"x"}]})",
       R"("max_completion_tokens" must be an integer, got a string)", "max_completion_tokens"},
      {R"({"messages":"hello"})", R"("messages" must be an array)", "messages"},
      {R"({"model":"m"})", R"("messages" is required)", "messages"},
      {R"({"messages":[{"role":"user","content":5}]})", "messages[0].content must be a string",
       "messages[0].content"},
      {R"({"messages":[{"role":"user","content":"x"}],"stream_options":{"include_usage":true}})",
       "Stream options can only be defined when `stream=True`.", "stream_options"},
      {R"({"messages":[{"role":"assistant","tool_calls":{"a":1}}]})",
       "messages[0].tool_calls must be an array", "messages[0].tool_calls"},
      {R"({"messages":[{"role":"user","content":"x"}],"temperature":-1})",
       "temperature must be non-negative", "temperature"},
      {R"([1,2,3])", "the request body must be a JSON object", ""},
  };
  for (const Case& c : cases) {
    INFO(c.body);
    std::string response = RawHttpServer::Exchange(sim->http_port(), Post(c.body));
    CHECK(StatusOf(response) == 400);
    json error = BodyOf(response);
    REQUIRE(error.is_object());
    REQUIRE(error.contains("error"));
    CHECK(error["error"]["type"] == "BadRequestError");
    CHECK(error["error"]["code"] == 400);
    CHECK_THAT(error["error"]["message"].get<std::string>(), Catch::Contains(c.message));
    if (c.param[0] != '\0') CHECK(error["error"]["param"] == c.param);
  }
  // 100,000 levels of nesting: refused before any recursive walk of the body.
  const std::string deep =
      R"({"messages":[{"role":"assistant","tool_calls":[{"function":{"name":"f","arguments":)" +
      std::string(100000, '[') + std::string(100000, ']') + "}}]}]}";
  std::string response = RawHttpServer::Exchange(sim->http_port(), Post(deep));
  CHECK(StatusOf(response) == 400);
  CHECK_THAT(BodyOf(response)["error"]["message"].get<std::string>(),
             Catch::Contains("nests deeper than 256 levels"));
  // Still serving: nothing above ended the process or the accept loop.
  std::string ok = RawHttpServer::Exchange(sim->http_port(),
                                           Post(R"({"messages":[{"role":"user","content":"x"}]})"));
  CHECK(StatusOf(ok) == 200);
}

TEST_CASE("strata-sim answers flat error bodies on request", "[sim]") {
  sim::SimOptions options;
  options.error_shape = "flat";
  auto sim = StartSim(options);
  json error =
      BodyOf(RawHttpServer::Exchange(sim->http_port(), Post(R"({"messages":[{"role":"x"}]})")));
  CHECK(error["object"] == "error");
  CHECK(error["code"] == 400);
  CHECK_THAT(error["message"].get<std::string>(), Catch::Contains("is not one of"));
  options.error_shape = "round";
  CHECK(sim::SimServer::Start(options).status().code() == StatusCode::kInvalidArgument);
}

TEST_CASE("strata-sim stops at the output cap with finish_reason length", "[sim]") {
  auto sim = StartSim();
  const std::string reply =
      R"({"role":"assistant","reasoning_content":"abcdefgh","content":"0123456789abcdef"})";
  for (bool stream : {false, true}) {
    INFO("stream " << stream);
    HttpTransportOptions options;
    options.base_url = sim->base_url();
    auto transport = MakeHttpTransport(options).value();
    CallOptions call;
    call.headers = {{"X-Strata-Sim-Reply", reply}};
    std::string body =
        std::string(
            R"({"messages":[{"role":"user","content":"x"}],"max_completion_tokens":3,"stream":)") +
        (stream ? R"(true,"stream_options":{"include_usage":true}})" : "false}");
    Response response;
    REQUIRE(transport->Send(body, call, &response).ok());
    CHECK(response.finish_reason == "length");
    CHECK(response.reasoning == "abcdefgh");  // 2 tokens at 4 bytes per token
    CHECK(response.content == "0123");        // the third token
    CHECK(response.usage.completion_tokens == 3);
    // Under the cap nothing is cut.
    body = R"({"messages":[{"role":"user","content":"x"}],"max_completion_tokens":100})";
    REQUIRE(transport->Send(body, call, &response).ok());
    CHECK(response.finish_reason == "stop");
    CHECK(response.content == "0123456789abcdef");
  }
}

TEST_CASE("strata-sim sends a stream's headers before the prefill", "[sim]") {
  sim::SimOptions options;
  options.prefill_us_per_token = 100000;  // 0.1 s per prompt token: a prefill of seconds
  auto sim = StartSim(options);
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(sim->http_port()));
  inet_pton(AF_INET, "127.0.0.1", &addr.sin_addr);
  REQUIRE(connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0);
  REQUIRE(RawHttpServer::Write(
      fd, Post(R"({"messages":[{"role":"user","content":"hello there"}],"stream":true})")));
  std::string first;
  char buf[65536];
  pollfd p{fd, POLLIN, 0};
  REQUIRE(poll(&p, 1, 10000) == 1);
  ssize_t n = recv(fd, buf, sizeof(buf), 0);
  REQUIRE(n > 0);
  first.assign(buf, static_cast<size_t>(n));
  // The first bytes are the headers alone; the events come after the prefill.
  CHECK(first.rfind("HTTP/1.1 200 OK", 0) == 0);
  CHECK(first.find("text/event-stream") != std::string::npos);
  CHECK(first.find("data:") == std::string::npos);
  shutdown(fd, SHUT_RDWR);
  close(fd);
}

TEST_CASE("strata-sim refuses bad framing and oversize requests", "[sim]") {
  sim::SimOptions options;
  options.max_request_bytes = 1000;
  auto sim = StartSim(options);
  auto raw = [&](const std::string& request) {
    return RawHttpServer::Exchange(sim->http_port(), request);
  };
  std::string head = "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\n";
  std::string r = raw(head + "Content-Length: -1\r\n\r\n");
  CHECK(StatusOf(r) == 400);
  CHECK_THAT(BodyOf(r)["error"]["message"].get<std::string>(),
             Catch::Contains("Content-Length \"-1\""));
  CHECK(StatusOf(raw(head + "Content-Length: 12abc\r\n\r\n")) == 400);
  CHECK(StatusOf(raw(head + "Content-Length: 99999999999999999999999\r\n\r\n")) == 400);
  r = raw(head + "Content-Length: 5000\r\n\r\n");
  CHECK(StatusOf(r) == 413);
  CHECK_THAT(BodyOf(r)["error"]["message"].get<std::string>(),
             Catch::Contains("over the limit of 1000 bytes"));
  CHECK(StatusOf(raw(head + "X-Big: " + std::string(70000, 'a') + "\r\n\r\n")) == 431);
}

TEST_CASE("strata-sim closes slow and idle connections", "[sim]") {
  sim::SimOptions options;
  options.request_timeout_ms = 300;
  options.idle_timeout_ms = 200;
  auto sim = StartSim(options);
  // A head that never completes: 408 and closed, not a thread held forever.
  std::string r = RawHttpServer::Exchange(sim->http_port(),
                                          "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\n");
  CHECK(StatusOf(r) == 408);
  // A body that never arrives.
  r = RawHttpServer::Exchange(
      sim->http_port(),
      "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n{");
  CHECK(StatusOf(r) == 408);
  // A connection that never sends anything is closed after idle_timeout_ms (Exchange returns when
  // the server closes; its own limit is 5 s).
  auto start = std::chrono::steady_clock::now();
  r = RawHttpServer::Exchange(sim->http_port(), "");
  CHECK(r.empty());
  CHECK(std::chrono::steady_clock::now() - start < std::chrono::seconds(4));
}

int Connect(int port) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  inet_pton(AF_INET, "127.0.0.1", &addr.sin_addr);
  REQUIRE(connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0);
  return fd;
}

// True when the peer closes `fd` within `timeout_ms`.
bool ClosedWithin(int fd, int timeout_ms) {
  pollfd p{fd, POLLIN, 0};
  char buf[4096];
  while (poll(&p, 1, timeout_ms) == 1) {
    if (recv(fd, buf, sizeof(buf), 0) <= 0) return true;
  }
  return false;
}

TEST_CASE("strata-sim holds at most max_connections, and idle ones are released", "[sim]") {
  sim::SimOptions options;
  options.max_connections = 4;
  options.idle_timeout_ms = 300;
  auto sim = StartSim(options);
  std::vector<int> idle;
  for (int i = 0; i < 4; ++i) idle.push_back(Connect(sim->http_port()));
  // Wait until the simulator has taken all four (accepting happens on its own thread).
  REQUIRE(testing::WaitFor([&] { return sim->connections_accepted() == 4; }));
  std::string refused = RawHttpServer::Exchange(
      sim->http_port(), Post(R"({"messages":[{"role":"user","content":"x"}]})"));
  CHECK(StatusOf(refused) == 503);
  CHECK_THAT(BodyOf(refused)["error"]["message"].get<std::string>(),
             Catch::Contains("over 4 open connections"));
  // The four silent connections are closed by the idle timeout, which frees their slots.
  for (int fd : idle) {
    CHECK(ClosedWithin(fd, 5000));
    close(fd);
  }
  std::string served;
  CHECK(testing::WaitFor([&] {  // the slots are freed once the sim has closed the connections
    served = RawHttpServer::Exchange(sim->http_port(),
                                     Post(R"({"messages":[{"role":"user","content":"x"}]})"));
    return StatusOf(served) == 200;
  }));
}

TEST_CASE("strata-sim refuses a port outside 0..65535", "[sim]") {
  sim::SimOptions options;
  options.http_port = 99999;
  auto sim = sim::SimServer::Start(options);
  REQUIRE(sim.status().code() == StatusCode::kInvalidArgument);
  CHECK_THAT(sim.status().message(), Catch::Contains("99999"));
}

TEST_CASE("strata-sim keeps a bounded request log", "[sim]") {
  sim::SimOptions options;
  options.max_logged_body_bytes = 10;
  options.max_logged_requests = 3;
  auto sim = StartSim(options);
  const std::string body = R"({"messages":[{"role":"user","content":"x"}]})";
  for (int i = 0; i < 5; ++i)
    CHECK(StatusOf(RawHttpServer::Exchange(sim->http_port(), Post(body))) == 200);
  auto log = sim->requests();
  REQUIRE(log.size() == 3);
  CHECK(log[0].body == body.substr(0, 10));
  CHECK(log[0].body_bytes == body.size());
}

}  // namespace
}  // namespace strata
