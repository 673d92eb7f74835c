#include "strata/context.h"

#include <catch2/catch.hpp>
#include <functional>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <vector>

#include "strata/compaction_policy.h"
#include "testing/context_testing.h"
#include "testing/history_changes.h"
#include "testing/status_testing.h"

namespace strata {
namespace {

using testing::Must;
using testing::MustBuild;
using testing::NewContext;
using testing::PairingError;

size_t CommonPrefix(const std::string& a, const std::string& b) {
  size_t n = 0;
  while (n < a.size() && n < b.size() && a[n] == b[n]) ++n;
  return n;
}

TEST_CASE("a built request has the layers in order and is valid JSON", "[core][context]") {
  auto context = NewContext();
  REQUIRE(context->SetSystemPrompt("You are a coding agent.").ok());
  REQUIRE(context->SetTools(R"([{"type":"function","function":{"name":"bash","parameters":{}}}])").ok());
  REQUIRE(context->AddDocument(Layer::kDocs, {"guide.md", "Use pytest.", "v1", 0}).ok());
  REQUIRE(context->AddDocument(Layer::kIndex, {"repo", "src/a.py\nsrc/b.py", "abc123", 0}).ok());
  REQUIRE(context->AppendUser("Fix the test.").ok());
  REQUIRE(context->AppendAssistant({"Looking.", "I should list files.",
                                    {{"call_1", "bash", R"({"command": "ls"})"}}}).ok());
  REQUIRE(context->AppendToolResult({"call_1", "a.py\nb.py", false}).ok());
  REQUIRE(context->SetVolatile("time", "18:30").ok());

  BuiltRequest request = MustBuild(*context);
  nlohmann::json j = nlohmann::json::parse(request.body);
  CHECK(j["model"] == "glm-5.3-flash");
  CHECK(j["tools"][0]["function"]["name"] == "bash");
  const auto& messages = j["messages"];
  REQUIRE(messages.size() == 5);
  CHECK(messages[0]["role"] == "system");
  const std::string system = messages[0]["content"];
  // system, then index, then docs.
  CHECK(system.find("You are a coding agent.") < system.find("name=\"repo\""));
  CHECK(system.find("name=\"repo\"") < system.find("name=\"guide.md\""));
  CHECK(messages[2]["reasoning_content"] == "I should list files.");
  CHECK(messages[2]["tool_calls"][0]["function"]["arguments"] == R"({"command": "ls"})");
  CHECK(messages[3] == nlohmann::json({{"role", "tool"}, {"tool_call_id", "call_1"}, {"content", "a.py\nb.py"}}));
  CHECK(messages[4] == nlohmann::json({{"role", "user"}, {"content", "time: 18:30"}}));
  CHECK(request.message_count == 5);
  CHECK(request.body.compare(0, request.stable_prefix_bytes,
                             request.body.substr(0, request.body.find("{\"role\":\"user\""))) < 0);
  CHECK(request.body.substr(request.history_end_bytes, 2) == ",{");
  CHECK(request.layers[static_cast<int>(Layer::kHistory)].segments == 3);
  CHECK(request.total_tokens > 0);
  CHECK(request.tokens_estimated);
  CHECK(PairingError(request.body).empty());
}

TEST_CASE("tool call arguments are replayed byte for byte", "[core][context]") {
  auto context = NewContext();
  REQUIRE(context->AppendUser("go").ok());
  const std::string arguments = "{ \"b\" :2,\n\"a\":\"\\u00e9\" , \"x\": 1.50 }";
  REQUIRE(context->AppendAssistant({"", "", {{"c", "f", arguments}}}).ok());
  REQUIRE(context->AppendToolResult({"c", "ok", false}).ok());
  nlohmann::json j = nlohmann::json::parse(MustBuild(*context).body);
  CHECK(j["messages"][1]["tool_calls"][0]["function"]["arguments"] == arguments);
}

TEST_CASE("tool schemas are canonical: re-ordered keys and whitespace give the same bytes",
          "[core][context]") {
  auto a = NewContext();
  auto b = NewContext();
  REQUIRE(a->SetTools(R"([{"type":"function","function":{"name":"bash","description":"Run",
      "parameters":{"type":"object","properties":{"command":{"type":"string"}}}}}])").ok());
  REQUIRE(b->SetTools(R"([ { "function" : { "parameters" : { "properties" : { "command" : {
      "type" : "string" } }, "type" : "object" }, "description" : "Run", "name" : "bash" },
      "type" : "function" } ])").ok());
  REQUIRE(a->AppendUser("x").ok());
  REQUIRE(b->AppendUser("x").ok());
  CHECK(MustBuild(*a).body == MustBuild(*b).body);
}

TEST_CASE("invalid tool schemas are refused and change nothing", "[core][context][errors]") {
  auto context = NewContext();
  REQUIRE(context->SetTools(R"([{"type":"function","function":{"name":"keep"}}])").ok());
  REQUIRE(context->AppendUser("x").ok());
  const std::string before = MustBuild(*context).body;
  struct Case {
    const char* json;
    const char* expect;
  };
  for (const Case& c : {Case{"[{\"type\":", "malformed JSON"},
                        Case{R"({"type":"function"})", "must be an array"},
                        Case{R"([{"type":"function","function":{}}])", "name"},
                        Case{R"([{"type":"retrieval"}])", "\"type\": \"function\""},
                        Case{R"([{"type":"function","function":{"name":"a"}},
                                 {"type":"function","function":{"name":"a"}}])", "duplicate tool name"},
                        Case{nullptr, "nested deeper than 512 levels"}}) {
    std::string json = c.json != nullptr ? c.json
                                         : R"([{"type":"function","function":{"name":"deep","parameters":)" +
                                               std::string(30000, '[') + std::string(30000, ']') + "}}]";
    Status s = context->SetTools(json);
    CHECK(s.code() == StatusCode::kInvalidArgument);
    CHECK_THAT(s.message(), Catch::Contains(c.expect));
  }
  CHECK(MustBuild(*context).body == before);
}

TEST_CASE("bad history input gets a clear error and changes nothing", "[core][context][errors]") {
  auto context = NewContext();
  REQUIRE(context->SetSystemPrompt("sys").ok());
  REQUIRE(context->AppendUser("go").ok());
  REQUIRE(context->AppendAssistant({"", "", {{"call_5", "bash", "{}"}, {"call_6", "bash", "{}"}}}).ok());
  const ContextSnapshot before = context->Snapshot();

  Status orphan = context->AppendToolResult({"call_7", "x", false}).status();
  CHECK(orphan.code() == StatusCode::kInvalidArgument);
  CHECK(orphan.message() ==
        "tool result for unknown tool_call_id \"call_7\" (open: call_5, call_6); a tool result "
        "must answer a call of the last assistant message");

  Status user = context->AppendUser("interrupt").status();
  CHECK(user.code() == StatusCode::kFailedPrecondition);
  CHECK_THAT(user.message(), Catch::Contains("call_5, call_6"));
  CHECK(context->AppendAssistant({"again", "", {}}).status().code() == StatusCode::kFailedPrecondition);
  CHECK(context->Build().status().code() == StatusCode::kFailedPrecondition);

  Status utf8 = context->AppendToolResult({"call_5", "bad \xC3", false}).status();
  CHECK(utf8.code() == StatusCode::kInvalidArgument);
  CHECK_THAT(utf8.message(), Catch::Contains("not valid UTF-8") && Catch::Contains("byte 4"));

  CHECK(context->AppendAssistant({"", "", {{"", "bash", "{}"}}}).status().code() ==
        StatusCode::kInvalidArgument);
  CHECK(context->SetSystemPrompt("bad \xFF").code() == StatusCode::kInvalidArgument);

  const ContextSnapshot after = context->Snapshot();
  REQUIRE(after.segments.size() == before.segments.size());
  for (size_t i = 0; i < after.segments.size(); ++i) {
    CHECK(after.segments[i].id == before.segments[i].id);
    CHECK(after.segments[i].content == before.segments[i].content);
  }
  CHECK(context->OpenToolCalls() == std::vector<std::string>{"call_5", "call_6"});

  REQUIRE(context->AppendToolResult({"call_6", "six", false}).ok());
  Status twice = context->AppendToolResult({"call_6", "again", false}).status();
  CHECK_THAT(twice.message(), Catch::Contains("already answered") && Catch::Contains("open: call_5"));
  REQUIRE(context->AppendToolResult({"call_5", "five", false}).ok());
  CHECK(PairingError(MustBuild(*context).body).empty());
}

