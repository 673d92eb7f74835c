// The gRPC transport against an independent server: a Python grpcio implementation of
// sglang.runtime.v1.SglangService, written here from the same proto (stubs generated at build time
// with protoc --python_out and grpc_python_plugin into STRATA_GRPC_PY_DIR). It logs what it
// receives (metadata, trace headers, the deadline it sees, the body) and answers like upstream
// SGLang (chunks, then an empty finished chunk), or with a status code, gzip, a slow prefill, TLS.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "strata/grpc_transport.h"
#include "strata/transport.h"
#include "testing/temp_dir.h"
#include "testing/wait_for.h"

namespace strata {
namespace {

const char* kServer = R"PY(
import json, sys, time
from concurrent import futures
sys.path.insert(0, sys.argv[1])
import grpc
from sglang.runtime.v1 import sglang_pb2 as pb, sglang_pb2_grpc as pbg

LOG, TLS_DIR, TOKEN = sys.argv[2], sys.argv[3], sys.argv[4]
CODES = {c.value[0]: c for c in grpc.StatusCode}

def log(entry):
    with open(LOG, "a") as f:
        f.write(json.dumps(entry) + "\n")

def chunk(obj, finished=False):
    return pb.OpenAIStreamChunk(json_chunk=json.dumps(obj).encode() if obj is not None else b"", finished=finished)

class Service(pbg.SglangServiceServicer):
    def HealthCheck(self, request, context):
        return pb.HealthCheckResponse(healthy=True)

    def Abort(self, request, context):
        log({"abort": request.rid})
        return pb.AbortResponse(success=request.rid == "known-rid")

    def ChatComplete(self, request, context):
        md = {k: v for k, v in context.invocation_metadata()}
        entry = {"metadata": md, "trace_headers": dict(request.trace_headers),
                 "time_remaining": context.time_remaining(), "body": request.json_body.decode("utf-8")}
        log(entry)
        if TOKEN and md.get("authorization") != "Bearer " + TOKEN:
            context.abort(grpc.StatusCode.UNAUTHENTICATED, "missing or wrong bearer token")
        if "x-want-code" in md:
            context.abort(CODES[int(md["x-want-code"])], "server says " + md["x-want-code"])
        if "x-deadline-early-ms" in md:  # end the call with DEADLINE_EXCEEDED this early
            while context.time_remaining() > int(md["x-deadline-early-ms"]) / 1000.0:
                time.sleep(0.005)
            context.abort(grpc.StatusCode.DEADLINE_EXCEEDED, "server deadline reached")
        body = json.loads(request.json_body)
        if md.get("x-compress") == "gzip":
            context.set_compression(grpc.Compression.Gzip)
        delay = int(md.get("x-prefill-ms", "0")) / 1000.0
        end = time.time() + delay
        while time.time() < end:
            if not context.is_active():
                log({"stopped": "client gone during prefill"})
                return
            time.sleep(0.01)
        usage = {"prompt_tokens": 12, "completion_tokens": 5, "total_tokens": 17,
                 "prompt_tokens_details": {"cached_tokens": 8}}
        if not body.get("stream"):
            yield chunk({"id": "py-1", "object": "chat.completion", "model": body.get("model"),
                         "choices": [{"index": 0, "finish_reason": "stop",
                                      "message": {"role": "assistant", "content": "Hello" * 2000}}],
                         "usage": usage}, finished=True)
            return
        for c in [
            {"choices": [{"index": 0, "delta": {"role": "assistant", "content": "Hel"}}]},
            {"choices": [{"index": 0, "delta": {"content": "lo"}}]},
            {"choices": [{"index": 0, "delta": {"tool_calls": [{"index": 0, "id": "call_p", "type": "function",
                "function": {"name": "bash", "arguments": "{\"cmd\":"}}]}}]},
            {"choices": [{"index": 0, "delta": {"tool_calls": [{"index": 0, "function": {"arguments": "\"pwd\"}"}}]}}]},
            {"choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]},
            {"choices": [], "usage": usage},
        ]:
            yield chunk(c)
        yield chunk(None, finished=True)

server = grpc.server(futures.ThreadPoolExecutor(max_workers=8))
pbg.add_SglangServiceServicer_to_server(Service(), server)
if TLS_DIR:
    read = lambda name: open(TLS_DIR + "/" + name, "rb").read()
    credentials = grpc.ssl_server_credentials([(read("server.key"), read("server.pem"))],
                                              root_certificates=read("ca.pem"), require_client_auth=True)
    port = server.add_secure_port("127.0.0.1:0", credentials)
else:
    port = server.add_insecure_port("127.0.0.1:0")
server.start()
print(port, flush=True)
server.wait_for_termination()
)PY";

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// A test CA, a server certificate for 127.0.0.1 and a client certificate, made with openssl.
void MakeCertificates(const std::string& dir) {
  const std::string cmd = "cd '" + dir +
                          "' && "
                          "openssl req -x509 -newkey rsa:2048 -nodes -keyout ca.key -out ca.pem "
                          "-days 2 -subj /CN=strata-test-ca && "
                          "openssl req -newkey rsa:2048 -nodes -keyout server.key -out server.csr "
                          "-subj /CN=localhost && "
                          "printf 'subjectAltName=DNS:localhost,IP:127.0.0.1\\n' > server.ext && "
                          "openssl x509 -req -in server.csr -CA ca.pem -CAkey ca.key "
                          "-CAcreateserial -out server.pem -days 2 "
                          "-extfile server.ext && "
                          "openssl req -newkey rsa:2048 -nodes -keyout client.key -out client.csr "
                          "-subj /CN=strata-client && "
                          "openssl x509 -req -in client.csr -CA ca.pem -CAkey ca.key "
                          "-CAcreateserial -out client.pem -days 2 && "
                          "openssl req -x509 -newkey rsa:2048 -nodes -keyout other.key -out "
                          "other.pem -days 2 -subj /CN=other-ca";
  REQUIRE(std::system(("(" + cmd + ") >/dev/null 2>&1").c_str()) == 0);
}

struct PythonGrpcServer {
  pid_t pid = -1;
  int port = 0;
  testing::TempDir temp{"strata-grpc-py-"};
  std::string dir = temp.path();
  std::string log = dir + "/requests.jsonl";

