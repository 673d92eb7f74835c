// strata-sidecar's OpenAI-compatible proxy over real HTTP, with strata-sim as the upstream: the
// official `openai` npm client runs a tool-using agent through it (openai_proxy_client.js), curl
// checks the routes, authentication, limits and tenant isolation, and the simulator's request log
// shows what the sidecar sent upstream (compacted, byte-stable across turns).
#include <unistd.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "http_server.h"
#include "proxy.h"
#include "registry.h"
#include "sim_server.h"
#include "tenants.h"
#include "testing/command.h"
#include "testing/skip.h"
#include "testing/temp_dir.h"
#include "testing/wait_for.h"

namespace strata::sidecar {
namespace {

using json = nlohmann::json;
using strata::testing::RunCommand;

const std::string kTrajectory =
    std::string(STRATA_TEST_TRACES_DIR) + "/swe-agent/demo-marshmallow-1867-function_calling.jsonl";

// Where the "messages" array of a request body ends (its closing bracket): a body that starts with
// another body's bytes up to there carries that request's whole conversation unchanged.
size_t MessagesEnd(const std::string& body) {
  size_t i = body.find("\"messages\":[");
  REQUIRE(i != std::string::npos);
  i += std::string("\"messages\":[").size();
  int depth = 1;
  bool in_string = false;
  for (; i < body.size(); ++i) {
    const char c = body[i];
    if (in_string) {
      if (c == '\\') {
        ++i;
      } else if (c == '"') {
        in_string = false;
      }
    } else if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      ++depth;
    } else if (c == ']' || c == '}') {
      if (--depth == 0) return i;
    }
  }
  FAIL("unterminated messages array");
  return 0;
}

struct Fixture {
  testing::TempDir temp;  // destroyed last: the store in it is closed first
  std::string dir;
  std::unique_ptr<sim::SimServer> sim;
  std::unique_ptr<Authenticator> authenticator;
  std::unique_ptr<AgentRegistry> registry;
  std::unique_ptr<Proxy> proxy;
  std::unique_ptr<HttpServer> http;
  std::string base;  // http://127.0.0.1:PORT

  explicit Fixture(const std::string& name, TlsConfig tls = {}, double decode_us_per_token = 0)
      : temp("strata-proxy-test-" + name + "-"), dir(temp.path()) {
    REQUIRE(!dir.empty());
    sim::SimOptions sim_options;
    sim_options.trajectory_path = kTrajectory;
    sim_options.decode_us_per_token = decode_us_per_token;
    sim = std::move(sim::SimServer::Start(sim_options)).value();

    TenantConfig alpha;
    alpha.name = "alpha";
    alpha.token_sha256 = {Sha256Hex("alpha-token")};
    alpha.limits.max_request_bytes = 1 << 20;
    TenantConfig beta;
    beta.name = "beta";
    beta.token_sha256 = {Sha256Hex("beta-token")};
    beta.limits.max_request_bytes = 16 << 10;
    // "scrape-token" may read /metrics; the tenants' tokens may not.
    authenticator =
        std::make_unique<Authenticator>(std::vector<TenantConfig>{alpha, beta}, TenantLimits(),
                                        std::vector<std::string>{Sha256Hex("scrape-token")});

    RegistryOptions registry_options;
    registry_options.store_path = dir + "/sidecar.db";
    registry_options.upstream = sim->base_url();
    registry_options.window = 8000;  // small: the agent's context must be compacted
    registry = std::move(AgentRegistry::Open(registry_options)).value();

    ProxyOptions proxy_options;
    proxy_options.registry = registry.get();
    proxy_options.upstream = sim->base_url();
    proxy = std::make_unique<Proxy>(proxy_options);

    HttpServerOptions http_options;
    http_options.listen = "127.0.0.1:0";
    http_options.tls = tls;
    http_options.authenticator = authenticator.get();
    http_options.proxy = proxy.get();
    http_options.metrics = [] { return std::string("strata_test_metric 1\n"); };
    http = std::move(HttpServer::Start(http_options)).value();
    base = std::string(tls.enabled() ? "https" : "http") +
           "://127.0.0.1:" + std::to_string(http->port());
  }

