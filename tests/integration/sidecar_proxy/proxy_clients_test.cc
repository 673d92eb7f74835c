// Real OpenAI clients through strata-sidecar's proxy (proxy_clients.js: the official `openai`
// client, the OpenAI Agents SDK and LangChain.js, pinned in package.json), with an in-process
// strata-sim as the upstream: every client's history reconciles as appended on every turn (no
// "replaced"), what went upstream is byte-stable except where the sidecar compacted, and the
// openai client's own retries apply to the 429 and 503 the sidecar answers before the first byte.
// The request bodies each client sent are recorded fixtures (tests/data/sidecar/clients/), replayed
// without Node by the last case.
#include <unistd.h>

#include <catch2/catch.hpp>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "http_server.h"
#include "proxy.h"
#include "registry.h"
#include "sim_server.h"
#include "strata/store.h"
#include "tenants.h"
#include "testing/command.h"
#include "testing/skip.h"
#include "testing/temp_dir.h"

namespace strata::sidecar {
namespace {

using json = nlohmann::json;
using strata::testing::RunCommand;

const std::string kTrajectory =
    std::string(STRATA_TEST_TRACES_DIR) + "/swe-agent/demo-marshmallow-1867-function_calling.jsonl";
const std::string kClients =
    std::string(STRATA_SOURCE_DIR) + "/tests/integration/sidecar_proxy/proxy_clients.js";
const std::string kFixtures = std::string(STRATA_TEST_DATA_DIR) + "/sidecar/clients";

// The test trajectory with its tool calls numbered call_1, call_2, ... in order: it reuses ids
// (11 calls, 6 ids), which a client that keys its items by call id (the Agents SDK) cannot follow.
std::string DistinctCallIds() {
  std::ifstream in(kTrajectory);
  std::string out;
  int calls = 0;
  std::string open;  // the id the next tool message answers
  for (std::string line; std::getline(in, line);) {
    if (line.empty()) continue;
    json m = json::parse(line);
    if (m.contains("tool_calls")) {
      for (json& c : m["tool_calls"]) c["id"] = open = "call_" + std::to_string(++calls);
    } else if (m.value("role", "") == "tool") {
      m["tool_call_id"] = open;
    }
    out += m.dump() + "\n";
  }
  return out;
}

// The simulator with the trajectory, the proxy on a small window (compactions happen) for tenant
// "alpha", on 127.0.0.1 port 0.
struct ClientsFixture {
  testing::TempDir temp;  // destroyed last: the store in it is closed first
  std::string dir;
  std::unique_ptr<sim::SimServer> sim;
  std::unique_ptr<Authenticator> authenticator;
  std::unique_ptr<AgentRegistry> registry;
  std::unique_ptr<Proxy> proxy;
  std::unique_ptr<HttpServer> http;
  std::string base;  // http://127.0.0.1:PORT/v1

  std::string trajectory_path;  // the simulator's replies, and the client's task and tool outputs

  // `trajectory`: JSON lines of the replies; "" the test trajectory with distinct tool-call ids.
  explicit ClientsFixture(const std::string& name, int64_t window = 8000,
                          ProxyOptions proxy_options = {}, const std::string& trajectory = "")
      : temp("strata-proxy-clients-" + name + "-"), dir(temp.path()) {
    REQUIRE(!dir.empty());
    sim::SimOptions sim_options;
    trajectory_path = dir + "/trajectory.jsonl";
    std::ofstream(trajectory_path) << (trajectory.empty() ? DistinctCallIds() : trajectory);
    sim_options.trajectory_path = trajectory_path;
    sim = std::move(sim::SimServer::Start(sim_options)).value();
    TenantConfig alpha;
    alpha.name = "alpha";
    alpha.token_sha256 = {Sha256Hex("alpha-token")};
    alpha.limits.max_request_bytes = 4 << 20;
    authenticator = std::make_unique<Authenticator>(std::vector<TenantConfig>{alpha},
                                                    TenantLimits(), std::vector<std::string>{});
    RegistryOptions registry_options;
    registry_options.store_path = dir + "/sidecar.db";
    registry_options.upstream = sim->base_url();
    registry_options.window = window;
    registry = std::move(AgentRegistry::Open(registry_options)).value();
    proxy_options.registry = registry.get();
    proxy_options.upstream = sim->base_url();
    proxy = std::make_unique<Proxy>(proxy_options);
    HttpServerOptions http_options;
    http_options.authenticator = authenticator.get();
    http_options.proxy = proxy.get();
    http = std::move(HttpServer::Start(http_options)).value();
    base = "http://127.0.0.1:" + std::to_string(http->port()) + "/v1";
  }
  ~ClientsFixture() { http->Stop(); }