  explicit PythonGrpcServer(const std::string& tls_dir = "", const std::string& token = "") {
    REQUIRE(!dir.empty());
    std::string script = dir + "/server.py";
    std::ofstream(script) << kServer;
    int fds[2];
    REQUIRE(pipe(fds) == 0);
    pid = fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {
      dup2(fds[1], 1);
      close(fds[0]);
      close(fds[1]);
      execl("/usr/bin/python3", "python3", script.c_str(), STRATA_GRPC_PY_DIR, log.c_str(),
            tls_dir.c_str(), token.c_str(), static_cast<char*>(nullptr));
      _exit(127);
    }
    close(fds[1]);
    std::string line;
    char c;
    while (read(fds[0], &c, 1) == 1 && c != '\n') line += c;
    close(fds[0]);
    port = std::atoi(line.c_str());
    REQUIRE(port > 0);
  }
  ~PythonGrpcServer() {
    if (pid > 0) {
      kill(pid, SIGTERM);
      waitpid(pid, nullptr, 0);
    }
  }
  std::string target() const { return "127.0.0.1:" + std::to_string(port); }
  std::vector<nlohmann::json> Requests() const {
    std::vector<nlohmann::json> out;
    std::ifstream in(log);
    std::string line;
    while (std::getline(in, line)) out.push_back(nlohmann::json::parse(line));
    return out;
  }
};

const std::string kBody =
    R"({"model":"glm-5.3-flash","messages":[{"role":"system","content":"Be brief. ✓"},)"
    R"({"role":"user","content":"Say hello."}],"stream":true,"stream_options":{"include_usage":true}})";
const std::string kPlainBody =
    R"({"model":"glm-5.3-flash","messages":[{"role":"user","content":"Say hello."}],"stream":false})";

std::unique_ptr<Transport> Connect(GrpcTransportOptions options) {
  auto t = MakeGrpcTransport(std::move(options));
  INFO(t.status().ToString());
  REQUIRE(t.ok());
  return std::move(t).value();
}

TEST_CASE("gRPC transport against a Python grpcio server: streaming, metadata, deadline",
          "[grpc][python]") {
  PythonGrpcServer server;
  GrpcTransportOptions options;
  options.target = server.target();
  auto grpc = Connect(options);
  REQUIRE(grpc->HealthCheck(std::chrono::seconds(10)).ok());

  CallOptions call;
  call.request_id = "py-req-1";
  call.deadline = std::chrono::seconds(20);
  call.headers = {{"traceparent", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"}};
  Response streamed;
  Status s = grpc->Send(kBody, call, &streamed);
  INFO(s.ToString());
  REQUIRE(s.ok());
  CHECK(streamed.content == "Hello");
  REQUIRE(streamed.tool_calls.size() == 1);
  CHECK(streamed.tool_calls[0].arguments == R"({"cmd":"pwd"})");
  CHECK(streamed.finish_reason == "tool_calls");
  CHECK(streamed.usage.cached_tokens == 8);

  // A whole completion in one finished chunk, gzip-compressed by the server.
  CallOptions gzip;
  gzip.headers = {{"x-compress", "gzip"}};
  Response whole;
  s = grpc->Send(kPlainBody, gzip, &whole);
  INFO(s.ToString());
  REQUIRE(s.ok());
  std::string hellos;
  for (int i = 0; i < 2000; ++i) hellos += "Hello";
  CHECK(whole.content == hellos);
  CHECK(whole.finish_reason == "stop");

  auto requests = server.Requests();
  REQUIRE(requests.size() == 2);
  const auto& first = requests[0];
  CHECK(first["body"] == kBody);  // byte for byte
  CHECK(first["metadata"]["x-request-id"] == "py-req-1");
  CHECK(first["metadata"]["traceparent"] ==
        "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01");
  CHECK(first["trace_headers"]["traceparent"] ==
        "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01");
  CHECK(first["metadata"]["user-agent"].get<std::string>().find("strata/") == 0);
  // The deadline reached the server as grpc-timeout (no deadline: time_remaining would be null).
  REQUIRE(first["time_remaining"].is_number());
  CHECK(first["time_remaining"].get<double>() > 0);
  // grpcio converts the deadline from the monotonic clock and reads what remains against the wall
  // clock: on a busy machine it has read up to a tenth of a second more than the 20 s sent.
  CHECK(first["time_remaining"].get<double>() <= 21.0);
}

TEST_CASE("gRPC status codes map to the same strata codes", "[grpc][python]") {
  PythonGrpcServer server;
  GrpcTransportOptions options;
  options.target = server.target();
  options.retry.retry_enabled = false;
  auto grpc = Connect(options);
  // gRPC code -> strata code (equal numbers, equal names), for every code a server can return.
  const std::vector<std::pair<int, StatusCode>> table = {
      {1, StatusCode::kCancelled},          {2, StatusCode::kUnknown},
      {3, StatusCode::kInvalidArgument},    {4, StatusCode::kDeadlineExceeded},
      {5, StatusCode::kNotFound},           {6, StatusCode::kAlreadyExists},
      {7, StatusCode::kPermissionDenied},   {8, StatusCode::kResourceExhausted},
      {9, StatusCode::kFailedPrecondition}, {10, StatusCode::kAborted},
      {11, StatusCode::kOutOfRange},        {12, StatusCode::kUnimplemented},
      {13, StatusCode::kInternal},          {14, StatusCode::kUnavailable},
      {15, StatusCode::kDataLoss},          {16, StatusCode::kUnauthenticated},
  };
  for (const auto& [grpc_code, strata_code] : table) {
    CallOptions call;
    call.headers = {{"x-want-code", std::to_string(grpc_code)}};
    Response response;
    Status s = grpc->Send(kBody, call, &response);
    INFO("gRPC code " << grpc_code << " -> " << s.ToString());
    CHECK(s.code() == strata_code);
    CHECK(s.message().find("server says " + std::to_string(grpc_code)) != std::string::npos);
  }
  Response response;
  CHECK(grpc->Abort("known-rid").ok());
  CHECK(grpc->Abort("other-rid").code() == StatusCode::kNotFound);
}

// A server that ends the call with DEADLINE_EXCEEDED just before the client's timer (it counts the
// propagated deadline from when the header arrived) reached the call's deadline; one that says so
// long before reports its own error (the table above: "server says 4").
TEST_CASE("gRPC transport: a server's DEADLINE_EXCEEDED just before the deadline is the deadline",
          "[grpc][python]") {
  PythonGrpcServer server;
  GrpcTransportOptions options;
  options.target = server.target();
  options.retry.retry_enabled = false;
  auto grpc = Connect(options);
  CallOptions call;
  call.deadline = std::chrono::milliseconds(2000);
  call.headers = {{"x-deadline-early-ms", "30"}};
  Response response;
  Status s = grpc->Send(kBody, call, &response);
  INFO(s.ToString());
  CHECK(s.code() == StatusCode::kDeadlineExceeded);
  CHECK(s.message().find("exceeded its total time of") != std::string::npos);
}

TEST_CASE("gRPC transport: cancelling stops the Python server's prefill",
          "[grpc][python][concurrency]") {
  PythonGrpcServer server;
  GrpcTransportOptions options;
  options.target = server.target();
  auto grpc = Connect(options);
  CancellationToken token;
  CallOptions call;
  call.cancel = &token;
  call.headers = {{"x-prefill-ms", "30000"}};
  bool arrived = false;  // checked after join: Catch2 assertions are not thread-safe
  std::thread canceller([&] {
    // The server logs the call when it starts its prefill: the call is in flight.
    arrived = testing::WaitFor([&] { return !server.Requests().empty(); });
    token.Cancel();
  });
  Response response;
  Status s = grpc->Send(kBody, call, &response);
  canceller.join();
  CHECK(arrived);
  CHECK(s.code() == StatusCode::kCancelled);
  CHECK(testing::WaitFor([&] {  // the server saw the cancellation and ended its prefill
    for (const auto& r : server.Requests()) {
      if (r.contains("stopped")) return true;
    }
    return false;
  }));
}

// Made once per test process (every SECTION re-enters the test case).
const std::string& Certificates() {
  static const testing::TempDir dir("strata-grpc-tls-");
  static const bool made = [] {
    MakeCertificates(dir.path());
    return true;
  }();
  (void)made;
  return dir.path();
}

TEST_CASE("gRPC transport over TLS with a client certificate and a bearer token",
          "[grpc][python][tls]") {
  const std::string& certs = Certificates();
  PythonGrpcServer server(certs, "tok-tls");
  GrpcTransportOptions options;
  options.target = server.target();
  options.use_tls = true;
  options.tls_root_certs_pem = ReadFile(certs + "/ca.pem");
  options.tls_client_cert_pem = ReadFile(certs + "/client.pem");
  options.tls_client_key_pem = ReadFile(certs + "/client.key");
  options.retry.retry_enabled = false;

  SECTION("verified server, client certificate and token: the call succeeds") {
    options.bearer_token = "tok-tls";
    auto grpc = Connect(options);
    Response response;
    Status s = grpc->Send(kBody, {}, &response);
    INFO(s.ToString());
    REQUIRE(s.ok());
    CHECK(response.content == "Hello");
    CHECK(server.Requests().back()["metadata"]["authorization"] == "Bearer tok-tls");
  }
  SECTION("no token: the server's UNAUTHENTICATED") {
    auto grpc = Connect(options);
    Response response;
    CHECK(grpc->Send(kBody, {}, &response).code() == StatusCode::kUnauthenticated);
  }
  SECTION("a server certificate from another CA is refused: UNAVAILABLE, nothing sent") {
    options.bearer_token = "tok-tls";
    options.tls_root_certs_pem = ReadFile(certs + "/other.pem");
    auto grpc = Connect(options);
    Response response;
    CHECK(grpc->Send(kBody, {}, &response).code() == StatusCode::kUnavailable);
    CHECK(server.Requests().empty());
  }
  SECTION("without a client certificate the server refuses the handshake") {
    options.bearer_token = "tok-tls";
    options.tls_client_cert_pem.clear();
    options.tls_client_key_pem.clear();
    auto grpc = Connect(options);
    Response response;
    CHECK(grpc->Send(kBody, {}, &response).code() == StatusCode::kUnavailable);
    CHECK(server.Requests().empty());
  }
}

}  // namespace
}  // namespace strata
