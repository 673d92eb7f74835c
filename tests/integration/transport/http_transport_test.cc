// The HTTP transport against a raw in-test server that controls every byte and its timing: long
// prefills (headers at once, first event much later), stream limits, hostile error bodies and usage.
#include <catch2/catch.hpp>

#include <atomic>
#include <chrono>
#include <ctime>
#include <string>
#include <thread>

#include "raw_http_server.h"
#include "strata/transport.h"
#include "testing/fake_clock.h"
#include "transport/timeouts.h"

namespace strata {
namespace {

using strata::testing::RawHttpServer;
using strata::testing::RawRequest;
using namespace std::chrono_literals;

constexpr char kSseHead[] =
    "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nCache-Control: no-cache\r\nConnection: close\r\n\r\n";
constexpr char kChatBody[] = R"({"model":"m","messages":[{"role":"user","content":"hi"}],"stream":true})";

std::string Event(const std::string& json) { return "data: " + json + "\n\n"; }
const std::string kHello = Event(R"({"id":"c1","choices":[{"index":0,"delta":{"content":"Hello"}}]})");
const std::string kFinish = Event(R"({"id":"c1","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]})");

std::unique_ptr<Transport> Make(const std::string& base, Timeouts timeouts) {
  HttpTransportOptions options;
  options.base_url = base;
  options.timeouts = timeouts;
  options.retry.retry_enabled = false;
  return MakeHttpTransport(options).value();
}

TEST_CASE("the first-byte timeout grows with the prompt and has first_byte as its floor", "[transport]") {
  Timeouts t;
  t.first_byte = 5000ms;
  t.prefill_per_100k_tokens = 60000ms;
  CHECK(transport_internal::FirstByteTimeout(t, 0) == 5000ms);
  CHECK(transport_internal::FirstByteTimeout(t, 1000) == 5000ms);  // 600 ms < the floor
  CHECK(transport_internal::FirstByteTimeout(t, 100000) == 60000ms);
  CHECK(transport_internal::FirstByteTimeout(t, 1000000) == 600000ms);
  CHECK(transport_internal::FirstByteTimeout(t, -7) == 5000ms);
  Timeouts defaults;
  CHECK(transport_internal::FirstByteTimeout(defaults, 1048576) > defaults.first_byte);
}

TEST_CASE("a long prefill: headers at once, the first event after longer than idle", "[transport]") {
  // vLLM and SGLang send the headers before the prefill; the idle timeout must not start there.
  RawHttpServer server([](int fd, const RawRequest&) {
    RawHttpServer::Write(fd, kSseHead);
    std::this_thread::sleep_for(900ms);  // the prefill: 4.5x the idle timeout
    RawHttpServer::Write(fd, kHello + kFinish + "data: [DONE]\n\n");
  });
  Timeouts timeouts;
  timeouts.idle = 200ms;
  timeouts.first_byte = 10000ms;
  auto transport = Make(server.base_url(), timeouts);
  Response response;
  Status status = transport->Send(kChatBody, CallOptions(), &response);
  INFO(status.message());
  REQUIRE(status.ok());
  CHECK(response.content == "Hello");
  CHECK(response.finish_reason == "stop");
  CHECK(response.timings.ttft_ms >= 800);
}

TEST_CASE("the first-byte timeout scales with CallOptions::prompt_tokens", "[transport]") {
  RawHttpServer server([&](int fd, const RawRequest&) {
    RawHttpServer::Write(fd, kSseHead);
    std::this_thread::sleep_for(700ms);
    RawHttpServer::Write(fd, kHello + kFinish + "data: [DONE]\n\n");
  });
  Timeouts timeouts;
  timeouts.idle = 100ms;
  timeouts.first_byte = 150ms;                 // the floor alone is too short for this prefill
  timeouts.prefill_per_100k_tokens = 2000ms;   // 200K tokens -> 4 s
  auto transport = Make(server.base_url(), timeouts);
  SECTION("a small prompt gets the floor and times out, naming the timeout and the way out") {
    Response response;
    Status status = transport->Send(kChatBody, CallOptions(), &response);
    REQUIRE(status.code() == StatusCode::kDeadlineExceeded);
    CHECK_THAT(status.message(), Catch::Contains("first-byte timeout of 150 ms"));
    CHECK_THAT(status.message(), Catch::Contains("headers arrived, no body"));
    CHECK_THAT(status.message(), Catch::Contains("prefill_per_100k_tokens"));
  }
  SECTION("a 200K-token prompt gets 4 s") {
    CallOptions call;
    call.prompt_tokens = 200000;
    Response response;
    Status status = transport->Send(kChatBody, call, &response);
    INFO(status.message());
    REQUIRE(status.ok());
    CHECK(response.content == "Hello");
  }
  SECTION("without a hint the body size estimates the prompt (bytes / 4)") {
    std::string big = R"({"model":"m","stream":true,"messages":[{"role":"user","content":")" +
                      std::string(800000, 'a') + R"("}]})";  // ~200K tokens
    Response response;
    Status status = transport->Send(big, CallOptions(), &response);
    INFO(status.message());
    REQUIRE(status.ok());
  }
}

