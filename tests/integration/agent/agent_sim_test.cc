// strata::Agent against strata-sim (in-process, 127.0.0.1, port 0): a restart across two processes,
// a fork's first request served from the parent's cached prefix, streamed deltas.
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>

#include "sim_server.h"
#include "strata/agent.h"
#include "strata/chat_template.h"
#include "strata/tokenizer_spec.h"
#include "testing/context_testing.h"
#include "testing/sim_testing.h"

namespace strata {
namespace {

using testing::Must;
using testing::MustOk;
using testing::TestSpmSpec;

// A simulator counting and caching exactly as the agent predicts (same tokenizer, same template,
// same block size), streaming in 7-byte chunks.
struct Sim : testing::TestSim {
  Sim() : TestSim(Options()) {}
  static sim::SimOptions Options() {
    sim::SimOptions options;
    options.chunk_bytes = 7;
    return options;
  }
};

AgentConfig SimConfig(const std::string& id, const std::string& base_url) {
  AgentConfig c;
  c.identity.id = id;
  c.tokenizer = TestSpmSpec();
  c.endpoint.base_url = base_url;
  c.budget.window = 32000;
  return c;
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// The first process: creates the agent, runs turns, writes the request it would send next, exits.
// Run by the test below as a separate process (hidden from the default run).
TEST_CASE("agent child process: create and run turns", "[.agent-child]") {
  const char* db = std::getenv("STRATA_AGENT_CHILD_DB");
  const char* url = std::getenv("STRATA_AGENT_CHILD_URL");
  REQUIRE(db != nullptr);
  REQUIRE(url != nullptr);
  AgentConfig c = SimConfig("restarted", url);
  c.store_path = db;
  c.budget.window = 20000;
  c.policy.keep_tool_results = 2;
  auto agent = Must(Agent::Create(c));
  MustOk(agent->SetSystemPrompt("You are an agent that survives restarts."));
  MustOk(agent
             ->PutDocument(Layer::kDocs,
                           Document{"notes", "Notes about the repository layout.", "1", 0})
             .status());
  MustOk(agent->AppendUser("Turn one.").status());
  Must(agent->Complete());
  MustOk(agent->AppendUser("Turn two.").status());
  Must(agent->Complete());
  MustOk(agent->AppendUser("Turn three.").status());
  std::ofstream out(std::string(db) + ".body", std::ios::binary);
  out << testing::MustPreview(agent->context()).body;
}

TEST_CASE("an agent reopened in another process keeps its configuration, rendering and cache view",
          "[agent][sim][restart]") {
  Sim sim;
  const std::string db = "/tmp/strata-agent-restart-" + std::to_string(::getpid()) + ".db";
  std::remove(db.c_str());
  ::setenv("STRATA_AGENT_CHILD_DB", db.c_str(), 1);
  ::setenv("STRATA_AGENT_CHILD_URL", sim.server->base_url().c_str(), 1);
  pid_t pid = ::fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {  // only exec after fork: the simulator's threads live in this process
    char self[4096];
    ssize_t n = ::readlink("/proc/self/exe", self, sizeof self - 1);
    if (n <= 0) ::_exit(120);
    self[n] = '\0';
    ::execl(self, self, "[.agent-child]", static_cast<char*>(nullptr));
    ::_exit(121);
  }
  int status = 0;
  REQUIRE(::waitpid(pid, &status, 0) == pid);
  REQUIRE(WIFEXITED(status));
  REQUIRE(WEXITSTATUS(status) == 0);
  REQUIRE(sim.server->requests().size() == 2);

  auto agent = Must(Agent::Open(db, "restarted"));
  CHECK(agent->config().tokenizer == TestSpmSpec());
  CHECK(agent->config().budget.window == 20000);
  CHECK(agent->config().policy.keep_tool_results == 2);
  CHECK(agent->config().endpoint.base_url == sim.server->base_url());
  CHECK(testing::MustPreview(agent->context()).body ==
        ReadFile(db + ".body"));
  CachePrediction predicted = Must(agent->PredictCachedTokens());
  CHECK(predicted.predicted_cached_tokens > 0);
  Turn turn = Must(agent->Complete());
  REQUIRE(turn.record.cached_tokens_reported.has_value());
  CHECK(*turn.record.cached_tokens_reported == predicted.predicted_cached_tokens);
  CHECK(turn.record.cached_tokens_predicted == predicted.predicted_cached_tokens);
  CHECK(turn.record.input_tokens == predicted.input_tokens);
  CHECK_FALSE(turn.prefix_break.has_value());  // no false server_shortfall after the restart
  std::remove(db.c_str());
  std::remove((db + ".body").c_str());
}

TEST_CASE("a fork's first request is served from the parent's cached stable prefix",
          "[agent][sim][fork][.slow]") {
  Sim sim;
  auto parent = Must(Agent::Create(SimConfig("parent", sim.server->base_url())));
  std::string index;
  for (int i = 0; i < 60; ++i)
    index +=
        "src/module_" + std::to_string(i) + ".py: handlers for route " + std::to_string(i) + "\n";
  MustOk(parent->SetSystemPrompt("You are the parent agent."));
  MustOk(parent->PutDocument(Layer::kIndex, Document{"index", index, "1", 0}).status());
  MustOk(parent->AppendUser("A long task.").status());
  Must(parent->Complete());
  const BuiltRequest built = testing::MustPreview(parent->context());
  // Tokens of the stable prefix: the prompt of a request holding only the stable message.
  nlohmann::json body = nlohmann::json::parse(built.body);
  nlohmann::json stable = {
      {"model", body["model"]}, {"tools", body["tools"]}, {"messages", {body["messages"][0]}}};
  Glm5TemplateOptions no_prompt;
  no_prompt.add_generation_prompt = false;
  auto text = Must(MakeGlm5ChatTemplate(no_prompt)->Render(stable.dump()));
  const int64_t stable_tokens = static_cast<int64_t>(sim.tokenizer->Count(text));
  REQUIRE(stable_tokens > 200);

  auto child = Must(parent->Fork("Look at module 7 only."));
  Turn first = Must(child->Complete());
  REQUIRE(first.record.cached_tokens_reported.has_value());
  // Every full block of the stable prefix but the one its end may merge into.
  CHECK(*first.record.cached_tokens_reported >= (stable_tokens / 16 - 1) * 16);
  CHECK(first.record.cached_tokens_predicted == *first.record.cached_tokens_reported);
}

TEST_CASE("content and tool-call argument deltas stream to the callback", "[agent][sim][stream]") {
  Sim sim;
  auto agent = Must(Agent::Create(SimConfig("streamer", sim.server->base_url())));
  MustOk(agent->RegisterTool("read_file", R"({"parameters":{"type":"object"}})",
                             [](const std::string& args) {
                               return ToolOutput{"read " + args, false};
                             }));
  std::string content, arguments;
  int deltas = 0;
  RunOptions run;
  run.max_turns = 1;
  run.turn.on_delta = [&](const StreamDelta& d) {
    ++deltas;
    if (d.kind == StreamDelta::Kind::kContent) content += d.text;
    if (d.kind == StreamDelta::Kind::kToolCallArguments) {
      arguments += d.text;
      CHECK(d.tool_call_index == 0);
    }
  };
  run.turn.headers = {
      {"X-Strata-Sim-Reply",
       R"({"role":"assistant","content":"Reading the file now.","tool_calls":[{"id":"c1","type":"function","function":{"name":"read_file","arguments":"{\"path\":\"src/a_long_name.py\"}"}}]})"}};
  RunResult result = Must(agent->Run("Read a file.", run));
  REQUIRE(result.turns.size() == 1);
  CHECK(deltas > 3);
  CHECK(content == result.turns[0].response.content);
  CHECK(content == "Reading the file now.");
  CHECK(arguments == "{\"path\":\"src/a_long_name.py\"}");
  CHECK(result.tool_calls == 1);
  CHECK(result.tool_errors == 0);
}

}  // namespace
}  // namespace strata
