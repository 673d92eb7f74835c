// `strata run` and `strata inspect --json` as a user runs them: the real CLI as a separate process
// against strata-sim in-process, replaying a scripted trajectory as the model.
#include <sys/stat.h>
#include <unistd.h>

#include <array>
#include <catch2/catch.hpp>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "sim_server.h"
#include "strata/store.h"
#include "testing/command.h"
#include "testing/temp_dir.h"

namespace strata {
namespace {

struct Output {
  int status = -1;
  std::string out;
};

// Runs `command` through the shell; stdout (and stderr when `merge`) captured.
Output Shell(const std::string& command) {
  testing::CommandResult run = testing::RunCommand(command + " 2>&1");
  Output result;
  result.status = run.exit_code;
  result.out = std::move(run.output);
  return result;
}

TEST_CASE("strata run drives an agent with read-only tools, inspect --json shows its config",
          "[agent][cli][.slow]") {
  const testing::TempDir temp("strata-cli-run-");
  REQUIRE(!temp.path().empty());
  const std::string& dir = temp.path();
  ::mkdir((dir + "/repo").c_str(), 0755);
  std::ofstream(dir + "/repo/app.py") << "from routes import route\n";
  std::ofstream(dir + "/repo/routes.py")
      << "def route(request):\n    return HANDLERS[request.path]\n";
  std::ofstream(dir + "/secret.txt") << "outside the root\n";
  // The model: lists the directory, reads routes.py, tries to leave the root, answers.
  std::ofstream(dir + "/model.jsonl")
      << R"({"role":"user","content":"task"})"
         "\n"
      << R"({"role":"assistant","content":"","tool_calls":[{"id":"c1","type":"function","function":{"name":"list_dir","arguments":"{\"path\":\".\"}"}}]})"
         "\n"
      << R"({"role":"tool","tool_call_id":"c1","content":"x"})"
         "\n"
      << R"({"role":"assistant","content":"","tool_calls":[{"id":"c2","type":"function","function":{"name":"read_file","arguments":"{\"path\":\"routes.py\"}"}},{"id":"c3","type":"function","function":{"name":"read_file","arguments":"{\"path\":\"../secret.txt\"}"}}]})"
         "\n"
      << R"({"role":"tool","tool_call_id":"c2","content":"x"})"
         "\n"
      << R"({"role":"tool","tool_call_id":"c3","content":"x"})"
         "\n"
      << R"({"role":"assistant","content":"Requests are routed by route() in routes.py."})"
         "\n";
  std::ofstream(dir + "/agent.json")
      << R"({"identity":{"id":"cli-agent"},"budget":{"window":16000},"tokenizer":"estimate"})";
  sim::SimOptions options;
  options.trajectory_path = dir + "/model.jsonl";
  auto sim = sim::SimServer::Start(options);
  REQUIRE(sim.ok());
  const std::string cli = STRATA_CLI_PATH;
  Output run =
      Shell(cli + " run --config " + dir + "/agent.json --endpoint " + (*sim)->base_url() +
            " --root " + dir + "/repo --db " + dir + "/agents.db \"Where are requests routed?\"");
  INFO(run.out);
  REQUIRE(run.status == 0);
  CHECK(run.out.find("Requests are routed by route() in routes.py.") != std::string::npos);
  CHECK(run.out.find("[stopped: answer after 3 requests, 3 tool calls, 1 tool errors]") !=
        std::string::npos);
  // What the model was sent: the listing, the file, and a refusal for the path outside the root.
  auto requests = (*sim)->requests();
  REQUIRE(requests.size() == 3);
  CHECK(requests[1].body.find("app.py\\nroutes.py") != std::string::npos);
  CHECK(requests[2].body.find("HANDLERS[request.path]") != std::string::npos);
  CHECK(requests[2].body.find("path leaves the root directory") != std::string::npos);
  CHECK(requests[2].body.find("outside the root") == std::string::npos);

  Output inspect = Shell(cli + " inspect --db " + dir + "/agents.db --agent cli-agent --json");
  INFO(inspect.out);
  REQUIRE(inspect.status == 0);
  auto doc = nlohmann::json::parse(inspect.out);
  CHECK(doc["config"]["identity"]["id"] == "cli-agent");
  CHECK(doc["config"]["budget"]["window"] == 16000);
  CHECK(doc["config"]["endpoint"]["base_url"] == (*sim)->base_url());
  CHECK(doc["agent"]["requests"] == 3);
  CHECK(doc["compactions"].is_array());
  CHECK(Shell(cli + " inspect --db " + dir + "/agents.db --json").status ==
        2);  // --json needs --agent
}

