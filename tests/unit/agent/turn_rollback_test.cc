// A failed Agent::Run() or Complete() changes nothing: for each way a call fails (unreachable
// endpoint, 4xx, 5xx after retries, deadline, cancellation, a tool handler that throws or returns
// an error before the request after it fails), the rendered request and the stored agent (reopened
// with Agent::Open) are what they were before the call, and a retry of the same text leaves one
// user message. Against strata-sim in-process (127.0.0.1, port 0) and a scripted transport.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <cstdio>
#include <functional>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>

#include "sim_server.h"
#include "strata/agent.h"
#include "testing/context_testing.h"
#include "testing/scripted_transport.h"
#include "testing/sim_testing.h"
#include "testing/status_testing.h"

namespace strata {
namespace {

using testing::Must;
using testing::MustOk;

std::string TempPath(const std::string& name) {
  std::string path = "/tmp/strata-rollback-test-" + std::to_string(::getpid()) + "-" + name;
  for (const char* suffix : {"", "-wal", "-shm"}) std::remove((path + suffix).c_str());
  return path;
}

// A base URL nothing listens on: a port bound to 127.0.0.1 and closed again.
std::string DeadBaseUrl() {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(addr);
  if (fd < 0 || ::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 ||
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    throw std::runtime_error("DeadBaseUrl: cannot bind a port");
  }
  ::close(fd);
  return "http://127.0.0.1:" + std::to_string(ntohs(addr.sin_port)) + "/v1";
}

// Every stored field of every segment, the kept originals and the turn: what Open() restores.
std::string SnapshotText(const ContextSnapshot& snapshot) {
  nlohmann::json out = nlohmann::json::array();
  for (const Segment& s : snapshot.segments) {
    nlohmann::json calls = nlohmann::json::array();
    for (const ToolCall& c : s.tool_calls) calls.push_back({c.id, c.name, c.arguments});
    out.push_back({s.id,
                   s.seq,
                   s.position,
                   static_cast<int>(s.kind),
                   static_cast<int>(s.layer),
                   s.content,
                   s.reasoning,
                   calls,
                   s.tool_call_id,
                   s.name,
                   s.version,
                   s.order,
                   s.turn,
                   s.tokens,
                   s.pinned,
                   static_cast<int>(s.state),
                   static_cast<int>(s.hygiene),
                   s.recall_id,
                   s.duplicate_of,
                   s.policy});
  }
  std::sort(out.begin(), out.end());
  return nlohmann::json{
      {"segments", out}, {"originals", snapshot.originals}, {"turn", snapshot.turn}}
      .dump();
}

// What a caller can observe of an agent: the request it would send and what the store holds.
struct Observed {
  std::string body;
  std::string stored;
  bool operator==(const Observed& o) const { return body == o.body && stored == o.stored; }
};

Observed Observe(const Agent& agent) {
  Store* store = agent.store();
  REQUIRE(store != nullptr);
  return Observed{testing::MustPreview(agent.context()).body,
                  SnapshotText(Must(store->LoadSnapshot(agent.id())))};
}

// The same agent reopened from its store file.
Observed ObserveReopened(const std::string& path, const std::string& id) {
  std::unique_ptr<Agent> again = Must(Agent::Open(path, id));
  return Observe(*again);
}

// User messages of the agent's next request whose content is `text`.
int UserMessages(const Agent& agent, const std::string& text) {
  nlohmann::json body = nlohmann::json::parse(testing::MustPreview(agent.context()).body);
  int n = 0;
  for (const auto& m : body["messages"]) n += m["role"] == "user" && m["content"] == text;
  return n;
}

const char kReadFileSchema[] =
    R"({"description":"Read a file","parameters":{"type":"object","properties":{"path":{"type":"string"}}}})";
const char kToolCallReply[] =
    R"({"role":"assistant","content":"","tool_calls":[{"id":"call_1","type":"function","function":{"name":"read_file","arguments":"{\"path\":\"a.txt\"}"}}]})";