TEST_CASE("idle applies between body bytes once the answer started", "[transport]") {
  RawHttpServer server([](int fd, const RawRequest&) {
    RawHttpServer::Write(fd, std::string(kSseHead) + kHello);
    std::this_thread::sleep_for(1000ms);
    RawHttpServer::Write(fd, kFinish + "data: [DONE]\n\n");
  });
  Timeouts timeouts;
  timeouts.idle = 200ms;
  timeouts.first_byte = 10000ms;
  auto transport = Make(server.base_url(), timeouts);
  Response response;
  Status status = transport->Send(kChatBody, CallOptions(), &response);
  REQUIRE(status.code() == StatusCode::kDeadlineExceeded);
  CHECK_THAT(status.message(), Catch::Contains("idle timeout"));
}


constexpr char kJsonOk[] = R"({"id":"c1","choices":[{"index":0,"message":{"role":"assistant","content":"ok"},"finish_reason":"stop"}]})";

std::string JsonResponse(int status, const std::string& body, const std::string& extra = "") {
  return "HTTP/1.1 " + std::to_string(status) + " X\r\nContent-Type: application/json\r\nContent-Length: " +
         std::to_string(body.size()) + "\r\nConnection: close\r\n" + extra + "\r\n" + body;
}

TEST_CASE("each retry carries a fresh rid / request_id and X-Request-Id", "[transport]") {
  std::atomic<int> calls{0};
  RawHttpServer server([&](int fd, const RawRequest&) {
    if (calls++ < 2) {
      RawHttpServer::Write(fd, JsonResponse(503, R"({"error":{"message":"busy","type":"x","code":503}})"));
    } else {
      RawHttpServer::Write(fd, JsonResponse(200, kJsonOk));
    }
  });
  testing::FakeClock clock;
  HttpTransportOptions options;
  options.base_url = server.base_url();
  options.clock = &clock;
  auto transport = MakeHttpTransport(options).value();
  CallOptions call;
  call.request_id = "req-7";
  Response response;
  const std::string body = R"({"model":"m","rid":"req-7","request_id":"req-7","messages":[{"role":"user","content":"é"}]})";
  REQUIRE(transport->Send(body, call, &response).ok());
  CHECK(response.attempts == 3);
  auto requests = server.requests();
  REQUIRE(requests.size() == 3);
  CHECK(requests[0].body == body);  // the first attempt is sent byte for byte
  CHECK_THAT(requests[0].head, Catch::Contains("X-Request-Id: req-7\r\n"));
  CHECK_THAT(requests[1].body, Catch::Contains(R"("rid":"req-7-retry1","request_id":"req-7-retry1")"));
  CHECK_THAT(requests[1].head, Catch::Contains("X-Request-Id: req-7-retry1"));
  CHECK_THAT(requests[2].body, Catch::Contains(R"("rid":"req-7-retry2")"));
  CHECK_THAT(requests[2].body, Catch::Contains(R"("messages":[{"role":"user","content":"é"}])"));
  CHECK_THAT(requests[2].head, Catch::Contains("X-Request-Id: req-7-retry2"));
}

TEST_CASE("Retry-After as an HTTP date sets the backoff", "[transport]") {
  std::atomic<int> calls{0};
  RawHttpServer server([&](int fd, const RawRequest&) {
    if (calls++ == 0) {
      std::time_t at = std::time(nullptr) + 30;
      char date[64];
      std::strftime(date, sizeof(date), "%a, %d %b %Y %H:%M:%S GMT", std::gmtime(&at));
      RawHttpServer::Write(fd, JsonResponse(429, R"({"error":{"message":"slow down","type":"x","code":429}})",
                                            std::string("Retry-After: ") + date + "\r\n"));
    } else {
      RawHttpServer::Write(fd, JsonResponse(200, kJsonOk));
    }
  });
  testing::FakeClock clock;
  HttpTransportOptions options;
  options.base_url = server.base_url();
  options.clock = &clock;
  auto transport = MakeHttpTransport(options).value();
  Response response;
  REQUIRE(transport->Send(kChatBody, CallOptions(), &response).ok());
  REQUIRE(clock.sleeps().size() == 1);
  // 30 s from the server's clock, read one second of date granularity later at most.
  CHECK(clock.sleeps()[0] >= 28000000);
  CHECK(clock.sleeps()[0] <= 30000000);
}

}  // namespace
}  // namespace strata
