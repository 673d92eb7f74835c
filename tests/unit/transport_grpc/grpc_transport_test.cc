// The gRPC++ transport (strata::transport_grpc) against strata-sim's gRPC service, in-process on
// 127.0.0.1 port 0; and strata-sim's service itself, read with the generated stub, against the
// upstream SGLang behaviour it follows (sim_grpc.h).
#include "strata/grpc_transport.h"

#include <grpcpp/grpcpp.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "sglang/runtime/v1/sglang.grpc.pb.h"
#include "sim_server.h"
#include "strata/transport.h"
#include "testing/fake_clock.h"
#include "testing/sim_testing.h"
#include "testing/wait_for.h"
#include "transport/timeouts.h"

namespace strata {
namespace {

using nlohmann::json;
namespace pb = ::sglang::runtime::v1;

// strata-sim with its gRPC side only.
std::unique_ptr<sim::SimServer> StartSim(sim::SimOptions options = {}) {
  options.http_port = -1;
  options.grpc_port = 0;
  return testing::StartSim(std::move(options));
}

GrpcTransportOptions Options(const sim::SimServer& sim) {
  GrpcTransportOptions options;
  options.target = sim.grpc_target();
  options.retry.uniform01 = [] { return 0.0; };
  options.retry.initial_backoff = std::chrono::milliseconds(10);
  options.timeouts.first_byte = std::chrono::milliseconds(10000);
  options.timeouts.idle = std::chrono::milliseconds(10000);
  return options;
}

std::unique_ptr<Transport> Grpc(GrpcTransportOptions options) {
  auto t = MakeGrpcTransport(std::move(options));
  INFO(t.status().ToString());
  REQUIRE(t.ok());
  return std::move(t).value();
}

std::string Body(bool stream, const std::string& user = "Say something.") {
  json body = {{"model", "glm-5.3-flash"},
               {"messages", json::array({{{"role", "system"}, {"content", "You are a test."}},
                                         {{"role", "user"}, {"content", user}}})},
               {"stream", stream}};
  if (stream) body["stream_options"] = {{"include_usage", true}};
  return body.dump();
}

const char* kReply =
    R"({"content":"Done — ünïcode ✓.","reasoning_content":"List, then read.",)"
    R"("tool_calls":[{"id":"call_1","function":{"name":"bash","arguments":"{\"cmd\":\"ls -la\"}"}},)"
    R"({"id":"call_2","function":{"name":"read_file","arguments":"{\"path\":\"a.py\",\"lines\":[1,2]}"}}]})";

// Reads a whole ChatComplete stream with the generated stub (no strata code on the client side).
struct RawCall {
  std::vector<pb::OpenAIStreamChunk> chunks;
  grpc::Status status;
};
// `trace_headers` go in OpenAIRequest.trace_headers (strata-sim reads them like metadata).
RawCall ReadRaw(const std::string& target, const std::string& body,
                const std::vector<std::pair<std::string, std::string>>& trace_headers = {}) {
  auto stub =
      pb::SglangService::NewStub(grpc::CreateChannel(target, grpc::InsecureChannelCredentials()));
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(20));
  pb::OpenAIRequest request;
  request.set_json_body(body);
  for (const auto& [k, v] : trace_headers) (*request.mutable_trace_headers())[k] = v;
  RawCall out;
  auto reader = stub->ChatComplete(&context, request);
  pb::OpenAIStreamChunk chunk;
  while (reader->Read(&chunk)) out.chunks.push_back(chunk);
  out.status = reader->Finish();
  return out;
}

