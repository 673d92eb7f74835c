// Tests of contexts attached to a store: every change persisted before the call returns, restores
// that render byte-identically (same process and across processes), refused changes rolled back.
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>

#include "strata/builtin_policies.h"
#include "strata/replay/trace.h"
#include "strata/store.h"
#include "testing/postgres_testing.h"
#include "testing/traces.h"
#include "unit/store/store_test_util.h"

namespace strata {
namespace {

using testing::Describe;
using testing::TempDir;

std::string TracePath(const std::string& name) {
  return testing::TestTracePath(name);
}

std::vector<TraceMessage> LoadTrace(const std::string& name) {
  auto trace = ReadTrace(TracePath(name));
  if (!trace.ok()) FAIL(trace.status().ToString());
  return std::move(trace).value();
}

std::vector<std::string> DescribeAll(const std::vector<Segment>& segments) {
  std::vector<std::string> out;
  for (const Segment& s : segments) out.push_back(Describe(s));
  return out;
}

ContextOptions Options(const std::string& id) {
  ContextOptions options;
  options.agent.id = id;
  options.agent.tenant = "t";
  options.hygiene.max_segment_tokens = 600;  // truncate often: originals go to the store
  return options;
}

// The request body, or the segments when tool calls are open (a request cannot be built then).
std::string Render(const Context& context) {
  auto built = context.Preview();
  if (built.ok()) return built->body;
  std::string out = "unbuildable:";
  for (const Segment& s : context.Segments()) out += Describe(s) + "\n";
  return out;
}

// Replays `messages` into `context`, returning every request body rendered on the way.
std::vector<std::string> Replay(const std::vector<TraceMessage>& messages, Context& context) {
  std::vector<std::string> bodies;
  Status status =
      ReplayTrace(messages, context, [&](const TraceMessage&, const BuiltRequest& request) {
        bodies.push_back(request.body);
        return Status::Ok();
      });
  REQUIRE(status.ok());
  return bodies;
}

const char* const kTrace = "mini-swe-agent/django__django-14315.jsonl";

TEST_CASE("a restored context renders byte-identically and continues identically", "[store]") {
  STRATA_FOR_EACH_STORE_BACKEND(dir);
  std::vector<TraceMessage> trace = LoadTrace(kTrace);
  REQUIRE(trace.size() > 20);
  size_t half = trace.size() / 2;
  while (half < trace.size() && trace[half].role != TraceRole::kAssistant)
    ++half;  // a buildable point
  REQUIRE(half < trace.size());
  std::vector<TraceMessage> first(trace.begin(), trace.begin() + half);
  std::vector<TraceMessage> rest(trace.begin() + half, trace.end());

  // Reference: one uninterrupted in-memory context.
  auto reference = Context::Create(Options("agent"));
  REQUIRE(reference.ok());
  Replay(first, **reference);

  std::string body_before;
  {
    auto store = dir.Open();
    REQUIRE(store.ok());
    auto context = CreateContext(**store, Options("agent"));
    REQUIRE(context.ok());
    Replay(first, **context);
    body_before = (*context)->Build()->body;
    CHECK(body_before == (*reference)->Build()->body);
  }
  auto store = dir.Open();
  REQUIRE(store.ok());
  auto restored = OpenContext(**store, "agent");
  REQUIRE(restored.ok());
  CHECK((*restored)->Build()->body == body_before);
  CHECK(DescribeAll((*restored)->Segments()) == DescribeAll((*reference)->Segments()));
  CHECK((*restored)->Stats().turns == (*reference)->Stats().turns);
  for (const Segment& s : (*reference)->Segments()) {
    if (s.recall_id.empty()) continue;
    auto original = (*restored)->Recall(s.recall_id);
    REQUIRE(original.ok());
    CHECK(*original == *(*reference)->Recall(s.recall_id));
    CHECK(*(*store)->LoadOriginal("agent", s.recall_id) == *original);
  }

  // Continuing after the restore gives the same bytes as never stopping.
  auto continued_reference =
      ReplayTrace(rest, **reference, [](auto&, auto&) { return Status::Ok(); });
  REQUIRE(continued_reference.ok());
  REQUIRE(ReplayTrace(rest, **restored, [](auto&, auto&) { return Status::Ok(); }).ok());
  CHECK(Render(**restored) == Render(**reference));
  // And the store followed.
  auto again = OpenContext(**store, "agent");
  REQUIRE(again.ok());
  CHECK(Render(**again) == Render(**reference));
}

TEST_CASE("a rewound context is rewound in the store: segments, originals and turn", "[store]") {
  STRATA_FOR_EACH_STORE_BACKEND(dir);
  std::vector<TraceMessage> trace = LoadTrace(kTrace);
  size_t half = trace.size() / 2;
  while (half < trace.size() && trace[half].role != TraceRole::kAssistant) ++half;
  REQUIRE(half < trace.size());
  std::vector<TraceMessage> first(trace.begin(), trace.begin() + half);
  std::vector<TraceMessage> rest(trace.begin() + half, trace.end());
  auto store = dir.Open();
  REQUIRE(store.ok());
  auto context = CreateContext(**store, Options("agent"));
  REQUIRE(context.ok());
  Replay(first, **context);
  const std::string body_before = Render(**context);
  const ContextSnapshot snapshot = (*context)->Snapshot();
  const int64_t blobs_before = (*store)->Stats()->blobs;
  REQUIRE(ReplayTrace(rest, **context, [](auto&, auto&) { return Status::Ok(); }).ok());
  REQUIRE((*context)->Snapshot().originals.size() > snapshot.originals.size());

  REQUIRE((*context)->Rewind(snapshot).ok());
  CHECK(Render(**context) == body_before);
  auto stored = (*store)->LoadSnapshot("agent");
  REQUIRE(stored.ok());
  CHECK(stored->turn == snapshot.turn);
  CHECK(stored->originals == snapshot.originals);
  auto again = OpenContext(**store, "agent");
  REQUIRE(again.ok());
  CHECK(Render(**again) == body_before);
  CHECK(DescribeAll((*again)->Segments()) == DescribeAll((*context)->Segments()));
  CHECK((*store)->GetAgent("agent")->turn == snapshot.turn);
  CHECK((*store)->Stats()->blobs == blobs_before);  // the blobs only the undone part used are gone
}

TEST_CASE("many agents share one store without mixing", "[store]") {
  STRATA_FOR_EACH_STORE_BACKEND(dir);
  auto store = dir.Open();
  REQUIRE(store.ok());
  std::vector<std::string> names = {kTrace, "mini-swe-agent/sympy__sympy-13031.jsonl",
                                    "swe-agent/ctf-forensics-flash.jsonl"};
  std::vector<std::string> bodies;
  for (const std::string& name : names) {
    auto context = CreateContext(**store, Options(TraceAgentId(name)));
    REQUIRE(context.ok());
    Replay(LoadTrace(name), **context);
    bodies.push_back(Render(**context));
  }
  CHECK(CreateContext(**store, Options(TraceAgentId(kTrace))).status().code() ==
        StatusCode::kAlreadyExists);
  auto agents = (*store)->ListAgents();
  REQUIRE(agents.ok());
  CHECK(agents->size() == names.size());
  for (size_t i = 0; i < names.size(); ++i) {
    auto context = OpenContext(**store, TraceAgentId(names[i]));
    REQUIRE(context.ok());
    CHECK(Render(**context) == bodies[i]);
  }
  CHECK(OpenContext(**store, "nobody").status().code() == StatusCode::kNotFound);
}

TEST_CASE("a change the store refuses is rolled back in the context", "[store]") {
  TempDir dir;
  StoreOptions store_options;
  store_options.max_pages = 30;
  store_options.compression_level = 0;
  auto store = OpenSqliteStore(dir.File("a.db"), store_options);
  REQUIRE(store.ok());
  ContextOptions options = Options("a");
  options.hygiene.max_segment_tokens = 0;
  auto context = CreateContext(**store, options);
  REQUIRE(context.ok());
  REQUIRE((*context)->SetSystemPrompt("You are terse.").ok());
  std::string last_body;
  Status status;
  for (int i = 0; i < 500; ++i) {
    StatusOr<std::string> id = (*context)->AppendUser(std::string(3000 + i, 'a' + i % 26) + "\n");
    if (!id.ok()) {
      status = id.status();
      break;
    }
    last_body = (*context)->Build()->body;
  }
  REQUIRE_FALSE(status.ok());
  CHECK(status.code() == StatusCode::kResourceExhausted);
  CHECK((*context)->Build()->body == last_body);  // the refused append left no trace
  auto restored = OpenContext(**store, "a");
  REQUIRE(restored.ok());
  CHECK((*restored)->Build()->body == last_body);
}

TEST_CASE("growth points follow the context's layers", "[store]") {
  STRATA_FOR_EACH_STORE_BACKEND(dir);
  auto store = dir.Open();
  REQUIRE(store.ok());
  auto context = CreateContext(**store, Options("a"));
  REQUIRE(context.ok());
  Status status =
      ReplayTrace(LoadTrace(kTrace), **context, [&](const TraceMessage&, const BuiltRequest&) {
        return (*store)->RecordGrowth(GrowthPointOf(**context));
      });
  REQUIRE(status.ok());
  auto curve = (*store)->Growth("a");
  REQUIRE(curve.ok());
  REQUIRE(curve->size() > 10);
  for (size_t i = 1; i < curve->size(); ++i) {
    CHECK(curve->at(i).turn > curve->at(i - 1).turn);
    CHECK(curve->at(i).layer_tokens[static_cast<int>(Layer::kHistory)] >=
          curve->at(i - 1).layer_tokens[static_cast<int>(Layer::kHistory)]);
  }
  CHECK(curve->back().layer_tokens[static_cast<int>(Layer::kSystem)] > 0);
}

}  // namespace
}  // namespace strata