// An agent with a store, a system prompt, a tool and one successful Run() behind it, talking to
// an in-process strata-sim (or to `base_url` when given).
struct Fixture {
  std::unique_ptr<sim::SimServer> sim = testing::StartSim();
  std::string path;
  std::unique_ptr<Agent> agent;
  std::function<ToolOutput(const std::string&)> tool = [](const std::string&) {
    return ToolOutput{"contents of a.txt", false};
  };

  explicit Fixture(const std::string& name,
                   const std::function<void(AgentConfig&)>& tweak = nullptr) {
    path = TempPath(name + ".db");
    AgentConfig c;
    c.identity.id = name;
    c.tokenizer = "estimate";
    c.budget.window = 32000;
    c.endpoint.base_url = sim->base_url();
    c.endpoint.max_attempts = 2;
    c.store_path = path;
    if (tweak) tweak(c);
    agent = Must(Agent::Create(c));
    MustOk(agent->SetSystemPrompt("You are a careful agent."));
    MustOk(agent->RegisterTool("read_file", kReadFileSchema,
                               [this](const std::string& arguments) { return tool(arguments); }));
  }

  void FirstTask() { Must(agent->Run("Read a.txt, then summarize it.")); }

  // `failures` Runs of "hi" fail with `code` (each arranged by `arrange`), changing nothing in
  // memory or in the store; then a good one leaves exactly one "hi".
  void ExpectFailedRunsChangeNothing(StatusCode code, const std::function<RunOptions()>& arrange,
                                     int failures = 2) {
    const Observed before = Observe(*agent);
    CHECK(ObserveReopened(path, agent->id()) == before);
    for (int i = 0; i < failures; ++i) {
      StatusOr<RunResult> failed = agent->Run("hi", arrange());
      REQUIRE_FALSE(failed.ok());
      CHECK(failed.status().code() == code);
      CHECK(Observe(*agent) == before);
      CHECK(ObserveReopened(path, agent->id()) == before);
    }
    tool = [](const std::string&) { return ToolOutput{"contents of a.txt", false}; };
    RunResult good = Must(agent->Run("hi"));
    CHECK(good.stopped == "answer");
    CHECK(UserMessages(*agent, "hi") == 1);
    CHECK(UserMessages(*Must(Agent::Open(path, agent->id())), "hi") == 1);
  }
};

TEST_CASE("a failed Run against an unreachable endpoint changes nothing", "[agent][rollback]") {
  const std::string dead = DeadBaseUrl();
  Fixture f("unreachable", [&](AgentConfig& c) {
    c.endpoint.base_url = dead;
    c.endpoint.max_attempts = 1;
  });
  const Observed before = Observe(*f.agent);
  for (int i = 0; i < 2; ++i) {
    StatusOr<RunResult> failed = f.agent->Run("Where are requests routed?");
    REQUIRE_FALSE(failed.ok());
    CHECK(failed.status().code() == StatusCode::kUnavailable);
    CHECK(Observe(*f.agent) == before);
    CHECK(ObserveReopened(f.path, "unreachable") == before);
  }
  // Reopened at a live endpoint, the same text is sent once.
  f.agent.reset();
  OpenOptions open;
  open.endpoint = Must(Agent::Open(f.path, "unreachable"))->config().endpoint;
  open.endpoint->base_url = f.sim->base_url();
  auto agent = Must(Agent::Open(f.path, "unreachable", open));
  Must(agent->Run("Where are requests routed?"));
  CHECK(UserMessages(*agent, "Where are requests routed?") == 1);
}

TEST_CASE("a failed Run on a 4xx answer changes nothing", "[agent][rollback]") {
  Fixture f("client-error");
  f.FirstTask();
  f.ExpectFailedRunsChangeNothing(StatusCode::kInvalidArgument, [&] {
    MustOk(f.sim->InjectFault("400", 1));
    return RunOptions{};
  });
}

TEST_CASE("a failed Run on a 5xx answer after every retry changes nothing", "[agent][rollback]") {
  Fixture f("server-error");
  f.FirstTask();
  f.ExpectFailedRunsChangeNothing(StatusCode::kUnavailable, [&] {
    MustOk(f.sim->InjectFault("500", 2));  // both attempts
    return RunOptions{};
  });
  CHECK(f.sim->requests().size() >= 6);  // 1 + 2 x 2 attempts + 1
}