TEST_CASE(
    "strata run answers context_recall arguments that are not JSON, cut on a character, and goes on",
    "[agent][cli]") {
  const testing::TempDir temp("strata-cli-recall-");
  REQUIRE(!temp.path().empty());
  const std::string& dir = temp.path();
  ::mkdir((dir + "/repo").c_str(), 0755);
  // 301 bytes, "é" from byte 1: byte 200, where the reply quotes up to, is inside a character.
  std::string arguments = "x";
  for (int i = 0; i < 150; ++i) arguments += "\xC3\xA9";
  const nlohmann::json call = {
      {"role", "assistant"},
      {"content", ""},
      {"tool_calls",
       {{{"id", "r1"},
         {"type", "function"},
         {"function", {{"name", "context_recall"}, {"arguments", arguments}}}}}}};
  std::ofstream(dir + "/model.jsonl") << R"({"role":"user","content":"task"})" "\n"
                                      << call.dump() << "\n"
                                      << R"({"role":"tool","tool_call_id":"r1","content":"x"})" "\n"
                                      << R"({"role":"assistant","content":"Done."})" "\n";
  std::ofstream(dir + "/agent.json")
      << R"({"identity":{"id":"recall-agent"},"budget":{"window":16000},"tokenizer":"estimate"})";
  sim::SimOptions options;
  options.trajectory_path = dir + "/model.jsonl";
  auto sim = sim::SimServer::Start(options);
  REQUIRE(sim.ok());
  Output run = Shell(std::string(STRATA_CLI_PATH) + " run --config " + dir + "/agent.json" +
                     " --endpoint " + (*sim)->base_url() + " --root " + dir + "/repo --db " + dir +
                     "/agents.db \"Go.\"");
  INFO(run.out);
  // Before: the reply cut a character at 200 bytes and the run stopped on it ("tool result ... is
  // not valid UTF-8"), before the reply was kept.
  CHECK(run.out.find("not valid UTF-8") == std::string::npos);
  auto store = OpenSqliteStore(dir + "/agents.db");
  REQUIRE(store.ok());
  auto snapshot = (*store)->LoadSnapshot("recall-agent");
  REQUIRE(snapshot.ok());
  std::string reply, kept_arguments;
  bool answered = false;
  for (const Segment& s : snapshot->segments) {
    if (s.tool_call_id == "r1") reply = s.content;  // a tool result (kept as an error log)
    for (const ToolCall& c : s.tool_calls) {
      if (c.id == "r1") kept_arguments = c.arguments;
    }
    if (s.content == "Done.") answered = true;
  }
  CHECK(reply.find("context_recall needs {\"recall_id\": \"r-...\"}") == 0);
  CHECK(reply.find("got " + arguments.substr(0, 199) + "...") != std::string::npos);
  // The call's arguments, which no chat template renders, are kept whole as a JSON object, so the
  // next request renders and the run goes on to the model's answer.
  CHECK(kept_arguments == nlohmann::json{{"unparsed_arguments", arguments}}.dump());
  CHECK(answered);
}

TEST_CASE("strata inspect lists no agents in a file left before its schema was written",
          "[agent][cli]") {
  const std::string path = "/tmp/strata-cli-empty-" + std::to_string(::getpid()) + ".db";
  std::ofstream(path, std::ios::binary);  // what a process killed before its first commit leaves
  Output inspect = Shell(std::string(STRATA_CLI_PATH) + " inspect --db " + path);
  INFO(inspect.out);
  CHECK(inspect.status == 0);
  CHECK(inspect.out.find(": 0 agents") != std::string::npos);
  std::remove(path.c_str());
}

}  // namespace
}  // namespace strata