  // Runs proxy_clients.js; its JSON summary (skips when node or the packages are missing).
  json RunClient(const std::string& client, const std::string& agent,
                 const std::string& record = "") {
    if (RunCommand("command -v node >/dev/null && echo yes").output.find("yes") ==
        std::string::npos) {
      STRATA_SKIP("node is not installed (scripts/setup installs it)");
    }
    auto run = RunCommand((record.empty() ? "" : "STRATA_RECORD_REQUESTS='" + record + "' ") +
                          "timeout 120 node '" + kClients + "' " + client + " '" + base +
                          "' alpha-token " + agent + " '" + trajectory_path + "' 2>&1");
    if (run.exit_code == 77) STRATA_SKIP(run.output);
    INFO(run.output);
    REQUIRE(run.exit_code == 0);
    return json::parse(run.output.substr(run.output.rfind("\n{") + 1));
  }

  // The bodies the sidecar sent upstream for `agent` of tenant alpha, in order.
  std::vector<std::string> Upstream(const std::string& agent) {
    std::vector<std::string> out;
    for (const sim::SimRequestLog& r : sim->requests()) {
      auto id = r.headers.find("x-request-id");
      if (id != r.headers.end() && id->second.rfind("alpha/" + agent + "-", 0) == 0) {
        out.push_back(r.body);
      }
    }
    return out;
  }

  // One chat completion of tenant alpha through the proxy (a stream is read whole).
  HttpReply Chat(const std::string& agent, const json& body) {
    HttpReply reply =
        proxy->ChatCompletions(authenticator->tenants().front(), agent, body.dump());
    if (reply.stream) {
      std::string text;
      reply.stream([&text](std::string_view data) {
        text.append(data.data(), data.size());
        return true;
      });
      reply.body = text;
    }
    return reply;
  }