TEST_CASE("a failed Run past its deadline changes nothing", "[agent][rollback]") {
  Fixture f("deadline", [](AgentConfig& c) { c.endpoint.deadline_ms = 300; });
  f.FirstTask();
  f.ExpectFailedRunsChangeNothing(StatusCode::kDeadlineExceeded, [&] {
    MustOk(f.sim->InjectFault("slow-first-byte,delay_ms=1500", 1));
    return RunOptions{};
  });
}

TEST_CASE("a cancelled Run changes nothing, the tool results it appended included",
          "[agent][rollback]") {
  Fixture f("cancelled");
  f.FirstTask();
  CancellationToken token;
  SECTION("cancelled before it starts") {
    f.ExpectFailedRunsChangeNothing(StatusCode::kCancelled, [&] {
      token.Cancel();
      RunOptions run;
      run.turn.cancel = &token;
      return run;
    });
  }
  SECTION("cancelled by a tool handler, after its result was appended") {
    CancellationToken each[2];
    int n = 0;
    f.ExpectFailedRunsChangeNothing(StatusCode::kCancelled, [&] {
      CancellationToken* mine = &each[n++];
      f.tool = [mine](const std::string&) {
        mine->Cancel();
        return ToolOutput{"contents of a.txt", false};
      };
      RunOptions run;
      run.turn.cancel = mine;
      run.turn.headers = {{"X-Strata-Sim-Reply", kToolCallReply}};
      return run;
    });
  }
}

TEST_CASE(
    "a Run whose tool handler throws or fails, then whose next request fails, changes nothing",
    "[agent][rollback]") {
  Fixture f("tool-error");
  f.FirstTask();
  SECTION("the handler throws") {
    f.ExpectFailedRunsChangeNothing(StatusCode::kInvalidArgument, [&] {
      f.tool = [&](const std::string&) -> ToolOutput {
        MustOk(f.sim->InjectFault("400", 1));  // the request carrying the error result fails
        throw std::runtime_error("disk on fire");
      };
      RunOptions run;
      run.turn.headers = {{"X-Strata-Sim-Reply", kToolCallReply}};
      return run;
    });
  }
  SECTION("the handler returns an error") {
    f.ExpectFailedRunsChangeNothing(StatusCode::kInvalidArgument, [&] {
      f.tool = [&](const std::string&) {
        MustOk(f.sim->InjectFault("400", 1));
        return ToolOutput{"no such file", true};
      };
      RunOptions run;
      run.turn.headers = {{"X-Strata-Sim-Reply", kToolCallReply}};
      return run;
    });
  }
}

TEST_CASE("a failed Complete undoes the compaction it applied", "[agent][rollback]") {
  testing::ScriptedTransport transport;
  const std::string path = TempPath("compacted.db");
  AgentConfig c;
  c.identity.id = "compacted";
  c.tokenizer = "estimate";
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
  MustOk(agent->AppendUser("Read the files.").status());
  bool due = false;
  for (int i = 0; i < 30 && !due; ++i) {
    const std::string id = "call_" + std::to_string(i);
    Response r;
    r.tool_calls.push_back(ToolCall{id, "read_file", "{}"});
    transport.Respond(r);
    Must(agent->Complete());
    std::string output;
    for (int line = 0; line < 40; ++line)
      output += "line " + std::to_string(line) + " of file " + std::to_string(i) + "\n";
    MustOk(agent->AppendToolResult({id, output, false}).status());
    due = Must(agent->PredictCachedTokens()).compaction_due;
  }
  REQUIRE(due);
  const Observed before = Observe(*agent);
  transport.Fail(UnavailableError("the endpoint went away"));
  StatusOr<Turn> failed = agent->Complete();
  REQUIRE(failed.status().code() == StatusCode::kUnavailable);
  CHECK(Observe(*agent) == before);
  CHECK(ObserveReopened(path, "compacted") == before);
  // The retry compacts again and succeeds.
  transport.Reply("Read them all.");
  Turn turn = Must(agent->Complete());
  CHECK(turn.compactions.size() == 1);
}

}  // namespace
}  // namespace strata
