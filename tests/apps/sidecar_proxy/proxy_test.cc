// The proxy's checks of a Chat Completions body (ParseChatRequest): which fields it handles, which
// it forwards upstream or drops, the refusals, and the nesting limit that keeps a hostile body from
// overflowing the stack of a connection thread.
#include "proxy.h"

#include <sqlite3.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstdio>
#include <memory>
#include <nlohmann/json.hpp>
#include <regex>
#include <set>
#include <string>
#include <string_view>

#include "chat_body.h"
#include "core/json_text.h"
#include "proxy_recall.h"
#include "reconcile.h"
#include "registry.h"
#include "tenants.h"
#include "testing/scripted_transport.h"
#include "testing/status_testing.h"

namespace strata::sidecar {
namespace {

using json = nlohmann::json;

const json kMessages = json::array({{{"role", "user"}, {"content", "list the files"}}});

// The message of the refusal of `body`; fails the test when the body is accepted.
std::string Refusal(const std::string& body) {
  StatusOr<ChatRequest> request = ParseChatRequest(body);
  REQUIRE_FALSE(request.ok());
  CHECK(request.status().code() == StatusCode::kInvalidArgument);
  return request.status().message();
}

// `depth` nested arrays around 1.
std::string Nested(size_t depth) { return std::string(depth, '[') + "1" + std::string(depth, ']'); }

TEST_CASE("ParseChatRequest takes a body apart: handled, forwarded and agent-owned fields") {
  const json body = {
      {"model", "glm-5.3-flash"},
      {"messages", kMessages},
      {"temperature", 0.2},
      {"cache_salt", "other-tenant"},
      {"tools", json::array({{{"type", "function"}, {"function", {{"name", "ls"}}}}})},
      {"stream", true},
      {"stream_options", {{"include_usage", true}}},
      {"response_format", {{"type", "json_object"}}},
      {"rid", "r1"},
      {"extra_key", "another-tenants-cache-key"},
      {"extra_body", {{"cache_salt", "x"}}},
      {"n", 1}};
  StatusOr<ChatRequest> request = ParseChatRequest(body.dump());
  REQUIRE(request.ok());
  CHECK(request->model == "glm-5.3-flash");
  REQUIRE(request->chat.history.size() == 1);
  CHECK(request->chat.history[0]->content == "list the files");
  CHECK(request->tools->value == body["tools"]);
  REQUIRE(request->tools->dumps.size() == body["tools"].size());
  CHECK(request->tools->dumps[0] == body["tools"][0].dump());
  CHECK(request->stream);
  CHECK(request->include_usage);
  // Forwarded and dropped fields come in the order of their names.
  using Field = std::pair<std::string, std::string>;
  CHECK(request->forwarded == std::vector<Field>{{"response_format", R"({"type":"json_object"})"},
                                                 {"temperature", "0.2"}});
  // SGLang's extra_key (a cache key) and a literal extra_body are the agent's too: dropped.
  CHECK(request->ignored ==
        std::vector<std::string>{"cache_salt", "extra_body", "extra_key", "rid"});
}

TEST_CASE("an agent has the wanted tools when its tools layer holds each as SetTools keeps it") {
  strata::testing::ScriptedTransport transport;
  AgentServices services;
  services.transport = &transport;
  AgentConfig config;
  config.identity.id = "tools";
  config.tokenizer = "estimate";
  config.recall.expose_tool = false;
  auto agent = strata::testing::Must(Agent::Create(config, services));
  // As a client spells them: keys in its own order, spaces.
  const std::string body =
      R"({"messages":[{"role":"user","content":"hi"}],"tools":[ {"type":"function",)"
      R"("function":{"name":"read","parameters":{"type":"object"},"description":"reads"}},)"
      R"({"function":{"name":"write"},"type":"function"} ]})";
  std::shared_ptr<const ChatTools> tools = strata::testing::Must(ParseChatRequest(body)).tools;
  CHECK_FALSE(HasWantedTools(*agent, *tools, false));
  REQUIRE(agent->context().SetTools(WantedTools(tools->value, false).dump()).ok());
  CHECK(HasWantedTools(*agent, *tools, false));
  CHECK_FALSE(HasWantedTools(*agent, *tools, true));  // without the context_recall tool
  REQUIRE(agent->context().SetTools(WantedTools(tools->value, true).dump()).ok());
  CHECK(HasWantedTools(*agent, *tools, true));
  CHECK_FALSE(HasWantedTools(*agent, *tools, false));
  json changed = tools->value;
  changed[1]["function"]["description"] = "writes";
  CHECK_FALSE(HasWantedTools(*agent, *ChatTools::Of(changed), true));
  changed.erase(1);
  CHECK_FALSE(HasWantedTools(*agent, *ChatTools::Of(changed), true));
  // Sent again, the array is the one parsed before.
  CHECK(strata::testing::Must(ParseChatRequest(body)).tools == tools);
}

TEST_CASE("ParseChatRequest: absent and null fields take the defaults") {
  StatusOr<ChatRequest> request = ParseChatRequest(json{
      {"messages", kMessages},
      {"tools", nullptr},
      {"stream", nullptr},
      {"stream_options", nullptr}}.dump());
  REQUIRE(request.ok());
  CHECK(request->model.empty());
  CHECK(request->tools->value == json::array());
  CHECK_FALSE(request->stream);
  CHECK_FALSE(request->include_usage);
  CHECK(request->forwarded.empty());
  CHECK(request->ignored.empty());
  // include_usage only applies to a stream.
  request = ParseChatRequest(
      json{{"messages", kMessages}, {"stream_options", {{"include_usage", true}}}}.dump());
  REQUIRE(request.ok());
  CHECK_FALSE(request->include_usage);
}

TEST_CASE("ParseChatRequest refuses each malformed field by name") {
  auto with = [](const char* key, const json& value) {
    json body = {{"messages", kMessages}};
    body[key] = value;
    return body.dump();
  };
  CHECK_THAT(Refusal("[1, 2]"), Catch::Contains("not a JSON object"));
  // A body that does not parse says why, precisely.
  CHECK_THAT(Refusal("{\"messages\": "), Catch::Contains("is not valid JSON at byte 14"));
  CHECK_THAT(Refusal("{\"messages\": [], \"user\": \"\xff\"}"),
             Catch::Contains("is not valid UTF-8: the byte 0xFF at offset 26"));
  CHECK_THAT(Refusal("{\"messages\": [], \"user\": \"\\ud800\"}"),
             Catch::Contains("surrogate U+D800"));
  CHECK_THAT(Refusal("{\"messages\": [], \"seed\": 1e400}"),
             Catch::Contains("number overflow parsing '1e400'"));
  CHECK_THAT(Refusal("{\"model\": \"m\"}"), Catch::Contains("no \"messages\""));
  CHECK_THAT(Refusal(with("n", 2)), Catch::Contains("\"n\""));
  CHECK_THAT(Refusal(with("n", 1.0)), Catch::Contains("\"n\""));
  CHECK_THAT(Refusal(with("model", 5)), Catch::Contains("\"model\" must be a string"));
  CHECK_THAT(Refusal(with("tools", json::object())), Catch::Contains("\"tools\" must be an array"));
  CHECK_THAT(Refusal(with("stream", "yes")), Catch::Contains("\"stream\" must be true or false"));
  CHECK_THAT(Refusal(with("stream_options", 1)), Catch::Contains("\"stream_options\""));
  CHECK_THAT(Refusal(with("stream_options", {{"include_usage", "yes"}})),
             Catch::Contains("\"stream_options\""));
  // A nameless field used to be forwarded, and the agent refused the turn after the history had
  // been appended (for a stream, after the 200 had gone out).
  CHECK_THAT(Refusal(with("", 1)), Catch::Contains("empty name"));
  // The messages' own refusals (ParseChatMessages) come through unchanged.
  CHECK_THAT(Refusal(R"({"messages": [{"role": 5}]})"),
             Catch::Contains("messages[0] has no \"role\""));
  CHECK_THAT(Refusal(R"({"messages": [{"role": "robot", "content": "x"}]})"),
             Catch::Contains("role \"robot\""));
}

TEST_CASE("ParseChatRequest refuses a body nested deeper than 512 levels, naming the limit") {
  // 511 levels inside the body's object are accepted and forwarded as they came.
  StatusOr<ChatRequest> request =
      ParseChatRequest("{\"messages\":" + kMessages.dump() + ",\"x\":" + Nested(511) + "}");
  REQUIRE(request.ok());
  REQUIRE(request->forwarded.size() == 1);
  CHECK(request->forwarded[0].second == Nested(511));
  // A million levels in a forwarded field or in the tools: re-serializing them used to recurse
  // once per level and overflow the stack.
  for (const char* key : {"x", "tools"}) {
    const std::string message =
        Refusal("{\"messages\":" + kMessages.dump() + ",\"" + key + "\":" + Nested(1000000) + "}");
    CHECK_THAT(message, Catch::Contains("the request body") && Catch::Contains("512"));
  }
  CHECK_THAT(Refusal("{\"messages\":" + kMessages.dump() + ",\"x\":" + Nested(512) + "}"),
             Catch::Contains("512"));
}

TEST_CASE("a body taken apart is refused for a new message nested too deep, as a whole one is") {
  // The body's object, its messages array and the message are 3 levels: 509 more are 512.
  const auto body = [](const std::string& messages) {
    return "{\"model\":\"m\",\"messages\":[" + messages + "]}";
  };
  const auto user = [](const std::string& text, size_t levels) {
    return "{\"role\":\"user\",\"content\":\"" + text + "\",\"x\":" + Nested(levels) + "}";
  };
  const std::string first = user("deep-ok", 509);
  StatusOr<ChatRequest> accepted = ParseChatRequest(body(first));
  REQUIRE(accepted.ok());
  // One level more, in a new message of a body that is taken apart (the first one continued from
  // its base, or on its own): refused with the whole body's message.
  std::shared_ptr<const ChatBodyBase> base;
  REQUIRE(ParseChatRequest(body(first), nullptr, &base).ok());
  REQUIRE(base != nullptr);
  const std::string deeper = body(first + "," + user("deep-not-ok", 510));
  for (const std::shared_ptr<const ChatBodyBase>& previous :
       std::initializer_list<std::shared_ptr<const ChatBodyBase>>{nullptr, base}) {
    StatusOr<ChatRequest> refused = ParseChatRequest(deeper, previous, nullptr);
    REQUIRE_FALSE(refused.ok());
    CHECK(refused.status().message() ==
          internal::CheckJsonDepth(deeper, "the request body").message());
  }
  // The same in the tools array, 2 levels inside the body: 510 more are 512.
  const std::string tools =
      "{\"model\":\"m\",\"messages\":[" + first + "],\"tools\":[" + Nested(511) + "]}";
  StatusOr<ChatRequest> refused_tools = ParseChatRequest(tools);
  REQUIRE_FALSE(refused_tools.ok());
  CHECK_THAT(std::string(refused_tools.status().message()), Catch::Contains("512"));
}

TEST_CASE("Proxy::ChatCompletions answers a deeply nested body with 400, before any agent") {
  const std::string store = "/tmp/strata-proxy-test-" + std::to_string(::getpid()) + "-deep.db";
  for (const char* suffix : {"", "-wal", "-shm"}) std::remove((store + suffix).c_str());
  RegistryOptions registry_options;
  registry_options.store_path = store;
  registry_options.upstream = "http://127.0.0.1:9/v1";  // never asked: the body is refused first
  std::unique_ptr<AgentRegistry> registry =
      strata::testing::Must(AgentRegistry::Open(registry_options));
  ProxyOptions options;
  options.registry = registry.get();
  Proxy proxy(options);
  TenantConfig tenant;
  tenant.name = "alpha";
  const std::string body =
      "{\"messages\":" + kMessages.dump() + ",\"response_format\":" + Nested(1000000) + "}";
  HttpReply reply = proxy.ChatCompletions(tenant, "", body);
  CHECK(reply.status == 400);
  const json error = json::parse(reply.body);
  CHECK(error["error"]["type"] == "invalid_request_error");
  CHECK_THAT(error["error"]["message"].get<std::string>(), Catch::Contains("512"));
  registry.reset();
  for (const char* suffix : {"", "-wal", "-shm"}) std::remove((store + suffix).c_str());
}

// What a caller can observe of a proxied agent: the request it would send and what its store holds.
std::string Observe(AgentRegistry& registry, const TenantConfig& tenant, const std::string& id) {
  AgentLease lease = strata::testing::Must(registry.Acquire(tenant, id));
  StatusOr<BuiltRequest> built = lease.agent().context().Preview();
  std::string out = built.ok() ? built->body : built.status().ToString();
  StatusOr<ContextSnapshot> stored = lease.agent().store()->LoadSnapshot(lease.stored_id());
  REQUIRE(stored.ok());
  for (const Segment& s : stored->segments) out += "\n" + s.id + ":" + s.content;
  StatusOr<ClientView> view = LoadClientView(lease.agent());
  REQUIRE(view.ok());
  out += "\nview:" + view->ToJson();
  return out;
}

TEST_CASE("Proxy::ChatCompletions: a failed upstream leaves the agent as it was") {
  const std::string store = "/tmp/strata-proxy-test-" + std::to_string(::getpid()) + "-fail.db";
  for (const char* suffix : {"", "-wal", "-shm"}) std::remove((store + suffix).c_str());
  strata::testing::ScriptedTransport transport;
  RegistryOptions registry_options;
  registry_options.store_path = store;
  registry_options.transport = &transport;
  std::unique_ptr<AgentRegistry> registry =
      strata::testing::Must(AgentRegistry::Open(registry_options));
  ProxyOptions options;
  options.registry = registry.get();
  Proxy proxy(options);
  TenantConfig tenant;
  tenant.name = "alpha";
  auto body = [](const json& messages) { return json{{"messages", messages}}.dump(); };

  transport.Reply("a.py and b.py");
  json messages = kMessages;
  REQUIRE(proxy.ChatCompletions(tenant, "p1", body(messages)).status == 200);
  const std::string before = Observe(*registry, tenant, "p1");
  messages.push_back({{"role", "assistant"}, {"content", "a.py and b.py"}});
  messages.push_back({{"role", "user"}, {"content", "and the tests?"}});
  for (int i = 0; i < 2; ++i) {
    transport.Fail(UnavailableError("upstream down"));
    HttpReply failed = proxy.ChatCompletions(tenant, "p1", body(messages));
    CHECK(failed.status == 502);
    CHECK(Observe(*registry, tenant, "p1") == before);
  }
  transport.Reply("tests/test_a.py");
  REQUIRE(proxy.ChatCompletions(tenant, "p1", body(messages)).status == 200);
  AgentLease lease = strata::testing::Must(registry->Acquire(tenant, "p1"));
  int asked = 0;
  for (const Segment& s : lease.agent().context().Segments()) asked += s.content == "and the tests?";
  CHECK(asked == 1);
  lease = AgentLease();
  registry.reset();
  for (const char* suffix : {"", "-wal", "-shm"}) std::remove((store + suffix).c_str());
}

// A proxy over a SQLite store with a scripted upstream, for tests of its turns.
struct ProxyHarness {
  std::string store;
  strata::testing::ScriptedTransport transport;
  std::unique_ptr<AgentRegistry> registry;
  std::unique_ptr<Proxy> proxy;
  TenantConfig tenant;
  int64_t write_failures = 0;  // ProxyOptions::on_record_write_failures

