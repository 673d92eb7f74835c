// Text from outside through the sidecar's proxy over real HTTP: a client's tool-call arguments that
// the chat template quotes, upstream error bodies cut mid-character or made of garbage, and an
// upstream that quotes the API key. Each answer (streamed or whole) must be valid JSON in valid
// UTF-8, the sidecar must stay up (a throwing dump inside a streamed answer aborted the process),
// and the key must reach neither the client nor the store.
#include <stdlib.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <fstream>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/utf8.h"
#include "http_server.h"
#include "integration/transport/raw_http_server.h"
#include "proxy.h"
#include "registry.h"
#include "tenants.h"
#include "testing/command.h"
#include "testing/skip.h"
#include "testing/temp_dir.h"

namespace strata::sidecar {
namespace {

using json = nlohmann::json;
using strata::testing::RawHttpServer;
using strata::testing::RawRequest;
using strata::testing::RunCommand;

constexpr char kKeyVariable[] = "STRATA_PROXY_OUTSIDE_TEXT_KEY";
constexpr char kKey[] = "sk-test-0123456789abcdef-secret";

std::string Repeat(std::string_view s, size_t n) {
  std::string out;
  for (size_t i = 0; i < n; ++i) out += s;
  return out;
}

// The value of header `name` (lower case) in a raw request head, "" when absent.
std::string Header(const std::string& head, const std::string& name) {
  std::string lower = head;
  for (char& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  const size_t at = lower.find("\r\n" + name + ":");
  if (at == std::string::npos) return "";
  const size_t start = head.find_first_not_of(' ', at + name.size() + 3);
  return head.substr(start, head.find("\r\n", start) - start);
}

// An upstream that answers every request with the response of its path, which a test sets.
// "{auth}" in a body is replaced by the request's Authorization header (an upstream quoting it).
class Upstream {
 public:
  Upstream()
      : server_([this](int fd, const RawRequest& request) {
          const bool models = request.head.find(" /v1/models ") != std::string::npos;
          std::string answer;
          {
            std::lock_guard<std::mutex> lock(mu_);
            answer = models ? models_ : completions_;
          }
          for (size_t at = answer.find("{auth}"); at != std::string::npos;
               at = answer.find("{auth}")) {
            answer.replace(at, 6, Header(request.head, "authorization"));
          }
          RawHttpServer::Write(fd, answer);
        }) {}

  // The next answers to POST /v1/chat/completions and GET /v1/models.
  void AnswerCompletions(int status, const std::string& content_type, const std::string& body) {
    std::lock_guard<std::mutex> lock(mu_);
    completions_ = Response(status, content_type, body);
  }
  void AnswerModels(int status, const std::string& content_type, const std::string& body) {
    std::lock_guard<std::mutex> lock(mu_);
    models_ = Response(status, content_type, body);
  }
  std::string base_url() const { return server_.base_url(); }
  std::vector<RawRequest> requests() const { return server_.requests(); }

 private:
  static std::string Response(int status, const std::string& content_type, std::string body) {
    // The length is only known once "{auth}" is replaced: the connection's end marks the body's.
    return "HTTP/1.1 " + std::to_string(status) + " X\r\nContent-Type: " + content_type +
           "\r\nConnection: close\r\n\r\n" + body;
  }

  std::mutex mu_;
  std::string completions_;  // guarded by mu_
  std::string models_;       // guarded by mu_
  RawHttpServer server_;
};

struct Fixture {
  testing::TempDir temp;  // destroyed last: the store in it is closed first
  std::string dir;
  Upstream upstream;
  std::unique_ptr<Authenticator> authenticator;
  std::unique_ptr<AgentRegistry> registry;
  std::unique_ptr<Proxy> proxy;
  std::unique_ptr<HttpServer> http;
  TenantConfig tenant;
  std::string base;

  explicit Fixture(const std::string& name)
      : temp("strata-proxy-outside-" + name + "-"), dir(temp.path()) {
    REQUIRE(!dir.empty());
    ::setenv(kKeyVariable, kKey, 1);
    tenant.name = "alpha";
    tenant.token_sha256 = {Sha256Hex("alpha-token")};
    tenant.limits.max_request_bytes = 1 << 20;
    authenticator = std::make_unique<Authenticator>(std::vector<TenantConfig>{tenant},
                                                    TenantLimits(), std::vector<std::string>{});
    RegistryOptions registry_options;
    registry_options.store_path = dir + "/sidecar.db";
    registry_options.upstream = upstream.base_url();
    registry_options.api_key_env = kKeyVariable;
    registry = std::move(AgentRegistry::Open(registry_options)).value();
    ProxyOptions proxy_options;
    proxy_options.registry = registry.get();
    proxy_options.upstream = upstream.base_url();
    proxy_options.upstream_api_key = kKey;
    proxy = std::make_unique<Proxy>(proxy_options);
    HttpServerOptions http_options;
    http_options.listen = "127.0.0.1:0";
    http_options.authenticator = authenticator.get();
    http_options.proxy = proxy.get();
    http = std::move(HttpServer::Start(http_options)).value();
    base = "http://127.0.0.1:" + std::to_string(http->port());
  }

  // POSTs `body` to /v1/chat/completions as agent `agent`: curl's status code and the body.
  std::pair<int, std::string> Post(const std::string& agent, const json& body) {
    const std::string body_file = dir + "/body.json";
    std::ofstream(body_file, std::ios::binary) << body.dump();
    return Curl("-N -X POST -H 'Content-Type: application/json' -H 'X-Strata-Agent: " + agent +
                "' --data-binary @" + body_file + " " + base + "/v1/chat/completions");
  }
  std::pair<int, std::string> Curl(const std::string& args) {
    const std::string out_file = dir + "/curl.out";
    auto result = RunCommand("curl -s -H 'Authorization: Bearer alpha-token' -o '" + out_file +
                             "' -w '%{http_code}' " + args);
    return {std::atoi(result.output.c_str()), strata::testing::ReadFile(out_file)};
  }
  bool Healthy() { return Curl(base + "/healthz").first == 200; }
};

void RequireCurl() {
  if (RunCommand("command -v curl >/dev/null && echo yes").output.find("yes") ==
      std::string::npos) {
    STRATA_SKIP("curl is not installed (scripts/setup installs it)");
  }
}

json Request(json messages, bool stream) {
  json body = {{"model", "glm-5.3-flash"}, {"messages", std::move(messages)}};
  if (stream) body["stream"] = true;
  return body;
}

json UserOnly(const std::string& text) {
  return json::array({{{"role", "user"}, {"content", text}}});
}

// The error message of an answer: its OpenAI error body. These failures all come before the first
// byte, so a streamed answer gets its HTTP status and error body too (`stream` says which one was
// asked for). Fails the test unless the answer is valid UTF-8 and valid JSON.
std::string ErrorMessage(const std::pair<int, std::string>& reply, bool stream) {
  INFO(reply.second << (stream ? " (streamed)" : ""));
  REQUIRE(internal::IsValidUtf8(reply.second));
  const std::string text = reply.second;
  CHECK(reply.first >= 400);
  CHECK(text.find("data: ") == std::string::npos);
  const json error = json::parse(text, nullptr, false);
  REQUIRE(error.is_object());
  REQUIRE(error["error"]["message"].is_string());
  return error["error"]["message"].get<std::string>();
}

TEST_CASE("proxy: tool-call arguments that are not JSON and not ASCII are quoted, cut whole",
          "[sidecar][proxy]") {
  RequireCurl();
  Fixture f("arguments");
  const std::string arguments = "x" + Repeat("\xC3\xA9", 100);  // 201 bytes, "é" from byte 1
  const json messages =
      json::array({{{"role", "user"}, {"content", "go"}},
                   {{"role", "assistant"},
                    {"content", ""},
                    {"tool_calls",
                     {{{"id", "c1"},
                       {"type", "function"},
                       {"function", {{"name", "read_file"}, {"arguments", arguments}}}}}}},
                   {{"role", "tool"}, {"tool_call_id", "c1"}, {"content", "file text"}}});
  for (bool stream : {true, false}) {
    INFO("stream " << stream);
    const std::string message = ErrorMessage(
        f.Post(stream ? "args-stream" : "args-whole", Request(messages, stream)), stream);
    // The template quotes 80 bytes: 39 whole "é", not the first byte of the 40th.
    CHECK(message.find(".arguments is not a JSON object: x" + Repeat("\xC3\xA9", 39) + "...") !=
          std::string::npos);
    CHECK(f.Healthy());
  }
}

TEST_CASE("proxy: an upstream error body cut mid-character and garbage bodies answer valid JSON",
          "[sidecar][proxy]") {
  RequireCurl();
  Fixture f("upstream");
  const std::string garbage = "\xFF\xFE<\x80\x80 not json \xC3(\xE2\x82 \xED\xA0\x80 end";
  struct Case {
    int status;
    const char* content_type;
    std::string body;
    std::string expected;  // in the message
  };
  const std::vector<Case> cases = {
      // Quoted up to 300 bytes: 149 whole "é" after the "x", not the first byte of the 150th.
      {400, "text/plain", "x" + Repeat("\xC3\xA9", 400), "x" + Repeat("\xC3\xA9", 149)},
      {403, "text/plain", garbage, "\xEF\xBF\xBD\xEF\xBF\xBD<"},
      {200, "application/json", garbage, "malformed JSON in the server's answer"},
      {200, "text/event-stream", "data: " + garbage + "\n\n", "malformed JSON"}};
  int n = 0;
  for (const Case& c : cases) {
    for (bool stream : {true, false}) {
      INFO("HTTP " << c.status << " " << c.content_type << ", stream " << stream);
      f.upstream.AnswerCompletions(c.status, c.content_type, c.body);
      const std::string agent = "up-" + std::to_string(n++);
      const std::string message =
          ErrorMessage(f.Post(agent, Request(UserOnly("hi"), stream)), stream);
      CHECK(message.find(c.expected) != std::string::npos);
      CHECK(f.Healthy());
      // The agent's record of the failed request holds the same valid text.
      const std::string stored = AgentRegistry::StoredId(f.tenant, agent);
      StatusOr<std::vector<RequestRecord>> records = f.registry->store().RecentRequests(stored, 5);
      REQUIRE(records.ok());
      REQUIRE_FALSE(records->empty());
      CHECK(internal::IsValidUtf8(records->front().error));
      CHECK(records->front().error.find(c.expected) != std::string::npos);
    }
  }
}

TEST_CASE("proxy: an upstream that quotes the API key has it redacted everywhere",
          "[sidecar][proxy]") {
  RequireCurl();
  Fixture f("key");
  // OpenAI's 401 quotes the key; this upstream quotes the whole Authorization header too.
  f.upstream.AnswerCompletions(
      401, "application/json",
      R"({"error":{"message":"Incorrect API key provided: {auth}.","type":"invalid_request_error"}})");
  f.upstream.AnswerModels(401, "text/plain", "you sent\nAuthorization: {auth}\nwhich is wrong");
  for (bool stream : {true, false}) {
    INFO("stream " << stream);
    const std::string agent = stream ? "key-stream" : "key-whole";
    const auto reply = f.Post(agent, Request(UserOnly("hi"), stream));
    const std::string message = ErrorMessage(reply, stream);
    CHECK(message.find("Incorrect API key provided: Bearer [redacted].") != std::string::npos);
    CHECK(reply.second.find(kKey) == std::string::npos);
    StatusOr<std::vector<RequestRecord>> records =
        f.registry->store().RecentRequests(AgentRegistry::StoredId(f.tenant, agent), 5);
    REQUIRE(records.ok());
    REQUIRE_FALSE(records->empty());
    CHECK(records->front().error.find("[redacted]") != std::string::npos);
    CHECK(records->front().error.find(kKey) == std::string::npos);
  }
  // The upstream did get the key: what it quoted was real.
  bool sent = false;
  for (const RawRequest& r : f.upstream.requests()) {
    sent = sent || Header(r.head, "authorization") == std::string("Bearer ") + kKey;
  }
  CHECK(sent);
  // GET /v1/models is passed through, without the key.
  const auto models = f.Curl(f.base + "/v1/models");
  INFO(models.second);
  CHECK(models.first == 401);
  CHECK(models.second.find("Authorization: [redacted]") != std::string::npos);
  CHECK(models.second.find(kKey) == std::string::npos);
  // Nothing of the key reached the store's files.
  f.http->Stop();
  f.http.reset();
  f.proxy.reset();
  f.registry.reset();
  for (const char* suffix : {"", "-wal"}) {
    CHECK(strata::testing::ReadFile(f.dir + "/sidecar.db" + suffix).find(kKey) ==
          std::string::npos);
  }
}

}  // namespace
}  // namespace strata::sidecar
