// A complete tool-using agent: strata::Agent with two tools over a small in-memory repository,
// a budget, a store, streaming, and a restart that continues the same agent.
//
// The model is strata-sim replaying a scripted trajectory (its assistant messages are the replies):
//   sim=build/sdk/apps/strata-sim/strata-sim
//   $sim --port 8000 --chat-template glm5 --trajectory examples/agent_loop.jsonl &
//   build/examples/example_agent_loop http://127.0.0.1:8000/v1
// Point it at a real OpenAI-compatible server (vLLM, SGLang) the same way.
#include <cstdio>
#include <iostream>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "strata/agent.h"

namespace {

const std::map<std::string, std::string> kRepository = {
    {"app.py", "from routes import route\n\ndef handle(request):\n    return route(request)\n"},
    {"routes.py",
     "HANDLERS = {'/api': api, '/static': static}\n\ndef route(request):\n"
     "    prefix = request.path.split('/')[1]\n    return HANDLERS['/' + prefix](request)\n"}};

strata::ToolOutput ReadFile(const std::string& arguments) {
  const std::string path =
      nlohmann::json::parse(arguments).at("path");  // a throw becomes an error result
  auto file = kRepository.find(path);
  if (file == kRepository.end()) return {"no such file: " + path, true};
  return {file->second, false};
}

strata::ToolOutput ListDir(const std::string&) {
  std::string names;
  for (const auto& [name, content] : kRepository) names += name + "\n";
  return {names, false};
}

strata::Status Main(const std::string& base_url) {
  strata::AgentConfig config;
  config.identity.id = "agent-loop";
  config.endpoint.base_url = base_url;
  config.budget.window = 8000;  // reserves scale with the window
  config.store_path = "agent_loop.db";
  std::remove(config.store_path.c_str());  // a fresh start for the example
  STRATA_ASSIGN_OR_RETURN(std::unique_ptr<strata::Agent> agent, strata::Agent::Create(config));
  STRATA_RETURN_IF_ERROR(agent->SetSystemPrompt("You are a coding agent. Use the tools."));
  STRATA_RETURN_IF_ERROR(agent->RegisterTool(
      "read_file",
      R"({"description":"Read a file","parameters":{"type":"object","properties":{"path":{"type":"string"}}}})",
      ReadFile));
  STRATA_RETURN_IF_ERROR(agent->RegisterTool(
      "list_dir", R"({"description":"List the repository","parameters":{"type":"object"}})",
      ListDir));

  strata::RunOptions options;
  options.max_turns = 8;
  options.turn.on_delta = [](const strata::StreamDelta& delta) {  // the answer as it streams
    if (delta.kind == strata::StreamDelta::Kind::kContent) std::cout << delta.text << std::flush;
  };
  STRATA_ASSIGN_OR_RETURN(strata::RunResult run, agent->Run("Where are requests routed?", options));
  std::cout << "\n\n"
            << run.turns.size() << " requests, " << run.tool_calls << " tool calls, stopped on "
            << run.stopped << "\n";
  for (const strata::Turn& turn : run.turns) {
    std::cout << "  " << turn.record.input_tokens << " input tokens, "
              << turn.record.cached_tokens_predicted << " predicted cached, "
              << (turn.record.cached_tokens_reported
                      ? std::to_string(*turn.record.cached_tokens_reported)
                      : "?")
              << " reported\n";
  }

  // A restart: the configuration, the context and the cache view come back from the store.
  agent.reset();
  STRATA_ASSIGN_OR_RETURN(agent, strata::Agent::Open("agent_loop.db", "agent-loop"));
  STRATA_ASSIGN_OR_RETURN(strata::CachePrediction next, agent->PredictCachedTokens());
  std::cout << "after reopening: budget window " << agent->config().budget.window
            << ", next request " << next.input_tokens << " tokens, " << next.predicted_cached_tokens
            << " predicted cached\n";
  return strata::Status();
}

}  // namespace

int main(int argc, char** argv) {
  strata::Status status = Main(argc > 1 ? argv[1] : "http://127.0.0.1:8000/v1");
  if (!status.ok()) {
    std::cerr << "agent_loop: " << status << "\n";
    return 1;
  }
  return 0;
}