  ProxyHarness(const std::string& name, bool recall_tool = false)
      : store("/tmp/strata-proxy-test-" + std::to_string(::getpid()) + "-" + name + ".db") {
    Remove();
    Open(recall_tool);
    tenant.name = "alpha";
  }
  // (Re)opens the registry and the proxy over the store.
  void Open(bool recall_tool = false) {
    proxy.reset();
    registry.reset();
    RegistryOptions registry_options;
    registry_options.store_path = store;
    registry_options.transport = &transport;
    registry = strata::testing::Must(AgentRegistry::Open(registry_options));
    ProxyOptions options;
    options.registry = registry.get();
    options.recall_tool = recall_tool;
    options.on_record_write_failures = [this](std::string_view, int64_t n) { write_failures += n; };
    proxy = std::make_unique<Proxy>(options);
  }
  ~ProxyHarness() {
    proxy.reset();
    registry.reset();
    Remove();
  }
  void Remove() {
    for (const char* suffix : {"", "-wal", "-shm"}) std::remove((store + suffix).c_str());
  }
  int64_t Transactions() {
    return strata::testing::Must(registry->store().Stats()).write_transactions;
  }
  HttpReply Send(const json& messages, bool stream = false) {
    HttpReply reply = proxy->ChatCompletions(
        tenant, "p1", json{{"messages", messages}, {"stream", stream}}.dump());
    if (reply.stream)
      reply.stream([&](std::string_view text) {
        reply.body += std::string(text);
        return true;
      });
    return reply;
  }
  size_t Records() {
    AgentLease lease = strata::testing::Must(registry->Acquire(tenant, "p1"));
    return strata::testing::Must(registry->store().RecentRequests(lease.stored_id(), 1000)).size();
  }
};

TEST_CASE("Proxy::ChatCompletions stores each turn in one write transaction") {
  ProxyHarness h("one-commit");
  json messages = kMessages;
  h.transport.Reply("a.py and b.py");
  REQUIRE(h.Send(messages).status == 200);  // creates the agent and sets its tools
  for (int turn = 0; turn < 4; ++turn) {
    INFO("turn " << turn);
    const std::string reply = "answer " + std::to_string(turn);
    messages.push_back(
        {{"role", "assistant"},
         {"content", turn == 0 ? "a.py and b.py" : "answer " + std::to_string(turn - 1)}});
    messages.push_back({{"role", "user"}, {"content", "question " + std::to_string(turn)}});
    if (turn == 2) messages[0]["content"] = "list the files, please";  // an edit: replaced
    h.transport.Reply(reply);
    const int64_t before = h.Transactions();
    const bool stream = turn % 2 == 1;
    HttpReply answered = h.Send(messages, stream);
    REQUIRE(answered.status == 200);
    CHECK(answered.body.find(reply) != std::string::npos);
    // The reconciled messages (and a replacement's evictions and event), the reply, its record,
    // growth, cache state and the client's view: one Store::CommitTurn.
    CHECK(h.Transactions() == before + 1);
  }
  // What the turns stored is whole: the view names the reply the client was given last.
  const std::string stored = Observe(*h.registry, h.tenant, "p1");
  CHECK(stored.find("answer 3") != std::string::npos);
  AgentLease lease = strata::testing::Must(h.registry->Acquire(h.tenant, "p1"));
  ClientView view = strata::testing::Must(LoadClientView(lease.agent()));
  REQUIRE_FALSE(view.entries().empty());
  CHECK(view.entries().back().role == "assistant");
  CHECK(lease.agent().context().Find(view.entries().back().segment_id)->content == "answer 3");
  CHECK(strata::testing::Must(h.registry->store().Events(lease.stored_id(), "history_replaced"))
            .size() == 1);
}

TEST_CASE("completions the upstream gave no id are each named by a chatcmpl id of their own") {
  ProxyHarness h("completion-ids");
  json messages = kMessages;
  std::set<std::string> ids;
  for (int turn = 0; turn < 4; ++turn) {
    INFO("turn " << turn);
    h.transport.Reply("answer " + std::to_string(turn));
    const bool stream = turn % 2 == 1;
    HttpReply answered = h.Send(messages, stream);
    REQUIRE(answered.status == 200);
    // A whole answer's body, or the first chunk of a streamed one: each carries the id.
    const std::string text =
        stream ? answered.body.substr(6, answered.body.find('\n') - 6) : answered.body;
    const std::string id = json::parse(text).at("id").get<std::string>();
    CHECK(std::regex_match(id, std::regex("chatcmpl-[0-9a-f]{24}")));
    CHECK(ids.insert(id).second);
    messages.push_back({{"role", "assistant"}, {"content", "answer " + std::to_string(turn)}});
    messages.push_back({{"role", "user"}, {"content", "go on"}});
  }
}

TEST_CASE("Proxy::ChatCompletions: a failed upstream call writes nothing but its record") {
  ProxyHarness h("fail-writes");
  json messages = kMessages;
  h.transport.Reply("a.py and b.py");
  REQUIRE(h.Send(messages).status == 200);
  const std::string before = Observe(*h.registry, h.tenant, "p1");
  const size_t records = h.Records();
  messages.push_back({{"role", "assistant"}, {"content", "a.py and b.py"}});
  messages.push_back({{"role", "user"}, {"content", "and the tests?"}});
  for (bool stream : {false, true}) {
    h.transport.Fail(UnavailableError("upstream down"));
    const int64_t transactions = h.Transactions();
    CHECK(h.Send(messages, stream).status == 502);
    // The failed request's record only: no reconciled message, no view, no undo.
    CHECK(h.Transactions() == transactions + 1);
    CHECK(Observe(*h.registry, h.tenant, "p1") == before);
  }
  CHECK(h.Records() == records + 2);
}

TEST_CASE("Proxy::ChatCompletions: a failed context_recall round leaves the agent as it was") {
  ProxyHarness h("recall-fail", /*recall_tool=*/true);
  json messages = kMessages;
  h.transport.Reply("a.py and b.py");
  REQUIRE(h.Send(messages).status == 200);
  const std::string before = Observe(*h.registry, h.tenant, "p1");
  messages.push_back({{"role", "assistant"}, {"content", "a.py and b.py"}});
  messages.push_back({{"role", "user"}, {"content", "what did a.py hold?"}});
  Response recall;
  recall.tool_calls.push_back({"call_r", "context_recall", R"({"recall_id":"r-none"})"});
  recall.finish_reason = "tool_calls";
  recall.attempts = 1;
  // The first round is answered (and committed), the second one fails upstream: both undone.
  h.transport.Respond(recall);
  h.transport.Fail(UnavailableError("upstream down"));
  CHECK(h.Send(messages).status == 502);
  CHECK(h.transport.bodies().size() == 3);  // both rounds were sent
  CHECK(Observe(*h.registry, h.tenant, "p1") == before);
  // The retry goes through, with one copy of the question.
  h.transport.Respond(recall);
  h.transport.Reply("it held main()");
  const int64_t transactions = h.Transactions();
  HttpReply answered = h.Send(messages);
  REQUIRE(answered.status == 200);
  // One commit per upstream call: the question with the recall call, then the recall's answer
  // with the reply.
  CHECK(h.Transactions() == transactions + 2);
  CHECK(answered.body.find("it held main()") != std::string::npos);
  AgentLease lease = strata::testing::Must(h.registry->Acquire(h.tenant, "p1"));
  int asked = 0;
  for (const Segment& s : lease.agent().context().Segments())
    asked += s.content == "what did a.py hold?";
  CHECK(asked == 1);
}

// Runs `sql` on the SQLite file at `path` (a second connection).
void RunSql(const std::string& path, const std::string& sql) {
  sqlite3* db = nullptr;
  REQUIRE(sqlite3_open(path.c_str(), &db) == SQLITE_OK);
  char* error = nullptr;
  const int rc = sqlite3_exec(db, sql.c_str(), nullptr, nullptr, &error);
  INFO((error != nullptr ? error : ""));
  sqlite3_free(error);
  sqlite3_close(db);
  REQUIRE(rc == SQLITE_OK);
}

TEST_CASE("Proxy::ChatCompletions: a turn whose writes the store refuses fails whole, counted") {
  ProxyHarness h("refused");
  json messages = kMessages;
  h.transport.Reply("a.py and b.py");
  REQUIRE(h.Send(messages).status == 200);
  const std::string before = Observe(*h.registry, h.tenant, "p1");
  messages.push_back({{"role", "assistant"}, {"content", "a.py and b.py"}});
  messages.push_back({{"role", "user"}, {"content", "and the tests?"}});
  // The store refuses every request record: the turn's commit (which holds one) and the failed
  // turn's own record.
  // (The registry holds the file's lock: closed while the trigger is added, then opened again.)
  h.proxy.reset();
  h.registry.reset();
  RunSql(h.store,
         "CREATE TRIGGER refuse_records BEFORE INSERT ON requests "
         "BEGIN SELECT RAISE(ABORT, 'the test refuses records'); END;");
  h.Open();
  h.transport.Reply("tests/test_a.py");
  HttpReply refused = h.Send(messages);
  CHECK(refused.status != 200);
  CHECK(refused.body.find("the test refuses records") != std::string::npos);
  CHECK(Observe(*h.registry, h.tenant, "p1") == before);  // nothing of the turn stayed
  CHECK(h.write_failures == 2);                           // the commit and the failed turn's record
  h.proxy.reset();
  h.registry.reset();
  RunSql(h.store, "DROP TRIGGER refuse_records;");
  h.Open();
  h.transport.Reply("tests/test_a.py");
  REQUIRE(h.Send(messages).status == 200);
  CHECK(h.write_failures == 2);
}

}  // namespace
}  // namespace strata::sidecar
