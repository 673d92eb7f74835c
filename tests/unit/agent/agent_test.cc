// strata::Agent with a scripted model: create/open with the configuration, Complete() turns, one
// token count everywhere, tools and Run(), paged recall, predictions, fork/join.
#include "strata/agent.h"

#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>
#include <vector>

#include "testing/context_testing.h"
#include "testing/scripted_transport.h"
#include "testing/status_testing.h"

namespace strata {
namespace {

using testing::Must;
using testing::MustOk;
using testing::ScriptedTransport;

std::string TempPath(const std::string& name) {
  std::string path = "/tmp/strata-agent-test-" + std::to_string(::getpid()) + "-" + name;
  std::remove(path.c_str());
  std::remove((path + "-wal").c_str());
  std::remove((path + "-shm").c_str());
  return path;
}

std::string SpmSpec() {
  return std::string("spm:") + STRATA_TEST_DATA_DIR + "/strata-test-spm.model";
}

AgentConfig SmallConfig(const std::string& id) {
  AgentConfig c;
  c.identity.id = id;
  c.tokenizer = "estimate";
  c.budget.window = 8000;
  return c;
}

Response ToolCallReply(const std::string& id, const std::string& name,
                       const std::string& arguments) {
  Response r;
  r.tool_calls.push_back(ToolCall{id, name, arguments});
  r.finish_reason = "tool_calls";
  r.attempts = 1;
  return r;
}

Response TextReply(const std::string& content) {
  Response r;
  r.content = content;
  r.finish_reason = "stop";
  r.attempts = 1;
  return r;
}

const char kReadFileSchema[] =
    R"({"description":"Read a file","parameters":{"type":"object","properties":{"path":{"type":"string"}}}})";

TEST_CASE("Create validates the configuration before writing anything", "[agent]") {
  const std::string path = TempPath("create.db");
  AgentConfig c = SmallConfig("a");
  c.store_path = path;
  c.policy.name = "bogus";
  auto bad = Agent::Create(c);
  REQUIRE_FALSE(bad.ok());
  CHECK(bad.status().message().find("bogus") != std::string::npos);
  c.policy.name = "strata";
  c.tokenizer = "";
  CHECK_FALSE(Agent::Create(c).ok());
  c.tokenizer = "estimate";
  c.identity.id = "";
  CHECK(Agent::Create(c).status().message().find("identity.id") != std::string::npos);
  c.identity.id = "a";
  c.endpoint.base_url = "http://127.0.0.1:1/v1";
  c.endpoint.api_key_env = "STRATA_AGENT_TEST_SURELY_UNSET";
  auto no_key = Agent::Create(c);
  REQUIRE_FALSE(no_key.ok());
  CHECK(no_key.status().message().find("STRATA_AGENT_TEST_SURELY_UNSET") != std::string::npos);
  // Nothing was registered by the failed attempts.
  c.endpoint = {};
  auto ok = Agent::Create(c);
  REQUIRE(ok.ok());
  CHECK(Agent::Create(c).status().code() == StatusCode::kAlreadyExists);
}

TEST_CASE("errors name the Agent's API, not the lower layers'", "[agent][errors]") {
  const std::string path = TempPath("names.db");
  AgentConfig c = SmallConfig("named");
  c.store_path = path;
  auto agent = Must(Agent::Create(c));
  Status taken = Agent::Create(c).status();
  CHECK(taken.code() == StatusCode::kAlreadyExists);
  CHECK(taken.message().find("Agent::Open") != std::string::npos);
  CHECK(taken.message().find("OpenContext") == std::string::npos);
  CHECK(taken.message().find(path) != std::string::npos);

  Status missing = Agent::Open(TempPath("no-such.db"), "named").status();
  CHECK(missing.code() == StatusCode::kNotFound);
  CHECK(missing.message().find("Agent::Create") != std::string::npos);
  CHECK(missing.message().find("create_if_missing") == std::string::npos);

  MustOk(agent->AppendUser("Split this.").status());
  ForkOptions fork;
  fork.id = "named";  // the parent's own id
  Status forked = agent->Fork("a subtask", fork).status();
  CHECK(forked.code() == StatusCode::kAlreadyExists);
  CHECK(forked.message().find("ForkOptions::id \"named\"") != std::string::npos);
  CHECK(forked.message().find("OpenContext") == std::string::npos);
}

TEST_CASE("Agent::Create refuses numbers out of range in a configuration built in code",
          "[agent][errors]") {
  AgentConfig c = SmallConfig("ranged");
  c.endpoint.total_timeout_ms = INT64_MAX;  // would overflow a deadline
  Status refused = Agent::Create(c).status();
  CHECK(refused.code() == StatusCode::kInvalidArgument);
  CHECK(refused.message().find("endpoint.total_timeout_ms") != std::string::npos);
  c = SmallConfig("ranged");
  c.endpoint.max_attempts = 1000000;
  refused = Agent::Create(c).status();
  CHECK(refused.code() == StatusCode::kInvalidArgument);
  CHECK(refused.message().find("endpoint.max_attempts") != std::string::npos);
  CHECK(Agent::Create(SmallConfig("ranged")).ok());
}

TEST_CASE("PreviewRequest is the next request with the figures its Turn reports",
          "[agent][predict]") {
  ScriptedTransport transport;
  AgentConfig c = SmallConfig("previewed");
  c.chat_template = "glm5";
  AgentServices services;
  services.transport = &transport;
  auto agent = Must(Agent::Create(c, services));
  MustOk(agent->SetSystemPrompt("You are a test agent."));
  MustOk(agent->PutDocument(Layer::kDocs, Document{"guide", "How to test.", "v1", 0}).status());
  MustOk(agent->AppendUser("First.").status());
  transport.Respond(TextReply("One."));
  Must(agent->Complete());
  MustOk(agent->AppendUser("Second.").status());
  MustOk(agent->SetVolatile("time", "18:30"));

  const RequestPreview preview = Must(agent->PreviewRequest());
  const BuiltRequest built = testing::MustPreview(agent->context());
  transport.Respond(TextReply("Two."));
  const Turn turn = Must(agent->Complete());
  // The body sent, but for the request id.
  nlohmann::json previewed = nlohmann::json::parse(preview.body);
  nlohmann::json sent = nlohmann::json::parse(turn.body);
  previewed.erase("request_id");
  sent.erase("request_id");
  CHECK(previewed == sent);
  CHECK(preview.input_tokens == turn.record.input_tokens);
  CHECK(preview.input_tokens_exact);
  CHECK(preview.predicted_cached_tokens == turn.record.cached_tokens_predicted);
  CHECK(preview.predicted_cached_tokens > 0);  // the first request's prefix
  CHECK_FALSE(preview.compaction_due);
  CHECK(preview.message_count == built.message_count);
  for (int i = 0; i < kLayerCount; ++i) {
    CHECK(preview.layer_tokens[i] == static_cast<int64_t>(built.layers[i].tokens));
  }
  CHECK(preview.layer_tokens[static_cast<int>(Layer::kDocs)] > 0);
  CHECK(preview.layer_tokens[static_cast<int>(Layer::kVolatile)] > 0);
}

TEST_CASE("OpenOptions::endpoint replaces the whole endpoint and is stored", "[agent][store]") {
  const std::string path = TempPath("endpoint.db");
  AgentConfig c = SmallConfig("moved");
  c.store_path = path;
  c.endpoint.base_url = "http://127.0.0.1:9/v1";
  Must(Agent::Create(c));
  ScriptedTransport transport;
  OpenOptions open;
  open.services.transport = &transport;
  AgentEndpointConfig endpoint;
  endpoint.backend = "openai";
  endpoint.base_url = "http://127.0.0.1:10/v1";
  endpoint.stream = false;
  endpoint.max_output_tokens = 123;
  endpoint.thinking = true;
  endpoint.reasoning_effort = "low";
  endpoint.send_cache_salt = false;
  endpoint.deadline_ms = 4567;
  endpoint.connect_timeout_ms = 111;
  endpoint.max_attempts = 2;
  open.endpoint = endpoint;
  auto agent = Must(Agent::Open(path, "moved", open));
  const std::string expected = nlohmann::json::parse(AgentConfigToJson(agent->config()))["endpoint"].dump();
  AgentConfig want = agent->config();
  want.endpoint = endpoint;
  CHECK(expected == nlohmann::json::parse(AgentConfigToJson(want))["endpoint"].dump());
  MustOk(agent->AppendUser("Hello.").status());
  const nlohmann::json body = nlohmann::json::parse(Must(agent->PreviewRequest()).body);
  CHECK(body["stream"] == false);
  CHECK(body["max_completion_tokens"] == 123);  // the openai profile's cap
  CHECK(body["reasoning_effort"] == "low");
  CHECK_FALSE(body.contains("cache_salt"));
  agent.reset();
  // Reopened without it: the replaced endpoint is the stored one now.
  auto again = Must(Agent::Open(path, "moved"));
  CHECK(nlohmann::json::parse(again->ConfigJson())["endpoint"].dump() == expected);
}

TEST_CASE("Open restores the configuration, the rendering and the cache state", "[agent][store]") {
  const std::string path = TempPath("open.db");
  ScriptedTransport transport;
  std::string body_before;
  {
    AgentConfig c = SmallConfig("agent-1");
    c.tokenizer = SpmSpec();
    c.store_path = path;
    c.policy.keep_tool_results = 1;
    AgentServices services;
    services.transport = &transport;
    auto agent = Must(Agent::Create(c, services));
    MustOk(agent->SetSystemPrompt("You are a test agent."));
    MustOk(agent->RegisterTool("read_file", kReadFileSchema, [](const std::string&) {
      return ToolOutput{"contents", false};
    }));
    MustOk(agent->AppendUser("hello").status());
    transport.Respond(TextReply("hi"));
    Must(agent->Complete());
    MustOk(agent->AppendUser("again").status());
    body_before = testing::MustPreview(agent->context()).body;
  }
  ScriptedTransport transport2;
  OpenOptions options;
  options.services.transport = &transport2;
  auto agent = Must(Agent::Open(path, "agent-1", options));
  CHECK(agent->config().tokenizer == SpmSpec());
  CHECK(agent->config().budget.window == 8000);
  CHECK(agent->config().policy.keep_tool_results == 1);
  CHECK(agent->context().options().budget.has_value());
  CHECK(agent->context().options().request_counter != nullptr);
  CHECK(testing::MustPreview(agent->context()).body == body_before);
  // The prefix-cache state came back: the next request is predicted to reuse the stored prefix.
  auto prediction = Must(agent->PredictCachedTokens());
  CHECK(prediction.predicted_cached_tokens > 0);
  CHECK(prediction.input_tokens_exact);
  // Re-registering the same tool attaches the handler without touching the prefix.
  MustOk(agent->RegisterTool("read_file", kReadFileSchema, [](const std::string&) {
    return ToolOutput{"x", false};
  }));
  CHECK(testing::MustPreview(agent->context()).body == body_before);
}

TEST_CASE("Open refuses another tokenizer or template naming both, unless retokenizing",
          "[agent][store]") {
  const std::string path = TempPath("retok.db");
  {
    AgentConfig c = SmallConfig("agent-1");
    c.store_path = path;
    auto agent = Must(Agent::Create(c));
    MustOk(agent->AppendUser(std::string(4000, 'x')).status());
  }
  OpenOptions other;
  other.tokenizer = SpmSpec();
  auto refused = Agent::Open(path, "agent-1", other);
  REQUIRE_FALSE(refused.ok());
  CHECK(refused.status().code() == StatusCode::kFailedPrecondition);
  CHECK(refused.status().message().find("\"estimate\"") != std::string::npos);
  CHECK(refused.status().message().find(SpmSpec()) != std::string::npos);
  OpenOptions templ;
  templ.chat_template = "generic";
  auto refused_template = Agent::Open(path, "agent-1", templ);
  REQUIRE_FALSE(refused_template.ok());
  CHECK(refused_template.status().message().find("\"glm5\"") != std::string::npos);
  CHECK(refused_template.status().message().find("\"generic\"") != std::string::npos);

  other.retokenize = true;
  int64_t estimate_tokens = 0;
  {
    auto agent = Must(Agent::Open(path, "agent-1", OpenOptions{}));
    estimate_tokens = Must(agent->InputTokens());
  }
  {
    auto agent = Must(Agent::Open(path, "agent-1", other));
    CHECK(agent->config().tokenizer == SpmSpec());
    CHECK(Must(agent->InputTokens()) != estimate_tokens);
  }
  // The recount was stored: opening again without options keeps the new tokenizer.
  auto again = Must(Agent::Open(path, "agent-1", OpenOptions{}));
  CHECK(again->config().tokenizer == SpmSpec());
}

TEST_CASE("Complete returns the turn: compaction report, every break cause, growth", "[agent]") {
  const std::string path = TempPath("turn.db");
  ScriptedTransport transport;
  AgentConfig c = SmallConfig("agent-1");
  c.store_path = path;
  c.budget.window = 4000;
  c.budget.reserve_output = 0;
  c.budget.reserve_reasoning = 0;
  c.budget.reserve_headroom = 0;
  c.budget.trigger = BudgetLimit::Fraction(0.7);
  c.budget.target = BudgetLimit::Fraction(0.4);
  c.policy.keep_tool_results = 1;
  c.policy.keep_turns = 1;
  AgentServices services;
  services.transport = &transport;
  auto agent = Must(Agent::Create(c, services));
  MustOk(agent->SetSystemPrompt("You are a test agent."));
  MustOk(agent->PutDocument(Layer::kDocs, Document{"guide", "Version one of the guide.", "v1", 0})
             .status());
  MustOk(agent->AppendUser("Read the files.").status());
  int compacted_turn = -1;
  Turn last;
  for (int i = 0; i < 30 && compacted_turn < 0; ++i) {
    const std::string id = "call_" + std::to_string(i);
    transport.Respond(ToolCallReply(id, "read_file", "{\"path\":\"f" + std::to_string(i) + "\"}"));
    if (i > 0 && Must(agent->PredictCachedTokens()).compaction_due) {
      // A document update in the same build as a compaction: both causes are reported.
      MustOk(
          agent->PutDocument(Layer::kDocs, Document{"guide", "Version two of the guide.", "v2", 0})
              .status());
    }
    Turn turn = Must(agent->Complete());
    CHECK(turn.growth.turn == static_cast<int64_t>(agent->context().Stats().turns));
    if (!turn.compactions.empty()) {
      compacted_turn = i;
      last = turn;
    }
    std::string output;
    for (int line = 0; line < 40; ++line)
      output += "line " + std::to_string(line) + " of file " + std::to_string(i) + "\n";
    MustOk(agent->AppendToolResult({id, output, false}).status());
  }
  REQUIRE(compacted_turn > 0);
  REQUIRE(last.prefix_break.has_value());
  CHECK(last.break_causes ==
        std::vector<std::string>{"doc version change (v1 -> v2)", "compaction"});
  CHECK(last.prefix_break->reason == "doc version change (v1 -> v2) and compaction");
  auto store = agent->store();
  REQUIRE(store != nullptr);
  auto growth = Must(store->Growth("agent-1"));
  CHECK(growth.size() == static_cast<size_t>(compacted_turn + 1));
  CHECK(growth.back().compactions == 1);
  auto breaks = Must(store->Events("agent-1", "prefix_break"));
  REQUIRE_FALSE(breaks.empty());
  CHECK(breaks.back().payload_json.find("compaction") != std::string::npos);
}

TEST_CASE("a turn's extra fields reach the request after the messages, replacing the agent's",
          "[agent]") {
  const std::string path = TempPath("fields.db");
  ScriptedTransport transport;
  AgentConfig c = SmallConfig("agent-fields");
  c.store_path = path;
  c.endpoint.backend = "vllm";
  c.endpoint.max_output_tokens = 512;
  AgentServices services;
  services.transport = &transport;
  auto agent = Must(Agent::Create(c, services));
  MustOk(agent->AppendUser("Hello.").status());

  transport.Reply("plain");
  Must(agent->Complete());
  nlohmann::json first = nlohmann::json::parse(transport.bodies().back());
  CHECK(first["max_completion_tokens"] == 512);
  CHECK_FALSE(first.contains("temperature"));

  MustOk(agent->AppendUser("Again, colder.").status());
  transport.Reply("cold");
  TurnOptions options;
  options.extra_fields = {{"temperature", "0.2"},
                          {"max_tokens", "64"},  // replaces the cap sent as max_completion_tokens
                          {"stop", R"(["END"])"},
                          {"response_format", R"({"type":"json_object"})"}};
  Turn cold = Must(agent->Complete(options));
  const std::string body = transport.bodies().back();
  nlohmann::json sent = nlohmann::json::parse(body);
  CHECK(sent["temperature"] == 0.2);
  CHECK(sent["max_tokens"] == 64);
  CHECK_FALSE(sent.contains("max_completion_tokens"));
  CHECK(sent["stop"] == nlohmann::json::array({"END"}));
  CHECK(sent["response_format"]["type"] == "json_object");
  CHECK(sent.contains("request_id"));  // the agent's own fields stay
  // After the messages: the cached prefix is the same as without the fields.
  CHECK(body.find("\"temperature\"") > body.find("\"messages\""));
  CHECK(cold.body.substr(0, cold.body.find("\"temperature\"")).find("Hello.") != std::string::npos);

  // Fields the agent owns are refused before anything is sent or recorded.
  const size_t sent_before = transport.bodies().size();
  const size_t records_before = Must(agent->store()->RecentRequests("agent-fields", 100)).size();
  for (const char* owned : {"cache_salt", "messages", "stream", "request_id", "model"}) {
    INFO(owned);
    TurnOptions bad;
    bad.extra_fields = {{"temperature", "0"}, {owned, "\"x\""}};
    StatusOr<Turn> refused = agent->Complete(bad);
    CHECK(refused.status().code() == StatusCode::kInvalidArgument);
    CHECK_THAT(refused.status().message(), Catch::Contains(std::string("\"") + owned + "\""));
  }
  CHECK(transport.bodies().size() == sent_before);
  CHECK(Must(agent->store()->RecentRequests("agent-fields", 100)).size() == records_before);
}

// The four figures of one request agree: the agent's InputTokens() before the call, the
// compaction report's tokens_before/after, the stored compaction event and the RequestRecord.
TEST_CASE("one token count on a replayed trace: InputTokens, report, stored event, record",
          "[agent][trace]") {
  const std::string trace = std::string(STRATA_TEST_TRACES_DIR) +
                            "/swe-agent/demo-marshmallow-1867-function_calling.jsonl";
  std::ifstream in(trace);
  REQUIRE(in.good());
  std::vector<nlohmann::json> messages;
  for (std::string line; std::getline(in, line);) {
    if (!line.empty()) messages.push_back(nlohmann::json::parse(line));
  }
  const std::string path = TempPath("trace.db");
  ScriptedTransport transport;
  AgentConfig c = SmallConfig("replay");
  c.tokenizer = SpmSpec();
  c.store_path = path;
  c.budget.window = 6000;
  c.budget.reserve_output = 0;
  c.budget.reserve_reasoning = 0;
  c.budget.reserve_headroom = 0;
  c.recall.expose_tool = false;
  AgentServices services;
  services.transport = &transport;
  auto agent = Must(Agent::Create(c, services));
  int compactions = 0;
  int requests = 0;
  for (size_t i = 0; i < messages.size(); ++i) {
    const nlohmann::json& m = messages[i];
    const std::string role = m["role"];
    const std::string content =
        m.value("content", nlohmann::json("")).is_string() ? m.value("content", "") : "";
    if (role == "system") {
      MustOk(agent->SetSystemPrompt(content));
    } else if (role == "user") {
      MustOk(agent->AppendUser(content).status());
    } else if (role == "tool") {
      MustOk(agent->AppendToolResult({m["tool_call_id"], content, false}).status());
    } else if (role == "assistant") {
      Response r = TextReply(content);
      if (m.contains("tool_calls")) {
        for (const auto& call : m["tool_calls"]) {
          r.tool_calls.push_back(
              {call["id"], call["function"]["name"], call["function"]["arguments"]});
        }
      }
      transport.Respond(r);
      const int64_t before = Must(agent->InputTokens());
      CachePrediction predicted = Must(agent->PredictCachedTokens());
      Turn turn = Must(agent->Complete());
      ++requests;
      CHECK(predicted.input_tokens == turn.record.input_tokens);
      if (turn.compactions.empty()) {
        CHECK(before == turn.record.input_tokens);
        CHECK_FALSE(predicted.compaction_due);
      } else {
        ++compactions;
        const CompactionReport& report = turn.compactions[0];
        CHECK(predicted.compaction_due);
        CHECK(static_cast<int64_t>(report.tokens_before) == before);
        CHECK(static_cast<int64_t>(report.tokens_after) == turn.record.input_tokens);
        auto events = Must(agent->store()->Events("replay", "compaction"));
        REQUIRE_FALSE(events.empty());
        auto payload = nlohmann::json::parse(events.back().payload_json);
        CHECK(payload["tokens_before"] == report.tokens_before);
        CHECK(payload["tokens_after"] == report.tokens_after);
      }
    }
  }
  CHECK(requests > 5);
  CHECK(compactions > 0);
  auto records = Must(agent->store()->RecentRequests("replay", 1000));
  CHECK(records.size() == static_cast<size_t>(requests));
}

TEST_CASE("Run dispatches tools, answers recall, survives bad tools and stops", "[agent][tools]") {
  ScriptedTransport transport;
  AgentConfig c = SmallConfig("runner");
  c.budget.enforce = false;
  c.hygiene.max_segment_tokens = 100;  // so that a long output is truncated and recallable
  AgentServices services;
  services.transport = &transport;
  auto agent = Must(Agent::Create(c, services));
  std::string long_output;
  for (int i = 0; i < 200; ++i) long_output += "row " + std::to_string(i) + "\n";
  int calls = 0;
  MustOk(agent->RegisterTool("read_file", kReadFileSchema, [&](const std::string& arguments) {
    ++calls;
    CHECK(arguments == "{\"path\":\"a.txt\"}");
    return ToolOutput{long_output, false};
  }));
  MustOk(agent->RegisterTool(
      "explode", R"({"description":"Throws"})",
      [](const std::string&) -> ToolOutput { throw std::runtime_error("boom"); }));
  CHECK(agent->RegisterTool("read_file", kReadFileSchema, nullptr).code() ==
        StatusCode::kInvalidArgument);
  CHECK(agent->RegisterTool("context_recall", "{}", nullptr).code() ==
        StatusCode::kInvalidArgument);
  CHECK(agent->RegisterTool("x", "not json", nullptr).code() == StatusCode::kInvalidArgument);

  transport.Respond(ToolCallReply("c1", "read_file", "{\"path\":\"a.txt\"}"));
  Response two = ToolCallReply("c2", "explode", "{}");
  two.tool_calls.push_back({"c3", "no_such_tool", "{}"});
  transport.Respond(two);
  // The truncated output's recall id is only known once it is appended; answer it then.
  RunResult first = Must(agent->Run("Start.", RunOptions{2, {}}));
  CHECK(first.stopped == "max_turns");
  CHECK(first.turns.size() == 2);
  CHECK(first.tool_calls == 3);
  CHECK(first.tool_errors == 2);
  CHECK(calls == 1);
  std::string recall_id;
  for (const Segment& s : agent->context().Segments()) {
    if (s.tool_call_id == "c1") recall_id = s.recall_id;
    if (s.tool_call_id == "c2")
      CHECK(s.content.find("tool \"explode\" failed: boom") != std::string::npos);
    if (s.tool_call_id == "c3")
      CHECK(s.content.find("unknown tool \"no_such_tool\"") != std::string::npos);
  }
  REQUIRE_FALSE(recall_id.empty());

  transport.Respond(ToolCallReply("c4", "context_recall",
                                  "{\"recall_id\":\"" + recall_id + "\",\"max_tokens\":40}"));
  transport.Respond(TextReply("Done: 200 rows."));
  RunResult second = Must(agent->Run("", RunOptions{5, {}}));
  CHECK(second.stopped == "answer");
  CHECK(second.answer == "Done: 200 rows.");
  CHECK(second.turns.size() == 2);
  // The recall answer was appended before the last request: a first page, saying what remains.
  const std::string last_body = transport.bodies().back();
  CHECK(last_body.find("[" + recall_id + ": bytes 0-") != std::string::npos);
  CHECK(last_body.find("bytes remain: call context_recall") != std::string::npos);
  CHECK(Must(agent->InputTokens()) > 0);
}

TEST_CASE("recall is paged, bounded by the share of the target, and protected", "[agent][recall]") {
  ScriptedTransport transport;
  AgentConfig c = SmallConfig("pager");
  c.hygiene.max_segment_tokens = 100;
  c.recall.protect_turns = 2;
  AgentServices services;
  services.transport = &transport;
  auto agent = Must(Agent::Create(c, services));
  std::string big;
  for (int i = 0; i < 2000; ++i) big += "entry " + std::to_string(i) + "\n";
  MustOk(agent->AppendUser("go").status());
  transport.Respond(ToolCallReply("c1", "dump", "{}"));
  Must(agent->Complete());
  MustOk(agent->AppendToolResult({"c1", big, false}).status());
  std::string recall_id;
  for (const Segment& s : agent->context().Segments()) {
    if (s.tool_call_id == "c1") recall_id = s.recall_id;
  }
  REQUIRE_FALSE(recall_id.empty());
  // Default page: a quarter of the target, capped so that truncation (100 tokens) leaves it whole
  // with its header and footer (100 - 48 tokens).
  RecallPage page = Must(agent->Recall(recall_id));
  CHECK(page.offset == 0);
  CHECK(page.tokens <= 52);
  CHECK(page.tokens > 30);
  CHECK(page.remaining_bytes == big.size() - page.content.size());
  CHECK(big.compare(0, page.content.size(), page.content) == 0);
  RecallPage next = Must(agent->Recall(recall_id, page.content.size(), 20));
  CHECK(next.offset == page.content.size());
  CHECK(next.tokens <= 20);
  CHECK(big.compare(next.offset, next.content.size(), next.content) == 0);
  CHECK(agent->Recall(recall_id, big.size() + 1).status().code() == StatusCode::kOutOfRange);
  CHECK(agent->Recall("r-unknown").status().code() == StatusCode::kNotFound);

  // Answered through the tool, the result is pinned for protect_turns turns, then released.
  transport.Respond(ToolCallReply("c2", "context_recall", "{\"recall_id\":\"" + recall_id + "\"}"));
  Must(agent->Complete());
  MustOk(agent->DispatchToolCalls());
  std::string answer_id;
  for (const Segment& s : agent->context().Segments()) {
    if (s.tool_call_id == "c2") {
      answer_id = s.id;
      CHECK(s.pinned);
      CHECK(s.hygiene == HygieneAction::kNone);  // not truncated again
    }
  }
  REQUIRE_FALSE(answer_id.empty());
  transport.Respond(TextReply("a"));
  Must(agent->Complete());
  MustOk(agent->AppendUser("more").status());
  CHECK(agent->context().Find(answer_id)->pinned);
  transport.Respond(TextReply("b"));
  Must(agent->Complete());
  MustOk(agent->AppendUser("more").status());
  transport.Respond(TextReply("c"));
  Must(agent->Complete());
  CHECK_FALSE(agent->context().Find(answer_id)->pinned);
}

TEST_CASE("PredictCachedTokens computes a due compaction without applying it", "[agent][predict]") {
  ScriptedTransport transport;
  AgentConfig c = SmallConfig("predict");
  c.budget.window = 3000;
  c.budget.reserve_output = 0;
  c.budget.reserve_reasoning = 0;
  c.budget.reserve_headroom = 0;
  c.policy.keep_tool_results = 1;
  c.policy.keep_turns = 1;
  AgentServices services;
  services.transport = &transport;
  auto agent = Must(Agent::Create(c, services));
  MustOk(agent->AppendUser("go").status());
  bool due = false;
  for (int i = 0; i < 20 && !due; ++i) {
    const std::string id = "c" + std::to_string(i);
    // Distinct arguments: no output supersedes an earlier one, so nothing is worth compacting
    // below the trigger and the context grows until a compaction is due.
    transport.Respond(ToolCallReply(id, "cat", "{\"path\":\"" + id + "\"}"));
    Must(agent->Complete());
    MustOk(agent->AppendToolResult({id, std::string(600, 'a' + i % 26), false}).status());
    CachePrediction p = Must(agent->PredictCachedTokens());
    if (p.compaction_due) {
      due = true;
      REQUIRE(p.compaction.has_value());
      const size_t compactions = agent->context().Compactions().size();
      const int64_t tokens = Must(agent->InputTokens());
      CHECK(tokens > p.input_tokens);  // predicted after the compaction, not applied
      CHECK(agent->context().Compactions().size() == compactions);
      transport.Respond(TextReply("ok"));
      Turn turn = Must(agent->Complete());
      REQUIRE(turn.compactions.size() == 1);
      CHECK(turn.record.input_tokens == p.input_tokens);
      CHECK(turn.record.cached_tokens_predicted == p.predicted_cached_tokens);
    }
  }
  CHECK(due);
}

// Plans at every build, noting whether it was handed the agent's own segments or a copy's, and
// masks `mask` when set (every time it plans, so that a prediction and the turn plan alike).
class WherePlannedPolicy final : public CompactionPolicy {
 public:
  std::string Name() const override { return "where@1"; }
  bool ShouldCompact(const CompactionInput&) const override { return true; }
  StatusOr<HistoryEdit> Plan(const CompactionInput& input) override {
    const Segment* first = input.history.front();
    on_agents_context.push_back(live != nullptr && live->Find(first->id) == first);
    HistoryEdit edit;
    if (!mask.empty()) edit.edits.push_back({mask, SegmentEdit::Action::kMask, "[masked]"});
    return edit;
  }
  const Context* live = nullptr;
  std::string mask;
  std::vector<bool> on_agents_context;  // one per Plan call
};

// A prediction asks the policy once, on the agent's own context: a plan that changes nothing
// needs no copy, and a plan that compacts is applied to a copy as planned (not planned again),
// with the volatile items too (a snapshot would leave them out), so that it predicts the turn
// exactly.
TEST_CASE("a prediction plans on the agent's context and copies it only to apply a compaction",
          "[agent][predict]") {
  ScriptedTransport transport;
  WherePlannedPolicy policy;
  AgentServices services;
  services.transport = &transport;
  services.policy = &policy;
  AgentConfig c = SmallConfig("predict-in-place");
  c.budget.window = 1000000;
  auto agent = Must(Agent::Create(c, services));
  policy.live = &agent->context();
  MustOk(agent->AppendUser("go").status());
  std::vector<std::string> results;
  for (int i = 0; i < 3; ++i) {
    const std::string id = "c" + std::to_string(i);
    transport.Respond(ToolCallReply(id, "cat", "{\"path\":\"" + id + "\"}"));
    Must(agent->Complete());
    results.push_back(
        Must(agent->AppendToolResult({id, std::string(600, 'a' + i), false})));
  }
  MustOk(agent->context().SetVolatile("now", "12:00"));
  const size_t turns_before = policy.on_agents_context.size();
  const CachePrediction kept = Must(agent->PredictCachedTokens());
  CHECK_FALSE(kept.compaction_due);
  REQUIRE(policy.on_agents_context.size() == turns_before + 1);
  CHECK(policy.on_agents_context.back());

  policy.mask = results[0];
  const CachePrediction compacting = Must(agent->PredictCachedTokens());
  REQUIRE(compacting.compaction_due);
  REQUIRE(policy.on_agents_context.size() == turns_before + 2);  // not planned again on the copy
  CHECK(policy.on_agents_context.back());
  CHECK(compacting.input_tokens < kept.input_tokens);
  CHECK(agent->context().Compactions().empty());  // predicted, not applied
  transport.Respond(TextReply("ok"));
  const Turn turn = Must(agent->Complete());
  REQUIRE(turn.compactions.size() == 1);
  CHECK(turn.body.find("now: 12:00") != std::string::npos);
  CHECK(turn.record.input_tokens == compacting.input_tokens);
  CHECK(turn.record.cached_tokens_predicted == compacting.predicted_cached_tokens);
}

// Above the budget's limit InputTokens() counts the request the context would render, the
// volatile items with it (Context::CountRequest), not a copy restored without them.
TEST_CASE("InputTokens above the limit counts the volatile items", "[agent][predict]") {
  AgentConfig c = SmallConfig("over-the-limit");
  c.budget.window = 2000;
  c.budget.reserve_output = 0;
  c.budget.reserve_reasoning = 0;
  c.budget.reserve_headroom = 0;
  auto agent = Must(Agent::Create(c));
  MustOk(agent->SetVolatile("now", std::string(800, 'v')));
  MustOk(agent->AppendUser(std::string(12000, 'x')).status());
  REQUIRE(agent->context().Preview().status().code() == StatusCode::kResourceExhausted);
  const int64_t with_volatile = Must(agent->InputTokens());
  CHECK(with_volatile > 2000);
  MustOk(agent->context().RemoveVolatile("now"));
  const int64_t without = Must(agent->InputTokens());
  CHECK(without > 2000);
  CHECK(with_volatile - without >= 150);  // 800 bytes at about four bytes a token
}

TEST_CASE("Fork copies the stable layers byte for byte, Join folds the answer back",
          "[agent][fork]") {
  const std::string path = TempPath("fork.db");
  ScriptedTransport transport;
  AgentConfig c = SmallConfig("parent");
  c.store_path = path;
  c.hygiene.max_segment_tokens = 64;
  AgentServices services;
  services.transport = &transport;
  auto parent = Must(Agent::Create(c, services));
  MustOk(parent->SetSystemPrompt("You are the parent."));
  MustOk(
      parent->PutDocument(Layer::kIndex, Document{"index", "src/a.py\nsrc/b.py", "1", 0}).status());
  MustOk(parent->RegisterTool("read_file", kReadFileSchema, [](const std::string&) {
    return ToolOutput{std::string(2000, 'z'), false};
  }));
  MustOk(parent->AppendUser("Big task.").status());
  const BuiltRequest parent_request =
      testing::MustPreview(parent->context());

  auto child = Must(parent->Fork("Read a.py and report."));
  CHECK(child->id() == "parent.fork-1");
  const BuiltRequest child_request =
      testing::MustPreview(child->context());
  CHECK(child_request.stable_prefix_hash == parent_request.stable_prefix_hash);
  CHECK(child_request.body.compare(0, parent_request.stable_prefix_bytes, parent_request.body, 0,
                                   parent_request.stable_prefix_bytes) == 0);
  CHECK(child_request.body.find("Read a.py and report.") != std::string::npos);
  CHECK(child_request.body.find("Big task.") == std::string::npos);

  transport.Respond(ToolCallReply("k1", "read_file", "{\"path\":\"a.py\"}"));
  transport.Respond(TextReply("a.py defines route()."));
  RunResult run = Must(child->Run("", RunOptions{4, {}}));
  CHECK(run.stopped == "answer");
  std::string child_recall;
  for (const Segment& s : child->context().Segments()) {
    if (!s.recall_id.empty()) child_recall = s.recall_id;
  }
  REQUIRE_FALSE(child_recall.empty());

  const std::string joined = Must(parent->Join(*child));
  const Segment* message = parent->context().Find(joined);
  REQUIRE(message != nullptr);
  CHECK(message->content.find("a.py defines route().") != std::string::npos);
  CHECK(message->content.find(child_recall) != std::string::npos);
  // The parent answers recall of the child's ids, also after a restart.
  CHECK(Must(parent->Recall(child_recall)).content.substr(0, 10) == std::string(10, 'z'));
  parent.reset();
  OpenOptions options;
  options.services.transport = &transport;
  auto reopened = Must(Agent::Open(path, "parent", options));
  CHECK(Must(reopened->Recall(child_recall)).total_bytes == 2000);
  auto stored_child = Must(Agent::Open(path, "parent.fork-1", options));
  CHECK(stored_child->config().identity.id == "parent.fork-1");
  // A fork of the reopened parent does not collide with the stored one.
  CHECK(Must(reopened->Fork("another subtask"))->id() == "parent.fork-2");
}

TEST_CASE("a fork of a parent at the id limit gets an id that fits and works as any agent",
          "[agent][fork]") {
  const std::string path = TempPath("fork-limit.db");
  constexpr size_t kLimit = 40;
  const std::string parent_id = std::string(kLimit - 5, 'p') + ".fork";  // at the limit
  AgentConfig c = SmallConfig(parent_id);
  c.store_path = path;
  ScriptedTransport transport;
  AgentServices services;
  services.transport = &transport;
  auto parent = Must(Agent::Create(c, services));
  MustOk(parent->AppendUser("task").status());
  ForkOptions options;
  options.max_id_length = kLimit;
  auto first = Must(parent->Fork("part one", options));
  CHECK(first->id() == std::string(kLimit - 7, 'p') + ".fork-1");
  auto second = Must(parent->Fork("part two", options));
  CHECK(second->id() == std::string(kLimit - 7, 'p') + ".fork-2");
  const std::string first_id = first->id();
  first.reset();

  OpenOptions open_options;
  open_options.services.transport = &transport;
  auto reopened = Must(Agent::Open(path, first_id, open_options));
  CHECK(reopened->id() == first_id);
  CHECK_FALSE(Must(parent->Join(*reopened)).empty());
  reopened.reset();
  auto store = Must(OpenSqliteStore(path));
  MustOk(store->DeleteAgent(first_id));
  CHECK(store->GetAgent(first_id).status().code() == StatusCode::kNotFound);
  options.id = std::string(kLimit + 1, 'k');
  CHECK(parent->Fork("too long", options).status().code() == StatusCode::kInvalidArgument);
}

TEST_CASE("Join of a child without a final answer folds a summary", "[agent][fork]") {
  ScriptedTransport transport;
  AgentConfig c = SmallConfig("p");
  AgentServices services;
  services.transport = &transport;
  auto parent = Must(Agent::Create(c, services));
  MustOk(parent->AppendUser("task").status());
  auto child = Must(parent->Fork("subtask: inspect src/main.py"));
  transport.Respond(ToolCallReply("k1", "read_file", "{\"path\":\"src/main.py\"}"));
  Must(child->Run("", RunOptions{1, {}}));
  const std::string joined = Must(parent->Join(*child, JoinOptions{200}));
  const std::string content = parent->context().Find(joined)->content;
  CHECK(content.find("summary") != std::string::npos);
  CHECK(content.find("src/main.py") != std::string::npos);
}

TEST_CASE("Join of a child without a final answer works for an agent without an upstream",
          "[agent][fork]") {
  auto parent = Must(Agent::Create(SmallConfig("offline")));  // no transport
  MustOk(parent->AppendUser("task").status());
  auto child = Must(parent->Fork("subtask: inspect src/main.py"));
  Must(child->AppendUser("read src/main.py and note what it imports"));
  const std::string joined = Must(parent->Join(*child, JoinOptions{200}));
  const std::string content = parent->context().Find(joined)->content;
  CHECK(content.find("summary") != std::string::npos);
}

}  // namespace
}  // namespace strata