  // curl's status line code and body: "<code>\n<body>".
  std::pair<int, std::string> Curl(const std::string& args) {
    const std::string out_file = dir + "/curl.out";
    auto result = RunCommand("curl -s -H 'Content-Type: application/json' -o '" + out_file +
                             "' -w '%{http_code}' " + args);
    std::ifstream in(out_file);
    std::string body((std::istreambuf_iterator<char>(in)), {});
    return {std::atoi(result.output.c_str()), body};
  }

  std::vector<sim::SimRequestLog> UpstreamRequests(const std::string& stored_agent) {
    std::vector<sim::SimRequestLog> out;
    for (const sim::SimRequestLog& r : sim->requests()) {
      auto id = r.headers.find("x-request-id");
      if (r.path.find("chat/completions") != std::string::npos && id != r.headers.end() &&
          id->second.rfind(stored_agent + "-", 0) == 0) {
        out.push_back(r);
      }
    }
    return out;
  }
};

std::string ChatBody(const std::string& user, bool stream = false) {
  json body = {{"model", "glm-5.3-flash"},
               {"messages", json::array({{{"role", "user"}, {"content", user}}})}};
  if (stream) body["stream"] = true;
  return body.dump();
}

void RequireTools() {
  if (RunCommand("command -v curl >/dev/null && echo yes").output.find("yes") ==
      std::string::npos) {
    STRATA_SKIP("curl is not installed (scripts/setup installs it)");
  }
}

TEST_CASE(
    "the openai client runs a tool-using agent through the proxy, upstream sees a managed request",
    "[sidecar][proxy]") {
  RequireTools();
  if (RunCommand("command -v node >/dev/null && echo yes").output.find("yes") ==
      std::string::npos) {
    STRATA_SKIP("node is not installed (scripts/setup installs it)");
  }
  Fixture f("openai");
  auto run = RunCommand("timeout 120 node '" + std::string(STRATA_SOURCE_DIR) +
                        "/tests/integration/sidecar_proxy/openai_proxy_client.js' '" +
                        f.base + "/v1' alpha-token agent-1 '" + kTrajectory + "' 2>&1");
  if (run.exit_code == 77) STRATA_SKIP(run.output);
  INFO(run.output);
  REQUIRE(run.exit_code == 0);
  const json summary = json::parse(run.output.substr(run.output.rfind("\n{") + 1));
  CHECK(summary["streamed"].get<int>() >= 2);
  CHECK(summary["compactions"].get<int>() >= 1);  // the 8,000-token window was reached

  // What the sidecar sent upstream for this agent: every request's conversation is carried on
  // byte for byte by the next one, except where the sidecar compacted, and the managed requests
  // are smaller than what the client sent.
  std::vector<sim::SimRequestLog> sent = f.UpstreamRequests("alpha/agent-1");
  const int turns = summary["turns"].get<int>();
  REQUIRE(static_cast<int>(sent.size()) == turns + 1);  // + the edited history
  int stable = 0;
  int changed = 0;
  for (int i = 0; i + 1 < turns; ++i) {
    const std::string& before = sent[i].body;
    const std::string& after = sent[i + 1].body;
    const size_t end = MessagesEnd(before);
    if (after.compare(0, end, before, 0, end) == 0) {
      ++stable;
    } else {
      ++changed;
    }
  }
  CHECK(changed == summary["compactions"].get<int>());
  CHECK(stable >= 3);
  CHECK(sent[turns - 1].body_bytes < summary["last_request_bytes"].get<size_t>());
  // Each turn's request reuses what the previous one left in the simulator's prefix cache.
  CHECK(sent[turns - 1].cached_tokens > 0);
  // The edited history replaced the conversation from the first user message.
  const std::string& edited = sent.back().body;
  CHECK(edited.find("(Edited: be brief.)") != std::string::npos);
  CHECK(json::parse(edited)["messages"].size() == 2);
  CHECK(summary["edit_break"].get<std::string>().find("client history replaced") == 0);
}

TEST_CASE("proxy routes: health, readiness, models, metrics, streaming, errors in OpenAI's shape",
          "[sidecar][proxy]") {
  RequireTools();
  Fixture f("routes");
  CHECK(f.Curl(f.base + "/healthz") == std::make_pair(200, std::string("ok\n")));
  CHECK(f.Curl(f.base + "/readyz").first == 200);

  // Authentication: health excepted, everything needs a tenant's bearer token.
  auto [code, body] = f.Curl(f.base + "/v1/chat/completions -d '" + ChatBody("hi") + "'");
  CHECK(code == 401);
  CHECK(json::parse(body)["error"]["type"] == "authentication_error");
  CHECK(body.find("alpha-token") == std::string::npos);
  CHECK(f.Curl("-H 'Authorization: Bearer wrong' " + f.base + "/v1/models").first == 401);
  CHECK(f.Curl(f.base + "/metrics").first == 401);
  const std::string alpha = "-H 'Authorization: Bearer alpha-token' ";
  // /metrics holds every tenant's series: a tenant's token is refused, the scrape token reads it.
  auto tenant_metrics = f.Curl(alpha + f.base + "/metrics");
  CHECK(tenant_metrics.first == 403);
  CHECK(json::parse(tenant_metrics.second)["error"]["message"].get<std::string>().find(
            "the token of tenant \"alpha\" may not read /metrics") == 0);
  CHECK(tenant_metrics.second.find("strata_test_metric") == std::string::npos);
  const std::string scrape = "-H 'Authorization: Bearer scrape-token' ";
  CHECK(f.Curl(scrape + f.base + "/metrics") ==
        std::make_pair(200, std::string("strata_test_metric 1\n")));
  // The scrape token is no tenant's: it reaches no agent.
  CHECK(f.Curl(scrape + f.base + "/v1/chat/completions -d '" + ChatBody("hi") + "'").first == 401);

  auto models = f.Curl(alpha + f.base + "/v1/models");
  CHECK(models.first == 200);
  CHECK(json::parse(models.second)["data"][0]["id"] == "glm-5.3-flash");

  auto missing = f.Curl(alpha + f.base + "/v1/nothing");
  CHECK(missing.first == 404);
  CHECK(json::parse(missing.second)["error"]["message"].get<std::string>().find("no route") == 0);

  // A bad request names what is wrong.
  auto bad = f.Curl(
      alpha + f.base +
      "/v1/chat/completions -d '{\"messages\":[{\"role\":\"assistant\",\"content\":\"x\"}]}'");
  CHECK(bad.first == 400);
  CHECK(json::parse(bad.second)["error"]["message"].get<std::string>().find(
            "messages[0] is an assistant message") == 0);

  auto not_bool =
      f.Curl(alpha + f.base + "/v1/chat/completions -d '{\"stream\":\"yes\",\"messages\":[]}'");
  CHECK(not_bool.first == 400);
  CHECK(json::parse(not_bool.second)["error"]["message"] == "\"stream\" must be true or false");

  // An upstream that keeps failing before its first byte: its status (503) whether streamed or not,
  // since nothing was sent to the client yet.
  REQUIRE(f.sim->InjectFault("503", 8).ok());  // 4 attempts per completion, two completions
  auto down = f.Curl(alpha + "-H 'X-Strata-Agent: down' " + f.base + "/v1/chat/completions -d '" +
                     ChatBody("anyone there?") + "'");
  CHECK(down.first == 503);
  CHECK(json::parse(down.second)["error"]["code"] == "unavailable");
  auto down_stream = f.Curl("-N " + alpha + "-H 'X-Strata-Agent: down' " + f.base +
                            "/v1/chat/completions -d '" + ChatBody("anyone there?", true) + "'");
  CHECK(down_stream.first == 503);
  CHECK(json::parse(down_stream.second)["error"]["code"] == "unavailable");
  // An upstream that says the prompt is too long is a 400 the client must not retry, not a 429.
  REQUIRE(f.sim->InjectFault("oversize", 1).ok());  // not retried: one request
  auto too_long = f.Curl(alpha + "-H 'X-Strata-Agent: long' " + f.base +
                         "/v1/chat/completions -d '" + ChatBody("a question") + "'");
  INFO(too_long.second);
  CHECK(too_long.first == 400);
  CHECK(json::parse(too_long.second)["error"]["code"] == "context_length_exceeded");
  // After the first byte an error can only be an event of the stream: the upstream's connection
  // is reset after two chunks (no retry once bytes were received).
  REQUIRE(f.sim->InjectFault("reset,after=2", 1).ok());
  auto cut = f.Curl("-N " + alpha + "-H 'X-Strata-Agent: cut' " + f.base +
                    "/v1/chat/completions -d '" + ChatBody("a long answer please", true) + "'");
  INFO(cut.second);
  CHECK(cut.first == 200);
  CHECK(cut.second.find("chat.completion.chunk") != std::string::npos);
  CHECK(cut.second.find("data: {\"error\":{") != std::string::npos);
  CHECK(cut.second.find("[DONE]") == std::string::npos);

  // Streaming over curl: chunks, then [DONE].
  auto streamed = f.Curl("-N " + alpha + "-H 'X-Strata-Agent: streamer' " + f.base +
                         "/v1/chat/completions -d '" + ChatBody("hello", true) + "'");
  CHECK(streamed.first == 200);
  CHECK(streamed.second.find("\"object\":\"chat.completion.chunk\"") != std::string::npos);
  CHECK(streamed.second.size() > 14);
  CHECK(streamed.second.substr(streamed.second.size() - 14) == "data: [DONE]\n\n");

  // Without X-Strata-Agent the agent is derived from the conversation: the same one next turn.
  const std::string headers_file = f.dir + "/headers";
  f.Curl("-D '" + headers_file + "' " + alpha + f.base + "/v1/chat/completions -d '" +
         ChatBody("derive me") + "'");
  std::string headers = strata::testing::ReadFile(headers_file);
  const size_t at = headers.find("X-Strata-Agent: conv-");
  REQUIRE(at != std::string::npos);
  const std::string derived = headers.substr(at + 16, 21);
  auto reply = f.Curl(alpha + f.base + "/v1/chat/completions -d '" + ChatBody("derive me") + "'");
  INFO(reply.second);
  CHECK(json::parse(reply.second)["strata"]["agent"] == derived);

  // Draining: not ready, new completions refused.
  f.http->BeginDrain();
  CHECK(f.Curl(f.base + "/readyz").first == 503);
  CHECK(f.Curl(alpha + f.base + "/v1/chat/completions -d '" + ChatBody("late") + "'").first == 503);
}

TEST_CASE("the client's sampling and other request fields reach upstream unchanged",
          "[sidecar][proxy]") {
  RequireTools();
  Fixture f("fields");
  const std::string alpha = "-H 'Authorization: Bearer alpha-token' ";
  const json fields = {
      {"temperature", 0.25},
      {"top_p", 0.9},
      {"max_tokens", 77},
      {"stop", {"END", "STOP"}},
      {"seed", 1234},
      {"presence_penalty", 0.5},
      {"tool_choice", {{"type", "function"}, {"function", {{"name", "read_file"}}}}},
      {"parallel_tool_calls", false},
      {"response_format", {{"type", "json_object"}}},
      {"user", "end-user-7"},
      {"top_k", 20},  // a vendor field (vLLM, SGLang): forwarded as well
      {"cache_salt", "someone-elses-salt"}};
  const json tool = {{"type", "function"},
                     {"function",
                      {{"name", "read_file"},
                       {"parameters", {{"type", "object"}, {"properties", json::object()}}}}}};
  for (bool stream : {false, true}) {
    INFO("stream " << stream);
    const std::string agent = stream ? "fields-stream" : "fields-plain";
    json body = json::parse(ChatBody("Answer in JSON.", stream));
    body.update(fields);
    body["tools"] = json::array({tool});
    if (stream) body["stream_options"] = {{"include_usage", true}};
    const std::string body_file = f.dir + "/fields.json";
    std::ofstream(body_file) << body.dump();
    const std::string headers_file = f.dir + "/fields.headers";
    auto reply =
        f.Curl((stream ? "-N " : "") + alpha + "-H 'X-Strata-Agent: " + agent + "' -D '" +
               headers_file + "' " + f.base + "/v1/chat/completions --data-binary @" + body_file);
    INFO(reply.second);
    REQUIRE(reply.first == 200);
    if (stream) CHECK(reply.second.find("\"usage\"") != std::string::npos);
    // The agent owns cache_salt (another tenant's salt must never be reachable): dropped, named.
    CHECK(strata::testing::ReadFile(headers_file).find("X-Strata-Ignored-Fields: cache_salt") !=
          std::string::npos);
    // The upstream request's id, streamed or not, before the body: the body names it too.
    const std::string headers = strata::testing::ReadFile(headers_file);
    const size_t id_at = headers.find("X-Request-Id: ");
    REQUIRE(id_at != std::string::npos);
    const std::string request_id =
        headers.substr(id_at + 14, headers.find('\r', id_at) - id_at - 14);
    CHECK(!request_id.empty());
    CHECK(reply.second.find("\"request_id\":\"" + request_id + "\"") != std::string::npos);

    std::vector<sim::SimRequestLog> sent = f.UpstreamRequests("alpha/" + agent);
    REQUIRE(sent.size() == 1);
    const json upstream = json::parse(sent[0].body);
    for (const char* name :
         {"temperature", "top_p", "max_tokens", "stop", "seed", "presence_penalty", "tool_choice",
          "parallel_tool_calls", "response_format", "user", "top_k"}) {
      INFO(name);
      REQUIRE(upstream.contains(name));
      CHECK(upstream[name] == fields[name]);
    }
    // The client's max_tokens replaced the agent's cap instead of being sent next to it.
    CHECK_FALSE(upstream.contains("max_completion_tokens"));
    CHECK(upstream["tools"].size() == 1);
    CHECK(upstream["tools"][0]["function"]["name"] == "read_file");
    CHECK(sent[0].cache_salt != "someone-elses-salt");
    CHECK(upstream["cache_salt"] != "someone-elses-salt");
  }
}

TEST_CASE(
    "proxy limits and tenants: 413 above the tenant's size, another tenant's agent is its own",
    "[sidecar][proxy]") {
  RequireTools();
  Fixture f("tenants");
  const std::string alpha = "-H 'Authorization: Bearer alpha-token' ";
  const std::string beta = "-H 'Authorization: Bearer beta-token' ";
  const std::string big_file = f.dir + "/big.json";
  {
    std::ofstream out(big_file);
    out << ChatBody(std::string(20000, 'x'));
  }
  // 20 KB: fine for alpha (1 MiB), above beta's 16 KiB.
  auto fits = f.Curl(alpha + "-H 'X-Strata-Agent: big' " + f.base +
                     "/v1/chat/completions --data-binary @" + big_file);
  INFO(fits.second);
  CHECK(fits.first == 200);
  auto refused = f.Curl(beta + f.base + "/v1/chat/completions --data-binary @" + big_file);
  CHECK(refused.first == 413);
  CHECK(json::parse(refused.second)["error"]["message"].get<std::string>().find(
            "max_request_bytes (16384)") != std::string::npos);
  // Above every tenant's limit: refused before the body is read.
  {
    std::ofstream out(big_file);
    out << ChatBody(std::string(1100000, 'y'));
  }
  auto huge = f.Curl(alpha + f.base + "/v1/chat/completions --data-binary @" + big_file);
  CHECK(huge.first == 413);
  CHECK(json::parse(huge.second)["error"]["type"] == "invalid_request_error");

  // Alpha's agent "shared" holds a secret; beta naming the same id gets its own empty agent, and
  // nothing of alpha's conversation reaches beta's upstream request.
  auto a = f.Curl(alpha + "-H 'X-Strata-Agent: shared' " + f.base + "/v1/chat/completions -d '" +
                  ChatBody("alpha secret 4242") + "'");
  REQUIRE(a.first == 200);
  auto b = f.Curl(beta + "-H 'X-Strata-Agent: shared' " + f.base + "/v1/chat/completions -d '" +
                  ChatBody("beta question") + "'");
  REQUIRE(b.first == 200);
  const json strata = json::parse(b.second)["strata"];
  CHECK(strata["reconcile"]["kept"] == 0);
  CHECK(strata["reconcile"]["replaced"] == false);
  std::vector<sim::SimRequestLog> beta_sent = f.UpstreamRequests("beta/shared");
  REQUIRE(beta_sent.size() == 1);
  CHECK(beta_sent[0].body.find("alpha secret") == std::string::npos);
  std::vector<sim::SimRequestLog> alpha_sent = f.UpstreamRequests("alpha/shared");
  REQUIRE(alpha_sent.size() == 1);
  CHECK(alpha_sent[0].cache_salt != beta_sent[0].cache_salt);
  // Through the registry, beta cannot reach alpha's agent at all.
  const TenantConfig* beta_tenant = f.authenticator->Find("beta");
  REQUIRE(beta_tenant != nullptr);
  CHECK(f.registry->Acquire(*beta_tenant, "big").status().code() == StatusCode::kNotFound);
}

TEST_CASE("GET /v1/models with length pools asks every pool endpoint and lists each model once",
          "[sidecar][proxy]") {
  Fixture f("models");
  sim::SimOptions second_options;
  auto second = std::move(sim::SimServer::Start(second_options)).value();
  // A port nothing listens on: bound, then closed.
  auto gone = std::move(sim::SimServer::Start(second_options)).value();
  const std::string dead = gone->base_url();
  gone.reset();

  ProxyOptions options;
  options.registry = f.registry.get();
  options.model_upstreams = {f.sim->base_url(), second->base_url(), dead, "grpc://127.0.0.1:1",
                             f.sim->base_url()};
  Proxy proxy(options);
  // Each endpoint asked is one new connection to it (the simulator logs chat requests only).
  const uint64_t first_before = f.sim->connections_accepted();
  const uint64_t second_before = second->connections_accepted();
  HttpReply reply = proxy.Models();
  INFO(reply.body);
  REQUIRE(reply.status == 200);
  const json models = json::parse(reply.body);
  CHECK(models["object"] == "list");
  REQUIRE(models["data"].size() == 1);  // both simulators serve glm-5.3-flash: listed once
  CHECK(models["data"][0]["id"] == "glm-5.3-flash");
  CHECK(f.sim->connections_accepted() - first_before == 1);  // listed twice, asked once
  CHECK(second->connections_accepted() - second_before == 1);
  bool named = false;
  for (const auto& [name, value] : reply.headers) {
    if (name == "X-Strata-Models-Unavailable") named = value.find(dead) == 0;
  }
  CHECK(named);

  options.model_upstreams = {dead};
  HttpReply none = Proxy(options).Models();
  CHECK(none.status == 502);
  CHECK_THAT(json::parse(none.body)["error"]["message"].get<std::string>(),
             Catch::StartsWith("no pool endpoint answered GET /models: " + dead));
  options.model_upstreams = {"grpc://127.0.0.1:1"};
  HttpReply grpc_only = Proxy(options).Models();
  CHECK(grpc_only.status == 503);
  CHECK_THAT(json::parse(grpc_only.body)["error"]["message"].get<std::string>(),
             Catch::Contains("no HTTP endpoint"));
}

TEST_CASE("a drain lets completions finish until its deadline, then cancels them",
          "[sidecar][proxy][concurrency]") {
  RequireTools();
  // The simulated model decodes one token per second: a completion takes about 16 s.
  Fixture f("drain", {}, 1e6);
  std::pair<int, std::string> slow;
  std::thread client([&] {
    slow = f.Curl("-H 'Authorization: Bearer alpha-token' " + f.base + "/v1/chat/completions -d '" +
                  ChatBody("take your time") + "'");
  });
  // Wait until the simulator has the request (the completion is in flight).
  auto in_flight = [&f] {
    for (const sim::SimRequestLog& r : f.sim->requests()) {
      if (r.path.find("chat/completions") != std::string::npos) return true;
    }
    return false;
  };
  REQUIRE(testing::WaitFor(in_flight));
  f.http->Stop(std::chrono::milliseconds(200));
  client.join();
  CHECK(slow.first == 499);
  CHECK(json::parse(slow.second)["error"]["code"] == "cancelled");
}

TEST_CASE("the proxy serves HTTPS from PEM files", "[sidecar][proxy]") {
  RequireTools();
  if (RunCommand("command -v openssl >/dev/null && echo yes").output.find("yes") ==
      std::string::npos) {
    STRATA_SKIP("openssl is not installed (scripts/setup installs it)");
  }
  const testing::TempDir temp("strata-proxy-test-tls-pem-");
  REQUIRE(!temp.path().empty());
  const std::string& dir = temp.path();
  auto made = RunCommand("cd '" + dir +
                         "' && "
                         "openssl req -x509 -newkey rsa:2048 -nodes -keyout ca.key -out ca.pem "
                         "-days 1 -subj /CN=test-ca 2>&1 && "
                         "openssl req -newkey rsa:2048 -nodes -keyout server.key -out server.csr "
                         "-subj /CN=127.0.0.1 2>&1 && "
                         "printf 'subjectAltName=IP:127.0.0.1\\n' > ext.cnf && "
                         "openssl x509 -req -in server.csr -CA ca.pem -CAkey ca.key "
                         "-CAcreateserial -out server.pem -days 1 "
                         "-extfile ext.cnf 2>&1");
  INFO(made.output);
  REQUIRE(made.exit_code == 0);
  TlsConfig tls;
  tls.cert_file = dir + "/server.pem";
  tls.key_file = dir + "/server.key";
  Fixture f("tls", tls);
  CHECK(f.Curl("--cacert '" + dir + "/ca.pem' " + f.base + "/healthz") ==
        std::make_pair(200, std::string("ok\n")));
  auto reply = f.Curl("--cacert '" + dir + "/ca.pem' -H 'Authorization: Bearer alpha-token' " +
                      f.base + "/v1/chat/completions -d '" + ChatBody("over tls") + "'");
  CHECK(reply.first == 200);
  CHECK(json::parse(reply.second)["object"] == "chat.completion");
  // Without the CA the client refuses the certificate: no plaintext fallback.
  CHECK(f.Curl(f.base + "/healthz").first == 0);

  // Mutual TLS: with client_ca_file, a client without a certificate from that CA is refused.
  auto client_cert = RunCommand("cd '" + dir +
                                "' && "
                                "openssl req -newkey rsa:2048 -nodes -keyout client.key -out "
                                "client.csr -subj /CN=client 2>&1 && "
                                "openssl x509 -req -in client.csr -CA ca.pem -CAkey ca.key "
                                "-CAcreateserial -out client.pem -days 1 2>&1");
  INFO(client_cert.output);
  REQUIRE(client_cert.exit_code == 0);
  HttpServerOptions mtls_options;
  mtls_options.tls = tls;
  mtls_options.tls.client_ca_file = dir + "/ca.pem";
  mtls_options.authenticator = f.authenticator.get();
  mtls_options.proxy = f.proxy.get();
  auto mtls = HttpServer::Start(mtls_options);
  REQUIRE(mtls.ok());
  const std::string mtls_base = "https://127.0.0.1:" + std::to_string((*mtls)->port());
  CHECK(f.Curl("--cacert '" + dir + "/ca.pem' " + mtls_base + "/healthz").first == 0);
  CHECK(f.Curl("--cacert '" + dir + "/ca.pem' --cert '" + dir + "/client.pem' --key '" + dir +
               "/client.key' " + mtls_base + "/healthz") ==
        std::make_pair(200, std::string("ok\n")));
  (*mtls)->Stop();

  // Unreadable PEM files are named.
  TlsConfig missing;
  missing.cert_file = dir + "/nope.pem";
  missing.key_file = dir + "/server.key";
  HttpServerOptions options;
  options.tls = missing;
  options.authenticator = f.authenticator.get();
  options.proxy = f.proxy.get();
  auto refused = HttpServer::Start(options);
  REQUIRE_FALSE(refused.ok());
  CHECK(refused.status().message().find("nope.pem") != std::string::npos);
}

}  // namespace
}  // namespace strata::sidecar
