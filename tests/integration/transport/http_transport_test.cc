// The HTTP transport against a raw in-test server that controls every byte and its timing: long
// prefills (headers at once, first event much later), stream limits, hostile error bodies and
// usage.
#include <fcntl.h>
#include <unistd.h>

#include <atomic>
#include <catch2/catch.hpp>
#include <chrono>
#include <cstdlib>
#include <ctime>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>
#include <thread>

#include "raw_http_server.h"
#include "strata/client.h"
#include "strata/http_transport.h"
#include "strata/transport.h"
#include "testing/context_testing.h"
#include "testing/fake_clock.h"
#include "transport/timeouts.h"

namespace strata {
namespace {

using strata::testing::RawHttpServer;
using strata::testing::RawRequest;
using namespace std::chrono_literals;

constexpr char kSseHead[] =
    "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nCache-Control: no-cache\r\nConnection: "
    "close\r\n\r\n";
constexpr char kChatBody[] =
    R"({"model":"m","messages":[{"role":"user","content":"hi"}],"stream":true})";

std::string Event(const std::string& json) { return "data: " + json + "\n\n"; }
const std::string kHello =
    Event(R"({"id":"c1","choices":[{"index":0,"delta":{"content":"Hello"}}]})");
const std::string kFinish =
    Event(R"({"id":"c1","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]})");

std::unique_ptr<Transport> Make(const std::string& base, Timeouts timeouts) {
  HttpTransportOptions options;
  options.base_url = base;
  options.timeouts = timeouts;
  options.retry.retry_enabled = false;
  return MakeHttpTransport(options).value();
}