namespace strata {
namespace {

TEST_CASE("a compacting context stores its compactions as events and restores byte-identically",
          "[store][compact]") {
  STRATA_FOR_EACH_STORE_BACKEND(dir);
  auto store = dir.Open();
  REQUIRE(store.ok());
  auto policy = MakeStrataPolicy();
  ContextOptions options = Options("compacting");
  Budget budget;
  budget.window = 3000;
  budget.reserve_output = budget.reserve_reasoning = budget.reserve_headroom = 0;
  options.budget = budget;
  options.compaction = policy.get();
  auto context = CreateContext(**store, options);
  REQUIRE(context.ok());
  REQUIRE((*context)->AppendUser("task: read the modules").ok());
  for (int t = 1; t <= 25; ++t) {
    const std::string id = "call_" + std::to_string(t);
    REQUIRE((*context)->AppendAssistant({"reading", "", {{id, "bash", "{\"command\": \"cat m" + std::to_string(t) + ".py\"}"}}}).ok());
    std::string output;
    for (int line = 0; line < 25; ++line) output += "def function_" + std::to_string(t) + "_" + std::to_string(line) + "(): pass\n";
    REQUIRE((*context)->AppendToolResult({id, output, false}).ok());
    REQUIRE((*context)->Build().ok());
  }
  const size_t compactions = (*context)->Compactions().size();
  REQUIRE(compactions > 0);
  auto events = (*store)->Events("compacting", "compaction");
  REQUIRE(events.ok());
  CHECK(events->size() == compactions);
  CHECK_THAT(events->front().payload_json, Catch::Contains("\"policy\":\"strata@1\"") &&
                                               Catch::Contains("\"invalidated_tokens\""));

  auto reopened = OpenContext(**store, "compacting", options);
  REQUIRE(reopened.ok());
  const Context& a = **context;
  const Context& b = **reopened;
  CHECK(b.Preview()->body == a.Preview()->body);
  size_t masked = 0;
  for (const Segment& s : b.Segments()) {
    if (s.state == SegmentState::kMasked) {
      ++masked;
      CHECK(s.policy == "strata@1");
      CHECK(b.Recall(s.recall_id).ok());
    }
  }
  CHECK(masked > 0);
}

}  // namespace
}  // namespace strata

