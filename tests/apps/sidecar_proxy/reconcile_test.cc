// Reconciling an OpenAI client's whole message list with an agent's stored history: appends,
// edits and truncations (replace from the first difference), compacted histories, persistence.
#include "reconcile.h"

#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstdio>
#include <map>
#include <nlohmann/json.hpp>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "strata/store.h"
#include "testing/scripted_transport.h"
#include "testing/status_testing.h"

namespace strata::sidecar {
namespace {

using json = nlohmann::json;
using strata::testing::ScriptedTransport;

using strata::testing::Must;

std::string TempPath(const std::string& name) {
  std::string path = "/tmp/strata-reconcile-test-" + std::to_string(::getpid()) + "-" + name;
  for (const char* suffix : {"", "-wal", "-shm"}) std::remove((path + suffix).c_str());
  return path;
}

AgentConfig TestConfig(const std::string& id) {
  AgentConfig c;
  c.identity.id = id;
  c.tokenizer = "estimate";
  c.budget.enforce = false;
  c.recall.expose_tool = false;
  c.cache.block_tokens = 4;  // short test conversations still fill prefix-cache blocks
  return c;
}

json User(const std::string& text) { return {{"role", "user"}, {"content", text}}; }
json System(const std::string& text) { return {{"role", "system"}, {"content", text}}; }
json Tool(const std::string& id, const std::string& text) {
  return {{"role", "tool"}, {"tool_call_id", id}, {"content", text}};
}
// An assistant message the way the openai npm client hands it back (null content, refusal, ...).
json AssistantCalls(const std::vector<std::pair<std::string, std::string>>& calls) {
  json list = json::array();
  for (const auto& [id, args] : calls) {
    list.push_back({{"id", id},
                    {"type", "function"},
                    {"function", {{"name", "read_file"}, {"arguments", args}}}});
  }
  return {{"role", "assistant"}, {"content", nullptr}, {"refusal", nullptr}, {"tool_calls", list}};
}
json AssistantText(const std::string& text) {
  return {{"role", "assistant"},
          {"content", text},
          {"refusal", nullptr},
          {"annotations", json::array()}};
}

Response CallsReply(const std::vector<std::pair<std::string, std::string>>& calls) {
  Response r;
  for (const auto& [id, args] : calls) r.tool_calls.push_back(ToolCall{id, "read_file", args});
  r.finish_reason = "tool_calls";
  r.attempts = 1;
  return r;
}
Response TextReply(const std::string& text) {
  Response r;
  r.content = text;
  r.finish_reason = "stop";
  r.attempts = 1;
  return r;
}

// Rendered history of the agent as (role-ish kind, content) strings, e.g. "user:hi".
std::vector<std::string> RenderedHistory(const Agent& agent) {
  std::vector<std::string> out;
  for (const Segment& s : agent.context().Segments()) {
    if (s.layer != Layer::kHistory) continue;
    if (s.state != SegmentState::kLive && s.state != SegmentState::kMasked) continue;
    std::string text = std::string(SegmentKindName(s.kind)) + ":" + s.content;
    for (const ToolCall& c : s.tool_calls) text += "[" + c.id + "]";
    out.push_back(text);
  }
  return out;
}

// One proxy request: reconcile, complete with the next scripted answer, record the reply.
struct Harness {
  ScriptedTransport transport;
  std::unique_ptr<Agent> agent;
  ClientView view;

