#include "strata/replay/trace.h"

#include <catch2/catch.hpp>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <unistd.h>

#include "testing/context_testing.h"
#include "testing/traces.h"

namespace strata {
namespace {

namespace fs = std::filesystem;
using testing::NewContext;
using testing::PairingError;

std::string TempPath(const std::string& name) {
  return (fs::temp_directory_path() / ("strata_trace_test_" + std::to_string(::getpid()) + "_" + name))
      .string();
}

TEST_CASE("trace lines parse into messages, malformed lines are refused clearly", "[tools][trace]") {
  auto m = ParseTraceLine(
      R"({"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function","function":{"name":"bash","arguments":"{\"command\": \"ls\"}"}}]})");
  REQUIRE(m.ok());
  CHECK(m->role == TraceRole::kAssistant);
  CHECK(m->content.empty());
  REQUIRE(m->tool_calls.size() == 1);
  CHECK(m->tool_calls[0].arguments == R"({"command": "ls"})");

  struct Case {
    std::string line;
    std::string expect;
  };
  for (const Case& c : {Case{R"({"role":"robot","content":"x"})", "unknown role \"robot\""},
                        Case{R"({"role":"user","content":)", "malformed JSON"},
                        Case{R"(["user"])", "expected a JSON object"},
                        Case{R"({"role":"user","content":5})", "\"content\" must be a string"},
                        Case{R"({"role":"tool","content":"x"})", "without \"tool_call_id\""},
                        Case{"{\"role\":\"user\",\"content\":\"\xC3\"}", "not valid UTF-8"},
                        Case{R"({"role":"assistant","content":"","tool_calls":[{"id":"c"}]})",
                             "\"function\" object"}}) {
    CAPTURE(c.line);
    auto parsed = ParseTraceLine(c.line);
    REQUIRE_FALSE(parsed.ok());
    CHECK(parsed.status().code() == StatusCode::kInvalidArgument);
    CHECK_THAT(parsed.status().message(), Catch::Contains(c.expect));
  }
}

TEST_CASE("reading a trace names the file and line of a bad message", "[tools][trace]") {
  const std::string path = TempPath("bad.jsonl");
  {
    std::ofstream out(path);
    out << R"({"role":"user","content":"hi"})" << "\n\n"
        << R"({"role":"assistant","content":"hello"})" << "\n"
        << R"({"role":"narrator","content":"x"})" << "\n";
  }
  auto trace = ReadTrace(path);
  REQUIRE_FALSE(trace.ok());
  CHECK(trace.status().message() ==
        path + ":4: unknown role \"narrator\" (expected system, user, assistant or tool)");
  CHECK(ReadTrace(path + ".missing").status().code() == StatusCode::kNotFound);
  CHECK(TraceAgentId("dir/sub/run-7.jsonl") == "run-7");
  std::remove(path.c_str());
}

TEST_CASE("replay refuses a tool result that answers no call, naming the line", "[tools][trace]") {
  std::vector<TraceMessage> messages(2);
  messages[0].role = TraceRole::kUser;
  messages[0].content = "hi";
  messages[0].line = 1;
  messages[1].role = TraceRole::kTool;
  messages[1].tool_call_id = "call_9";
  messages[1].line = 2;
  auto context = NewContext();
  Status s = ReplayTrace(messages, *context, nullptr);
  CHECK(s.code() == StatusCode::kInvalidArgument);
  CHECK_THAT(s.message(), Catch::StartsWith("line 2: tool result for unknown tool_call_id \"call_9\""));
}

TEST_CASE("all test traces replay with valid, append-only requests", "[tools][trace]") {
  const std::vector<std::string> traces = testing::TestTraceFiles();
  REQUIRE(traces.size() == 19);  // tests/data/traces (see SOURCES.md there)
  size_t turns = 0;
  for (const std::string& path : traces) {
    CAPTURE(path);
    auto trace = ReadTrace(path);
    REQUIRE(trace.ok());
    auto context = NewContext();
    std::string previous;
    size_t previous_end = 0;
    Status s = ReplayTrace(*trace, *context, [&](const TraceMessage&, const BuiltRequest& request) {
      if (!previous.empty() && request.body.compare(0, previous_end, previous, 0, previous_end) != 0) {
        return InternalError("request is not an append-only extension of the previous one");
      }
      if (std::string fault = PairingError(request.body); !fault.empty()) return InternalError(fault);
      previous = request.body;
      previous_end = request.history_end_bytes;
      ++turns;
      return Status::Ok();
    });
    CHECK(s.ok());
  }
  CHECK(turns == 464);  // every assistant message of the 19 traces
}

#ifdef STRATA_CLI_PATH
TEST_CASE("a second process renders the same bytes (strata replay --out)", "[tools][trace][determinism]") {
  const std::vector<std::string> traces = testing::TestTraceFiles();
  for (size_t i : {size_t{0}, traces.size() / 2, traces.size() - 1}) {
    const std::string& path = traces[i];
    CAPTURE(path);
    const std::string out = TempPath("replay.jsonl");
    const std::string command = std::string("\"") + STRATA_CLI_PATH + "\" replay -q \"" + path +
                                "\" --out \"" + out + "\"";
    REQUIRE(std::system(command.c_str()) == 0);

    auto trace = ReadTrace(path);
    REQUIRE(trace.ok());
    ContextOptions options;
    options.agent.id = TraceAgentId(path);
    auto context = NewContext(options);
    std::vector<std::string> bodies;
    REQUIRE(ReplayTrace(*trace, *context, [&](const TraceMessage&, const BuiltRequest& request) {
              bodies.push_back(request.body);
              return Status::Ok();
            }).ok());

    std::ifstream in(out, std::ios::binary);
    std::string line;
    size_t turn = 0;
    while (std::getline(in, line)) {
      const std::string prefix = "{\"turn\":" + std::to_string(turn) + ",\"request\":";
      REQUIRE(line.compare(0, prefix.size(), prefix) == 0);
      REQUIRE(turn < bodies.size());
      CHECK(line.compare(prefix.size(), bodies[turn].size(), bodies[turn]) == 0);
      CHECK(line.compare(prefix.size() + bodies[turn].size(), 9, ",\"stats\":") == 0);
      ++turn;
    }
    CHECK(turn == bodies.size());
    std::remove(out.c_str());
  }
}
#endif

}  // namespace
}  // namespace strata
