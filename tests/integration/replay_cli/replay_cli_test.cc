// `strata replay` end to end: a failed or concurrent replay never loses a stored agent, outputs are
// complete or absent, write errors and usage errors get their exit codes, and the options combine.
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>

#include "strata/agent.h"
#include "strata/chat_template.h"
#include "strata/prefix_cache.h"
#include "strata/replay/trace.h"
#include "strata/store.h"
#include "strata/tokenizer_spec.h"
#include "testing/command.h"
#include "testing/paths.h"
#include "testing/temp_dir.h"

namespace strata {
namespace {

using testing::TempDir;

using Result = testing::CommandResult;
using testing::ReadFile;

Result Run(const std::string& args, const std::string& redirect = "2>&1") {
  return testing::RunCommand(std::string(STRATA_CLI_PATH) + " " + args + " " + redirect);
}

const std::string kTrace = std::string(STRATA_TEST_TRACES_DIR) + "/mini-swe-agent/sympy__sympy-15976.jsonl";

// kTrace with a tool result answering no call appended: it reads, and fails in the middle of the
// replay (the consistency check of ReplayTrace).
std::string BrokenTrace(const TempDir& dir) {
  const std::string path = dir.File("broken.jsonl");
  std::ofstream(path, std::ios::binary) << ReadFile(kTrace)
                                        << R"({"role":"tool","tool_call_id":"call_nobody","content":"x"})" << "\n"
                                        << R"({"role":"assistant","content":"done"})" << "\n";
  return path;
}

int64_t Turns(const std::string& db, const std::string& agent) {
  StoreOptions options;
  options.read_only = true;
  auto store = OpenSqliteStore(db, options);
  if (!store.ok()) return -1;
  auto stored = (*store)->GetAgent(agent);
  return stored.ok() ? stored->turn : -1;
}

std::vector<std::string> AgentIds(const std::string& db) {
  std::vector<std::string> ids;
  auto store = OpenSqliteStore(db);
  if (!store.ok()) return ids;
  auto agents = (*store)->ListAgents();
  if (!agents.ok()) return ids;
  for (const StoredAgent& a : *agents) ids.push_back(a.options.agent.id);
  return ids;
}

TEST_CASE("replay --db replaces an agent only when the new one is complete", "[cli][replay]") {
  TempDir dir;
  const std::string db = dir.File("agents.db");
  REQUIRE(Run("replay " + kTrace + " --db " + db + " --agent x -q").exit_code == 0);
  const int64_t turns = Turns(db, "x");
  REQUIRE(turns > 20);
  // Before: x was deleted and committed first, then left as a partial copy.
  Result failed = Run("replay " + BrokenTrace(dir) + " --db " + db + " --agent x -q");
  INFO(failed.output);
  CHECK(failed.exit_code == 1);
  CHECK_THAT(failed.output, Catch::Contains("call_nobody"));
  CHECK(Turns(db, "x") == turns);
  CHECK(AgentIds(db) == std::vector<std::string>{"x"});  // no temporary agent left behind
  // The run that completes replaces it, and keeps its configuration in a "replay" event.
  REQUIRE(Run("replay " + kTrace + " --db " + db + " --agent x -q --no-hygiene").exit_code == 0);
  CHECK(AgentIds(db) == std::vector<std::string>{"x"});
  auto store = OpenSqliteStore(db);
  REQUIRE(store.ok());
  auto events = (*store)->Events("x", "replay");
  REQUIRE(events.ok());
  REQUIRE(events->size() == 1);
  CHECK(nlohmann::json::parse(events->front().payload_json)["no_hygiene"] == true);
}

TEST_CASE("replay --db refuses an id another live process is replaying", "[cli][replay]") {
  TempDir dir;
  const std::string db = dir.File("agents.db");
  REQUIRE(Run("replay " + kTrace + " --db " + db + " --agent x -q").exit_code == 0);
  char host[256] = {};
  REQUIRE(::gethostname(host, sizeof host - 1) == 0);
  auto lock = [&](int64_t pid) {
    auto store = OpenSqliteStore(db);
    REQUIRE(store.ok());
    ContextOptions options;
    options.agent.id = "x.replaying";
    REQUIRE((*store)->CreateAgent(options).ok());
    StoredEvent event;
    event.agent_id = "x.replaying";
    event.type = "replay";
    event.payload_json = nlohmann::json{{"pid", pid}, {"host", host}}.dump();
    REQUIRE((*store)->AppendEvent(event).ok());
  };
  lock(::getpid());  // this test process: alive
  Result refused = Run("replay " + kTrace + " --db " + db + " --agent x -q");
  INFO(refused.output);
  CHECK(refused.exit_code == 1);
  CHECK_THAT(refused.output, Catch::Contains("is being replayed by process " + std::to_string(::getpid())));
  CHECK(Turns(db, "x") > 20);
  CHECK(Turns(db, "x.replaying") == 0);  // the other process's agent is untouched
  // A temporary agent of a process that is gone is reclaimed.
  REQUIRE(OpenSqliteStore(db).value()->DeleteAgent("x.replaying").ok());
  pid_t child = ::fork();
  if (child == 0) ::_exit(0);
  ::waitpid(child, nullptr, 0);
  lock(child);
  Result reclaimed = Run("replay " + kTrace + " --db " + db + " --agent x -q");
  INFO(reclaimed.output);
  CHECK(reclaimed.exit_code == 0);
  CHECK(AgentIds(db) == std::vector<std::string>{"x"});
}

TEST_CASE("replay outputs are complete or untouched, and write errors exit 1", "[cli][replay]") {
  TempDir dir;
  const std::string out = dir.File("out.jsonl"), summary = dir.File("summary.json");
  std::ofstream(out) << "previous\n";
  std::ofstream(summary) << "previous\n";
  // Before: --out was truncated even though the replay then failed.
  Result failed = Run("replay " + BrokenTrace(dir) + " -q --out " + out + " --summary-json " + summary);
  CHECK(failed.exit_code == 1);
  CHECK(ReadFile(out) == "previous\n");
  CHECK(ReadFile(summary) == "previous\n");
  REQUIRE(Run("replay " + kTrace + " -q --out " + out + " --summary-json " + summary).exit_code == 0);
  CHECK(ReadFile(out).find("{\"turn\":0,") == 0);
  CHECK(nlohmann::json::parse(ReadFile(summary))["turns"].get<int>() > 20);
  std::vector<std::string> left;
  for (const auto& entry : std::filesystem::directory_iterator(dir.path())) left.push_back(entry.path().filename());
  CHECK(left.size() == 3);  // out, summary, broken trace: no temporary files

  // Before: --summary-json /dev/full exited 0 having written nothing; stdout errors were ignored.
  for (const char* args : {"--summary-json /dev/full", "--out /dev/full"}) {
    Result full = Run("replay " + kTrace + " -q " + std::string(args));
    INFO(args << ": " << full.output);
    CHECK(full.exit_code == 1);
    CHECK_THAT(full.output, Catch::Contains("/dev/full") && Catch::Contains("failed"));
  }
  Result stdout_full = Run("replay " + kTrace, ">/dev/full 2>&1");
  CHECK(stdout_full.exit_code == 1);
  Result stdout_error = Run("replay " + kTrace, "2>&1 >/dev/full");
  CHECK_THAT(stdout_error.output, Catch::Contains("standard output"));
}

TEST_CASE("a trace file name that is not UTF-8 does not abort --summary-json", "[cli][replay]") {
  TempDir dir;
  const std::string trace = dir.File("tr\xff\xfe" "ce.jsonl");
  std::ofstream(trace, std::ios::binary) << ReadFile(kTrace);
  const std::string summary = dir.File("summary.json");
  Result result = Run("replay '" + trace + "' -q --summary-json " + summary);
  INFO(result.output);
  CHECK(result.exit_code == 0);
  auto doc = nlohmann::json::parse(ReadFile(summary));
  CHECK(doc["trace"].get<std::string>().find("tr\xEF\xBF\xBD\xEF\xBF\xBD" "ce.jsonl") != std::string::npos);
}

TEST_CASE("replay takes a BOM, CRLF lines and a NUL escape, refuses an empty trace and a FIFO",
          "[cli][replay]") {
  TempDir dir;
  const std::string plain_out = dir.File("plain.jsonl");
  REQUIRE(Run("replay " + kTrace + " -q --out " + plain_out).exit_code == 0);
  const std::string plain = ReadFile(plain_out);
  std::string crlf;
  for (char c : ReadFile(kTrace)) crlf += c == '\n' ? std::string("\r\n") : std::string(1, c);
  struct Accepted {
    const char* name;
    std::string text;
  };
  // Before: all of these exited 0; the BOM and CRLF ones must give the plain trace's requests.
  for (const Accepted& a : {Accepted{"bom", "\xEF\xBB\xBF" + ReadFile(kTrace)},
                            Accepted{"crlf", crlf}, Accepted{"bom-crlf", "\xEF\xBB\xBF" + crlf}}) {
    const std::string trace = dir.File(std::string(a.name) + ".jsonl");
    const std::string out = dir.File(std::string(a.name) + ".out");
    std::ofstream(trace, std::ios::binary) << a.text;
    Result result = Run("replay " + trace + " -q --agent sympy__sympy-15976 --out " + out);
    INFO(a.name << ": " << result.output);
    CHECK(result.exit_code == 0);
    CHECK(ReadFile(out) == plain);
  }
  // JSON allows \u0000 in a string: the NUL is content, sent on escaped the same way. A raw NUL
  // byte is not JSON.
  const std::string nul = dir.File("nul.jsonl");
  std::ofstream(nul, std::ios::binary) << R"({"role":"user","content":"a\u0000b"})" "\n"
                                       << R"({"role":"assistant","content":"ok"})" "\n";
  const std::string nul_out = dir.File("nul.out");
  Result escaped = Run("replay " + nul + " -q --out " + nul_out);
  INFO(escaped.output);
  CHECK(escaped.exit_code == 0);
  CHECK_THAT(ReadFile(nul_out), Catch::Contains(R"("content":"a\u0000b")"));
  const std::string raw = dir.File("raw-nul.jsonl");
  std::ofstream(raw, std::ios::binary) << std::string("{\"role\":\"user\",\"content\":\"a") + '\0' + "b\"}\n";
  Result raw_result = Run("replay " + raw + " -q");
  CHECK(raw_result.exit_code == 1);
  CHECK_THAT(raw_result.output, Catch::Contains(raw + ":1: malformed JSON"));

  for (const char* text : {"", "  \n\t\n\r\n\n"}) {
    const std::string empty = dir.File("empty.jsonl");
    std::ofstream(empty, std::ios::binary) << text;
    Result result = Run("replay " + empty + " -q");
    INFO(result.output);
    CHECK(result.exit_code == 1);
    CHECK_THAT(result.output, Catch::Contains("trace \"" + empty + "\" has no messages"));
  }
  // A FIFO would block the replay until a writer comes (forever): refused without waiting for one.
  // `timeout` turns a hang into exit 124, which fails the check.
  const std::string fifo = dir.File("trace.fifo");
  REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
  Result refused = testing::RunCommand("timeout 30 " + std::string(STRATA_CLI_PATH) + " replay " + fifo +
                                " -q 2>&1");
  INFO(refused.output);
  CHECK(refused.exit_code == 1);
  CHECK_THAT(refused.output, Catch::Contains("trace \"" + fifo + "\" is not a regular file"));
}

TEST_CASE("replay usage errors exit 2 with a message", "[cli][replay]") {
  struct Case {
    const char* args;
    const char* expect;
  };
  for (const Case& c : {Case{"--send", "--endpoint"},
                        Case{"--send --endpoint http://127.0.0.1:1/v1 --backend nope", "nope"},
                        Case{"--send --endpoint 127.0.0.1:8000/v1", "scheme"},
                        Case{"--tokenizer bogus", "bogus"},
                        Case{"--budget 3000 --trigger 5", "--trigger"},
                        Case{"--budget 3000 --trigger 0.5 --target 0.9", "must not exceed the trigger"},
                        Case{"--budget -5", "--budget"},
                        Case{"--max-segment-tokens -1", "--max-segment-tokens"},
                        Case{"--policy sliding", "needs --budget"},
                        Case{"--budget 3000 --policy strata,none", "--compare"},
                        Case{"--budget 3000 --compare strata,none --tokenizer estimate --db x.db", "--compare"},
                        Case{"--timeout -1", "--timeout"},
                        Case{"--timeout nan", "--timeout"},
                        Case{"--timeout 0", "--timeout"},
                        Case{"--timeout 1e300", "--timeout"},
                        Case{"--tokenizer estimate:1e-15", "0.5 to 64"},
                        Case{"--tokenizer estimate:1e-300", "0.5 to 64"}}) {
    Result result = Run("replay " + kTrace + " -q " + c.args);
    INFO(c.args << ": " << result.output);
    CHECK(result.exit_code == 2);
    CHECK_THAT(result.output, Catch::Contains(c.expect));
  }
}

TEST_CASE("replay --db with --budget persists the compacted run, --out reports each compaction", "[cli][replay]") {
  TempDir dir;
  const std::string db = dir.File("agents.db"), out = dir.File("out.jsonl"), summary = dir.File("s.json");
  // Before: --db with --budget exited 0 without creating the database.
  Result result = Run("replay " + kTrace + " -q --db " + db + " --agent b --budget 3000 --tokenizer estimate --out " +
                      out + " --summary-json " + summary);
  INFO(result.output);
  REQUIRE(result.exit_code == 0);
  auto doc = nlohmann::json::parse(ReadFile(summary));
  CHECK(doc["policy"] == "strata");
  CHECK(doc["budget_violations"] == 0);
  const int compactions = doc["compactions"].get<int>();
  CHECK(compactions > 0);
  std::ifstream lines(out);
  int reported = 0, turns_compacted = 0;
  for (std::string line; std::getline(lines, line);) {
    auto turn = nlohmann::json::parse(line);
    CHECK(turn["policy"] == "strata");
    CHECK(turn["stats"]["input_tokens"].get<int>() <= 3000);
    if (turn.contains("compactions")) {
      ++turns_compacted;
      reported += static_cast<int>(turn["compactions"].size());
      for (const auto& report : turn["compactions"]) {
        CHECK(report["tokens_before"].get<int>() > 0);
        CHECK(report["tokens_after"].get<int>() > 0);
        CHECK(report["policy"].get<std::string>().rfind("strata@", 0) == 0);
      }
    }
  }
  CHECK(reported == compactions);
  CHECK(turns_compacted > 0);
  auto store = OpenSqliteStore(db);
  REQUIRE(store.ok());
  auto agent = (*store)->GetAgent("b");
  REQUIRE(agent.ok());
  CHECK(agent->compactions == compactions);
  auto events = (*store)->Events("b", "replay");
  REQUIRE(events.ok());
  REQUIRE(events->size() == 1);
  auto config = nlohmann::json::parse(events->front().payload_json);
  CHECK(config["budget"] == 3000);
  CHECK(config["policy"] == "strata");
  CHECK(config["tokenizer"] == "estimate:4");
}

// The request bodies and stats of a --out file: the body is the line's "request", verbatim.
std::vector<std::pair<std::string, nlohmann::json>> OutTurns(const std::string& path) {
  std::vector<std::pair<std::string, nlohmann::json>> turns;
  std::ifstream lines(path);
  for (std::string line; std::getline(lines, line);) {
    const std::string open = R"("request":)";
    const size_t start = line.find(open);
    const size_t end = line.rfind(R"(,"stats":)");
    REQUIRE(start != std::string::npos);
    REQUIRE(end != std::string::npos);
    turns.emplace_back(line.substr(start + open.size(), end - start - open.size()),
                       nlohmann::json::parse(line)["stats"]);
  }
  return turns;
}

// replay continues its measures from request to request (the bytes a request shares with the one
// before, its prompt's token blocks in the prefix-cache model, its count): each equals the whole
// computation on the request's body, on every fixture trace, and with compactions.
TEST_CASE("replay's reused bytes and cached tokens and its counts equal the whole computation",
          "[cli][replay]") {
  TempDir dir;
  auto qwen3 = MakeTokenizer(std::string("hf:") + STRATA_TOK_QWEN3_JSON);
  REQUIRE(qwen3.ok());
  auto glm = MakeGlm5ChatTemplate();
  std::vector<std::string> traces;
  for (const auto& entry :
       std::filesystem::recursive_directory_iterator(STRATA_TEST_TRACES_DIR)) {
    if (entry.path().extension() == ".jsonl" && entry.path().filename() != "manifest.jsonl") {
      traces.push_back(entry.path().string());
    }
  }
  std::sort(traces.begin(), traces.end());
  REQUIRE(traces.size() > 10);
  std::vector<std::string> runs = traces;  // the arguments after the tokenizer
  for (size_t i = 0; i < traces.size(); i += 6) runs.push_back("--budget 8000 " + traces[i]);
  size_t checked = 0, compacted = 0;
  for (const std::string& run : runs) {
    const std::string out = dir.File("out.jsonl");
    Result result = Run("replay -q --tokenizer hf:" + std::string(STRATA_TOK_QWEN3_JSON) +
                        " --out " + out + " " + run);
    INFO(run << "\n" << result.output);
    REQUIRE(result.exit_code == 0);
    PrefixCacheModel model;
    std::string previous;
    for (const auto& [body, stats] : OutTurns(out)) {
      INFO("request " << checked);
      CHECK(stats["request_bytes"] == body.size());
      const size_t shared = static_cast<size_t>(
          std::mismatch(previous.begin(), previous.end(), body.begin(), body.end()).first -
          previous.begin());
      CHECK(stats["reused_bytes"] == shared);
      auto counted = CountRequestTokens(*glm, **qwen3, body);
      REQUIRE(counted.ok());
      CHECK(stats["input_tokens"] == counted->tokens);
      auto prompt = glm->Render(body);
      REQUIRE(prompt.ok());
      CHECK(stats["reused_tokens"] ==
            model.LookupAndInsert(HashPrompt(*prompt, "", qwen3->get(), model.options())));
      if (body.size() < previous.size()) ++compacted;
      previous = body;
      ++checked;
    }
  }
  CHECK(checked > 200);
  CHECK(compacted > 0);
}

TEST_CASE("replay --send stops after consecutive failures", "[cli][replay]") {
  // A port nothing listens on: every request fails at once (connection refused).
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  REQUIRE(fd >= 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  REQUIRE(::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0);
  socklen_t len = sizeof addr;
  REQUIRE(::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0);
  const int port = ntohs(addr.sin_port);
  ::close(fd);
  const std::string endpoint = "http://127.0.0.1:" + std::to_string(port) + "/v1";
  Result result = Run("replay " + kTrace + " -q --send --endpoint " + endpoint + " --max-consecutive-failures 2");
  INFO(result.output);
  CHECK(result.exit_code == 1);
  CHECK_THAT(result.output, Catch::Contains("stopped after 2 consecutive failed requests"));
}

}  // namespace
}  // namespace strata

namespace strata {
namespace {

// The request bodies of a `replay --out` file, by turn (the "request" member, byte for byte).
std::vector<std::string> RequestBodies(const std::string& out) {
  std::vector<std::string> bodies;
  std::ifstream lines(out);
  for (std::string line; std::getline(lines, line);) {
    const size_t begin = line.find(",\"request\":") + 11, end = line.rfind(",\"stats\":");
    REQUIRE(end > begin);
    bodies.push_back(line.substr(begin, end - begin));
  }
  return bodies;
}

TEST_CASE("replay --db --budget --policy P stores the configuration Agent::Open continues with",
          "[cli][replay][agent]") {
  // strata and the two baselines users run instead (clear-tool-uses, observation-masking).
  const std::string policy = GENERATE(as<std::string>{}, "strata", "clear-tool-uses", "observation-masking");
  INFO("policy " << policy);
  TempDir dir;
  const std::string db = dir.File("agents.db"), out = dir.File("whole.jsonl");
  const std::string options =
      " --budget 4000 --policy " + policy + " --keep-tool-results 2 --tokenizer estimate -q";
  // The first half of the trace, cut before its 24th assistant message.
  std::vector<std::string> lines;
  {
    std::ifstream in(kTrace);
    for (std::string line; std::getline(in, line);) lines.push_back(line);
  }
  size_t assistants = 0, cut = 0;
  for (size_t i = 0; i < lines.size() && cut == 0; ++i) {
    if (nlohmann::json::parse(lines[i])["role"] == "assistant" && ++assistants == 24) cut = i;
  }
  REQUIRE(cut > 0);
  const std::string half = dir.File("half.jsonl");
  {
    std::ofstream file(half, std::ios::binary);
    for (size_t i = 0; i < cut; ++i) file << lines[i] << "\n";
  }
  Result stored = Run("replay " + half + " --db " + db + " --agent x" + options);
  INFO(stored.output);
  REQUIRE(stored.exit_code == 0);
  // The whole trace in one process: what the continued agent must render.
  Result whole = Run("replay " + kTrace + " --out " + out + options);
  INFO(whole.output);
  REQUIRE(whole.exit_code == 0);
  const std::vector<std::string> bodies = RequestBodies(out);
  REQUIRE(bodies.size() == 46);

  // Before: "config": null.
  Result inspected = Run("inspect --db " + db + " --agent x --json", "2>/dev/null");
  REQUIRE(inspected.exit_code == 0);
  const nlohmann::json config = nlohmann::json::parse(inspected.output)["config"];
  REQUIRE(config.is_object());
  CHECK(config["identity"]["id"] == "x");
  CHECK(config["budget"]["window"] == 4000);
  CHECK(config["budget"]["reserve_output"] == 0);
  CHECK(config["budget"]["trigger"]["fraction"] == 0.95);
  CHECK(config["budget"]["target"]["fraction"] == 0.7);
  CHECK(config["policy"]["name"] == policy);
  CHECK(config["policy"]["keep_tool_results"] == 2);
  CHECK(config["tokenizer"] == "estimate");
  CHECK(config["chat_template"] == "glm5");
  CHECK(config["hygiene"]["max_segment_tokens"] == 1000);  // a quarter of the budget
  CHECK(config["recall"]["expose_tool"] == false);

  StatusOr<std::unique_ptr<Agent>> agent = Agent::Open(db, "x");
  INFO(agent.status().ToString());
  REQUIRE(agent.ok());
  CHECK((*agent)->config().policy.keep_tool_results == 2);
  StatusOr<std::vector<TraceMessage>> trace = ReadTrace(kTrace);
  REQUIRE(trace.ok());
  const std::vector<TraceMessage> rest(trace->begin() + static_cast<std::ptrdiff_t>(cut), trace->end());
  const size_t compactions_before = (*agent)->context().Compactions().size();
  size_t turn = 23, compared = 0;
  Status replayed = ReplayTrace(rest, (*agent)->context(), [&](const TraceMessage&, const BuiltRequest& request) {
    if (request.body != bodies.at(turn)) return InternalError("turn " + std::to_string(turn) + " differs");
    ++turn;
    ++compared;
    return Status::Ok();
  });
  CHECK(replayed.ToString() == "OK");
  CHECK(compared == 23);
  // The continuation compacted under the stored budget and policy.
  CHECK((*agent)->context().Compactions().size() > compactions_before);
}

}  // namespace
}  // namespace strata