TEST_CASE("strata-sim ends gRPC streams like upstream SGLang", "[grpc][sim]") {
  auto sim = StartSim();
  SECTION("streaming: one chunk per event, no [DONE], a final empty chunk with finished") {
    RawCall call = ReadRaw(sim->grpc_target(), Body(true), {{"x-strata-sim-reply", kReply}});
    REQUIRE(call.status.ok());
    REQUIRE(call.chunks.size() >= 3);
    for (size_t i = 0; i + 1 < call.chunks.size(); ++i) {
      CHECK_FALSE(call.chunks[i].finished());
      CHECK(call.chunks[i].json_chunk() != "[DONE]");
      CHECK(json::parse(call.chunks[i].json_chunk())["object"] == "chat.completion.chunk");
    }
    CHECK(call.chunks.back().finished());
    CHECK(call.chunks.back().json_chunk().empty());
  }
  SECTION("non-streaming: the whole completion in one finished chunk") {
    RawCall call = ReadRaw(sim->grpc_target(), Body(false), {{"x-strata-sim-reply", kReply}});
    REQUIRE(call.status.ok());
    REQUIRE(call.chunks.size() == 1);
    CHECK(call.chunks[0].finished());
    CHECK(json::parse(call.chunks[0].json_chunk())["object"] == "chat.completion");
  }
  SECTION("a request that cannot be parsed: status INTERNAL with the message") {
    RawCall call = ReadRaw(sim->grpc_target(), "{not json");
    CHECK(call.status.error_code() == grpc::StatusCode::INTERNAL);
    CHECK(call.status.error_message().find("not valid JSON") != std::string::npos);
    CHECK(call.chunks.empty());
  }
  SECTION("a serving error (context length): an error JSON inside a chunk, status OK") {
    RawCall streamed =
        ReadRaw(sim->grpc_target(), Body(true), {{"x-strata-sim-fault", "oversize"}});
    REQUIRE(streamed.status.ok());
    REQUIRE(streamed.chunks.size() == 2);
    json error = json::parse(streamed.chunks[0].json_chunk());
    CHECK(error["error"]["code"] == 400);
    CHECK(error["error"]["message"].get<std::string>().find("maximum context length") !=
          std::string::npos);
    CHECK_FALSE(streamed.chunks[0].finished());
    CHECK(streamed.chunks[1].finished());
    CHECK(streamed.chunks[1].json_chunk().empty());
    RawCall whole = ReadRaw(sim->grpc_target(), Body(false), {{"x-strata-sim-fault", "oversize"}});
    REQUIRE(whole.status.ok());
    REQUIRE(whole.chunks.size() == 1);
    CHECK(whole.chunks[0].finished());
    CHECK(json::parse(whole.chunks[0].json_chunk())["object"] == "error");
  }
}

TEST_CASE("strata-sim sends the gRPC response headers before the prefill", "[grpc][sim]") {
  auto sim = StartSim();
  auto stub = pb::SglangService::NewStub(
      grpc::CreateChannel(sim->grpc_target(), grpc::InsecureChannelCredentials()));
  grpc::ClientContext context;
  // A 60 s prefill: the headers must come long before it ends (the deadline would end the call).
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(20));
  context.AddMetadata("x-strata-sim-fault", "slow-first-byte,delay_ms=60000");
  pb::OpenAIRequest request;
  request.set_json_body(Body(true));
  auto reader = stub->ChatComplete(&context, request);
  reader->WaitForInitialMetadata();
  context.TryCancel();  // headers arrived during the prefill; give up
  pb::OpenAIStreamChunk chunk;
  CHECK_FALSE(reader->Read(&chunk));
  CHECK(reader->Finish().error_code() == grpc::StatusCode::CANCELLED);
}

TEST_CASE("gRPC transport: streaming, non-streaming and tool calls", "[grpc][sim]") {
  auto sim = StartSim();
  auto grpc = Grpc(Options(*sim));
  CallOptions call;
  call.headers = {{"X-Strata-Sim-Reply", kReply}, {"X-Strata-Sim-Chunk", "3"}};
  for (bool stream : {true, false}) {
    Response response;
    Status s = grpc->Send(Body(stream), call, &response);
    INFO(s.ToString());
    REQUIRE(s.ok());
    CHECK(response.streamed == stream);
    CHECK(response.content == "Done — ünïcode ✓.");
    CHECK(response.reasoning == "List, then read.");
    CHECK(response.finish_reason == "tool_calls");
    REQUIRE(response.tool_calls.size() == 2);
    CHECK(response.tool_calls[0].name == "bash");
    CHECK(response.tool_calls[0].arguments == R"({"cmd":"ls -la"})");
    CHECK(response.tool_calls[1].arguments == R"({"path":"a.py","lines":[1,2]})");
    CHECK(response.usage.reported);
    CHECK(response.usage.prompt_tokens > 0);
    CHECK(response.attempts == 1);
    CHECK(response.http_status == 0);
  }
  CHECK(grpc->Name() == "grpc");
  CHECK(grpc->Endpoint() == sim->grpc_target());
  CHECK(grpc->HealthCheck(std::chrono::seconds(5)).ok());
}