  size_t Compactions(const std::string& agent) {
    return registry->store().Events("alpha/" + agent, "compaction").value().size();
  }
};

std::string Header(const HttpReply& reply, const std::string& name) {
  for (const auto& [key, value] : reply.headers) {
    if (key == name) return value;
  }
  return "";
}

// Where the "messages" array of a request body ends (its closing bracket).
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

// Each upstream request carries the one before it byte for byte, except at compactions.
void CheckUpstreamPrefixes(const std::vector<std::string>& sent, size_t compactions) {
  size_t changed = 0;
  for (size_t i = 0; i + 1 < sent.size(); ++i) {
    const size_t end = MessagesEnd(sent[i]);
    if (sent[i + 1].compare(0, end, sent[i], 0, end) != 0) ++changed;
  }
  CHECK(changed <= compactions);
}

std::vector<std::string> ReadLines(const std::string& path) {
  std::ifstream in(path);
  std::vector<std::string> lines;
  for (std::string line; std::getline(in, line);) {
    if (!line.empty()) lines.push_back(line);
  }
  return lines;
}

TEST_CASE("the openai client and the Agents SDK and LangChain.js reconcile as appended on every turn",
          "[sidecar][proxy][clients]") {
  for (const std::string client : {"openai", "agents", "langchain"}) {
    DYNAMIC_SECTION(client) {
      // The simulator answers by the number of assistant messages it is sent, so after a
      // compaction it repeats a turn, tool-call ids included; the Agents SDK keeps one item per
      // call id and would pair them wrongly. It gets a window without compactions.
      ClientsFixture f(client, client == "agents" ? 1 << 20 : 8000);
      const std::string recorded = f.dir + "/" + client + ".jsonl";
      const json summary = f.RunClient(client, client + "-1", recorded);
      const json& requests = summary["requests"];
      REQUIRE(requests.size() >= 10);
      for (const json& r : requests) {
        INFO(r.dump());
        CHECK(r["status"] == 200);
        CHECK(r["reconcile"].get<std::string>().rfind("appended ", 0) == 0);
      }
      int streamed = 0;
      for (const std::string& body : ReadLines(recorded)) {
        if (json::parse(body).value("stream", false)) ++streamed;
      }
      CHECK(streamed == 1);
      const std::vector<std::string> sent = f.Upstream(client + "-1");
      CHECK(sent.size() == requests.size());
      CheckUpstreamPrefixes(sent, f.Compactions(client + "-1"));
      // Each compaction was told to the client, in the answer of the request it came before.
      size_t told = 0;
      for (const json& r : requests) {
        if (r["compaction"].is_string()) {
          CHECK(r["compaction"].get<std::string>().rfind("policy ", 0) == 0);
          ++told;
        }
      }
      CHECK(told == f.Compactions(client + "-1"));
      if (client != "agents") CHECK(told >= 1);  // the 8000-token window was reached
      // STRATA_UPDATE_CLIENT_FIXTURES=1 writes the bodies as the recorded fixtures.
      if (std::getenv("STRATA_UPDATE_CLIENT_FIXTURES") != nullptr) {
        RunCommand("mkdir -p '" + std::string(kFixtures) + "' && cp '" + recorded + "' '" +
                   kFixtures + "/" + client + ".jsonl'");
      }
    }
  }
}

TEST_CASE("each client's recorded re-serialization replays as appended",
          "[sidecar][proxy][clients]") {
  for (const std::string client : {"openai", "agents", "langchain"}) {
    DYNAMIC_SECTION(client) {
      const std::vector<std::string> bodies =
          ReadLines(std::string(kFixtures) + "/" + client + ".jsonl");
      REQUIRE(bodies.size() >= 10);
      ClientsFixture f("replay-" + client, client == "agents" ? 1 << 20 : 8000);
      for (size_t i = 0; i < bodies.size(); ++i) {
        TenantConfig alpha = f.authenticator->tenants().front();
        HttpReply reply = f.proxy->ChatCompletions(alpha, client + "-1", bodies[i]);
        if (reply.stream) reply.stream([](std::string_view) { return true; });
        INFO(client << " request " << i << ": " << reply.body.substr(0, 300));
        REQUIRE(reply.status == 200);
        std::string reconcile;
        for (const auto& [name, value] : reply.headers) {
          if (name == "X-Strata-Reconcile") reconcile = value;
        }
        CHECK(reconcile.rfind("appended ", 0) == 0);
      }
      // A real difference still replaces: the last request again with its first tool call's
      // arguments changed in value.
      json edited = json::parse(bodies.back());
      for (json& m : edited["messages"]) {
        if (m.contains("tool_calls") && m["tool_calls"].is_array() && !m["tool_calls"].empty()) {
          m["tool_calls"][0]["function"]["arguments"] = R"({"filename":"elsewhere.py"})";
          break;
        }
      }
      HttpReply replaced = f.Chat(client + "-1", edited);
      CHECK(Header(replaced, "X-Strata-Reconcile").rfind("replaced from message ", 0) == 0);
    }
  }
}

TEST_CASE("the openai client retries a 429 and a 503 the sidecar answers before the first byte",
          "[sidecar][proxy][clients]") {
  ClientsFixture f("retry");
  // The sidecar's own upstream attempts (4) all fail, so the client's first request fails.
  for (const std::string fault : {"429,retry_after=0", "503"}) {
    for (const std::string mode : {"retry-plain", "retry-stream"}) {
      DYNAMIC_SECTION(fault << " " << mode) {
        REQUIRE(f.sim->InjectFault(fault, 4).ok());
        const json summary = f.RunClient(mode, "retry-" + mode);
        const json& requests = summary["requests"];
        INFO(summary.dump());
        REQUIRE(requests.size() == 2);
        CHECK(requests[0]["status"] == std::stoi(fault.substr(0, 3)));
        CHECK(requests[0]["retry_after"] == "1");
        CHECK(requests[1]["status"] == 200);
        CHECK(!summary["answer"].get<std::string>().empty());
      }
    }
  }
}

json User(const std::string& text) { return {{"role", "user"}, {"content", text}}; }

TEST_CASE("hygiene on the client's new message is named and the original read back by route",
          "[sidecar][proxy][notes]") {
  ClientsFixture f("hygiene", 1 << 20);
  json messages = json::array({User("Reproduce the issue.")});
  HttpReply first = f.Chat("h", {{"model", "m"}, {"messages", messages}});
  REQUIRE(first.status == 200);
  const json reply = json::parse(first.body)["choices"][0]["message"];
  REQUIRE(reply["tool_calls"].size() == 1);
  CHECK(Header(first, "X-Strata-Hygiene").empty());
  CHECK(json::parse(first.body)["strata"]["hygiene"] == json::array());
  // A tool result far above the agent's 8192-token hygiene cap is truncated when appended.
  std::string output;
  for (int i = 0; output.size() < 100000; ++i) output += "line " + std::to_string(i) + "\n";
  messages.push_back(reply);
  messages.push_back({{"role", "tool"},
                      {"tool_call_id", reply["tool_calls"][0]["id"]},
                      {"content", output}});
  HttpReply second = f.Chat("h", {{"model", "m"}, {"messages", messages}});
  REQUIRE(second.status == 200);
  const json notes = json::parse(second.body)["strata"]["hygiene"];
  INFO(second.body.substr(0, 2000));
  REQUIRE(notes.size() == 1);
  CHECK(notes[0]["message"] == 2);
  CHECK(notes[0]["action"] == "truncated");
  const std::string recall_id = notes[0]["recall_id"].get<std::string>();
  CHECK(Header(second, "X-Strata-Hygiene") == "messages[2] truncated (recall " + recall_id + ")");
  CHECK(Header(second, "X-Request-Id") ==
        json::parse(second.body)["strata"]["request_id"].get<std::string>());

  const TenantConfig& alpha = f.authenticator->tenants().front();
  HttpReply page = f.proxy->Recall(alpha, "h", recall_id, "6", "");
  REQUIRE(page.status == 200);
  const json recalled = json::parse(page.body);
  CHECK(recalled["total_bytes"] == output.size());
  CHECK(recalled["offset"] == 6);
  CHECK(output.compare(6, recalled["content"].get<std::string>().size(),
                       recalled["content"].get<std::string>()) == 0);
  CHECK(f.proxy->Recall(alpha, "h", "r-0000000000000000", "", "").status == 404);
  CHECK(f.proxy->Recall(alpha, "h", recall_id, "x", "").status == 400);
  CHECK(f.proxy->Recall(alpha, "nobody", recall_id, "", "").status == 404);
  // Over HTTP, behind the tenant's token.
  auto run = RunCommand("curl -s -H 'Authorization: Bearer alpha-token' "
                        "'http://127.0.0.1:" + std::to_string(f.http->port()) +
                        "/v1/strata/agents/h/recall/" + recall_id + "?max_tokens=5'");
  CHECK(json::parse(run.output)["recall_id"] == recall_id);
  CHECK(json::parse(run.output)["tokens"].get<int>() <= 5);
}

TEST_CASE("a changed model is listed as ignored and the agent keeps its model",
          "[sidecar][proxy][notes]") {
  ClientsFixture f("model", 1 << 20);
  json messages = json::array({User("Hello")});
  HttpReply first = f.Chat("m", {{"model", "model-a"}, {"messages", messages}});
  REQUIRE(first.status == 200);
  CHECK(Header(first, "X-Strata-Ignored-Fields").empty());
  messages.push_back(json::parse(first.body)["choices"][0]["message"]);
  messages.push_back({{"role", "tool"},
                      {"tool_call_id", messages[1]["tool_calls"][0]["id"]},
                      {"content", "done"}});
  HttpReply second =
      f.Chat("m", {{"model", "model-b"}, {"messages", messages}, {"cache_salt", "x"}});
  REQUIRE(second.status == 200);
  CHECK(Header(second, "X-Strata-Ignored-Fields") == "cache_salt,model");
  CHECK(json::parse(second.body)["strata"]["ignored_fields"] == json({"cache_salt", "model"}));
  const std::vector<std::string> sent = f.Upstream("m");
  REQUIRE(sent.size() == 2);
  CHECK(json::parse(sent[1])["model"] == "model-a");
}

TEST_CASE("an oversized message is said so or refused with 413 changing nothing",
          "[sidecar][proxy][notes]") {
  const std::string big(1200000, 'x');  // ~300K tokens, above a 200K window's input
  for (const bool reject : {false, true}) {
    DYNAMIC_SECTION((reject ? "reject" : "summarize")) {
      ProxyOptions options;
      options.reject_oversized = reject;
      ClientsFixture f(reject ? "oversized-reject" : "oversized", 200000, options);
      HttpReply reply = f.Chat("o", {{"messages", json::array({User(big)})}});
      const std::string note = Header(reply, "X-Strata-Oversized");
      INFO(reply.status << " " << reply.body.substr(0, 500));
      CHECK(note.rfind("messages[0] has ", 0) == 0);
      if (reject) {
        CHECK(reply.status == 413);
        CHECK(json::parse(reply.body)["error"]["code"] == "context_length_exceeded");
        CHECK(note.find(": refused") != std::string::npos);
        CHECK(f.Upstream("o").empty());
        // Nothing was kept: the next request is reconciled from an empty view.
        HttpReply next = f.Chat("o", {{"messages", json::array({User("small")})}});
        REQUIRE(next.status == 200);
        CHECK(Header(next, "X-Strata-Reconcile") == "appended 1");
      } else {
        CHECK(note.find("compacted to fit (oversized: summarize)") != std::string::npos);
      }
    }
  }
}

TEST_CASE("with recall_tool the sidecar answers context_recall itself and the client never sees it",
          "[sidecar][proxy][notes]") {
  ProxyOptions options;
  options.recall_tool = true;
  const std::string trajectory =
      R"({"role":"assistant","content":"","tool_calls":[{"id":"call_r","type":"function",)"
      R"("function":{"name":"context_recall","arguments":"{\"recall_id\":\"r-0123456789abcdef\"}"}}]})"
      "\n"
      R"({"role":"assistant","content":"Recalled and done."})"
      "\n";
  ClientsFixture f("recall-tool", 1 << 20, options, trajectory);
  json messages = json::array({User("Look it up.")});
  for (const bool stream : {false, true}) {
    HttpReply reply = f.Chat("r", {{"messages", messages}, {"stream", stream}});
    REQUIRE(reply.status == 200);
    INFO(reply.body.substr(0, 1000));
    CHECK(reply.body.find("context_recall") == std::string::npos);
    CHECK(Header(reply, "X-Strata-Reconcile") == "appended 1");
    if (stream) break;
    const json message = json::parse(reply.body)["choices"][0]["message"];
    CHECK(message["content"] == "Recalled and done.");
    CHECK(!message.contains("tool_calls"));
    messages.push_back(message);
    messages.push_back(User("And again."));
  }
  const std::vector<std::string> sent = f.Upstream("r");
  REQUIRE(sent.size() >= 2);
  // The agent offered the tool and sent its answer upstream.
  CHECK(sent[0].find("\"context_recall\"") != std::string::npos);
  CHECK(sent[1].find("\"tool_call_id\":\"call_r\"") != std::string::npos);
}

TEST_CASE("the JS snippet of docs/sidecar.md reads the sidecar's headers with withResponse",
          "[sidecar][proxy][clients]") {
  ClientsFixture f("docs");
  const json summary = f.RunClient("docs", "docs-1");
  INFO(summary.dump());
  REQUIRE(summary["requests"].size() == 1);
  CHECK(summary["requests"][0]["status"] == 200);
  CHECK(!summary["answer"]["content"].get<std::string>().empty());
  const std::string logged = summary["answer"]["logged"][0].get<std::string>();
  CHECK(logged.rfind("reconcile: appended 1 request: alpha/", 0) == 0);
}

}  // namespace
}  // namespace strata::sidecar