TEST_CASE("documents: add, update, remove, declared order, clear errors", "[core][context][docs]") {
  auto context = NewContext();
  REQUIRE(context->AddDocument(Layer::kDocs, {"late", "L", "1", 20}).ok());
  REQUIRE(context->AddDocument(Layer::kDocs, {"early", "E", "1", 10}).ok());
  REQUIRE(context->AppendUser("go").ok());
  std::string system = nlohmann::json::parse(MustBuild(*context).body)["messages"][0]["content"];
  CHECK(system.find("name=\"early\"") < system.find("name=\"late\""));

  Status unknown = context->UpdateDocument(Layer::kDocs, {"missing", "x", "", 0});
  CHECK(unknown.code() == StatusCode::kNotFound);
  CHECK_THAT(unknown.message(), Catch::Contains("known: early, late"));
  CHECK(context->AddDocument(Layer::kDocs, {"early", "x", "", 0}).status().code() ==
        StatusCode::kAlreadyExists);
  CHECK(context->AddDocument(Layer::kHistory, {"x", "x", "", 0}).status().code() ==
        StatusCode::kInvalidArgument);
  CHECK(context->AddDocument(Layer::kDocs, {"", "x", "", 0}).status().code() ==
        StatusCode::kInvalidArgument);

  auto id = context->PutDocument(Layer::kDocs, {"early", "E2", "2", 10});
  REQUIRE(id.ok());
  CHECK(context->Find(*id)->content == "E2");
  CHECK(context->Find(*id)->version == "2");
  REQUIRE(context->RemoveDocument(Layer::kDocs, "late").ok());
  CHECK(context->RemoveDocument(Layer::kDocs, "late").code() == StatusCode::kNotFound);
  system = nlohmann::json::parse(MustBuild(*context).body)["messages"][0]["content"];
  CHECK(system == "<document layer=\"docs\" name=\"early\" version=\"2\">\nE2\n</document>");
}

TEST_CASE("a document update invalidates from that document on and nothing before it",
          "[core][context][prefix]") {
  auto context = NewContext();
  REQUIRE(context->SetSystemPrompt("system prompt").ok());
  REQUIRE(context->SetTools(R"([{"type":"function","function":{"name":"bash"}}])").ok());
  REQUIRE(context->AddDocument(Layer::kIndex, {"index", std::string(2000, 'i'), "1", 0}).ok());
  REQUIRE(context->AddDocument(Layer::kDocs, {"a", std::string(1000, 'a'), "1", 1}).ok());
  REQUIRE(context->AddDocument(Layer::kDocs, {"b", std::string(1000, 'b'), "1", 2}).ok());
  REQUIRE(context->AddDocument(Layer::kDocs, {"c", std::string(1000, 'c'), "1", 3}).ok());
  REQUIRE(context->AppendUser("go").ok());
  const std::string before = MustBuild(*context).body;
  REQUIRE(context->UpdateDocument(Layer::kDocs, {"b", std::string(1000, 'B'), "2", 2}).ok());
  const std::string after = MustBuild(*context).body;
  const size_t doc_b = before.find("<document layer=\\\"docs\\\" name=\\\"b\\\"");
  REQUIRE(doc_b != std::string::npos);
  const size_t common = CommonPrefix(before, after);
  // Everything before document b is unchanged; the difference starts inside b's block.
  CHECK(common >= doc_b);
  CHECK(common < doc_b + 100);
  CHECK(before.size() == after.size());
}

TEST_CASE("lint reports volatile-looking content in stable layers with the segment id",
          "[core][context][lint]") {
  auto context = NewContext();
  REQUIRE(context->SetSystemPrompt("You are helpful. Current session started 2026-11-29 18:30:00.").ok());
  REQUIRE(context->AddDocument(Layer::kDocs, {"ids", "request 123e4567-e89b-12d3-a456-426614174000", "", 0}).ok());
  REQUIRE(context->AppendUser("What time is it? today is not in a stable layer").ok());
  BuiltRequest request = MustBuild(*context);
  REQUIRE(request.warnings.size() == 2);
  const Segment system = context->Segments().front();
  CHECK(request.warnings[0].segment_id == system.id);
  CHECK(request.warnings[0].layer == Layer::kSystem);
  CHECK(request.warnings[0].what == "timestamp");
  CHECK(request.warnings[1].what == "uuid");
  CHECK(request.warnings[1].layer == Layer::kDocs);
  CHECK_THAT(request.warnings[0].ToString(), Catch::Contains(system.id) && Catch::Contains("SetVolatile"));
  REQUIRE(context->SetSystemPrompt("You are helpful.").ok());
  CHECK(MustBuild(*context).warnings.size() == 1);
}

TEST_CASE("the volatile layer is the last message and never enters history", "[core][context]") {
  auto context = NewContext();
  REQUIRE(context->AppendUser("hi").ok());
  REQUIRE(context->SetVolatile("now", "t1").ok());
  REQUIRE(context->SetVolatile("request", "r1").ok());
  BuiltRequest first = MustBuild(*context);
  REQUIRE(context->SetVolatile("now", "t2").ok());
  REQUIRE(context->AppendAssistant({"hello", "", {}}).ok());
  BuiltRequest second = MustBuild(*context);
  CHECK(second.body.compare(0, first.history_end_bytes, first.body, 0, first.history_end_bytes) == 0);
  nlohmann::json j = nlohmann::json::parse(second.body);
  CHECK(j["messages"].back()["content"] == "now: t2\nrequest: r1");
  CHECK(j["messages"].size() == 3);
  REQUIRE(context->RemoveVolatile("now").ok());
  CHECK(context->RemoveVolatile("now").code() == StatusCode::kNotFound);
  context->ClearVolatile();
  CHECK(nlohmann::json::parse(MustBuild(*context).body)["messages"].size() == 2);
}