TEST_CASE("the first-byte timeout grows with the prompt and has first_byte as its floor",
          "[transport]") {
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

TEST_CASE("a long prefill: headers at once, the first event after longer than idle",
          "[transport]") {
  // vLLM and SGLang send the headers before the prefill; the idle timeout must not start there.
  RawHttpServer server([](int fd, const RawRequest&) {
    RawHttpServer::Write(fd, kSseHead);
    // The prefill: 4.5x the idle timeout, a twentieth of the first-byte timeout. This waits for
    // time to pass on purpose: curl's transfer runs in real time, and what is checked is that
    // the real idle time before the first event does not count.
    std::this_thread::sleep_for(900ms);
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
  std::atomic<bool> hold{false};  // the server never answers; it waits for the client to give up
  RawHttpServer* serving = nullptr;
  RawHttpServer server([&](int fd, const RawRequest&) {
    RawHttpServer::Write(fd, kSseHead);
    if (hold) {
      serving->WaitForHangUp(fd);
      return;
    }
    // The prefill: longer than the 150 ms floor, well within the 4 s a 200K-token prompt gets.
    std::this_thread::sleep_for(700ms);
    RawHttpServer::Write(fd, kHello + kFinish + "data: [DONE]\n\n");
  });
  serving = &server;
  Timeouts timeouts;
  timeouts.idle = 100ms;
  timeouts.first_byte = 150ms;                // the floor alone is too short for this prefill
  timeouts.prefill_per_100k_tokens = 2000ms;  // 200K tokens -> 4 s
  timeouts.total = 60000ms;                   // without a first-byte timeout: this one, later
  auto transport = Make(server.base_url(), timeouts);
  SECTION("a small prompt gets the floor and times out, naming the timeout and the way out") {
    hold = true;
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
  RawHttpServer* serving = nullptr;
  RawHttpServer server([&](int fd, const RawRequest&) {
    RawHttpServer::Write(fd, std::string(kSseHead) + kHello);
    serving->WaitForHangUp(fd);  // the rest never comes: only the idle timeout ends the call
  });
  serving = &server;
  Timeouts timeouts;
  timeouts.idle = 200ms;
  timeouts.first_byte = 10000ms;
  timeouts.total = 60000ms;  // without an idle timeout: this one, later
  auto transport = Make(server.base_url(), timeouts);
  Response response;
  Status status = transport->Send(kChatBody, CallOptions(), &response);
  REQUIRE(status.code() == StatusCode::kDeadlineExceeded);
  CHECK_THAT(status.message(), Catch::Contains("idle timeout"));
}

constexpr char kJsonOk[] =
    R"({"id":"c1","choices":[{"index":0,"message":{"role":"assistant","content":"ok"},"finish_reason":"stop"}]})";

std::string JsonResponse(int status, const std::string& body, const std::string& extra = "") {
  return "HTTP/1.1 " + std::to_string(status) +
         " X\r\nContent-Type: application/json\r\nContent-Length: " + std::to_string(body.size()) +
         "\r\nConnection: close\r\n" + extra + "\r\n" + body;
}

// A transport with the default retry policy whose time (backoff sleeps, their jitter, the wall
// time Retry-After dates are read against) comes from `clock`.
std::unique_ptr<Transport> MakeRetrying(const std::string& base, testing::FakeClock* clock) {
  HttpTransportOptions options;
  options.base_url = base;
  options.clock = clock;  // retry.uniform01 unset, seed 0: the clock seeds the jitter
  return MakeHttpTransport(options).value();
}

// A server that answers the first two requests 503 "busy" and every later one 200, and a
// retrying transport to it on a fake clock.
struct BusyTwiceThenOk {
  std::atomic<int> calls{0};
  testing::FakeClock clock;
  RawHttpServer server{[this](int fd, const RawRequest&) {
    if (calls++ < 2) {
      RawHttpServer::Write(
          fd, JsonResponse(503, R"({"error":{"message":"busy","type":"x","code":503}})"));
    } else {
      RawHttpServer::Write(fd, JsonResponse(200, kJsonOk));
    }
  }};
  std::unique_ptr<Transport> transport = MakeRetrying(server.base_url(), &clock);
};

TEST_CASE("each retry carries a fresh rid / request_id and X-Request-Id", "[transport]") {
  BusyTwiceThenOk fixture;
  CallOptions call;
  call.request_id = "req-7";
  Response response;
  const std::string body =
      R"({"model":"m","rid":"req-7","request_id":"req-7","messages":[{"role":"user","content":"é"}]})";
  REQUIRE(fixture.transport->Send(body, call, &response).ok());
  CHECK(response.attempts == 3);
  auto requests = fixture.server.requests();
  REQUIRE(requests.size() == 3);
  CHECK(requests[0].body == body);  // the first attempt is sent byte for byte
  CHECK_THAT(requests[0].head, Catch::Contains("X-Request-Id: req-7\r\n"));
  CHECK_THAT(requests[1].body,
             Catch::Contains(R"("rid":"req-7-retry1","request_id":"req-7-retry1")"));
  CHECK_THAT(requests[1].head, Catch::Contains("X-Request-Id: req-7-retry1"));
  CHECK_THAT(requests[2].body, Catch::Contains(R"("rid":"req-7-retry2")"));
  CHECK_THAT(requests[2].body, Catch::Contains(R"("messages":[{"role":"user","content":"é"}])"));
  CHECK_THAT(requests[2].head, Catch::Contains("X-Request-Id: req-7-retry2"));
}

TEST_CASE("backoff sleeps and their jitter come from HttpTransportOptions::clock", "[transport]") {
  std::vector<std::vector<int64_t>> runs;
  for (int run = 0; run < 2; ++run) {
    BusyTwiceThenOk fixture;
    Response response;
    REQUIRE(fixture.transport->Send(kChatBody, CallOptions(), &response).ok());
    runs.push_back(fixture.clock.sleeps());
  }
  REQUIRE(runs[0].size() == 2);
  // The default backoffs of 200 and 400 ms, half of each jitter: in [d/2, d).
  CHECK(runs[0][0] >= 100000);
  CHECK(runs[0][0] < 200000);
  CHECK(runs[0][1] >= 200000);
  CHECK(runs[0][1] < 400000);
  CHECK(runs[0] == runs[1]);  // the same fake clock, the same jitter
}

TEST_CASE("Retry-After as an HTTP date sets the backoff, from the injected clock's wall time",
          "[transport]") {
  std::atomic<int> calls{0};
  testing::FakeClock clock;  // its wall time is 2023-11-14T22:13:20Z, not today
  RawHttpServer server([&](int fd, const RawRequest&) {
    if (calls++ == 0) {
      std::time_t at = static_cast<std::time_t>(clock.UnixMillis() / 1000 + 30);
      char date[64];
      std::strftime(date, sizeof(date), "%a, %d %b %Y %H:%M:%S GMT", std::gmtime(&at));
      RawHttpServer::Write(
          fd, JsonResponse(429, R"({"error":{"message":"slow down","type":"x","code":429}})",
                           std::string("Retry-After: ") + date + "\r\n"));
    } else {
      RawHttpServer::Write(fd, JsonResponse(200, kJsonOk));
    }
  });
  auto transport = MakeRetrying(server.base_url(), &clock);
  Response response;
  REQUIRE(transport->Send(kChatBody, CallOptions(), &response).ok());
  REQUIRE(clock.sleeps().size() == 1);
  // 30 s after the fake's wall time, which does not move while the server answers.
  CHECK(clock.sleeps()[0] == 30000000);
}

TEST_CASE("429 with Retry-After: 0 gets at most kMaxRetryAttempts requests per call",
          "[transport]") {
  std::atomic<int> calls{0};
  testing::FakeClock clock;
  RawHttpServer server([&](int fd, const RawRequest&) {
    ++calls;
    RawHttpServer::Write(
        fd, JsonResponse(429, R"({"error":{"message":"slow down","type":"x","code":429}})",
                         "Retry-After: 0\r\n"));
  });
  HttpTransportOptions options;
  options.base_url = server.base_url();
  options.clock = &clock;
  options.retry.max_attempts = 1000000;  // clamped
  auto transport = MakeHttpTransport(options).value();
  Response response;
  Status status = transport->Send(kChatBody, CallOptions(), &response);
  CHECK(status.code() == StatusCode::kResourceExhausted);
  CHECK(response.attempts == kMaxRetryAttempts);
  CHECK(calls.load() == kMaxRetryAttempts);
  CHECK_THAT(status.message(), Catch::Contains("(after 10 attempts)"));
}

TEST_CASE("the waits between attempts stop at max_total_retry_wait", "[transport]") {
  std::atomic<int> calls{0};
  testing::FakeClock clock;
  RawHttpServer server([&](int fd, const RawRequest&) {
    ++calls;
    RawHttpServer::Write(
        fd, JsonResponse(429, R"({"error":{"message":"slow down","type":"x","code":429}})",
                         "Retry-After: 40\r\n"));
  });
  HttpTransportOptions options;
  options.base_url = server.base_url();
  options.clock = &clock;
  options.retry.max_attempts = 10;
  options.retry.max_total_retry_wait = 100s;  // two waits of 40 s fit, a third does not
  options.timeouts.total = 3600s;
  auto transport = MakeHttpTransport(options).value();
  Response response;
  Status status = transport->Send(kChatBody, CallOptions(), &response);
  CHECK(status.code() == StatusCode::kResourceExhausted);
  CHECK(calls.load() == 3);
  CHECK(clock.sleeps() == std::vector<int64_t>{40000000, 40000000});
  CHECK_THAT(status.message(), Catch::Contains("would wait beyond max_total_retry_wait"));
}

// ---- Limits on what a broken or hostile server can make the client do ---------------------

TEST_CASE("an SSE stream without blank-line separators is bounded by max_response_bytes",
          "[transport]") {
  RawHttpServer server([&](int fd, const RawRequest&) {
    if (!RawHttpServer::Write(fd, kSseHead)) return;
    const std::string line = "data: " + std::string(1000, 'x') + "\n";  // never a blank line
    for (int i = 0; i < 100000 && !server.stopping(); ++i) {
      if (!RawHttpServer::Write(fd, line)) return;  // the client gave up
    }
  });
  HttpTransportOptions options;
  options.base_url = server.base_url();
  options.max_response_bytes = 256 << 10;
  auto transport = MakeHttpTransport(options).value();
  Response response;
  Status status = transport->Send(kChatBody, CallOptions(), &response);
  REQUIRE(status.code() == StatusCode::kResourceExhausted);
  CHECK_THAT(status.message(), Catch::Contains("max_response_bytes = 262144"));
}

TEST_CASE("an endless stream of valid deltas is bounded by max_response_bytes", "[transport]") {
  RawHttpServer server([&](int fd, const RawRequest&) {
    if (!RawHttpServer::Write(fd, kSseHead)) return;
    for (int i = 0; i < 1000000 && !server.stopping(); ++i) {
      if (!RawHttpServer::Write(fd, kHello)) return;
    }
  });
  HttpTransportOptions options;
  options.base_url = server.base_url();
  options.max_response_bytes = 1 << 20;
  auto transport = MakeHttpTransport(options).value();
  Response response;
  Status status = transport->Send(kChatBody, CallOptions(), &response);
  REQUIRE(status.code() == StatusCode::kResourceExhausted);
  CHECK_THAT(status.message(), Catch::Contains("max_response_bytes = 1048576"));
  CHECK_THAT(status.message(), Catch::Contains("stream"));
}

std::string Deep(size_t levels) { return std::string(levels, '[') + std::string(levels, ']'); }

TEST_CASE("an error body nested 200,000 deep without a message is quoted, not re-serialized",
          "[transport]") {
  const std::string body = R"({"error":)" + Deep(200000) + "}";
  RawHttpServer server(
      [&](int fd, const RawRequest&) { RawHttpServer::Write(fd, JsonResponse(400, body)); });
  HttpTransportOptions options;
  options.base_url = server.base_url();
  auto transport = MakeHttpTransport(options).value();
  Response response;
  Status status = transport->Send(kChatBody, CallOptions(), &response);
  REQUIRE(status.code() == StatusCode::kInvalidArgument);
  CHECK_THAT(status.message(), Catch::Contains(R"({"error":[[[[)"));
  CHECK(status.message().size() < 1000);
}

TEST_CASE("streamed tool-call arguments nested 200,000 deep are refused with the limit",
          "[transport]") {
  const std::string chunk =
      R"({"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"c","function":{"name":"f","arguments":)" +
      Deep(200000) + "}}]}}]}";
  RawHttpServer server([&](int fd, const RawRequest&) {
    RawHttpServer::Write(fd, std::string(kSseHead) + Event(chunk) + kFinish + "data: [DONE]\n\n");
  });
  HttpTransportOptions options;
  options.base_url = server.base_url();
  auto transport = MakeHttpTransport(options).value();
  Response response;
  Status status = transport->Send(kChatBody, CallOptions(), &response);
  REQUIRE(status.code() == StatusCode::kDataLoss);
  CHECK_THAT(status.message(), Catch::Contains("nested deeper than 256 levels"));
}

// ---- Secrets -------------------------------------------------------------------------------

TEST_CASE("an API key or header with a control character is refused at creation", "[transport]") {
  HttpTransportOptions options;
  options.base_url = "http://127.0.0.1:9/v1";
  options.api_key = "sk-abc\r\nX-Injected: 1";
  auto made = MakeHttpTransport(options);
  REQUIRE(made.status().code() == StatusCode::kInvalidArgument);
  CHECK_THAT(made.status().message(), Catch::Contains("byte 0x0d at offset 6"));
  CHECK(made.status().message().find("sk-abc") == std::string::npos);
  options.api_key = "sk-ok";
  options.headers = {{"X-Trace", "a\nb"}};
  CHECK(MakeHttpTransport(options).status().code() == StatusCode::kInvalidArgument);
  options.headers.clear();
  auto transport = MakeHttpTransport(options).value();
  CallOptions call;
  call.headers = {{"X-Trace", "a\r\nInjected: 1"}};
  Response response;
  CHECK(transport->Send(kChatBody, call, &response).code() == StatusCode::kInvalidArgument);
}

TEST_CASE("an API key over plain http to a non-loopback host needs allow_insecure", "[transport]") {
  HttpTransportOptions options;
  options.api_key = "sk-key";
  options.base_url = "http://10.1.2.3:8000/v1";
  auto made = MakeHttpTransport(options);
  REQUIRE(made.status().code() == StatusCode::kInvalidArgument);
  CHECK_THAT(made.status().message(), Catch::Contains("allow_insecure"));
  CHECK_THAT(made.status().message(), Catch::Contains("https://"));
  for (const char* ok : {"https://10.1.2.3/v1", "http://127.0.0.1:8000/v1", "http://localhost/v1",
                         "http://[::1]:80/v1", "http://127.9.9.9/v1"}) {
    options.base_url = ok;
    CHECK(MakeHttpTransport(options).ok());
  }
  options.base_url = "http://127.0.0.1.evil.example/v1";
  CHECK_FALSE(MakeHttpTransport(options).ok());
  options.allow_insecure = true;
  CHECK(MakeHttpTransport(options).ok());
  options.api_key.clear();
  options.allow_insecure = false;
  CHECK(MakeHttpTransport(options).ok());  // no key, nothing to leak
}

// Captures what the process writes to a file descriptor (stdout, stderr) while alive.
class CaptureFd {
 public:
  explicit CaptureFd(int fd) : fd_(fd) {
    char path[] = "/tmp/strata-capture-XXXXXX";
    int tmp = mkstemp(path);
    path_ = path;
    std::fflush(nullptr);
    saved_ = dup(fd_);
    dup2(tmp, fd_);
    close(tmp);
  }
  std::string Finish() {
    std::fflush(nullptr);
    dup2(saved_, fd_);
    close(saved_);
    std::ifstream in(path_);
    std::stringstream text;
    text << in.rdbuf();
    unlink(path_.c_str());
    return text.str();
  }

 private:
  int fd_;
  int saved_ = -1;
  std::string path_;
};

TEST_CASE("no secret reaches stdout, stderr (STRATA_CURL_VERBOSE=1), records or messages",
          "[transport]") {
  const std::string key = "sk-SECRET-KEY-4242";
  const std::string password = "pw-SECRET-7777";
  std::atomic<int> calls{0};
  RawHttpServer server([&](int fd, const RawRequest&) {
    if (calls++ == 0) {
      RawHttpServer::Write(fd, std::string(kSseHead) + kHello + kFinish + "data: [DONE]\n\n");
    } else {
      RawHttpServer::Write(
          fd, JsonResponse(401, R"({"error":{"message":"bad key","type":"x","code":401}})"));
    }
  });
  const std::string base =
      "http://alice:" + password + "@127.0.0.1:" + std::to_string(server.port()) + "/v1";
  setenv("STRATA_CURL_VERBOSE", "1", 1);
  CaptureFd err(2), out(1);
  std::ostringstream records;
  std::string messages;
  {
    HttpTransportOptions options;
    options.base_url = base;
    options.api_key = key;
    auto transport = MakeHttpTransport(options).value();
    messages += transport->Endpoint() + "\n";
    JsonLinesRecordSink sink(records);
    ClientOptions copt;
    copt.transport = transport.get();
    copt.record_sink = &sink;
    auto client = Client::Create(copt).value();
    auto context = testing::NewContext();
    REQUIRE(context->AppendUser("hello").ok());
    auto done = client->Complete(*context);
    messages += done.ok() ? std::string("ok\n") : done.status().ToString() + "\n";
    auto failed = client->Complete(*context);  // 401: the error message and its record
    messages += failed.status().ToString() + "\n";
    Response response;
    messages += transport->Send("{", CallOptions(), &response).ToString() + "\n";
    messages += transport->HealthCheck(std::chrono::milliseconds(2000)).ToString() + "\n";
    // A bad base_url is quoted redacted too.
    HttpTransportOptions bad;
    bad.base_url = "ftp://bob:" + password + "@host/";
    messages += MakeHttpTransport(bad).status().ToString() + "\n";
  }
  std::string stdout_text = out.Finish();
  std::string stderr_text = err.Finish();
  unsetenv("STRATA_CURL_VERBOSE");
  // The run did use the secrets: the key reached the server, the trace ran, records were written.
  REQUIRE(!server.requests().empty());
  CHECK_THAT(server.requests()[0].head, Catch::Contains("Authorization: Bearer " + key));
  CHECK_THAT(stderr_text, Catch::Contains("Authorization: [redacted]"));
  CHECK_THAT(records.str(), Catch::Contains("\"endpoint\":\"http://[redacted]@127.0.0.1:"));
  CHECK_THAT(messages, Catch::Contains("HTTP 401"));
  for (const std::string& text : {stdout_text, stderr_text, records.str(), messages}) {
    CHECK(text.find(key) == std::string::npos);
    CHECK(text.find(password) == std::string::npos);
  }
}

}  // namespace
}  // namespace strata