  explicit Harness(const std::string& id, Store* store = nullptr) {
    AgentServices services;
    services.transport = &transport;
    services.store = store;
    agent = Must(Agent::Create(TestConfig(id), services));
  }
  ReconcileOutcome Send(const json& messages, Response reply) {
    ReconcileOutcome outcome = Must(Reconcile(Must(ParseChatMessages(messages)), *agent, &view));
    transport.Respond(std::move(reply));
    Turn turn = Must(agent->Complete());
    RecordReply(turn, &view);
    return outcome;
  }
};

TEST_CASE("new trailing messages are appended, the client's echo of a reply matches it",
          "[sidecar][reconcile]") {
  Harness h("append");
  json messages = json::array({System("You read files."), User("Read a.txt")});
  ReconcileOutcome first = h.Send(messages, CallsReply({{"call_1", R"({"path":"a.txt"})"}}));
  CHECK(first.appended == 1);
  CHECK(first.system_changed);
  CHECK_FALSE(first.replaced);

  messages.push_back(AssistantCalls({{"call_1", R"({"path":"a.txt"})"}}));
  messages.push_back(Tool("call_1", "alpha"));
  ReconcileOutcome second = h.Send(messages, TextReply("a.txt says alpha"));
  CHECK(second.kept == 2);  // the user message and the reply as echoed (null content, refusal)
  CHECK(second.appended == 1);
  CHECK_FALSE(second.replaced);
  CHECK_FALSE(second.system_changed);

  messages.push_back(AssistantText("a.txt says alpha"));
  messages.push_back(User("Thanks"));
  ReconcileOutcome third = h.Send(messages, TextReply("You're welcome"));
  CHECK(third.kept == 4);
  CHECK(third.appended == 1);
  CHECK(RenderedHistory(*h.agent) ==
        std::vector<std::string>{"user:Read a.txt", "tool_call:[call_1]", "tool_result:alpha",
                                 "assistant:a.txt says alpha", "user:Thanks",
                                 "assistant:You're welcome"});
  // Each request sent upstream starts with the previous request's history bytes.
  const std::vector<std::string> bodies = h.transport.bodies();
  REQUIRE(bodies.size() == 3);
  const std::string second_body = bodies[1];
  CHECK(bodies[2].find(R"("content":"alpha")") != std::string::npos);
  const size_t history_end = second_body.find(R"("content":"alpha")");
  REQUIRE(history_end != std::string::npos);
  CHECK(bodies[2].compare(0, history_end, second_body, 0, history_end) == 0);
}

TEST_CASE("tool-call arguments compare as JSON values and real changes still differ",
          "[sidecar][reconcile]") {
  auto digest = [](const std::string& args) {
    ParsedChat chat = Must(ParseChatMessages(
        json::array({User("go"), AssistantCalls({{"call_1", args}}), Tool("call_1", "ok")})));
    return MessageDigest(*chat.history[1]);
  };
  // The model's bytes and LangChain.js's / the Agents SDK's re-serialization of the same value.
  CHECK(digest(R"({"city": "Paris", "days": 2.0})") == digest(R"({"days":2,"city":"Paris"})"));
  CHECK(digest(R"({"name": "caf\u00e9"})") == digest("{\"name\":\"caf\xC3\xA9\"}"));
  CHECK(digest("") == digest("{}"));
  CHECK(digest("  ") == digest("{}"));
  // Another value, another key, or text that is not JSON changed by a byte: a real difference.
  CHECK(digest(R"({"city": "Paris"})") != digest(R"({"city":"Lyon"})"));
  CHECK(digest(R"({"city": "Paris"})") != digest(R"({"town":"Paris"})"));
  CHECK(digest(R"({"n": 2.5})") != digest(R"({"n":2})"));
  CHECK(digest("not json") != digest("not  json"));
  CHECK(CanonicalArguments(R"({ "b": [1, 2.0, {"z": null, "a": true}], "a": "x" })") ==
        R"({"a":"x","b":[1,2,{"a":true,"z":null}]})");
  CHECK(CanonicalArguments("{oops") == "{oops");
}

TEST_CASE("the Agents SDK's two messages for one reply read as that reply",
          "[sidecar][reconcile]") {
  // OpenAIChatCompletionsModel sends a reply with text and tool calls back as a text message (its
  // content as parts) and then a message with the calls and no content.
  const json split = json::array(
      {User("go"),
       {{"role", "assistant"},
        {"content", json::array({{{"type", "text"}, {"text", "Reading it."}, {"role", "x"}}})}},
       {{"role", "assistant"},
        {"content", nullptr},
        {"tool_calls", AssistantCalls({{"call_1", R"({"path":"a"})"}})["tool_calls"]}},
       Tool("call_1", "ok")});
  ParsedChat chat = Must(ParseChatMessages(split));
  REQUIRE(chat.history.size() == 3);
  CHECK(chat.history[1]->content == "Reading it.");
  REQUIRE(chat.history[1]->tool_calls.size() == 1);
  CHECK(chat.history[2]->tool_call_id == "call_1");
  Response reply;
  reply.content = "Reading it.";
  reply.tool_calls = {{"call_1", "read_file", R"({"path": "a"})"}};
  CHECK(MessageDigest(*chat.history[1]) == ReplyDigest(reply));
  CHECK(chat.history[1]->digest == ReplyDigest(reply));  // the merged message's, not its text's
  // Two text messages in a row stay two messages.
  ParsedChat two = Must(ParseChatMessages(json::array(
      {User("go"), AssistantText("one"), AssistantText("two"), User("and?")})));
  CHECK(two.history.size() == 4);
}

TEST_CASE("an edited message replaces the history from the first difference",
          "[sidecar][reconcile]") {
  const std::string path = TempPath("edit.db");
  auto store = Must(OpenSqliteStore(path));
  Harness h("edit", store.get());
  json messages = json::array({User("first question")});
  h.Send(messages, TextReply("first answer"));
  messages.push_back(AssistantText("first answer"));
  messages.push_back(User("second question"));
  h.Send(messages, TextReply("second answer"));

  // The client edits its second question (the reply to it is dropped by the client too).
  json edited = json::array(
      {User("first question"), AssistantText("first answer"), User("second question, rephrased")});
  const ClientView before_edit = h.view;
  ReconcileOutcome outcome = Must(Reconcile(Must(ParseChatMessages(edited)), *h.agent, &h.view));
  CHECK(outcome.replaced);
  CHECK(outcome.kept == 2);
  CHECK(outcome.first_difference == 2);
  CHECK(outcome.evicted_segments == 2);  // the old question and its answer
  CHECK(outcome.appended == 1);
  CHECK(outcome.reason == "messages[2] (user) differs from what the client sent before");
  CHECK(RenderedHistory(*h.agent) == std::vector<std::string>{"user:first question",
                                                              "assistant:first answer",
                                                              "user:second question, rephrased"});
  // What was replaced is kept for recall, and the store has the event.
  size_t evicted = 0;
  for (const Segment& s : h.agent->context().Segments()) {
    if (s.state == SegmentState::kEvicted) {
      ++evicted;
      CHECK(s.policy == kReconcilePolicy);
      CHECK(h.agent->context().Recall(s.recall_id).ok());
    }
  }
  CHECK(evicted == 2);
  auto events = Must(store->Events("edit", "history_replaced"));
  REQUIRE(events.size() == 1);
  CHECK(json::parse(events[0].payload_json)["first_difference"] == 2);

  // A view saved before the replacement (a crash before the new one was saved) is cut where the
  // replacement evicted: the agent ends up the same, nothing duplicated.
  ClientView stale = before_edit;
  ReconcileOutcome again = Must(Reconcile(Must(ParseChatMessages(edited)), *h.agent, &stale));
  CHECK(again.kept == 2);
  CHECK(again.reason == "1 history message the client did not send");
  CHECK(RenderedHistory(*h.agent) == std::vector<std::string>{"user:first question",
                                                              "assistant:first answer",
                                                              "user:second question, rephrased"});
  CHECK(stale.entries().size() == 3);

  // The next request reports the prefix break.
  h.transport.Respond(TextReply("rephrased answer"));
  Turn turn = Must(h.agent->Complete());
  REQUIRE(turn.prefix_break.has_value());
  CHECK(turn.prefix_break->reason.find("history") != std::string::npos);
}

TEST_CASE("a view naming its segments out of the history's order is trimmed by what exists",
          "[sidecar][reconcile]") {
  Harness h("out-of-order");
  json messages = json::array({User("q1")});
  h.Send(messages, TextReply("a1"));
  messages.push_back(AssistantText("a1"));
  messages.push_back(User("q2"));
  h.Send(messages, TextReply("a2"));
  messages.push_back(AssistantText("a2"));
  messages.push_back(User("q3"));
  REQUIRE(h.view.entries().size() == 4);
  // The third entry names the first message's segment (before the second's): it exists, so the
  // view is not cut there, and the one after it, found by its id, is kept too.
  ClientView reordered;
  for (size_t i = 0; i < 4; ++i) {
    ClientView::Entry e = h.view.entries()[i];
    if (i == 2) e.segment_id = h.view.entries()[0].segment_id;
    reordered.Append(e);
  }
  ReconcileOutcome kept = Must(Reconcile(Must(ParseChatMessages(messages)), *h.agent, &reordered));
  CHECK_FALSE(kept.replaced);
  CHECK(kept.kept == 4);
  CHECK(kept.appended == 1);
  // An entry naming no segment of the agent cuts the view there, wherever it is.
  h.transport.Respond(TextReply("a3"));
  RecordReply(Must(h.agent->Complete()), &reordered);
  ClientView missing;
  for (size_t i = 0; i < reordered.entries().size(); ++i) {
    ClientView::Entry e = reordered.entries()[i];
    if (i == 1) e.segment_id = "no-such-segment";
    missing.Append(e);
  }
  messages.push_back(AssistantText("a3"));
  messages.push_back(User("q4"));
  ReconcileOutcome cut = Must(Reconcile(Must(ParseChatMessages(messages)), *h.agent, &missing));
  CHECK(cut.replaced);
  CHECK(cut.kept == 1);
}

TEST_CASE("a truncated history (a retry without the reply) regenerates the answer",
          "[sidecar][reconcile]") {
  Harness h("retry");
  json messages = json::array({User("question")});
  h.Send(messages, TextReply("an answer the client never received"));
  ReconcileOutcome outcome = Must(Reconcile(Must(ParseChatMessages(messages)), *h.agent, &h.view));
  CHECK(outcome.replaced);
  CHECK(outcome.reason == "history truncated from 2 to 1 messages");
  CHECK(outcome.evicted_segments == 1);
  CHECK(outcome.appended == 0);
  CHECK(RenderedHistory(*h.agent) == std::vector<std::string>{"user:question"});
  CHECK(h.view.entries().size() == 1);
}

TEST_CASE("a history replaced while the last reply's tool calls are open", "[sidecar][reconcile]") {
  Harness h("open-calls");
  h.Send(json::array({User("read a")}), CallsReply({{"c1", R"({"path":"a"})"}}));
  REQUIRE(h.agent->context().OpenToolCalls() == std::vector<std::string>{"c1"});
  // The client never answers c1: it edits its question instead.
  ReconcileOutcome outcome =
      Must(Reconcile(Must(ParseChatMessages(json::array({User("read b")}))), *h.agent, &h.view));
  CHECK(outcome.replaced);
  CHECK(outcome.evicted_segments == 3);  // the question, the call and its placeholder result
  CHECK(h.agent->context().OpenToolCalls().empty());
  CHECK(RenderedHistory(*h.agent) == std::vector<std::string>{"user:read b"});
}

TEST_CASE("an edit inside a tool-call group replaces the whole group", "[sidecar][reconcile]") {
  Harness h("group");
  json messages = json::array({User("read two files")});
  h.Send(messages, CallsReply({{"c1", R"({"path":"a"})"}, {"c2", R"({"path":"b"})"}}));
  messages.push_back(AssistantCalls({{"c1", R"({"path":"a"})"}, {"c2", R"({"path":"b"})"}}));
  messages.push_back(Tool("c1", "A"));
  messages.push_back(Tool("c2", "B"));
  h.Send(messages, TextReply("done"));

  messages.erase(messages.end() - 1);
  messages.push_back(Tool("c2", "B, corrected"));
  ReconcileOutcome outcome = Must(Reconcile(Must(ParseChatMessages(messages)), *h.agent, &h.view));
  CHECK(outcome.replaced);
  CHECK(outcome.reason == "messages[3] (tool) differs from what the client sent before");
  CHECK(outcome.first_difference == 1);  // the assistant message that made the calls
  CHECK(outcome.evicted_segments == 4);  // calls, two results, the answer
  CHECK(outcome.appended == 3);
  CHECK(RenderedHistory(*h.agent) == std::vector<std::string>{"user:read two files",
                                                              "tool_call:[c1][c2]", "tool_result:A",
                                                              "tool_result:B, corrected"});
}

TEST_CASE("a compacted history still matches what the client sends", "[sidecar][reconcile]") {
  Harness h("compacted");
  json messages = json::array({User("read a")});
  h.Send(messages, CallsReply({{"c1", R"({"path":"a"})"}}));
  messages.push_back(AssistantCalls({{"c1", R"({"path":"a"})"}}));
  messages.push_back(Tool("c1", std::string(2000, 'x')));
  h.Send(messages, TextReply("long file"));

  // Compaction masks the tool result: the stored context no longer says what the client sends.
  std::string result_id;
  for (const Segment& s : h.agent->context().Segments()) {
    if (s.kind == SegmentKind::kToolResult) result_id = s.id;
  }
  HistoryEdit mask;
  mask.edits.push_back({result_id, SegmentEdit::Action::kMask, "[masked: 2000 bytes]"});
  REQUIRE(h.agent->context().ApplyEdit(mask, "test@1", "test").ok());

  messages.push_back(AssistantText("long file"));
  messages.push_back(User("and now?"));
  ReconcileOutcome outcome = h.Send(messages, TextReply("now this"));
  CHECK_FALSE(outcome.replaced);
  CHECK(outcome.kept == 4);
  CHECK(outcome.appended == 1);
  CHECK(RenderedHistory(*h.agent)[2] == "tool_result:[masked: 2000 bytes]");

  SECTION("an edit before a summarized span appends the summarized messages again") {
    std::vector<std::string> first_three;  // the question, the call and its (masked) result
    for (const Segment& s : h.agent->context().Segments()) {
      if (s.layer == Layer::kHistory && first_three.size() < 3) first_three.push_back(s.id);
    }
    HistoryEdit summary;
    summary.summaries.push_back({first_three, "The user asked to read a."});
    REQUIRE(h.agent->context().ApplyEdit(summary, "test@1", "test").ok());
    // The client edits the tool result: its call group is inside the summary, so the summary goes
    // and the client's messages from the first one it holds are appended again.
    json edited = messages;
    edited[2] = Tool("c1", "short now");
    edited.erase(edited.begin() + 3, edited.end());
    ReconcileOutcome again = Must(Reconcile(Must(ParseChatMessages(edited)), *h.agent, &h.view));
    CHECK(again.replaced);
    CHECK(again.kept == 0);
    CHECK(again.appended == 3);
    CHECK(RenderedHistory(*h.agent) ==
          std::vector<std::string>{"user:read a", "tool_call:[c1]", "tool_result:short now"});
  }
}

TEST_CASE("history the client never sent is replaced by the client's", "[sidecar][reconcile]") {
  Harness h("foreign");
  json messages = json::array({User("hello")});
  h.Send(messages, TextReply("hi"));
  REQUIRE(h.agent->AppendUser("appended by someone else").ok());
  messages.push_back(AssistantText("hi"));
  messages.push_back(User("how are you?"));
  ReconcileOutcome outcome = Must(Reconcile(Must(ParseChatMessages(messages)), *h.agent, &h.view));
  CHECK(outcome.replaced);
  CHECK(outcome.kept == 2);
  CHECK(outcome.evicted_segments == 1);
  CHECK(outcome.reason == "1 history message the client did not send");
  CHECK(RenderedHistory(*h.agent) ==
        std::vector<std::string>{"user:hello", "assistant:hi", "user:how are you?"});
}

TEST_CASE("a changed system message replaces the system prompt, not the history",
          "[sidecar][reconcile]") {
  Harness h("system");
  json messages = json::array({System("v1"), User("q")});
  h.Send(messages, TextReply("a"));
  messages[0] = System("v2");
  messages.push_back(AssistantText("a"));
  messages.push_back(User("q2"));
  ReconcileOutcome outcome = h.Send(messages, TextReply("a2"));
  CHECK(outcome.system_changed);
  CHECK_FALSE(outcome.replaced);
  CHECK(outcome.appended == 1);
  CHECK(h.transport.bodies().back().find("v2") != std::string::npos);
}

TEST_CASE("the client view is persisted with the agent and survives a reopen",
          "[sidecar][reconcile]") {
  const std::string path = TempPath("persist.db");
  json messages = json::array({User("q1")});
  {
    auto store = Must(OpenSqliteStore(path));
    Harness h("persist", store.get());
    h.Send(messages, TextReply("a1"));
    REQUIRE(SaveClientView(*h.agent, h.view).ok());
  }
  auto store = Must(OpenSqliteStore(path));
  ScriptedTransport transport;
  OpenOptions options;
  options.services.transport = &transport;
  auto agent = Must(Agent::Open(*store, "persist", options));
  ClientView view = Must(LoadClientView(*agent));
  REQUIRE(view.entries().size() == 2);
  CHECK(view.entries()[1].role == "assistant");
  messages.push_back(AssistantText("a1"));
  messages.push_back(User("q2"));
  ReconcileOutcome outcome = Must(Reconcile(Must(ParseChatMessages(messages)), *agent, &view));
  CHECK_FALSE(outcome.replaced);
  CHECK(outcome.appended == 1);

  CHECK_FALSE(ClientView::FromJson("{\"version\":2}").ok());
  CHECK_FALSE(ClientView::FromJson("[1,2]").ok());
  REQUIRE(store->PutAgentState("persist", kClientViewKey, "not json").ok());
  StatusOr<ClientView> broken = LoadClientView(*agent);
  CHECK(broken.status().code() == StatusCode::kDataLoss);
}

// The keys a view's Writes() stores, in order.
std::vector<std::string> Keys(const std::vector<std::pair<std::string, std::string>>& writes) {
  std::vector<std::string> keys;
  for (const auto& [key, value] : writes) keys.push_back(key);
  return keys;
}

TEST_CASE("a client view is stored in chunks and a turn writes the chunks from its first change",
          "[sidecar][reconcile]") {
  auto store = Must(OpenSqliteStore(TempPath("view-chunks.db")));
  Harness h("view-chunks", store.get());
  CHECK(Must(LoadClientView(*h.agent)).entries().empty());
  ClientView view;
  for (size_t i = 0; i < 2 * kClientViewChunk + 10; ++i) {
    view.Append({"digest-" + std::to_string(i), i % 2 == 0 ? "user" : "assistant",
                 "s" + std::to_string(i)});
  }
  REQUIRE(SaveClientView(*h.agent, view).ok());
  const auto stored = [&] {
    return Must(store->GetAgentState(h.agent->id(), kClientViewKey)).value_or("");
  };
  // Read back from its chunks (nothing kept for this agent).
  ClientView loaded = Must(LoadClientView(*h.agent));
  REQUIRE(loaded.entries().size() == view.entries().size());
  CHECK(loaded.entries()[kClientViewChunk + 3].segment_id ==
        view.entries()[kClientViewChunk + 3].segment_id);
  CHECK(loaded.header() == stored());
  const std::string key0 = kClientViewKey;
  // Appending rewrites the header and the last chunk only.
  loaded.Append({"digest-new", "user", "s-new"});
  CHECK(Keys(loaded.Writes()) == std::vector<std::string>{key0, ClientViewChunkKey(2)});
  // Cut into the second chunk, the view rewrites the header only; appended to, from that chunk.
  loaded.Truncate(kClientViewChunk + 1);
  CHECK(Keys(loaded.Writes()) == std::vector<std::string>{key0});
  loaded.Append({"digest-edit", "user", "s-edit"});
  CHECK(Keys(loaded.Writes()) == std::vector<std::string>{key0, ClientViewChunkKey(1)});
  // Committed and kept, the next load takes the kept view without reading the chunks: told apart
  // here by an entry appended after the commit, which the store does not hold.
  TurnWrites writes;
  writes.agent_id = h.agent->id();
  writes.state = loaded.Writes();
  REQUIRE(store->CommitTurn(writes).ok());
  loaded.Stored();
  CHECK(loaded.header() == stored());
  CHECK(Keys(loaded.Writes()) == std::vector<std::string>{key0});  // nothing changed since
  // Cut short and stored, the view reads back without the entries past its header's count.
  {
    ClientView cut = loaded;
    cut.Truncate(3);
    TurnWrites header_only;
    header_only.agent_id = h.agent->id();
    header_only.state = cut.Writes();
    REQUIRE(header_only.state.size() == 1);
    REQUIRE(store->CommitTurn(header_only).ok());
    ClientView read = Must(LoadClientView(*h.agent));
    REQUIRE(read.entries().size() == 3);
    CHECK(read.entries()[2].digest == "digest-2");
    REQUIRE(store->CommitTurn(writes).ok());  // back to the longer view
  }
  ClientView kept = loaded;
  kept.Append({"kept-not-stored", "assistant", "s-kept"});
  KeepClientView(h.agent->id(), kept);
  ClientView taken = Must(LoadClientView(*h.agent));
  REQUIRE(taken.entries().size() == kClientViewChunk + 3);
  CHECK(taken.entries().back().digest == "kept-not-stored");
  // Taken: the same header loaded again is read from the chunks.
  ClientView again = Must(LoadClientView(*h.agent));
  REQUIRE(again.entries().size() == kClientViewChunk + 2);
  CHECK(again.entries().back().segment_id == "s-edit");
  // A view kept under an older header (the store changed since) is not taken.
  KeepClientView(h.agent->id(), kept);
  REQUIRE(SaveClientView(*h.agent, view).ok());
  CHECK(Must(LoadClientView(*h.agent)).entries().size() == view.entries().size());
  // A view stored whole, as before chunks, is read.
  REQUIRE(store->PutAgentState(h.agent->id(), kClientViewKey, view.ToJson()).ok());
  CHECK(Must(LoadClientView(*h.agent)).entries().size() == view.entries().size());
  // A chunk missing, or fewer entries than the header says: DATA_LOSS.
  REQUIRE(SaveClientView(*h.agent, view).ok());
  REQUIRE(store->PutAgentState(h.agent->id(), ClientViewChunkKey(1), ClientView().ToJson()).ok());
  CHECK(LoadClientView(*h.agent).status().code() == StatusCode::kDataLoss);
}

// The chunks of `view` as a view holding the same entries and nothing stored writes them, by key.
std::map<std::string, std::string> WrittenWhole(const ClientView& view) {
  ClientView fresh;
  for (const ClientView::Entry& e : view.entries()) fresh.Append(e);
  std::map<std::string, std::string> out;
  for (auto& [key, value] : fresh.Writes(/*whole=*/true)) out[key] = value;
  return out;
}

// Each chunk of `writes` (the header skipped) is the chunk the view's entries give written whole.
void CheckChunksWhole(const ClientView& view,
                      const std::vector<std::pair<std::string, std::string>>& writes) {
  const std::map<std::string, std::string> whole = WrittenWhole(view);
  for (size_t i = 1; i < writes.size(); ++i) {
    INFO(writes[i].first);
    CHECK(writes[i].second == whole.at(writes[i].first));
  }
}

TEST_CASE("a view's last chunk is written on from the text it stored as the whole chunk would be",
          "[sidecar][reconcile]") {
  ClientView view;
  auto append = [&view](size_t i) {
    view.Append({"digest-\"" + std::to_string(i), i % 2 == 0 ? "user" : "assistant",
                 "s" + std::to_string(i)});
  };
  for (size_t i = 0; i < kClientViewChunk + 10; ++i) append(i);
  auto writes = view.Writes();
  CheckChunksWhole(view, writes);
  CHECK(view.entries_encoded() == kClientViewChunk + 10);
  view.Stored();
  CHECK(view.kept_text_bytes() > 0);
  // Appended: only the new entries are encoded, the chunk as it would be written whole.
  append(1000);
  append(1001);
  writes = view.Writes();
  REQUIRE(writes.size() == 2);
  CHECK(writes[1].first == ClientViewChunkKey(1));
  CheckChunksWhole(view, writes);
  CHECK(view.entries_encoded() == kClientViewChunk + 12);
  // Not stored (the commit failed): the next writes continue from what is stored.
  append(1002);
  writes = view.Writes();
  CheckChunksWhole(view, writes);
  CHECK(view.entries_encoded() == kClientViewChunk + 15);
  view.Stored();
  // Cut inside the kept text and appended to past its length: the chunk is encoded from its start.
  view.Truncate(kClientViewChunk + 4);
  for (size_t i = 2000; i < 2010; ++i) append(i);
  writes = view.Writes();
  CheckChunksWhole(view, writes);
  CHECK(view.entries_encoded() == kClientViewChunk + 15 + 14);
  view.Stored();
  // Grown into a new chunk: the rest of the last one and the new one.
  for (size_t i = 3000; i < 3000 + kClientViewChunk; ++i) append(i);
  writes = view.Writes();
  REQUIRE(writes.size() == 3);
  CheckChunksWhole(view, writes);
  CHECK(view.entries_encoded() == 2 * kClientViewChunk + 29);
  view.Stored();
  // Every chunk of a whole write is written whole.
  append(4000);
  CheckChunksWhole(view, view.Writes(/*whole=*/true));
}

TEST_CASE(
    "a client view is written as json writes it and read back and other views are read as json",
    "[sidecar][reconcile]") {
  std::mt19937 rng(7);
  const std::vector<std::string> pieces = {
      "a", "0f", "\"", "\\",     "\n",       std::string(1, '\x01'), "\x7f", "é",
      "✓", "/",  " ",  "call_1", "assistant"};
  auto text = [&] {
    std::string t;
    for (size_t n = rng() % 5; n > 0; --n) t += pieces[rng() % pieces.size()];
    return t;
  };
  for (int round = 0; round < 200; ++round) {
    ClientView view;
    for (size_t n = rng() % 6; n > 0; --n) view.Append({text(), text(), text()});
    json doc = {{"version", 1}, {"entries", json::array()}};
    for (const ClientView::Entry& e : view.entries())
      doc["entries"].push_back({e.digest, e.role, e.segment_id});
    const std::string written = view.ToJson();
    REQUIRE(written == doc.dump());
    ClientView read = Must(ClientView::FromJson(written));
    REQUIRE(read.entries().size() == view.entries().size());
    for (size_t i = 0; i < view.entries().size(); ++i) {
      CHECK(read.entries()[i].digest == view.entries()[i].digest);
      CHECK(read.entries()[i].role == view.entries()[i].role);
      CHECK(read.entries()[i].segment_id == view.entries()[i].segment_id);
    }
  }
  // Other spellings of a version 1 view are read as well.
  for (const char* other :
       {R"({"version":1,"entries":[["d","user","s1"]]})",
        R"({ "entries" : [ ["d", "user", "s1"] ], "version" : 1.0, "x": null })"}) {
    INFO(other);
    ClientView read = Must(ClientView::FromJson(other));
    REQUIRE(read.entries().size() == 1);
    CHECK(read.entries()[0].segment_id == "s1");
  }
  // What is not one is refused, saying what was wrong.
  for (const char* bad :
       {R"({"entries":[],"version":2})", R"({"entries":[]})",
        R"({"entries":[["d","user"]],"version":1})",
        R"({"entries":[["d","user","s",1]],"version":1})",
        R"({"entries":[["d","user","s"]],"version":1)", R"([["d","user","s"]])"}) {
    INFO(bad);
    CHECK(ClientView::FromJson(bad).status().code() == StatusCode::kInvalidArgument);
  }
  CHECK_THAT(
      std::string(
          ClientView::FromJson(R"({"entries":[["d","user"]],"version":1})").status().message()),
      Catch::Contains(R"(malformed entry: ["d","user"])"));
}

TEST_CASE("message lists the proxy cannot answer are refused naming the message",
          "[sidecar][reconcile]") {
  auto error = [](const json& messages) {
    StatusOr<ParsedChat> parsed = ParseChatMessages(messages);
    REQUIRE_FALSE(parsed.ok());
    CHECK(parsed.status().code() == StatusCode::kInvalidArgument);
    return parsed.status().message();
  };
  CHECK(error(json::object()).find("must be an array") != std::string::npos);
  CHECK(error(json::array({System("s")})).find("no user message") != std::string::npos);
  CHECK(error(json::array({User("q"), AssistantText("a")}))
            .find("messages[1] is an assistant message") != std::string::npos);
  CHECK(error(json::array({User("q"), System("late")}))
            .find("messages[1] is a system message after") != std::string::npos);
  CHECK(error(json::array(
                  {{{"role", "user"},
                    {"content", json::array({{{"type", "image_url"}, {"image_url", "x"}}})}}}))
            .find("messages[0].content[0]: content part type \"image_url\"") != std::string::npos);
  CHECK(error(json::array({User("q"), Tool("nope", "x")})).find("tool_call_id \"nope\"") !=
        std::string::npos);
  CHECK(error(json::array({User("q"), AssistantCalls({{"c1", "{}"}}), User("again")}))
            .find("tool calls c1 have no result") != std::string::npos);
  CHECK(error(json::array({{{"role", "function"}, {"content", "x"}}})).find("role \"function\"") !=
        std::string::npos);
  json bad_args = AssistantCalls({{"c1", "{}"}});
  bad_args["tool_calls"][0]["function"]["arguments"] = json::object();
  CHECK(error(json::array({User("q"), bad_args, Tool("c1", "x")}))
            .find("arguments must be a string") != std::string::npos);

  // Text parts are joined; the digest does not depend on the form the client used.
  ParsedChat parts = Must(ParseChatMessages(json::array(
      {{{"role", "user"},
        {"content",
         json::array({{{"type", "text"}, {"text", "a"}}, {{"type", "text"}, {"text", "b"}}})}}})));
  ParsedChat plain = Must(ParseChatMessages(json::array({User("ab")})));
  CHECK(parts.history[0]->content == "ab");
  CHECK(MessageDigest(*parts.history[0]) == MessageDigest(*plain.history[0]));
  CHECK(MessageDigest(*plain.history[0]) !=
        MessageDigest(*Must(ParseChatMessages(json::array({User("ab ")}))).history[0]));
}

}  // namespace
}  // namespace strata::sidecar