namespace strata {
namespace {

TEST_CASE("a summary's summarizer is stored with the segment and in the compaction event", "[store][compact]") {
  STRATA_FOR_EACH_STORE_BACKEND(dir);
  auto store = dir.Open();
  REQUIRE(store.ok());
  ContextOptions options = Options("summarized");
  auto context = CreateContext(**store, options);
  REQUIRE(context.ok());
  StatusOr<std::string> first = (*context)->AppendUser("task: read the modules");
  StatusOr<std::string> second = (*context)->AppendUser("and fix them");
  REQUIRE(first.ok());
  REQUIRE(second.ok());
  HistoryEdit edit;
  edit.summaries.push_back({{*first, *second}, "[the task: read and fix the modules]", "handwritten@2"});
  StatusOr<CompactionReport> report = (*context)->ApplyEdit(edit, "test@1", "test");
  REQUIRE(report.ok());
  CHECK(report->summarizer == "handwritten@2");

  auto events = (*store)->Events("summarized", "compaction");
  REQUIRE(events.ok());
  REQUIRE(events->size() == 1);
  CHECK_THAT(events->front().payload_json, Catch::Contains(R"("summarizer":"handwritten@2")"));
  auto reopened = OpenContext(**store, "summarized", options);
  REQUIRE(reopened.ok());
  size_t summaries = 0;
  for (const Segment& s : (*reopened)->Segments()) {
    if (s.kind != SegmentKind::kSummary) continue;
    ++summaries;
    CHECK(s.name == "handwritten@2");
    CHECK(s.policy == "test@1");
  }
  CHECK(summaries == 1);
}

}  // namespace
}  // namespace strata
