// `strata run --config AGENT.json --endpoint URL [--root DIR] "task"`: runs a strata::Agent with
// two read-only tools over a directory (read_file, list_dir), streaming the answer to stdout and a
// line per request to stderr. The whole loop from the shell.
#include <dirent.h>
#include <sys/stat.h>

#include <algorithm>
#include <climits>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <sstream>
#include <vector>

#include "commands.h"
#include "core/utf8.h"
#include "strata/agent.h"

namespace strata::cli {
namespace {

struct RunArgs {
  std::string config;
  std::string endpoint;
  std::string root = ".";
  std::string db;
  std::string task;
  int max_turns = 20;
  size_t max_file_bytes = 65536;
};

// Resolves `relative` under `root`; refuses paths that leave it (.., symlinks).
std::string Resolve(const std::string& root, const std::string& relative) {
  if (!relative.empty() && relative[0] == '/')
    throw std::runtime_error("absolute paths are not allowed: " + relative);
  char resolved[PATH_MAX];
  const std::string joined = root + "/" + (relative.empty() ? "." : relative);
  if (::realpath(joined.c_str(), resolved) == nullptr)
    throw std::runtime_error("no such file or directory: " + relative);
  std::string path = resolved;
  if (path != root && path.compare(0, root.size() + 1, root + "/") != 0) {
    throw std::runtime_error("path leaves the root directory: " + relative);
  }
  return path;
}

std::string PathArgument(const std::string& arguments) {
  nlohmann::json args = nlohmann::json::parse(arguments, nullptr, false);
  if (!args.is_object() || !args.contains("path") || !args["path"].is_string()) {
    throw std::runtime_error("expected {\"path\": \"...\"}, got " +
                             internal::Utf8Prefix(arguments, 100));
  }
  return args["path"].get<std::string>();
}

// The agent configuration of --config with the command line's overrides applied.
AgentConfig LoadRunConfig(const RunArgs& args) {
  std::ifstream in(args.config);
  if (!in) throw CommandFailed{"cannot read the agent configuration " + args.config};
  std::stringstream text;
  text << in.rdbuf();
  StatusOr<AgentConfig> parsed = AgentConfigFromJson(text.str());
  if (!parsed.ok()) throw CommandFailed{args.config + ": " + parsed.status().message()};
  AgentConfig config = std::move(parsed).value();
  if (!args.endpoint.empty()) config.endpoint.base_url = args.endpoint;
  if (!args.db.empty()) config.store_path = args.db;
  if (config.identity.id.empty()) config.identity.id = "strata-run";
  if (config.endpoint.base_url.empty()) {
    throw CLI::ValidationError(
        "--endpoint", "no endpoint: give --endpoint URL or endpoint.base_url in the configuration");
  }
  return config;
}

// A new agent with the exploring system prompt, or the stored one of the same id (continued).
std::unique_ptr<Agent> CreateOrOpenAgent(const AgentConfig& config) {
  std::unique_ptr<Agent> agent;
  StatusOr<std::unique_ptr<Agent>> created = Agent::Create(config);
  if (created.ok()) {
    agent = std::move(created).value();
    Status prompt = agent->SetSystemPrompt(
        "You are an agent exploring a directory with read-only tools. Paths are relative to the "
        "directory. Answer the task when you have what you need.");
    if (!prompt.ok()) throw CommandFailed{prompt.ToString()};
  } else if (created.status().code() == StatusCode::kAlreadyExists) {
    OpenOptions open;
    open.endpoint = config.endpoint;
    StatusOr<std::unique_ptr<Agent>> opened =
        Agent::Open(config.store_path, config.identity.id, open);
    if (!opened.ok()) throw CommandFailed{opened.status().ToString()};
    agent = std::move(opened).value();
    std::cerr << "[continuing agent " << config.identity.id << " from " << config.store_path
              << "]\n";
  } else {
    throw CommandFailed{created.status().ToString()};
  }
  return agent;
}

// The read-only tools over `root`: read_file (at most `max_bytes` of a file) and list_dir.
void RegisterDirectoryTools(Agent* agent, const std::string& root, size_t max_bytes) {
  Status tool = agent->RegisterTool(
      "read_file",
      R"json({"description":"Read a text file under the directory","parameters":{"type":"object","properties":{"path":{"type":"string","description":"Path relative to the directory"}},"required":["path"]}})json",
      [root, max_bytes](const std::string& arguments) {
        std::string path = Resolve(root, PathArgument(arguments));
        struct stat st;
        if (::stat(path.c_str(), &st) != 0 || !S_ISREG(st.st_mode))
          return ToolOutput{"not a regular file", true};
        std::ifstream file(path, std::ios::binary);
        // A tool result must be UTF-8: the cut ends on a character (the 3 bytes after it tell
        // where), other bytes become U+FFFD.
        std::string content(std::min<size_t>(static_cast<size_t>(st.st_size), max_bytes + 3), '\0');
        file.read(content.data(), static_cast<std::streamsize>(content.size()));
        content.resize(internal::Utf8Floor(content, max_bytes));
        content = internal::ToValidUtf8(content);
        if (static_cast<size_t>(st.st_size) > max_bytes) {
          content += "\n[file cut at " + std::to_string(max_bytes) + " of " +
                     std::to_string(st.st_size) + " bytes]";
        }
        return ToolOutput{content, false};
      });
  if (tool.ok()) {
    tool = agent->RegisterTool(
        "list_dir",
        R"json({"description":"List a directory (names; directories end with /)","parameters":{"type":"object","properties":{"path":{"type":"string","description":"Path relative to the directory, \".\" for the top"}},"required":["path"]}})json",
        [root](const std::string& arguments) {
          std::string path = Resolve(root, PathArgument(arguments));
          DIR* dir = ::opendir(path.c_str());
          if (dir == nullptr) return ToolOutput{"not a directory", true};
          std::vector<std::string> names;
          while (dirent* entry = ::readdir(dir)) {
            std::string name = entry->d_name;
            if (name == "." || name == "..") continue;
            struct stat st;
            if (::stat((path + "/" + name).c_str(), &st) == 0 && S_ISDIR(st.st_mode)) name += "/";
            names.push_back(name);
          }
          ::closedir(dir);
          std::sort(names.begin(), names.end());
          std::string out;
          for (const std::string& n : names) out += n + "\n";
          return ToolOutput{out.empty() ? "(empty)" : out, false};
        });
  }
  if (!tool.ok()) throw CommandFailed{tool.ToString()};
}