TEST_CASE("extra fields are canonical and cannot override the context's own", "[core][context]") {
  auto context = NewContext();
  REQUIRE(context->AppendUser("hi").ok());
  BuildOptions options;
  options.extra_fields = {{"stream", "true"}, {"stream_options", R"({ "include_usage" : true })"}};
  BuiltRequest request = MustBuild(*context, options);
  CHECK_THAT(request.body, Catch::EndsWith(R"(],"stream":true,"stream_options":{"include_usage":true}})"));
  options.extra_fields = {{"messages", "[]"}};
  CHECK(context->Build(options).status().code() == StatusCode::kInvalidArgument);
  options.extra_fields = {{"x", "{bad"}};
  CHECK(context->Build(options).status().code() == StatusCode::kInvalidArgument);
  // Each build renders the fields it is given, whatever the previous build was given.
  options.extra_fields = {{"stream", "false"}, {"stream_options", R"({ "include_usage" : true })"}};
  CHECK_THAT(MustBuild(*context, options).body,
             Catch::EndsWith(R"(],"stream":false,"stream_options":{"include_usage":true}})"));
  options.extra_fields = {{"stream", "false"}};
  CHECK_THAT(MustBuild(*context, options).body, Catch::EndsWith(R"(}],"stream":false})"));
  CHECK_THAT(MustBuild(*context).body, Catch::EndsWith(R"(}]})"));
  // A value the last build had at the same place keeps its canonical form under another name;
  // the others are canonicalized anew.
  options.extra_fields = {{"a", "[1, 2]"}, {"b", R"({ "k" : "v" })"}};
  CHECK_THAT(MustBuild(*context, options).body, Catch::EndsWith(R"(}],"a":[1,2],"b":{"k":"v"}})"));
  options.extra_fields = {{"c", "[1, 2]"}, {"b", "[1, 2]"}, {"a", R"({ "k" : "v" })"}};
  CHECK_THAT(MustBuild(*context, options).body,
             Catch::EndsWith(R"(}],"c":[1,2],"b":[1,2],"a":{"k":"v"}})"));
  options.extra_fields = {{"x", "{bad"}};
  CHECK(context->Build(options).status().code() == StatusCode::kInvalidArgument);
  CHECK_THAT(MustBuild(*context).body, Catch::EndsWith(R"(}]})"));
}

TEST_CASE("a layer's segments are the context's own in render order without copies",
          "[core][context]") {
  auto context = NewContext();
  REQUIRE(context->SetSystemPrompts({"one", "two"}).ok());
  REQUIRE(context->AddDocument(Layer::kDocs, {"d", "doc", "", 0}).ok());
  REQUIRE(context->AppendUser("hi").ok());
  REQUIRE(context->AppendAssistant({"hello", "", {}}).ok());
  REQUIRE(context->AppendUser("again").ok());
  REQUIRE(context->SetVolatile("now", "12:00").ok());
  const std::vector<Segment> all = context->Segments();
  for (Layer layer : {Layer::kSystem, Layer::kTools, Layer::kIndex, Layer::kDocs, Layer::kHistory,
                      Layer::kVolatile}) {
    INFO("layer " << static_cast<int>(layer));
    std::vector<const Segment*> got = context->LayerSegments(layer);
    std::vector<const Segment*> want;
    for (const Segment& s : all) {
      if (s.layer == layer && layer != Layer::kVolatile) want.push_back(&s);
    }
    REQUIRE(got.size() == want.size());
    for (size_t i = 0; i < got.size(); ++i) {
      CHECK(got[i]->id == want[i]->id);
      CHECK(got[i]->content == want[i]->content);
      CHECK(got[i] == context->Find(got[i]->id));  // the context's own segment
    }
  }
  CHECK(context->LayerSegments(Layer::kSystem).size() == 2);
  CHECK(context->LayerSegments(Layer::kHistory).size() == 3);
  CHECK(context->LayerSegments(Layer::kVolatile).empty());
}

TEST_CASE("an empty context cannot be built", "[core][context][errors]") {
  auto context = NewContext();
  Status s = context->Build().status();
  CHECK(s.code() == StatusCode::kFailedPrecondition);
  CHECK_THAT(s.message(), Catch::Contains("no messages"));
}

TEST_CASE("options are validated", "[core][context][errors]") {
  ContextOptions options;
  CHECK(Context::Create(options).status().code() == StatusCode::kInvalidArgument);
  options.agent.id = "a";
  options.render.volatile_role = "robot";
  CHECK_THAT(Context::Create(options).status().message(), Catch::Contains("volatile_role"));
  options.render.volatile_role = "user";
  options.hygiene.head_share = 1.5;
  CHECK(Context::Create(options).status().code() == StatusCode::kInvalidArgument);
}

TEST_CASE("one system message per segment when asked", "[core][context]") {
  ContextOptions options;
  options.render.system_layout = SystemLayout::kMessagePerSegment;
  auto context = NewContext(options);
  REQUIRE(context->SetSystemPrompts({"one", "two"}).ok());
  REQUIRE(context->AddDocument(Layer::kDocs, {"d", "doc", "", 0}).ok());
  REQUIRE(context->AppendUser("hi").ok());
  nlohmann::json j = nlohmann::json::parse(MustBuild(*context).body);
  REQUIRE(j["messages"].size() == 4);
  CHECK(j["messages"][1] == nlohmann::json({{"role", "system"}, {"content", "two"}}));
}

// A journal that keeps every change, and can be told to fail.
class RecordingJournal : public ContextJournal {
 public:
  Status Record(const ContextChange& change) override {
    if (fail) return UnavailableError("disk full");
    changes.push_back(change);
    return Status::Ok();
  }
  bool fail = false;
  std::vector<ContextChange> changes;
};

TEST_CASE("every change reaches the journal, a failed journal write rolls the change back",
          "[core][context][journal]") {
  RecordingJournal journal;
  ContextOptions options;
  options.journal = &journal;
  auto context = NewContext(options);
  REQUIRE(context->SetSystemPrompt("sys").ok());
  REQUIRE(context->AppendUser("go").ok());
  REQUIRE(context->AppendAssistant({"", "", {{"c1", "bash", "{}"}}}).ok());
  CHECK(journal.changes.size() == 3);
  CHECK(journal.changes.back().turn == 1);

  const std::string before_open = testing::PairingError("{\"messages\":[]}");
  journal.fail = true;
  Status failed = context->AppendToolResult({"c1", std::string(100000, 'x'), false}).status();
  CHECK(failed.code() == StatusCode::kUnavailable);
  CHECK(context->OpenToolCalls() == std::vector<std::string>{"c1"});
  CHECK(context->SetSystemPrompt("other").code() == StatusCode::kUnavailable);
  journal.fail = false;
  CHECK(context->Segments().front().content == "sys");
  auto id = context->AppendToolResult({"c1", std::string(100000, 'x'), false});
  REQUIRE(id.ok());
  // The truncated result carries its original for recall.
  REQUIRE(journal.changes.back().originals.size() == 1);
  CHECK(journal.changes.back().originals[0].second.size() == 100000);
}