TEST_CASE("gRPC transport: one channel serves every call", "[grpc][sim]") {
  auto sim = StartSim();
  auto grpc = Grpc(Options(*sim));
  for (int i = 0; i < 5; ++i) {
    Response response;
    REQUIRE(grpc->Send(Body(i % 2 == 0), {}, &response).ok());
  }
  auto requests = sim->requests();
  REQUIRE(requests.size() == 5);
  REQUIRE_FALSE(requests[0].peer.empty());
  for (const auto& r : requests) CHECK(r.peer == requests[0].peer);  // the same client connection
}

TEST_CASE("gRPC transport: metadata, trace headers and the bearer token reach the server",
          "[grpc][sim]") {
  auto sim = StartSim();
  GrpcTransportOptions options = Options(*sim);
  options.bearer_token = "tok-123";
  options.allow_token_without_tls = true;
  options.metadata = {{"x-routing-key", "agent-7"}};
  auto grpc = Grpc(options);
  CallOptions call;
  call.request_id = "req-42";
  call.headers = {{"traceparent", "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"}};
  Response response;
  REQUIRE(grpc->Send(Body(true), call, &response).ok());
  auto log = sim->requests().back();
  CHECK(log.protocol == "grpc");
  CHECK(log.headers["authorization"] == "Bearer tok-123");
  CHECK(log.headers["x-routing-key"] == "agent-7");
  CHECK(log.headers["x-request-id"] == "req-42");
  CHECK(log.headers["traceparent"] == "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01");
  CHECK(log.body == Body(true));  // byte for byte
}

TEST_CASE("gRPC transport: errors map to strata codes", "[grpc][sim]") {
  auto sim = StartSim();
  auto grpc = Grpc(Options(*sim));
  Response response;
  SECTION(
      "context length (error JSON in a chunk) is RESOURCE_EXHAUSTED with the server's message") {
    for (bool stream : {true, false}) {
      CallOptions call;
      call.headers = {{"x-strata-sim-fault", "oversize"}};
      Status s = grpc->Send(Body(stream), call, &response);
      CHECK(s.code() == StatusCode::kResourceExhausted);
      CHECK(s.message().find("maximum context length") != std::string::npos);
      CHECK(response.attempts == 1);
    }
  }
  SECTION("an injected 400 (error JSON in a chunk) is INVALID_ARGUMENT") {
    CallOptions call;
    call.headers = {{"x-strata-sim-fault", "400"}};
    CHECK(grpc->Send(Body(true), call, &response).code() == StatusCode::kInvalidArgument);
  }
  SECTION("a malformed request: the server's INTERNAL, unchanged, not retried") {
    Status s = grpc->Send("{not json", {}, &response);
    CHECK(s.code() == StatusCode::kInternal);
    CHECK(s.message().find("not valid JSON") != std::string::npos);
    CHECK(response.attempts == 1);
  }
  SECTION("UNAVAILABLE before the first message is retried") {
    CallOptions call;
    call.request_id = "retry-me";
    call.headers = {{"x-strata-sim-fault", "503,times=2"}};
    Status s = grpc->Send(Body(true), call, &response);
    INFO(s.ToString());
    REQUIRE(s.ok());
    CHECK(response.attempts == 3);
  }
  SECTION("RESOURCE_EXHAUSTED after the retries says how many attempts") {
    CallOptions call;
    call.headers = {{"x-strata-sim-fault", "429"}};
    Status s = grpc->Send(Body(true), call, &response);
    CHECK(s.code() == StatusCode::kResourceExhausted);
    CHECK(s.message().find("after 4 attempts") != std::string::npos);
  }
  SECTION("a stream broken after the answer started is not retried") {
    CallOptions call;
    call.headers = {{"x-strata-sim-fault", "reset,after=2"}};
    Status s = grpc->Send(Body(true), call, &response);
    CHECK(s.code() == StatusCode::kUnavailable);
    CHECK(s.message().find("not retried") != std::string::npos);
    CHECK(response.attempts == 1);
  }
  SECTION("a malformed chunk is DATA_LOSS") {
    CallOptions call;
    call.headers = {{"x-strata-sim-fault", "malformed-sse,after=1"}};
    CHECK(grpc->Send(Body(true), call, &response).code() == StatusCode::kDataLoss);
  }
  SECTION("nothing listening: UNAVAILABLE") {
    GrpcTransportOptions options;
    options.target = "127.0.0.1:1";
    options.retry.retry_enabled = false;
    auto nowhere = Grpc(options);
    CHECK(nowhere->Send(Body(true), {}, &response).code() == StatusCode::kUnavailable);
    CHECK(nowhere->HealthCheck(std::chrono::seconds(2)).code() == StatusCode::kUnavailable);
  }
}