void Execute(const RunArgs& args) {
  const AgentConfig config = LoadRunConfig(args);
  char root_buf[PATH_MAX];
  if (::realpath(args.root.c_str(), root_buf) == nullptr)
    throw CommandFailed{"--root " + args.root + " does not exist"};
  const std::string root = root_buf;
  std::unique_ptr<Agent> agent = CreateOrOpenAgent(config);
  RegisterDirectoryTools(agent.get(), root, args.max_file_bytes);

  RunOptions run;
  run.max_turns = args.max_turns;
  run.turn.on_delta = [](const StreamDelta& delta) {
    if (delta.kind == StreamDelta::Kind::kContent) std::cout << delta.text << std::flush;
  };
  StatusOr<RunResult> result = agent->Run(args.task, run);
  if (!result.ok()) throw CommandFailed{result.status().ToString()};
  std::cout << "\n";
  for (size_t i = 0; i < result->turns.size(); ++i) {
    const Turn& t = result->turns[i];
    std::cerr << "[request " << i + 1 << ": " << t.record.input_tokens << " input tokens, "
              << (t.record.cached_tokens_reported ? std::to_string(*t.record.cached_tokens_reported)
                                                  : "?")
              << " cached (predicted " << t.record.cached_tokens_predicted << "), "
              << t.response.tool_calls.size() << " tool calls"
              << (t.compactions.empty() ? "" : ", compacted") << "]\n";
  }
  std::cerr << "[stopped: " << result->stopped << " after " << result->turns.size() << " requests, "
            << result->tool_calls << " tool calls, " << result->tool_errors << " tool errors]\n";
}

}  // namespace

void RegisterRun(CLI::App& app) {
  auto args = std::make_shared<RunArgs>();
  CLI::App* cmd = app.add_subcommand(
      "run",
      "Run an agent (AgentConfig JSON) with read-only read_file/list_dir tools over a directory");
  cmd->add_option("--config", args->config, "Agent configuration (AgentConfig JSON, docs/agent.md)")
      ->required()
      ->check(CLI::ExistingFile);
  cmd->add_option("--endpoint", args->endpoint,
                  "Base URL of the model endpoint (overrides the configuration)");
  cmd->add_option("--root", args->root, "Directory the tools may read")->capture_default_str();
  cmd->add_option("--db", args->db,
                  "Store file: the agent is kept there and continued on the next run");
  cmd->add_option("--max-turns", args->max_turns, "Model calls at most")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  cmd->add_option("task", args->task, "The task")->required();
  cmd->callback([args] { Execute(*args); });
}

}  // namespace strata::cli