TEST_CASE("a restored snapshot renders byte-identically and keeps working", "[core][context][restore]") {
  auto context = NewContext();
  REQUIRE(context->SetSystemPrompt("sys").ok());
  REQUIRE(context->SetTools(R"([{"type":"function","function":{"name":"bash"}}])").ok());
  REQUIRE(context->AddDocument(Layer::kDocs, {"d", "doc", "1", 0}).ok());
  REQUIRE(context->AppendUser("go").ok());
  std::string big;
  for (int i = 0; i < 5000; ++i) big += "row " + std::to_string(i) + "\n";
  REQUIRE(context->AppendAssistant({"", "", {{"c1", "bash", "{\"command\":\"seq\"}"}}}).ok());
  REQUIRE(context->AppendToolResult({"c1", big, false}).ok());
  REQUIRE(context->AppendAssistant({"", "", {{"c2", "bash", "{\"command\":\"seq\"}"}}}).ok());

  auto restored = Context::Restore(context->options(), context->Snapshot());
  REQUIRE(restored.ok());
  CHECK((*restored)->OpenToolCalls() == std::vector<std::string>{"c2"});
  for (Context* c : {context.get(), restored->get()}) {
    REQUIRE(c->AppendToolResult({"c2", big, false}).ok());
  }
  CHECK(MustBuild(**restored).body == MustBuild(*context).body);
  CHECK((*restored)->Stats().deduplicated == 1);
  CHECK((*restored)->Stats().truncated == 1);

  ContextSnapshot broken = context->Snapshot();
  broken.segments.push_back(broken.segments.back());
  CHECK(Context::Restore(context->options(), broken).status().code() == StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace strata

namespace strata {
namespace {

TEST_CASE("invalidated_tokens counts only what the previous request sent from the boundary on",
          "[core][context][compaction]") {
  // 4 bytes per token, 6 tokens per message.
  auto context = NewContext();
  REQUIRE(context->AppendUser(std::string(40, 'u')).ok());  // 10 tokens
  MustBuild(*context);
  // Turn 1: a call of 1 + 3 tokens ("bash", {"cmd":"ls"}) and a 100-token result.
  REQUIRE(context->AppendAssistant({"", "", {{"c1", "bash", R"({"cmd":"ls"})"}}}).ok());
  StatusOr<std::string> r1 = context->AppendToolResult({"c1", std::string(400, 'x'), false});
  REQUIRE(r1.ok());
  MustBuild(*context);  // sent: user, a1, r1
  // Turn 2, appended since that request and never sent: a call (4 tokens) and a 200-token result.
  REQUIRE(context->AppendAssistant({"", "", {{"c2", "bash", R"({"cmd":"ls"})"}}}).ok());
  REQUIRE(context->AppendToolResult({"c2", std::string(800, 'y'), false}).ok());

  HistoryEdit edit;
  edit.edits.push_back({*r1, SegmentEdit::Action::kMask, "[masked]"});
  StatusOr<CompactionReport> report = context->ApplyEdit(edit, "test@1", "test");
  REQUIRE(report.ok());
  CHECK(report->boundary_segment_id == *r1);
  // The server cached r1 (100 + 6) after the boundary; a2 and r2 (10 + 206) it never saw.
  CHECK(report->invalidated_tokens == 106);
}

// A body over 1 MB is allocated a little larger than it is (at most an 8th more), so that the next
// turn's body, a few bytes longer, asks the allocator for the same size and reuses the memory the
// previous one freed instead of having fresh pages mapped and faulted in. A body that grows by
// 4 KB a turn asks for a new size every 256 KB at 3 MB: two or three sizes over 400 KB (four or
// five with a 32nd's rounding).
TEST_CASE("successive bodies over a megabyte are allocated in the same size class", "[core][context]") {
  ContextOptions options;
  options.hygiene.max_segment_tokens = 0;  // the tool result is kept whole
  auto context = NewContext(options);
  REQUIRE(context->AppendUser("Read the logs.").ok());
  REQUIRE(context->AppendAssistant({"", "", {{"call_0", "read", "{}"}}}).ok());
  REQUIRE(context->AppendToolResult({"call_0", std::string(3u << 20, 'x'), false}).ok());
  const BuiltRequest first = MustBuild(*context);
  REQUIRE(first.body.size() > (3u << 20));
  CHECK(first.body.capacity() >= first.body.size());
  CHECK(first.body.capacity() <= first.body.size() + first.body.size() / 8);
  REQUIRE(context->AppendAssistant({"", "", {{"call_1", "read", "{}"}}}).ok());
  REQUIRE(context->AppendToolResult({"call_1", "a few more bytes", false}).ok());
  const BuiltRequest second = MustBuild(*context);
  REQUIRE(second.body.size() > first.body.size());
  CHECK(second.body.capacity() == first.body.capacity());
  std::set<size_t> capacities;
  for (int turn = 2; turn < 102; ++turn) {
    const std::string call = "call_" + std::to_string(turn);
    REQUIRE(context->AppendAssistant({"", "", {{call, "read", "{}"}}}).ok());
    REQUIRE(context->AppendToolResult({call, call + std::string(4000, 'y'), false}).ok());
    const BuiltRequest next = MustBuild(*context);
    CHECK(next.body.capacity() <= next.body.size() + next.body.size() / 8);
    capacities.insert(next.body.capacity());
  }
  CHECK(capacities.size() <= 3);
  // A small body is allocated its size (and the few separators it may not need).
  auto small = NewContext();
  REQUIRE(small->AppendUser("Hello.").ok());
  const BuiltRequest tiny = MustBuild(*small);
  CHECK(tiny.body.capacity() <= tiny.body.size() + 8);
}

}  // namespace
}  // namespace strata

namespace strata {
namespace {

// The leading bytes `a` and `b` share.
size_t SharedBytes(const std::string& a, const std::string& b) {
  size_t n = 0;
  while (n < a.size() && n < b.size() && a[n] == b[n]) ++n;
  return n;
}

// Builds `context` and checks what the build says it shares with `previous` (the render before
// it): that render's serial, and bytes that are indeed the same. Returns the build.
BuiltRequest BuildAfter(Context& context, const BuiltRequest& previous) {
  BuiltRequest next = MustBuild(context);
  CHECK(next.render_serial > previous.render_serial);
  CHECK(next.previous_render_serial == previous.render_serial);
  CHECK(next.unchanged_bytes <= SharedBytes(previous.body, next.body));
  return next;
}

// `kept` (a list from an earlier call) brought up to date the way a turn does it.
std::vector<SegmentFingerprint> Advance(const Context& context, std::vector<SegmentFingerprint> kept,
                                        size_t* same) {
  std::vector<SegmentFingerprint> rest = context.FingerprintsAfter(kept, same);
  kept.resize(*same);
  kept.insert(kept.end(), rest.begin(), rest.end());
  return kept;
}

bool SameIds(const std::vector<SegmentFingerprint>& a, const std::vector<SegmentFingerprint>& b) {
  return std::equal(a.begin(), a.end(), b.begin(), b.end(), [](const auto& x, const auto& y) {
    return x.id == y.id && x.state == y.state && x.hash == y.hash && x.version == y.version;
  });
}

// `kept` and its serial brought up to date the way a turn does it.
std::vector<SegmentFingerprint> AdvanceWithSerial(const Context& context,
                                                  std::vector<SegmentFingerprint> kept,
                                                  uint64_t* serial, size_t* same) {
  std::vector<SegmentFingerprint> rest = context.FingerprintsAfter(kept, same, serial);
  kept.resize(*same);
  kept.insert(kept.end(), rest.begin(), rest.end());
  return kept;
}

TEST_CASE("fingerprints after a list named by its serial compare only what changed since",
          "[core][context]") {
  auto context = NewContext();
  REQUIRE(context->SetSystemPrompt("You are a test.").ok());
  REQUIRE(context->AppendUser("Read the logs.").ok());
  REQUIRE(context->AppendAssistant({"", "", {{"c1", "read", "{}"}}}).ok());
  const std::string result = *context->AppendToolResult({"c1", "log line", false});
  uint64_t serial = 0;
  size_t same = 0;
  std::vector<SegmentFingerprint> kept = AdvanceWithSerial(*context, {}, &serial, &same);
  REQUIRE(kept.size() == 4);
  CHECK(serial != 0);
  // An append. An entry of the list is doctored where the context did not change: with the serial
  // it is counted as the list's, not compared; without it, compared.
  REQUIRE(context->AppendAssistant({"Done.", "", {}}).ok());
  std::vector<SegmentFingerprint> doctored = kept;
  doctored[1].hash ^= 1;
  uint64_t doctored_serial = serial;
  std::vector<SegmentFingerprint> rest =
      context->FingerprintsAfter(doctored, &same, &doctored_serial);
  CHECK(same == 4);
  REQUIRE(rest.size() == 1);
  CHECK(doctored_serial != serial);
  CHECK(context->FingerprintsAfter(doctored, &same).size() == 4);
  CHECK(same == 1);
  // The serial of the doctored call replaced `serial`: every entry is compared again.
  kept = AdvanceWithSerial(*context, kept, &serial, &same);
  CHECK(same == 4);
  CHECK(SameIds(kept, context->Fingerprints()));
  // A mask re-renders from the result on: compared from there.
  HistoryEdit edit;
  edit.edits.push_back({result, SegmentEdit::Action::kMask, "[masked]"});
  REQUIRE(context->ApplyEdit(edit, "test@1", "test").ok());
  doctored = kept;
  doctored[1].hash ^= 1;
  kept = AdvanceWithSerial(*context, doctored, &serial, &same);
  CHECK(same == 3);
  kept[1] = context->Fingerprints()[1];
  CHECK(SameIds(kept, context->Fingerprints()));
  // A new system prompt: from the stable layers on, whatever the serial.
  REQUIRE(context->SetSystemPrompt("You are another test.").ok());
  kept = AdvanceWithSerial(*context, kept, &serial, &same);
  CHECK(same == 0);
  CHECK(SameIds(kept, context->Fingerprints()));
}

TEST_CASE("fingerprints kept with a serial equal the whole list after every kind of change",
          "[core][context]") {
  auto context = NewContext();
  REQUIRE(context->SetSystemPrompt("You are a test.").ok());
  REQUIRE(context->AppendUser("Start.").ok());
  uint64_t serial = 0;
  size_t same = 0;
  std::vector<SegmentFingerprint> kept = AdvanceWithSerial(*context, {}, &serial, &same);
  testing::HistoryChanges changes(12345);
  size_t steps = 0;
  for (int step = 0; step < 300; ++step) {
    const std::string call = "call" + std::to_string(step);
    switch (changes.Next(8)) {
      case 0:
      case 1:
      case 2:  // a tool call and its result
        REQUIRE(changes.CallAndResult(*context, call, "out " + call));
        break;
      case 3:  // a mask of a live result
        changes.MaskAResult(*context);
        break;
      case 4: {  // a summary of a call and its result, anywhere in the history
        const Status applied = changes.SummarizeACall(*context, "summary " + call);
        INFO(applied.ToString());
        CHECK(applied.ok());
        break;
      }
      case 5:  // a document
        REQUIRE(context->PutDocument(Layer::kDocs, Document{"guide", call, call, 0}).ok());
        break;
      case 6:  // a mark, a change and a rewind to it
        REQUIRE(changes.RewindAChange(*context, "undone " + call));
        break;
      default:
        REQUIRE(context->AppendUser("next " + call).ok());
        break;
    }
    kept = AdvanceWithSerial(*context, kept, &serial, &same);
    INFO("step " << step);
    REQUIRE(SameIds(kept, context->Fingerprints()));
    ++steps;
  }
  CHECK(steps == 300);
  CHECK(changes.masks > 10);
  CHECK(changes.summaries > 10);
  CHECK(changes.rewinds > 10);
}

TEST_CASE("fingerprints after an earlier list keep what it shares and list the rest",
          "[core][context]") {
  auto context = NewContext();
  REQUIRE(context->SetSystemPrompt("You are a test.").ok());
  REQUIRE(context->PutDocument(Layer::kDocs, Document{"guide", "Guide one.", "v1", 0}).ok());
  REQUIRE(context->AppendUser("Read the logs.").ok());
  REQUIRE(context->AppendAssistant({"", "", {{"c1", "read", "{}"}}}).ok());
  const std::string result = *context->AppendToolResult({"c1", "log line", false});
  std::vector<SegmentFingerprint> kept = context->Fingerprints();
  REQUIRE(kept.size() == 5);
  size_t same = 0;
  CHECK(context->FingerprintsAfter(kept, &same).empty());
  CHECK(same == 5);
  // An append: the list is kept whole and the new segment follows it.
  REQUIRE(context->AppendAssistant({"Done.", "", {}}).ok());
  kept = Advance(*context, kept, &same);
  CHECK(same == 5);
  CHECK(SameIds(kept, context->Fingerprints()));
  // A masked result: kept up to it, listed from it.
  HistoryEdit edit;
  edit.edits.push_back({result, SegmentEdit::Action::kMask, "[masked]"});
  REQUIRE(context->ApplyEdit(edit, "test@1", "test").ok());
  kept = Advance(*context, kept, &same);
  CHECK(same == 4);
  CHECK(SameIds(kept, context->Fingerprints()));
  // A new document version: from the stable layers on.
  REQUIRE(context->PutDocument(Layer::kDocs, Document{"guide", "Guide two.", "v2", 0}).ok());
  kept = Advance(*context, kept, &same);
  CHECK(same == 1);
  CHECK(SameIds(kept, context->Fingerprints()));
  // Kind is not compared (a stored signature has none); everything else is.
  std::vector<SegmentFingerprint> stored = kept;
  for (SegmentFingerprint& f : stored) f.kind = SegmentKind::kUser;
  CHECK(context->FingerprintsAfter(stored, &same).empty());
  CHECK(same == kept.size());
  stored[2].version = "v9";
  CHECK(context->FingerprintsAfter(stored, &same).size() == kept.size() - 2);
  CHECK(same == 2);
  // A longer earlier list than the context's: what it shares, nothing more.
  stored = kept;
  stored.push_back(kept.back());
  CHECK(context->FingerprintsAfter(stored, &same).empty());
  CHECK(same == kept.size());
}

TEST_CASE("a build says which leading bytes it shares with the render before it",
          "[core][context]") {
  auto context = NewContext();
  REQUIRE(context->SetSystemPrompt("You are a test.").ok());
  REQUIRE(context->AppendUser("Read the logs.").ok());
  const BuiltRequest first = MustBuild(*context);
  CHECK(first.render_serial != 0);
  CHECK(first.previous_render_serial == 0);
  CHECK(first.unchanged_bytes == 0);
  // Appends keep the whole history: everything up to its end is shared.
  REQUIRE(context->AppendAssistant({"", "", {{"call_0", "read", "{}"}}}).ok());
  const StatusOr<std::string> result = context->AppendToolResult({"call_0", "line one", false});
  REQUIRE(result.ok());
  const BuiltRequest second = BuildAfter(*context, first);
  CHECK(second.unchanged_bytes == first.history_end_bytes);
  // A volatile item and extra fields come after the history.
  REQUIRE(context->SetVolatile("now", "12:00").ok());
  const BuiltRequest third = BuildAfter(*context, second);
  CHECK(third.unchanged_bytes == second.history_end_bytes);
  // A Preview is a render too.
  REQUIRE(context->AppendAssistant({"", "", {{"call_1", "read", "{}"}}}).ok());
  REQUIRE(context->AppendToolResult({"call_1", "line three", false}).ok());
  const StatusOr<BuiltRequest> preview = context->Preview();
  REQUIRE(preview.ok());
  CHECK(preview->previous_render_serial == third.render_serial);
  CHECK(preview->unchanged_bytes == third.history_end_bytes);
  // An edit in the history: shared up to the edited segment's message at most.
  HistoryEdit mask;
  mask.edits.push_back({*result, SegmentEdit::Action::kMask, "[masked]"});
  REQUIRE(context->ApplyEdit(mask, "test", "mask").ok());
  const BuiltRequest masked = BuildAfter(*context, *preview);
  CHECK(masked.unchanged_bytes > masked.stable_prefix_bytes);
  CHECK(masked.unchanged_bytes < preview->history_end_bytes);
  // A changed system prompt: the header is rebuilt, nothing is known to be shared.
  REQUIRE(context->SetSystemPrompt("You are another test.").ok());
  const BuiltRequest system = BuildAfter(*context, masked);
  CHECK(system.unchanged_bytes == 0);
  // A rewound context renders anew: nothing is known to be shared, and a serial is never given
  // twice.
  const ContextSnapshot snapshot = context->Snapshot();
  REQUIRE(context->AppendUser("More.").ok());
  const BuiltRequest more = BuildAfter(*context, system);
  REQUIRE(context->Rewind(snapshot).ok());
  const BuiltRequest rewound = MustBuild(*context);
  CHECK(rewound.render_serial > more.render_serial);
  CHECK(rewound.previous_render_serial == 0);
  CHECK(rewound.unchanged_bytes == 0);
}

// A system prompt, a user message and `n` tool calls answered by 400 bytes each ('a', 'b', ...);
// the results' segment ids.
std::vector<std::string> ReadFiles(Context& context, int n) {
  REQUIRE(context.SetSystemPrompt("You are a test.").ok());
  REQUIRE(context.AppendUser("Read the files.").ok());
  std::vector<std::string> results;
  for (int i = 0; i < n; ++i) {
    const std::string id = "call_" + std::to_string(i);
    REQUIRE(context.AppendAssistant({"", "", {{id, "read", "{}"}}}).ok());
    StatusOr<std::string> result =
        context.AppendToolResult({id, std::string(400, static_cast<char>('a' + i)), false});
    REQUIRE(result.ok());
    results.push_back(*result);
  }
  return results;
}

// A budget of `window` tokens with nothing reserved: the limit is the window.
Budget WindowOnly(int64_t window) {
  Budget budget;
  budget.window = window;
  budget.reserve_output = 0;
  budget.reserve_reasoning = 0;
  budget.reserve_headroom = 0;
  return budget;
}

// Masks one tool result the first time a build plans (round 0), whatever the budget.
class MaskOncePolicy final : public CompactionPolicy {
 public:
  std::string Name() const override { return "mask-once@1"; }
  bool ShouldCompact(const CompactionInput& input) const override {
    return input.round == 0 && !target.empty();
  }
  StatusOr<HistoryEdit> Plan(const CompactionInput&) override {
    HistoryEdit edit;
    edit.edits.push_back({target, SegmentEdit::Action::kMask, "[masked]"});
    target.clear();
    return edit;
  }
  std::string target;  // the segment id to mask; cleared once planned
};

TEST_CASE("a compacting build says what it shares with the render before the build",
          "[core][context]") {
  MaskOncePolicy policy;
  ContextOptions options;
  options.budget = Budget();
  options.compaction = &policy;
  auto context = NewContext(options);
  const std::vector<std::string> results = ReadFiles(*context, 4);
  const BuiltRequest before = MustBuild(*context);
  REQUIRE_FALSE(before.compaction.has_value());
  REQUIRE(context->AppendAssistant({"", "", {{"call_4", "read", "{}"}}}).ok());
  REQUIRE(context->AppendToolResult({"call_4", std::string(400, 'e'), false}).ok());
  // Without a request counter the build plans on the context's own count, masks the third result
  // and renders once.
  policy.target = results[2];
  const BuiltRequest built = MustBuild(*context);
  REQUIRE(built.compaction.has_value());
  CHECK(built.previous_render_serial == before.render_serial);
  CHECK(built.render_serial == before.render_serial + 1);
  CHECK(built.unchanged_bytes <= SharedBytes(before.body, built.body));
  // Shared up to the masked result's message: the two results before it at least.
  CHECK(built.unchanged_bytes > before.body.find(std::string(400, 'b')) + 400);
  CHECK(built.unchanged_bytes < before.body.find(std::string(400, 'c')));
  // The next build continues this one.
  const BuiltRequest next = BuildAfter(*context, built);
  CHECK(next.unchanged_bytes == built.history_end_bytes);
  // An edit before the build, earlier than the one the build makes: shared up to the first.
  HistoryEdit mask;
  mask.edits.push_back({results[0], SegmentEdit::Action::kMask, "[masked]"});
  REQUIRE(context->ApplyEdit(mask, "test", "mask").ok());
  policy.target = results[3];
  const BuiltRequest edited = MustBuild(*context);
  REQUIRE(edited.compaction.has_value());
  CHECK(edited.previous_render_serial == next.render_serial);
  CHECK(edited.unchanged_bytes <= SharedBytes(next.body, edited.body));
  CHECK(edited.unchanged_bytes < next.body.find(std::string(400, 'a')));
}


// A request counter that notes each body it counts (its bytes and where they are) and, when told
// to, overwrites the second byte of the first body it counts after counting it.
class NotingCounter final : public RequestTokenCounter {
 public:
  std::string Name() const override { return "noting"; }
  StatusOr<size_t> CountRequest(std::string_view body) const override {
    bodies.emplace_back(body);
    places.push_back(body.data());
    if (scribble && bodies.size() == 1) const_cast<char*>(body.data())[1] = '#';  // a std::string
    return body.size() / 4;
  }
  bool scribble = false;
  mutable std::vector<std::string> bodies;
  mutable std::vector<const char*> places;
};

// With a request counter a compacting build renders, counts, plans, edits and renders again: the
// second render is written into the first one's memory, and only from the edit on (the bytes
// before it are the first render's, not written again).
TEST_CASE("a compacting build's second render keeps the bytes before the edit and writes the rest",
          "[core][context]") {
  for (const bool scribble : {false, true}) {
    MaskOncePolicy policy;
    NotingCounter counter;
    ContextOptions options;
    options.budget = Budget();
    options.compaction = &policy;
    options.request_counter = &counter;
    auto context = NewContext(options);
    const std::vector<std::string> results = ReadFiles(*context, 4);
    MustBuild(*context);
    REQUIRE(context->AppendAssistant({"", "", {{"call_4", "read", "{}"}}}).ok());
    REQUIRE(context->AppendToolResult({"call_4", std::string(400, 'e'), false}).ok());
    policy.target = results[2];
    counter.bodies.clear();
    counter.places.clear();
    counter.scribble = scribble;
    const BuiltRequest built = MustBuild(*context);
    counter.scribble = false;
    REQUIRE(built.compaction.has_value());
    REQUIRE(counter.bodies.size() == 2);  // the render before the plan, the one after the edit
    CHECK(counter.places[1] == counter.places[0]);
    CHECK(counter.places[1] == built.body.data());
    CHECK(built.body.find(std::string(400, 'c')) == std::string::npos);
    CHECK(built.body.find(std::string(400, 'e')) != std::string::npos);
    const StatusOr<BuiltRequest> fresh = context->Preview();  // rendered whole
    REQUIRE(fresh.ok());
    if (!scribble) {
      CHECK(built.body == fresh->body);
      CHECK(counter.bodies[1] == built.body);
    } else {
      // The first render's second byte, overwritten after it was counted, is still there: the
      // second render did not write it. From the masked result on, every byte is the new render's.
      CHECK(built.body[1] == '#');
      CHECK(fresh->body[1] != '#');
      CHECK(built.body.substr(2) == fresh->body.substr(2));
    }
  }
}

// Context::PreviewBuild: the policy is asked once, on the context itself; nothing planned is
// Preview()'s request; a plan is applied to a copy holding the volatile items too, and gives the
// bytes and report Build() then gives; the context is left as it was.
TEST_CASE("PreviewBuild is the request Build then returns and leaves the context as it was",
          "[core][context]") {
  class CountingMaskPolicy final : public CompactionPolicy {
   public:
    std::string Name() const override { return "counting-mask@1"; }
    bool ShouldCompact(const CompactionInput& input) const override { return input.round == 0; }
    StatusOr<HistoryEdit> Plan(const CompactionInput& input) override {
      ++plans;
      predictions += input.prediction ? 1 : 0;
      HistoryEdit edit;
      if (!target.empty()) edit.edits.push_back({target, SegmentEdit::Action::kMask, "[masked]"});
      return edit;
    }
    std::string target;
    int plans = 0;
    int predictions = 0;  // plans asked with CompactionInput::prediction set
  } policy;
  ContextOptions options;
  options.budget = Budget();
  options.compaction = &policy;
  auto context = NewContext(options);
  const std::vector<std::string> results = ReadFiles(*context, 3);
  REQUIRE(context->SetVolatile("now", "12:00").ok());

  // Nothing planned: Preview()'s request.
  StatusOr<BuiltRequest> kept = context->PreviewBuild();
  REQUIRE(kept.ok());
  CHECK(policy.plans == 1);
  CHECK(policy.predictions == 1);
  CHECK_FALSE(kept->compaction.has_value());
  const StatusOr<BuiltRequest> preview = context->Preview();
  REQUIRE(preview.ok());
  CHECK(kept->body == preview->body);
  CHECK(kept->input_tokens == preview->input_tokens);

  // A plan that compacts: applied to a copy, asked for once, and rendered once (by the copy:
  // without a request counter the plan needs no render of this context).
  policy.target = results[1];
  const StatusOr<BuiltRequest> predicted = context->PreviewBuild();
  REQUIRE(predicted.ok());
  CHECK(policy.plans == 2);
  CHECK(predicted->render_serial == preview->render_serial + 1);
  REQUIRE(predicted->compaction.has_value());
  CHECK(predicted->compaction->masked == 1);
  CHECK(predicted->compaction->policy == "counting-mask@1");
  CHECK(predicted->body.find(std::string(400, 'b')) == std::string::npos);
  CHECK(predicted->body.find("now: 12:00") != std::string::npos);
  // The context is as it was.
  CHECK(context->Compactions().empty());
  const StatusOr<BuiltRequest> after = context->Preview();
  REQUIRE(after.ok());
  CHECK(after->body == preview->body);
  // Build() gives the same bytes and report.
  const BuiltRequest built = MustBuild(*context);
  CHECK(policy.plans == 3);
  CHECK(policy.predictions == 2);  // the build's plan is not a prediction
  REQUIRE(built.compaction.has_value());
  CHECK(built.body == predicted->body);
  CHECK(built.input_tokens == predicted->input_tokens);
  CHECK(built.compaction->reason == predicted->compaction->reason);
  CHECK(built.compaction->tokens_before == predicted->compaction->tokens_before);
  CHECK(built.compaction->tokens_after == predicted->compaction->tokens_after);
  CHECK(built.compaction->boundary_segment_id == predicted->compaction->boundary_segment_id);
  CHECK(built.compaction->invalidated_tokens == predicted->compaction->invalidated_tokens);

  // The next compacting predictions copy into the copy the last one kept: nothing of the last
  // prediction, or of the context as it was then, remains in them.
  REQUIRE(context->AppendAssistant({"", "", {{"call_9", "read", "{}"}}}).ok());
  REQUIRE(context->AppendToolResult({"call_9", std::string(400, 'z'), false}).ok());
  REQUIRE(context->SetVolatile("now", "12:05").ok());
  policy.target = results[2];
  const StatusOr<BuiltRequest> again = context->PreviewBuild();
  const StatusOr<BuiltRequest> twice = context->PreviewBuild();
  REQUIRE(again.ok());
  REQUIRE(twice.ok());
  CHECK(twice->body == again->body);
  CHECK(again->body.find(std::string(400, 'c')) == std::string::npos);
  CHECK(again->body.find(std::string(400, 'z')) != std::string::npos);
  CHECK(again->body.find("now: 12:05") != std::string::npos);
  CHECK(context->Compactions().size() == 1);
  const BuiltRequest built_again = MustBuild(*context);
  REQUIRE(built_again.compaction.has_value());
  CHECK(built_again.body == again->body);
  CHECK(built_again.input_tokens == again->input_tokens);
  CHECK(built_again.compaction->tokens_before == again->compaction->tokens_before);
}

// Above the limit with nothing the policy can do, PreviewBuild fails as Build() does and changes
// nothing; without a policy, as Preview() does.
TEST_CASE("PreviewBuild above the limit fails as Build would", "[core][context]") {
  class NothingPolicy final : public CompactionPolicy {
   public:
    std::string Name() const override { return "nothing@1"; }
    bool ShouldCompact(const CompactionInput&) const override { return true; }
    StatusOr<HistoryEdit> Plan(const CompactionInput&) override { return HistoryEdit{}; }
  } policy;
  for (bool with_policy : {true, false}) {
    INFO("with a policy: " << with_policy);
    ContextOptions options;
    options.budget = WindowOnly(200);
    if (with_policy) options.compaction = &policy;
    auto context = NewContext(options);
    REQUIRE(context->AppendUser(std::string(4000, 'x')).ok());
    const StatusOr<BuiltRequest> predicted = context->PreviewBuild();
    REQUIRE_FALSE(predicted.ok());
    CHECK(predicted.status().code() == StatusCode::kResourceExhausted);
    const std::string advice =
        with_policy ? "could not reduce it further" : "set ContextOptions::compaction";
    CHECK(predicted.status().message().find(advice) != std::string::npos);
    CHECK(context->Build().status().message() == predicted.status().message());
  }
}

// CountRequest counts the request Build() would render, volatile items included, below and above
// the limit: what Preview() counts on a context without the budget.
TEST_CASE("CountRequest counts the whole request above the limit too", "[core][context]") {
  ContextOptions limited_options;
  limited_options.budget = WindowOnly(2000);
  auto limited = NewContext(limited_options);
  auto unlimited = NewContext();
  for (Context* c : {limited.get(), unlimited.get()}) {
    REQUIRE(c->SetVolatile("now", std::string(300, 'v')).ok());
    REQUIRE(c->AppendUser("Read the files.").ok());
  }
  const size_t small = Must(limited->CountRequest());
  CHECK(small == Must(limited->Preview()).input_tokens);
  CHECK(small == Must(unlimited->Preview()).input_tokens);
  for (Context* c : {limited.get(), unlimited.get()}) {
    REQUIRE(c->AppendUser(std::string(12000, 'x')).ok());
  }
  REQUIRE(limited->Preview().status().code() == StatusCode::kResourceExhausted);
  const size_t large = Must(limited->CountRequest());
  CHECK(large == Must(unlimited->Preview()).input_tokens);
  CHECK(Must(limited->CountRequest()) == large);  // counting changes nothing
  REQUIRE(limited->RemoveVolatile("now").ok());
  CHECK(Must(limited->CountRequest()) < large);  // the volatile item was counted
}

TEST_CASE("a recycled body's memory holds the next render and the bytes are a fresh render's",
          "[core][context]") {
  // Two contexts given the same calls; only `reused` is handed memory back.
  MaskOncePolicy reused_policy, fresh_policy;
  ContextOptions reused_options, fresh_options;
  reused_options.budget = fresh_options.budget = Budget();
  reused_options.compaction = &reused_policy;
  fresh_options.compaction = &fresh_policy;
  auto reused = NewContext(reused_options);
  auto fresh = NewContext(fresh_options);
  std::vector<std::string> results;
  auto both = [&](const std::function<void(Context&)>& call) {
    call(*reused);
    call(*fresh);
  };
  both([](Context& c) { REQUIRE(c.SetSystemPrompt("You are a test.").ok()); });
  both([](Context& c) { REQUIRE(c.AppendUser("Read the files.").ok()); });
  auto read = [&](int i) {
    const std::string id = "call_" + std::to_string(i);
    both([&](Context& c) {
      REQUIRE(c.AppendAssistant({"", "", {{id, "read", "{}"}}}).ok());
      StatusOr<std::string> result =
          c.AppendToolResult({id, std::string(400, static_cast<char>('a' + i)), false});
      REQUIRE(result.ok());
      if (&c == reused.get()) results.push_back(*result);
    });
  };
  read(0);
  read(1);
  BuiltRequest first = MustBuild(*reused);
  REQUIRE(first.body == MustBuild(*fresh).body);
  // Memory far larger than any body here, holding bytes of its own: only its memory is used.
  constexpr size_t kLarge = size_t{16} << 20;
  std::string large = "not a request";
  large.reserve(kLarge);
  reused->Recycle(std::move(large));
  read(2);
  BuiltRequest second = MustBuild(*reused);
  const BuiltRequest second_fresh = MustBuild(*fresh);
  CHECK(second.body == second_fresh.body);
  CHECK(second.body.capacity() >= kLarge);
  CHECK(second_fresh.body.capacity() < kLarge);
  // Its own body handed back, then an edit and a volatile value: still the fresh render's bytes.
  reused->Recycle(std::move(second.body));
  HistoryEdit mask;
  mask.edits.push_back({results[0], SegmentEdit::Action::kMask, "[masked]"});
  both([&](Context& c) { REQUIRE(c.ApplyEdit(mask, "test", "mask").ok()); });
  both([](Context& c) { REQUIRE(c.SetVolatile("time", "noon").ok()); });
  BuiltRequest third = MustBuild(*reused);
  CHECK(third.body == MustBuild(*fresh).body);
  CHECK(third.body.capacity() >= kLarge);
  // A compacting build renders twice: its first render's memory holds the second.
  reused->Recycle(std::move(third.body));
  read(3);
  reused_policy.target = results[3];
  fresh_policy.target = results[3];
  const BuiltRequest compacted = MustBuild(*reused);
  const BuiltRequest compacted_fresh = MustBuild(*fresh);
  REQUIRE(compacted.compaction.has_value());
  CHECK(compacted.body == compacted_fresh.body);
  CHECK(compacted.body.capacity() >= kLarge);
  // Memory too small for the next body is let go: the body is rendered as usual.
  reused->Recycle(std::string(8, 'x'));
  read(4);
  CHECK(MustBuild(*reused).body == MustBuild(*fresh).body);
}

TEST_CASE("a body handed back holds the next ones as the history grows",
          "[core][context]") {
  auto context = NewContext();
  REQUIRE(context->SetSystemPrompt("You are a test.").ok());
  REQUIRE(context->AppendUser("Read the files.").ok());
  int calls = 0;
  auto read = [&](size_t bytes) {
    const std::string id = "call_" + std::to_string(calls++);
    REQUIRE(context->AppendAssistant({"", "", {{id, "read", "{}"}}}).ok());
    REQUIRE(context->AppendToolResult({id, id + std::string(bytes, 'r'), false}).ok());
  };
  for (int i = 0; i < 20; ++i) read(4000);  // a body of about 80 KB
  BuiltRequest built = MustBuild(*context);
  REQUIRE(built.body.size() > (size_t{64} << 10));
  // Each turn adds about 500 bytes and hands its body back: the next render writes where it was.
  // The first body outgrown (its capacity is rounded up to a multiple of 4 KB here) is replaced by
  // one with room for a quarter more, which holds all the others.
  int same_memory = 0;
  constexpr int kTurns = 40;
  for (int turn = 0; turn < kTurns; ++turn) {
    const char* memory = built.body.data();
    context->Recycle(std::move(built.body));
    read(400);
    built = MustBuild(*context);
    if (built.body.data() == memory) ++same_memory;
  }
  CHECK(same_memory >= kTurns - 1);
}


// A body handed back with its render serial is trusted to be that render: the next build keeps the
// bytes the two share and writes only the rest. (A byte changed in place shows which bytes were
// kept: it is sent as changed.) Handed back without the serial, of another size or of an earlier
// render, only its memory is used.
TEST_CASE("a body handed back unchanged with its render serial is continued in place",
          "[core][context]") {
  auto reused = NewContext();
  auto fresh = NewContext();
  auto both = [&](auto&& change) {
    change(*reused);
    change(*fresh);
  };
  both([](Context& c) { REQUIRE(c.SetSystemPrompt("You are a test.").ok()); });
  int turn = 0;
  auto add_turn = [&] {
    const std::string said = "turn " + std::to_string(turn++);
    both([&](Context& c) {
      REQUIRE(c.AppendUser(said).ok());
      REQUIRE(c.AppendAssistant({said + " answered", "", {}}).ok());
    });
  };
  // Marks the system prompt in `body` without changing its size.
  auto scribble = [](std::string& body) {
    const size_t at = body.find("You are a test.");
    REQUIRE(at != std::string::npos);
    body.replace(at, 15, "YOU ARE A TEST.");
  };
  add_turn();
  BuiltRequest built = MustBuild(*reused);
  REQUIRE(built.body == MustBuild(*fresh).body);

  // Unchanged: the next body equals a fresh render, written into the same memory.
  built.body.reserve(built.body.size() * 4);  // room for the next body, whatever the allocator did
  const char* memory = built.body.data();
  reused->Recycle(std::move(built.body), built.render_serial);
  add_turn();
  built = MustBuild(*reused);
  CHECK(built.body == MustBuild(*fresh).body);
  CHECK(built.body.data() == memory);

  // Trusted, not compared: the changed byte is among those kept.
  scribble(built.body);
  reused->Recycle(std::move(built.body), built.render_serial);
  add_turn();
  built = MustBuild(*reused);
  CHECK(built.body.find("YOU ARE A TEST.") != std::string::npos);
  std::string expected = MustBuild(*fresh).body;
  scribble(expected);
  CHECK(built.body == expected);

  // Without the serial (the body still holds the changed byte): overwritten whole.
  reused->Recycle(std::move(built.body));
  add_turn();
  built = MustBuild(*reused);
  CHECK(built.body == MustBuild(*fresh).body);
  // Of another size than that render's: not that render, overwritten whole.
  scribble(built.body);
  built.body.push_back(' ');
  reused->Recycle(std::move(built.body), built.render_serial);
  add_turn();
  built = MustBuild(*reused);
  CHECK(built.body == MustBuild(*fresh).body);
  // Of an earlier render: the context rendered since, overwritten whole.
  const uint64_t earlier = built.render_serial;
  scribble(built.body);
  const BuiltRequest since = MustBuild(*reused);
  reused->Recycle(std::move(built.body), earlier);
  add_turn();
  built = MustBuild(*reused);
  CHECK(since.render_serial != earlier);
  CHECK(built.body == MustBuild(*fresh).body);
}

}  // namespace
}  // namespace strata