TEST_CASE("gRPC transport: backoff sleeps and their jitter come from GrpcTransportOptions::clock",
          "[grpc][sim]") {
  std::vector<std::vector<int64_t>> runs;
  for (int run = 0; run < 2; ++run) {
    auto sim = StartSim();  // a fresh server: its fault counts are per server
    testing::FakeClock clock;
    GrpcTransportOptions options = Options(*sim);
    options.retry.uniform01 = nullptr;  // seed 0: the jitter generator is seeded by the clock
    options.clock = &clock;
    auto grpc = Grpc(options);
    CallOptions call;
    call.headers = {{"x-strata-sim-fault", "503,times=2"}};
    Response response;
    REQUIRE(grpc->Send(Body(true), call, &response).ok());
    CHECK(response.attempts == 3);
    runs.push_back(clock.sleeps());
  }
  REQUIRE(runs[0].size() == 2);
  // Backoffs of 10 and 20 ms, half of each jitter: in [d/2, d).
  CHECK(runs[0][0] >= 5000);
  CHECK(runs[0][0] < 10000);
  CHECK(runs[0][1] >= 10000);
  CHECK(runs[0][1] < 20000);
  CHECK(runs[0] == runs[1]);  // the same fake clock, the same jitter
}

TEST_CASE("gRPC transport: cancellation reaches the server", "[grpc][sim][concurrency]") {
  auto sim = StartSim();
  auto grpc = Grpc(Options(*sim));
  CancellationToken token;
  CallOptions call;
  call.cancel = &token;
  call.headers = {{"x-strata-sim-fault", "stall,after=2,delay_ms=30000"}};
  bool arrived = false;  // checked after join: Catch2 assertions are not thread-safe
  std::thread canceller([&] {
    // The simulator logs the request before it answers: the call is in flight.
    arrived = testing::WaitFor([&] { return sim->requests().size() == 1; });
    token.Cancel();
  });
  Response response;
  Status s = grpc->Send(Body(true), call, &response);
  canceller.join();
  CHECK(arrived);
  CHECK(s.code() == StatusCode::kCancelled);
  // The server saw the cancellation (TryCancel) and stopped the stream.
  CHECK(testing::WaitFor([&] { return sim->grpc_cancelled_calls() == 1; }));
}

TEST_CASE("gRPC transport: the deadline travels to the server, which stops", "[grpc][sim]") {
  auto sim = StartSim();
  auto grpc = Grpc(Options(*sim));
  CallOptions call;
  call.deadline = std::chrono::milliseconds(300);
  call.headers = {{"x-strata-sim-fault", "slow-first-byte,delay_ms=30000"}};
  Response response;
  Status s = grpc->Send(Body(true), call, &response);
  INFO(s.ToString());
  CHECK(s.code() == StatusCode::kDeadlineExceeded);
  CHECK(s.message().find("total time") != std::string::npos);
  // The server's context expired: it stopped prefilling.
  CHECK(testing::WaitFor([&] { return sim->grpc_cancelled_calls() == 1; }));
}

TEST_CASE("gRPC transport: a long prefill is timed by the first-message timeout, not idle",
          "[grpc][sim]") {
  // Headers at once, the first message after 1.5 s of prefill: longer than the idle timeout,
  // shorter than the first-byte timeout.
  sim::SimOptions sim_options;
  sim_options.prefill_us_per_token = 1;
  auto sim = StartSim(sim_options);
  GrpcTransportOptions options = Options(*sim);
  options.timeouts.idle = std::chrono::milliseconds(300);
  options.timeouts.first_byte = std::chrono::milliseconds(300);
  options.timeouts.prefill_per_100k_tokens = std::chrono::milliseconds(3000);
  auto grpc = Grpc(options);
  CallOptions call;
  call.headers = {{"x-strata-sim-fault", "slow-first-byte,delay_ms=1500"}};
  SECTION("the first-byte timeout scales with CallOptions::prompt_tokens") {
    call.prompt_tokens = 100000;  // 3 s allowed before the first message
    Response response;
    Status s = grpc->Send(Body(true), call, &response);
    INFO(s.ToString());
    REQUIRE(s.ok());
    CHECK_FALSE(response.content.empty());
    CHECK(response.timings.ttft_ms >= 1500);
  }
  SECTION("a small prompt gets the floor, and the stall is reported as a first-byte timeout") {
    Response response;
    Status s = grpc->Send(Body(true), call, &response);
    CHECK(s.code() == StatusCode::kDeadlineExceeded);
    CHECK(s.message().find("first-byte timeout of 300 ms") != std::string::npos);
  }
  SECTION("idle applies between messages") {
    call.prompt_tokens = 100000;
    call.headers = {{"x-strata-sim-fault", "stall,after=2,delay_ms=5000"}};
    Response response;
    Status s = grpc->Send(Body(true), call, &response);
    CHECK(s.code() == StatusCode::kDeadlineExceeded);
    CHECK(s.message().find("idle timeout") != std::string::npos);
  }
}

