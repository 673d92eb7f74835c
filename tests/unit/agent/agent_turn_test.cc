// The Agent's turn (agent.cc over transport/turn.h): one store transaction per turn, a refused
// commit undone and counted, and the same predictions and break explanations as the Client's.
#include <unistd.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <cstdio>
#include <optional>
#include <string>
#include <vector>

#include "strata/agent.h"
#include "strata/client.h"
#include "testing/forwarding_store.h"
#include "testing/scripted_transport.h"
#include "testing/status_testing.h"

namespace strata {
namespace {

using testing::Must;
using testing::MustOk;
using testing::ScriptedTransport;

std::string TempPath(const std::string& name) {
  std::string path = "/tmp/strata-agent-turn-test-" + std::to_string(::getpid()) + "-" + name;
  for (const char* suffix : {"", "-wal", "-shm"}) std::remove((path + suffix).c_str());
  return path;
}

AgentConfig CompactingConfig(const std::string& id) {
  AgentConfig c;
  c.identity.id = id;
  c.tokenizer = "estimate";
  c.budget.window = 4000;
  c.budget.reserve_output = 0;
  c.budget.reserve_reasoning = 0;
  c.budget.reserve_headroom = 0;
  c.budget.trigger = BudgetLimit::Fraction(0.7);
  c.budget.target = BudgetLimit::Fraction(0.4);
  c.policy.keep_tool_results = 1;
  c.policy.keep_turns = 1;
  return c;
}

Response ToolCallReply(const std::string& id) {
  Response r;
  r.tool_calls.push_back(ToolCall{id, "read_file", "{\"path\":\"" + id + "\"}"});
  r.finish_reason = "tool_calls";
  r.attempts = 1;
  return r;
}

std::string Output(int i) {
  std::string output;
  for (int line = 0; line < 40; ++line) {
    output += "line " + std::to_string(line) + " of file " + std::to_string(i) + "\n";
  }
  return output;
}

int64_t Transactions(Store& store) { return Must(store.Stats()).write_transactions; }

TEST_CASE("a turn is one store transaction, a compacting one included", "[agent]") {
  const std::string path = TempPath("one.db");
  auto store = Must(OpenSqliteStore(path));
  ScriptedTransport transport;
  AgentServices services;
  services.transport = &transport;
  services.store = store.get();
  auto agent = Must(Agent::Create(CompactingConfig("agent-1"), services));
  MustOk(agent->SetSystemPrompt("You are a test agent."));
  MustOk(agent->AppendUser("Read the files.").status());
  int compactions = 0;
  int breaks = 0;
  int turns = 0;
  for (int i = 0; i < 30 && compactions < 2; ++i) {
    transport.Respond(ToolCallReply("call_" + std::to_string(i)));
    const int64_t before = Transactions(*store);
    Turn turn = Must(agent->Complete());
    ++turns;
    INFO("turn " << i);
    // The reply, the record, the growth point, the cache state, the compaction's changes and
    // events and the break event: one commit.
    CHECK(Transactions(*store) == before + 1);
    compactions += static_cast<int>(turn.compactions.size());
    breaks += turn.prefix_break.has_value() ? 1 : 0;
    CHECK(turn.warnings.empty());
    MustOk(agent->AppendToolResult({"call_" + std::to_string(i), Output(i), false}).status());
  }
  REQUIRE(compactions >= 1);
  CHECK(breaks >= 1);
  // What the turns committed is all there, as single writes used to leave it.
  CHECK(Must(store->RecentRequests("agent-1", 100)).size() == static_cast<size_t>(turns));
  CHECK(Must(store->Growth("agent-1")).size() == static_cast<size_t>(turns));
  CHECK(Must(store->Events("agent-1", "compaction")).size() == static_cast<size_t>(compactions));
  CHECK(Must(store->Events("agent-1", "prefix_break")).size() == static_cast<size_t>(breaks));
  CHECK(agent->record_write_failures() == 0);
  // Reopened, the agent predicts from the committed cache state.
  const int64_t predicted = Must(agent->PredictCachedTokens()).predicted_cached_tokens;
  agent.reset();
  OpenOptions open;
  open.services = services;
  auto reopened = Must(Agent::Open(*store, "agent-1", open));
  CHECK(Must(reopened->PredictCachedTokens()).predicted_cached_tokens == predicted);
}

TEST_CASE("a turn whose commit the store refuses fails, changes nothing and is counted",
          "[agent]") {
  const std::string path = TempPath("refused.db");
  auto inner = Must(OpenSqliteStore(path));
  testing::ForwardingStore store(*inner);
  ScriptedTransport transport;
  AgentServices services;
  services.transport = &transport;
  services.store = &store;
  auto agent = Must(Agent::Create(CompactingConfig("agent-r"), services));
  MustOk(agent->AppendUser("Hello.").status());
  transport.Reply("first");
  MustOk(agent->Complete().status());
  MustOk(agent->AppendUser("Again.").status());
  const ContextSnapshot before = Must(inner->LoadSnapshot("agent-r"));
  const size_t segments = agent->context().Segments().size();
  const size_t records = Must(inner->RecentRequests("agent-r", 100)).size();

  store.refuse_commits = true;
  transport.Reply("second");
  StatusOr<Turn> refused = agent->Complete();
  REQUIRE_FALSE(refused.ok());
  CHECK(refused.status().code() == StatusCode::kUnavailable);
  CHECK_THAT(refused.status().message(), Catch::Contains("refuses the turn's commit"));
  CHECK(agent->context().Segments().size() == segments);  // the reply was undone
  CHECK(Must(inner->LoadSnapshot("agent-r")).segments.size() == before.segments.size());
  CHECK(Must(inner->LoadSnapshot("agent-r")).turn == before.turn);
  // The failed request's record is stored on its own, with the store's error.
  auto stored = Must(inner->RecentRequests("agent-r", 100));
  REQUIRE(stored.size() == records + 1);
  CHECK(stored[0].code == StatusCode::kUnavailable);
  CHECK(agent->record_write_failures() == 1);

  // The record refused too: the turn's status says so, and it is counted.
  store.refuse_records = true;
  transport.Reply("third");
  refused = agent->Complete();
  REQUIRE_FALSE(refused.ok());
  CHECK_THAT(refused.status().message(), Catch::Contains("its request record was not stored either"));
  CHECK(agent->record_write_failures() == 3);

  // Once the store takes writes again the turn goes through.
  store.refuse_commits = false;
  store.refuse_records = false;
  transport.Reply("fourth");
  Turn turn = Must(agent->Complete());
  CHECK(turn.response.content == "fourth");
  CHECK(Must(inner->LoadSnapshot("agent-r")).segments.size() == before.segments.size() + 1);
}

// What the store holds of an agent's context: each segment's id and content.
std::vector<std::string> StoredSegments(Store& store, const std::string& agent_id) {
  std::vector<std::string> out;
  for (const Segment& s : Must(store.LoadSnapshot(agent_id)).segments) {
    out.push_back(s.id + ":" + s.content);
  }
  return out;
}

std::vector<std::string> Contents(const Context& context) {
  std::vector<std::string> out;
  for (const Segment& s : context.Segments()) out.push_back(s.id + ":" + s.content);
  return out;
}

TEST_CASE("before_build's changes and before_commit's state are committed with the turn",
          "[agent]") {
  const std::string path = TempPath("hooks.db");
  auto store = Must(OpenSqliteStore(path));
  ScriptedTransport transport;
  AgentServices services;
  services.transport = &transport;
  services.store = store.get();
  auto agent = Must(Agent::Create(CompactingConfig("agent-h"), services));
  MustOk(agent->SetSystemPrompt("You are a test agent."));
  TurnOptions options;
  std::string user_id;
  options.before_build = [&]() -> Status {
    STRATA_ASSIGN_OR_RETURN(user_id, agent->context().AppendUser("Hello."));
    return Status::Ok();
  };
  options.before_commit = [&](const Turn& turn, TurnWrites* writes) -> Status {
    writes->state.emplace_back("caller.seen", turn.assistant_segment_id);
    return Status::Ok();
  };
  transport.Reply("hi");
  const int64_t before = Transactions(*store);
  Turn turn = Must(agent->Complete(options));
  // The user message, the reply, the record, growth, cache state and the caller's state: one
  // commit.
  CHECK(Transactions(*store) == before + 1);
  const std::vector<std::string> stored = StoredSegments(*store, "agent-h");
  CHECK(std::find(stored.begin(), stored.end(), user_id + ":Hello.") != stored.end());
  CHECK(std::find(stored.begin(), stored.end(), turn.assistant_segment_id + ":hi") != stored.end());
  CHECK(Must(store->GetAgentState("agent-h", "caller.seen")) ==
        std::optional<std::string>(turn.assistant_segment_id));
  CHECK(transport.bodies().back().find("Hello.") != std::string::npos);  // sent with the turn
}

TEST_CASE("a failed turn undoes before_build's changes and stores none of them", "[agent]") {
  const std::string path = TempPath("hooks-fail.db");
  auto store = Must(OpenSqliteStore(path));
  ScriptedTransport transport;
  AgentServices services;
  services.transport = &transport;
  services.store = store.get();
  auto agent = Must(Agent::Create(CompactingConfig("agent-f"), services));
  MustOk(agent->SetSystemPrompt("You are a test agent."));
  MustOk(agent->AppendUser("First.").status());
  transport.Reply("first reply");
  MustOk(agent->Complete().status());
  const std::vector<std::string> memory = Contents(agent->context());
  const std::vector<std::string> stored = StoredSegments(*store, "agent-f");
  const size_t records = Must(store->RecentRequests("agent-f", 100)).size();
  TurnOptions options;
  options.before_build = [&] { return agent->context().AppendUser("Second.").status(); };
  options.before_commit = [&](const Turn&, TurnWrites* writes) -> Status {
    writes->state.emplace_back("caller.seen", "yes");
    return Status::Ok();
  };

  SECTION("the upstream fails") {
    transport.Fail(UnavailableError("upstream down"));
    const int64_t before = Transactions(*store);
    REQUIRE_FALSE(agent->Complete(options).ok());
    // Only the failed request's record is written: no context change, not even the undo's.
    CHECK(Transactions(*store) == before + 1);
    CHECK(Must(store->RecentRequests("agent-f", 100)).size() == records + 1);
  }
  SECTION("before_build fails: nothing is sent or written") {
    options.before_build = [&]() -> Status {
      MustOk(agent->context().AppendUser("Second.").status());
      return InvalidArgumentError("the caller refuses");
    };
    const int64_t before = Transactions(*store);
    StatusOr<Turn> failed = agent->Complete(options);
    REQUIRE_FALSE(failed.ok());
    CHECK(failed.status().message() == "the caller refuses");
    CHECK(Transactions(*store) == before);
    CHECK(Must(store->RecentRequests("agent-f", 100)).size() == records);
  }
  SECTION("before_commit fails: the turn fails whole") {
    options.before_commit = [](const Turn&, TurnWrites*) -> Status {
      return FailedPreconditionError("the caller's state cannot be kept");
    };
    transport.Reply("second reply");
    const int64_t before = Transactions(*store);
    StatusOr<Turn> failed = agent->Complete(options);
    REQUIRE_FALSE(failed.ok());
    CHECK(failed.status().code() == StatusCode::kFailedPrecondition);
    CHECK(Transactions(*store) == before + 1);  // the failed request's record
  }
  CHECK(Contents(agent->context()) == memory);
  CHECK(StoredSegments(*store, "agent-f") == stored);
  CHECK_FALSE(Must(store->GetAgentState("agent-f", "caller.seen")).has_value());
  // The retry leaves one "Second.".
  options.before_commit = nullptr;
  options.before_build = [&] { return agent->context().AppendUser("Second.").status(); };
  transport.Reply("second reply");
  MustOk(agent->Complete(options).status());
  int asked = 0;
  for (const Segment& s : agent->context().Segments()) asked += s.content == "Second.";
  CHECK(asked == 1);
}

TEST_CASE("undo_to_caller_mark undoes several turns together", "[agent]") {
  const std::string path = TempPath("caller-mark.db");
  auto store = Must(OpenSqliteStore(path));
  ScriptedTransport transport;
  AgentServices services;
  services.transport = &transport;
  services.store = store.get();
  auto agent = Must(Agent::Create(CompactingConfig("agent-m"), services));
  MustOk(agent->SetSystemPrompt("You are a test agent."));
  MustOk(agent->AppendUser("First.").status());
  transport.Reply("first reply");
  MustOk(agent->Complete().status());

  TurnOptions options;
  options.undo_to_caller_mark = true;
  // Without a mark the option is refused before anything happens.
  StatusOr<Turn> unmarked = agent->Complete(options);
  REQUIRE_FALSE(unmarked.ok());
  CHECK(unmarked.status().code() == StatusCode::kFailedPrecondition);

  MustOk(agent->AppendUser("Second.").status());
  const std::vector<std::string> memory = Contents(agent->context());
  const std::vector<std::string> stored = StoredSegments(*store, "agent-m");
  agent->context().Mark();
  transport.Respond(ToolCallReply("call_1"));
  Turn first = Must(agent->Complete(options));
  CHECK(agent->context().HasMark());                   // kept for the next step
  CHECK(StoredSegments(*store, "agent-m") != stored);  // the first turn is committed
  options.before_build = [&] {
    return agent->context().AppendToolResult({"call_1", "file contents", false}).status();
  };
  transport.Fail(UnavailableError("upstream down"));
  REQUIRE_FALSE(agent->Complete(options).ok());
  // Both turns and the tool result between them are undone, in memory and in the store.
  CHECK(Contents(agent->context()) == memory);
  CHECK(StoredSegments(*store, "agent-m") == stored);
  CHECK_FALSE(agent->context().HasMark());
  // Reopened, the agent holds what it held at the mark.
  agent.reset();
  OpenOptions open;
  open.services = services;
  auto reopened = Must(Agent::Open(*store, "agent-m", open));
  CHECK(Contents(reopened->context()) == memory);
}

TEST_CASE("the Agent and the Client run one turn: the same prediction and the same break reasons",
          "[agent]") {
  ScriptedTransport agent_transport;
  ScriptedTransport client_transport;
  AgentConfig c;
  c.identity.id = "twin";
  c.tokenizer = "estimate";
  c.chat_template = "";  // both render with the default GLM-5.3 template
  c.cache.block_tokens = 16;
  c.recall.expose_tool = false;  // the same segments in both contexts
  AgentServices services;
  services.transport = &agent_transport;
  auto agent = Must(Agent::Create(c, services));
  ClientOptions options;
  options.transport = &client_transport;
  options.backend = Backend::kVllm;
  options.cache = c.cache;
  auto client = Must(Client::Create(options));
  ContextOptions context_options = agent->context().options();
  context_options.journal = nullptr;
  auto context = Must(Context::Create(context_options));

  auto both = [&](const std::function<Status(Context&)>& op) {
    MustOk(op(agent->context()));
    MustOk(op(*context));
  };
  both([](Context& x) { return x.SetSystemPrompt(std::string(2000, 's')); });
  both([](Context& x) {
    return x.PutDocument(Layer::kDocs, Document{"guide", std::string(2000, 'g'), "v1", 0}).status();
  });
  for (int i = 0; i < 3; ++i) {
    both([&](Context& x) { return x.AppendUser("Question " + std::to_string(i)).status(); });
    if (i == 2) {
      both([](Context& x) {
        return x.PutDocument(Layer::kDocs, Document{"guide", std::string(2100, 'h'), "v2", 0})
            .status();
      });
    }
    agent_transport.Reply("Answer " + std::to_string(i));
    client_transport.Reply("Answer " + std::to_string(i));
    Turn turn = Must(agent->Complete());
    Completion done = Must(client->Complete(*context));
    INFO("turn " << i);
    CHECK(turn.record.cached_tokens_predicted == done.record.cached_tokens_predicted);
    CHECK(turn.record.input_tokens == done.record.input_tokens);
    CHECK(turn.prefix_break.has_value() == done.prefix_break.has_value());
    if (i == 2) {
      REQUIRE(done.prefix_break.has_value());
      CHECK(done.prefix_break->reason == "doc version change (v1 -> v2)");
    }
    if (turn.prefix_break && done.prefix_break) {
      CHECK(turn.prefix_break->reason == done.prefix_break->reason);
      CHECK(turn.prefix_break->segment_id == done.prefix_break->segment_id);
      CHECK(turn.prefix_break->layer == done.prefix_break->layer);
      CHECK(turn.prefix_break->previous_prompt_tokens == done.prefix_break->previous_prompt_tokens);
    }
    // One request-id scheme: "<agent>-<6 hex digits>-<n>".
    for (const std::string& id : {turn.record.request_id, done.record.request_id}) {
      CHECK(id.size() == std::string("twin-xxxxxx-1").size());
      CHECK(id.substr(id.size() - 2) == "-" + std::to_string(i + 1));
    }
  }
  CHECK(agent_transport.bodies().back().size() > 0);
  REQUIRE(agent->context().Segments().size() == context->Segments().size());
}

// A policy that plans at every build, noting the previous request it was handed, and masks the
// segment `mask` names when one is set (then the build renders a second time).
class PreviousRequestNotingPolicy final : public CompactionPolicy {
 public:
  std::string Name() const override { return "noting@1"; }
  bool ShouldCompact(const CompactionInput&) const override { return true; }
  StatusOr<HistoryEdit> Plan(const CompactionInput& input) override {
    previous.push_back(input.summary_request != nullptr ? std::string(input.summary_request->body)
                                                        : std::string("(none)"));
    HistoryEdit edit;
    if (!mask.empty()) edit.edits.push_back({mask, SegmentEdit::Action::kMask, "[masked]"});
    mask.clear();
    return edit;
  }
  std::vector<std::string> previous;
  std::string mask;
};

// An agent planning every build with `policy`, under a budget far above its requests.
std::unique_ptr<Agent> PlanningAgent(ScriptedTransport& transport, CompactionPolicy& policy,
                                     const std::string& id) {
  AgentServices services;
  services.transport = &transport;
  services.policy = &policy;
  AgentConfig config = CompactingConfig(id);
  config.budget.window = 1000000;
  return Must(Agent::Create(config, services));
}

// A policy noting where the previous request it is handed lies in memory.
class PreviousRequestMemoryPolicy final : public CompactionPolicy {
 public:
  std::string Name() const override { return "memory@1"; }
  bool ShouldCompact(const CompactionInput&) const override { return true; }
  StatusOr<HistoryEdit> Plan(const CompactionInput& input) override {
    if (input.summary_request != nullptr && !input.summary_request->body.empty())
      memory.push_back(input.summary_request->body.data());
    return HistoryEdit{};
  }
  std::vector<const char*> memory;
};

// The agent's copy of the request it sent has room to grow from the first: the turns after it
// append to it where it is instead of moving it whole to larger memory.
TEST_CASE("the agent's copy of its last request is continued where it lies", "[agent]") {
  ScriptedTransport transport;
  PreviousRequestMemoryPolicy policy;
  std::unique_ptr<Agent> agent = PlanningAgent(transport, policy, "agent-last-memory");
  MustOk(agent->SetSystemPrompt("You are a test agent. " + std::string(20000, 'x')));
  MustOk(agent->AppendUser("Read the files.").status());
  for (int i = 0; i < 6; ++i) {
    transport.Respond(ToolCallReply("call_" + std::to_string(i)));
    MustOk(agent->Complete().status());
    MustOk(
        agent->AppendToolResult({"call_" + std::to_string(i), "file " + std::to_string(i), false})
            .status());
  }
  REQUIRE(policy.memory.size() >= 5);
  for (size_t k = 1; k < policy.memory.size(); ++k) {
    INFO("plan " << k);
    CHECK(policy.memory[k] == policy.memory[0]);
  }
}

// The previous request a turn's planning is handed is the body the turn before sent, whatever
// changed between them: appends, an edit in the middle, a compaction inside the build (which
// renders twice), a preview, a volatile item, a new system prompt. (The agent keeps it by
// continuing its copy from the bytes the build says are unchanged.)
TEST_CASE("each turn's planning is handed exactly the body the turn before sent", "[agent]") {
  ScriptedTransport transport;
  PreviousRequestNotingPolicy policy;
  std::unique_ptr<Agent> agent = PlanningAgent(transport, policy, "agent-previous");
  MustOk(agent->SetSystemPrompt("You are a test agent."));
  MustOk(agent->AppendUser("Read the files.").status());
  std::vector<std::string> sent;
  std::vector<std::string> results;
  for (int i = 0; i < 10; ++i) {
    INFO("turn " << i);
    // Turns 7 and 8: the build masks the result appended two turns before, near the end; before
    // turn 8 an edit masks an earlier one too, so that the build's first render shares less with
    // the turn before than its second shares with its first.
    if (i == 7 || i == 8) policy.mask = results[results.size() - 2];
    if (i == 8) {
      HistoryEdit mask;
      mask.edits.push_back({results[1], SegmentEdit::Action::kMask, "[masked]"});
      MustOk(agent->context().ApplyEdit(mask, "test", "mask").status());
    }
    if (i == 3) {  // mask the first tool result: the history changes in its middle
      HistoryEdit mask;
      mask.edits.push_back(
          {agent->context().Fingerprints()[4].id, SegmentEdit::Action::kMask, "[masked]"});
      MustOk(agent->context().ApplyEdit(mask, "test", "mask").status());
    }
    if (i == 4) MustOk(agent->PreviewRequest().status());
    if (i == 5) MustOk(agent->context().SetVolatile("now", "12:00"));
    if (i == 6) MustOk(agent->SetSystemPrompt("You are another test agent."));
    transport.Respond(ToolCallReply("call_" + std::to_string(i)));
    const size_t plans = policy.previous.size();  // a preview plans too, on a copy
    Turn turn = Must(agent->Complete());
    REQUIRE(policy.previous.size() == plans + 1);
    CHECK(policy.previous.back() == (i == 0 ? std::string() : sent.back()));
    CHECK(turn.compactions.size() == (i == 7 || i == 8 ? 1u : 0u));
    sent.push_back(turn.body);
    results.push_back(
        Must(agent->AppendToolResult({"call_" + std::to_string(i), Output(i), false})));
  }
}


// Agent::Recycle: each turn's request is written into the memory of the turn handed back, and the
// requests sent are those of an agent that is handed nothing back, through edits, a compaction
// (two renders) and a preview in between.
TEST_CASE("a recycled turn's memory holds the next request and the requests sent are unchanged",
          "[agent]") {
  constexpr size_t kLarge = size_t{16} << 20;  // far above any body here
  auto run = [](bool recycle, std::vector<size_t>* capacities) {
    ScriptedTransport transport;
    PreviousRequestNotingPolicy policy;
    AgentServices services;
    services.transport = &transport;
    services.policy = &policy;
    AgentConfig config = CompactingConfig("agent-recycled");
    config.budget.window = 1000000;
    auto agent = Must(Agent::Create(config, services));
    MustOk(agent->SetSystemPrompt("You are a test agent."));
    MustOk(agent->AppendUser("Read the files.").status());
    std::vector<std::string> results;
    for (int i = 0; i < 6; ++i) {
      if (i == 2) {
        HistoryEdit mask;
        mask.edits.push_back({results[0], SegmentEdit::Action::kMask, "[masked]"});
        MustOk(agent->context().ApplyEdit(mask, "test", "mask").status());
      }
      if (i == 3) MustOk(agent->PreviewRequest().status());
      if (i == 4) policy.mask = results[results.size() - 2];
      transport.Respond(ToolCallReply("call_" + std::to_string(i)));
      Turn turn = Must(agent->Complete());
      CHECK(turn.compactions.size() == (i == 4 ? 1u : 0u));
      capacities->push_back(turn.body.capacity());
      if (recycle) {
        // Memory no render of these would ask for (after turn 3, to replace what its preview took).
        if (i == 0 || i == 3) turn.body.reserve(kLarge);
        agent->Recycle(std::move(turn));
      }
      results.push_back(
          Must(agent->AppendToolResult({"call_" + std::to_string(i), Output(i), false})));
    }
    // Without the request id, which names the agent's own process-unique prefix.
    std::vector<std::string> bodies = transport.bodies();
    for (std::string& body : bodies) body = body.substr(0, body.rfind(",\"request_id\":"));
    return bodies;
  };
  std::vector<size_t> recycled_capacities, fresh_capacities;
  const std::vector<std::string> recycled = run(true, &recycled_capacities);
  const std::vector<std::string> fresh = run(false, &fresh_capacities);
  REQUIRE(recycled.size() == 6);
  CHECK(recycled == fresh);
  for (size_t i = 1; i < recycled_capacities.size(); ++i) {
    INFO("turn " << i);
    CHECK(fresh_capacities[i] < kLarge);
    // A preview before turn 3 takes the memory handed back after turn 2 (it is a render too).
    CHECK((recycled_capacities[i] >= kLarge) == (i != 3));
  }
}

// Agent::RecycleUnchanged: the bytes of a turn handed back as it was are kept, and only what the
// next request adds is written. Shown by a byte changed in place, which the next request keeps
// (the bytes are trusted, not compared), and which Recycle() overwrites.
TEST_CASE("a turn handed back unchanged keeps its bytes and the next request writes what it adds",
          "[agent]") {
  ScriptedTransport transport;
  AgentServices services;
  services.transport = &transport;
  AgentConfig config = CompactingConfig("agent-unchanged");
  config.budget.window = 1000000;  // no compaction here
  auto agent = Must(Agent::Create(config, services));
  MustOk(agent->SetSystemPrompt("You are a test agent."));
  MustOk(agent->AppendUser("Read the files.").status());
  // Marks the system prompt in `body` without changing its size.
  auto scribble = [](std::string& body) {
    const size_t at = body.find("You are a test agent.");
    REQUIRE(at != std::string::npos);
    body.replace(at, 21, "YOU ARE A TEST AGENT.");
  };
  int call = 0;
  auto next_turn = [&] {
    const std::string id = "call_" + std::to_string(call++);
    transport.Respond(ToolCallReply(id));
    Turn turn = Must(agent->Complete());
    MustOk(agent->AppendToolResult({id, Output(call), false}).status());
    return turn;
  };
  Turn turn = next_turn();
  CHECK(turn.render_serial != 0);
  // Unchanged: the next request is the one an agent handed nothing back sends.
  const size_t first = turn.body.size();
  agent->RecycleUnchanged(std::move(turn));
  turn = next_turn();
  CHECK(turn.body.size() > first);
  CHECK(turn.body.find("You are a test agent.") != std::string::npos);
  // Changed in place and handed back as unchanged: the changed byte is among those kept.
  scribble(turn.body);
  agent->RecycleUnchanged(std::move(turn));
  turn = next_turn();
  CHECK(turn.body.find("YOU ARE A TEST AGENT.") != std::string::npos);
  CHECK(transport.bodies().back() == turn.body);  // and so it was sent
  // Recycle() lends only the memory: the body is written whole again.
  agent->Recycle(std::move(turn));
  turn = next_turn();
  CHECK(turn.body.find("You are a test agent.") != std::string::npos);
  // A render between (a preview) makes the turn's body an earlier render's: written whole.
  scribble(turn.body);
  MustOk(agent->PreviewRequest().status());
  agent->RecycleUnchanged(std::move(turn));
  turn = next_turn();
  CHECK(turn.body.find("You are a test agent.") != std::string::npos);
}

}  // namespace
}  // namespace strata
