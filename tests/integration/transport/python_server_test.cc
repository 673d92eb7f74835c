// The HTTP transport against an independent server: Python's http.server, written here, checks the
// request it receives (method, path, headers, JSON body) and answers in SSE or JSON.
#include <catch2/catch.hpp>

#include <nlohmann/json.hpp>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <sys/wait.h>
#include <unistd.h>

#include "strata/http_transport.h"
#include "strata/transport.h"
#include "testing/temp_dir.h"

namespace strata {
namespace {

const char* kServer = R"PY(
import json, sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

LOG = sys.argv[1]

class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    def log_message(self, *args):
        pass
    def do_POST(self):
        length = int(self.headers.get("Content-Length", "0"))
        raw = self.rfile.read(length)
        problems = []
        if self.path != "/v1/chat/completions":
            problems.append("path " + self.path)
        if self.headers.get("Content-Type") != "application/json":
            problems.append("content-type " + str(self.headers.get("Content-Type")))
        if self.headers.get("Authorization") != "Bearer sk-test":
            problems.append("authorization " + str(self.headers.get("Authorization")))
        if self.headers.get("Transfer-Encoding"):
            problems.append("chunked request")
        try:
            body = json.loads(raw.decode("utf-8"))
        except Exception as e:
            body = None
            problems.append("json: %s" % e)
        if body is not None:
            if not isinstance(body.get("messages"), list) or not body["messages"]:
                problems.append("no messages")
            for m in body.get("messages", []):
                if m.get("role") not in ("system", "user", "assistant", "tool"):
                    problems.append("role %r" % m.get("role"))
        with open(LOG, "ab") as f:
            f.write(json.dumps({"problems": problems, "raw": raw.decode("utf-8", "replace"),
                                "request_id": self.headers.get("X-Request-Id")}).encode() + b"\n")
        if problems:
            out = json.dumps({"error": {"message": "; ".join(problems), "type": "invalid_request_error"}}).encode()
            self.send_response(400)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(out)))
            self.end_headers()
            self.wfile.write(out)
            return
        usage = {"prompt_tokens": 12, "completion_tokens": 5, "total_tokens": 17,
                 "prompt_tokens_details": {"cached_tokens": 8}}
        if body.get("stream"):
            chunks = [
                {"choices": [{"index": 0, "delta": {"role": "assistant", "content": "Hel"}}]},
                {"choices": [{"index": 0, "delta": {"content": "lo"}}]},
                {"choices": [{"index": 0, "delta": {"tool_calls": [{"index": 0, "id": "call_p", "type": "function",
                    "function": {"name": "bash", "arguments": "{\"cmd\":"}}]}}]},
                {"choices": [{"index": 0, "delta": {"tool_calls": [{"index": 0, "function": {"arguments": "\"pwd\"}"}}]}}]},
                {"choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]},
                {"choices": [], "usage": usage},
            ]
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Connection", "close")
            self.end_headers()
            for c in chunks:
                self.wfile.write(b"data: " + json.dumps(c).encode() + b"\n\n")
                self.wfile.flush()
            self.wfile.write(b"data: [DONE]\n\n")
            self.close_connection = True
        else:
            out = json.dumps({"id": "x", "choices": [{"index": 0, "finish_reason": "stop",
                              "message": {"role": "assistant", "content": "Hello"}}], "usage": usage}).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(out)))
            self.end_headers()
            self.wfile.write(out)

server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
print(server.server_address[1], flush=True)
server.serve_forever()
)PY";

struct PythonServer {
  pid_t pid = -1;
  int port = 0;
  std::string log;
  testing::TempDir temp{"strata-pyserver-"};
  std::string dir = temp.path();

  PythonServer() {
    REQUIRE(!dir.empty());
    std::string script = dir + "/server.py";
    log = dir + "/requests.jsonl";
    std::ofstream(script) << kServer;
    int fds[2];
    REQUIRE(pipe(fds) == 0);
    pid = fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {
      dup2(fds[1], 1);
      close(fds[0]);
      close(fds[1]);
      execl("/usr/bin/python3", "python3", script.c_str(), log.c_str(), static_cast<char*>(nullptr));
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
  ~PythonServer() {
    if (pid > 0) {
      kill(pid, SIGTERM);
      waitpid(pid, nullptr, 0);
    }
  }
  std::vector<nlohmann::json> Requests() const {
    std::vector<nlohmann::json> out;
    std::ifstream in(log);
    std::string line;
    while (std::getline(in, line)) out.push_back(nlohmann::json::parse(line));
    return out;
  }
};

TEST_CASE("an independent Python http.server receives well-formed requests", "[transport][python]") {
  PythonServer server;
  HttpTransportOptions options;
  options.base_url = "http://127.0.0.1:" + std::to_string(server.port) + "/v1/";
  options.api_key = "sk-test";
  auto http = MakeHttpTransport(options).value();
  const std::string body =
      R"({"model":"glm-5.3-flash","messages":[{"role":"system","content":"Be brief. ✓"},)"
      R"({"role":"user","content":"Say hello."}],"stream":true,"stream_options":{"include_usage":true}})";
  CallOptions call;
  call.request_id = "py-1";
  Response streamed;
  Status s = http->Send(body, call, &streamed);
  INFO(s.ToString());
  REQUIRE(s.ok());
  CHECK(streamed.content == "Hello");
  REQUIRE(streamed.tool_calls.size() == 1);
  CHECK(streamed.tool_calls[0].arguments == R"({"cmd":"pwd"})");
  CHECK(streamed.finish_reason == "tool_calls");
  CHECK(streamed.usage.cached_tokens == 8);

  std::string plain = body;
  plain.replace(plain.find("\"stream\":true"), 13, "\"stream\":false");
  Response whole;
  REQUIRE(http->Send(plain, {}, &whole).ok());
  CHECK(whole.content == "Hello");
  CHECK(whole.finish_reason == "stop");

  auto requests = server.Requests();
  REQUIRE(requests.size() == 2);
  for (const auto& r : requests) CHECK(r["problems"].empty());
  CHECK(requests[0]["raw"] == body);  // byte for byte
  CHECK(requests[0]["request_id"] == "py-1");
  CHECK(requests[1]["raw"] == plain);

  // The server's own error (nested shape) comes back as INVALID_ARGUMENT with its message.
  Response bad;
  Status refused = http->Send(R"({"model":"m","messages":[{"role":"robot","content":"x"}]})", {}, &bad);
  CHECK(refused.code() == StatusCode::kInvalidArgument);
  CHECK(refused.message().find("role 'robot'") != std::string::npos);
  CHECK(bad.http_status == 400);
  CHECK(bad.attempts == 1);
}

}  // namespace
}  // namespace strata