TEST_CASE("FirstByteTimeout scales with the prompt above the floor", "[grpc]") {
  Timeouts t;
  t.first_byte = std::chrono::milliseconds(300000);
  t.prefill_per_100k_tokens = std::chrono::milliseconds(60000);
  CHECK(transport_internal::FirstByteTimeout(t, 0) == std::chrono::milliseconds(300000));
  CHECK(transport_internal::FirstByteTimeout(t, 100000) == std::chrono::milliseconds(300000));
  CHECK(transport_internal::FirstByteTimeout(t, 1000000) == std::chrono::milliseconds(600000));
  CHECK(transport_internal::FirstByteTimeout(t, 750000) == std::chrono::milliseconds(450000));
}

TEST_CASE("gRPC transport: message size limit and option checks", "[grpc][sim]") {
  auto sim = StartSim();
  GrpcTransportOptions options = Options(*sim);
  options.max_send_message_bytes = 1000;
  auto grpc = Grpc(options);
  Response response;
  Status s = grpc->Send(Body(true, std::string(2000, 'x')), {}, &response);
  CHECK(s.code() == StatusCode::kResourceExhausted);
  CHECK(s.message().find("max_send_message_bytes") != std::string::npos);
  CHECK(sim->requests().empty());  // nothing was sent

  auto invalid = [](GrpcTransportOptions o) { return MakeGrpcTransport(std::move(o)).status(); };
  GrpcTransportOptions o;
  CHECK(invalid(o).code() == StatusCode::kInvalidArgument);  // no target
  o.target = "http://127.0.0.1:1";
  CHECK(invalid(o).message().find("without a scheme") != std::string::npos);
  o.target = "127.0.0.1:1";
  o.bearer_token = "secret";
  Status plaintext = invalid(o);
  CHECK(plaintext.code() == StatusCode::kInvalidArgument);
  CHECK(plaintext.message().find("plaintext") != std::string::npos);
  CHECK(plaintext.message().find("secret") == std::string::npos);  // never logged
  o.bearer_token.clear();
  o.use_tls = true;
  o.tls_client_key_pem = "-----BEGIN PRIVATE KEY-----";
  CHECK(invalid(o).message().find("both tls_client_cert_pem and tls_client_key_pem") !=
        std::string::npos);
  o = GrpcTransportOptions();
  o.target = "127.0.0.1:1";
  o.tls_root_certs_pem = "x";
  CHECK(invalid(o).message().find("use_tls is false") != std::string::npos);
  o = GrpcTransportOptions();
  o.target = "127.0.0.1:1";
  o.metadata = {{"Bad Key", "v"}};
  CHECK(invalid(o).code() == StatusCode::kInvalidArgument);
  o.metadata = {};
  o.max_receive_message_bytes = 0;
  CHECK(invalid(o).code() == StatusCode::kInvalidArgument);
}

TEST_CASE("gRPC transport: keepalive pings do not break a long prefill", "[grpc][sim][.slow]") {
  auto sim = StartSim();
  GrpcTransportOptions options = Options(*sim);
  options.keepalive_time = std::chrono::milliseconds(200);
  options.keepalive_timeout = std::chrono::milliseconds(1000);
  auto grpc = Grpc(options);
  CallOptions call;
  call.headers = {{"x-strata-sim-fault", "slow-first-byte,delay_ms=4000"}};
  Response response;
  Status s = grpc->Send(Body(true), call, &response);
  INFO(s.ToString());
  CHECK(s.ok());
}

}  // namespace
}  // namespace strata
