#include "strata/builtin_policies.h"

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>
#include <set>

#include "testing/context_testing.h"
#include "testing/status_testing.h"

namespace strata {
namespace {

using testing::Must;
using testing::MustBuild;
using testing::PairingError;

// A context with a 4-bytes-per-token estimator, a budget of `limit` tokens and the given policy.
std::unique_ptr<Context> BudgetedContext(CompactionPolicy* policy, int64_t limit, double trigger = 0.9,
                                         double target = 0.5, HygieneOptions hygiene = {}) {
  ContextOptions options;
  options.agent.id = "compact-test";
  Budget budget;
  budget.window = limit;
  budget.reserve_output = budget.reserve_reasoning = budget.reserve_headroom = 0;
  budget.trigger = BudgetLimit::Fraction(trigger);
  budget.target = BudgetLimit::Fraction(target);
  options.budget = budget;
  options.compaction = policy;
  options.hygiene = hygiene;
  options.hygiene.deduplicate = false;
  return testing::NewContext(options);
}

std::string Output(int turn, size_t lines) {
  std::string out = "<returncode>1</returncode>\n";
  for (size_t i = 0; i < lines; ++i) {
    out += "src/module_" + std::to_string(turn) + ".py:" + std::to_string(i) + ": def helper_function_" +
           std::to_string(turn) + "(value): return value\n";
  }
  return out;
}

void Turn(Context& context, int turn, size_t lines = 20) {
  const std::string id = "call_" + std::to_string(turn);
  REQUIRE(context.AppendAssistant({"THOUGHT: look at module " + std::to_string(turn), "",
                                   {{id, "bash", R"({"command": "grep -n def src/module_)" +
                                                     std::to_string(turn) + R"(.py"})"}}})
              .ok());
  REQUIRE(context.AppendToolResult({id, Output(turn, lines), false}).ok());
}

size_t CommonPrefix(const std::string& a, const std::string& b) {
  size_t n = 0;
  while (n < a.size() && n < b.size() && a[n] == b[n]) ++n;
  return n;
}

TEST_CASE("the strata policy masks old tool results with informative placeholders", "[compact]") {
  // Above the trigger (masking after use, below it, narrows the protections by design; see
  // cost_model_test.cc).
  StrataPolicyOptions options;
  options.mask_after_use = false;
  auto policy = MakeStrataPolicy(options);
  auto context = BudgetedContext(policy.get(), 8000);
  REQUIRE(context->SetSystemPrompt("You are a coding agent.").ok());
  REQUIRE(context->AppendUser("Fix the bug in src/.").ok());
  for (int t = 1; t <= 30; ++t) {
    Turn(*context, t);
    BuiltRequest request = MustBuild(*context);
    CHECK(request.input_tokens <= 8000);
    CHECK(PairingError(request.body).empty());
  }
  REQUIRE_FALSE(context->Compactions().empty());
  const CompactionReport& report = context->Compactions().front();
  CHECK(report.policy == "strata@1");
  CHECK(report.masked > 0);
  CHECK(report.tokens_before > 0.9 * 8000);
  CHECK_THAT(report.reason, Catch::Contains("above the trigger"));

  // The last three tool results are intact; masked ones carry a placeholder and a recall id.
  std::vector<Segment> results;
  for (const Segment& s : context->Segments()) {
    if (s.kind == SegmentKind::kToolResult || s.kind == SegmentKind::kErrorLog) results.push_back(s);
  }
  REQUIRE(results.size() == 30);
  for (size_t i = results.size() - 3; i < results.size(); ++i) CHECK(results[i].state == SegmentState::kLive);
  const Segment* masked = nullptr;
  for (const Segment& s : results) {
    if (s.state == SegmentState::kMasked) {
      masked = &s;
      break;
    }
  }
  REQUIRE(masked != nullptr);
  CHECK(masked->policy == "strata@1");
  CHECK_THAT(masked->content, Catch::StartsWith("[strata: masked output of bash(command=\"grep -n def src/module_"));
  // Identifiers the call's arguments already show are not repeated.
  CHECK_THAT(masked->content, Catch::Contains("exit 1") && Catch::Contains("mentions: helper_function_") &&
                                  Catch::Contains(masked->recall_id));
  auto original = context->Recall(masked->recall_id);
  REQUIRE(original.ok());
  CHECK_THAT(*original, Catch::StartsWith("<returncode>1</returncode>"));
}

TEST_CASE("compaction runs rarely: above the trigger, down to the target", "[compact]") {
  // Hysteresis alone: masking after use, below the trigger, is covered in cost_model_test.cc.
  StrataPolicyOptions options;
  options.mask_after_use = false;
  auto policy = MakeStrataPolicy(options);
  auto context = BudgetedContext(policy.get(), 10000, 0.9, 0.5);
  REQUIRE(context->AppendUser("task").ok());
  size_t builds = 0;
  for (int t = 1; t <= 60; ++t) {
    Turn(*context, t);
    BuiltRequest request = MustBuild(*context);
    ++builds;
    if (request.compaction) {
      CHECK(request.compaction->tokens_before > 9000);
      CHECK(request.input_tokens <= 5000 + 200);  // the target, up to one placeholder's rounding
    }
  }
  const size_t compactions = context->Compactions().size();
  CHECK(compactions >= 2);
  CHECK(compactions * 5 < builds);  // hysteresis: far fewer compactions than requests
}

TEST_CASE("between compactions the history only grows, a compaction keeps everything before its boundary",
          "[compact]") {
  auto policy = MakeStrataPolicy();
  auto context = BudgetedContext(policy.get(), 8000);
  REQUIRE(context->SetSystemPrompt("sys").ok());
  REQUIRE(context->AppendUser("task").ok());
  std::string previous;
  size_t previous_end = 0;
  for (int t = 1; t <= 40; ++t) {
    Turn(*context, t);
    BuiltRequest request = MustBuild(*context);
    if (!previous.empty()) {
      if (!request.compaction) {
        CHECK(request.body.compare(0, previous_end, previous, 0, previous_end) == 0);  // I7
      } else {
        // I3: the bytes before the boundary are unchanged; the change starts at the boundary.
        nlohmann::json old_request = nlohmann::json::parse(previous);
        const std::string& boundary = request.compaction->boundary_segment_id;
        CHECK_FALSE(boundary.empty());
        const size_t common = CommonPrefix(previous, request.body);
        CHECK(common >= request.stable_prefix_bytes);
        CHECK(request.compaction->invalidated_tokens > 0);
      }
    }
    previous = request.body;
    previous_end = request.history_end_bytes;
  }
}

TEST_CASE("the boundary is the latest one that reaches the target", "[compact]") {
  auto policy = MakeStrataPolicy();
  // Trigger at the limit: only Compact(force) compacts here.
  auto context = BudgetedContext(policy.get(), 20000, 1.0, 0.5);
  REQUIRE(context->AppendUser("task").ok());
  for (int t = 1; t <= 14; ++t) Turn(*context, t, 45 + t % 4);
  const size_t before = context->InputTokens();
  REQUIRE(before > 10000);
  REQUIRE(before < 20000);
  auto report = context->Compact(/*force=*/true);
  REQUIRE(report.ok());
  REQUIRE(report->has_value());
  const CompactionReport& r = **report;
  CHECK(r.tokens_after <= 10000);
  // Everything before the boundary is untouched...
  bool at_or_after = false;
  for (const Segment& s : context->Segments()) {
    if (s.id == r.boundary_segment_id) at_or_after = true;
    if (!at_or_after) CHECK(s.state == SegmentState::kLive);
  }
  // ...and the boundary could not have been later: without masking the boundary segment the
  // target would not have been reached (masks are chosen oldest first from the boundary on).
  const Segment* boundary = context->Find(r.boundary_segment_id);
  REQUIRE(boundary != nullptr);
  REQUIRE(boundary->state == SegmentState::kMasked);
  auto original = context->Recall(boundary->recall_id);
  REQUIRE(original.ok());
  const size_t saving = (original->size() + 3) / 4 - boundary->tokens;
  CHECK(r.tokens_after + saving > 10000);
  // Re-forcing does nothing: already at the target.
  auto again = context->Compact(/*force=*/true);
  REQUIRE(again.ok());
  CHECK_FALSE(again->has_value());
}

TEST_CASE("pinned content that cannot fit fails with RESOURCE_EXHAUSTED naming the layers", "[compact]") {
  auto policy = MakeStrataPolicy();
  auto context = BudgetedContext(policy.get(), 2000);
  REQUIRE(context->SetSystemPrompt(std::string(12000, 'x')).ok());  // ~3,000 tokens, pinned
  REQUIRE(context->AppendUser("task").ok());
  Status s = context->Build().status();
  CHECK(s.code() == StatusCode::kResourceExhausted);
  CHECK_THAT(s.message(), Catch::Contains("budget allows 2,000") && Catch::Contains("system 3,000"));
  // Preview never returns an over-budget request either.
  CHECK(context->Preview().status().code() == StatusCode::kResourceExhausted);
}

TEST_CASE("without a policy an over-budget Build fails instead of sending", "[compact]") {
  auto context = BudgetedContext(nullptr, 1000);
  REQUIRE(context->AppendUser(std::string(8000, 'y')).ok());
  Status s = context->Build().status();
  CHECK(s.code() == StatusCode::kResourceExhausted);
  CHECK_THAT(s.message(), Catch::Contains("ContextOptions::compaction"));
  CHECK(context->Compact().status().code() == StatusCode::kFailedPrecondition);
}

TEST_CASE("when masking is not enough the oldest turns become a summary, the task stays", "[compact]") {
  auto policy = MakeStrataPolicy();
  auto context = BudgetedContext(policy.get(), 6000, 0.9, 0.5);
  REQUIRE(context->SetSystemPrompt("sys").ok());
  REQUIRE(context->AppendUser("TASK: fix module parsing").ok());
  for (int t = 1; t <= 40; ++t) {
    // Long assistant messages: masking tool results alone cannot keep up.
    const std::string id = "call_" + std::to_string(t);
    REQUIRE(context->AppendAssistant({"THOUGHT: " + std::string(600, 'a' + t % 26), "",
                                      {{id, "bash", R"({"command": "ls"})"}}}).ok());
    REQUIRE(context->AppendToolResult({id, "file_" + std::to_string(t) + ".py", false}).ok());
    BuiltRequest request = MustBuild(*context);
    CHECK(request.input_tokens <= 6000);
    CHECK(PairingError(request.body).empty());
  }
  bool summarized = false;
  for (const CompactionReport& r : context->Compactions()) summarized |= r.summarized > 0;
  CHECK(summarized);
  const std::vector<Segment> segments = context->Segments();
  const auto task = std::find_if(segments.begin(), segments.end(), [](const Segment& s) {
    return s.content == "TASK: fix module parsing";
  });
  REQUIRE(task != segments.end());
  CHECK(task->state == SegmentState::kLive);
  const auto summary = std::find_if(segments.begin(), segments.end(), [](const Segment& s) {
    return s.kind == SegmentKind::kSummary && s.state == SegmentState::kLive;
  });
  REQUIRE(summary != segments.end());
  CHECK_THAT(summary->content, Catch::StartsWith("[strata: summary of turns"));
  CHECK(summary->policy == "strata@1");
  // Summarized segments keep their originals.
  for (const Segment& s : segments) {
    if (s.state == SegmentState::kSummarized && s.kind == SegmentKind::kToolCall) {
      CHECK(context->Recall(s.recall_id).ok());
    }
  }
}

TEST_CASE("a compacted context restores byte-identically", "[compact][restore]") {
  auto policy = MakeStrataPolicy();
  auto context = BudgetedContext(policy.get(), 6000, 0.9, 0.5);
  REQUIRE(context->AppendUser("task").ok());
  for (int t = 1; t <= 30; ++t) {
    Turn(*context, t, 10);
    (void)MustBuild(*context);
  }
  REQUIRE_FALSE(context->Compactions().empty());
  auto restored = Context::Restore(context->options(), context->Snapshot());
  REQUIRE(restored.ok());
  const Context& a = *context;
  const Context& b = **restored;
  CHECK(testing::MustPreview(a).body == testing::MustPreview(b).body);
}

TEST_CASE("ApplyEdit refuses edits that break pairing, touch pins or name unknown segments", "[compact]") {
  auto context = testing::NewContext();
  REQUIRE(context->AppendUser("task").ok());
  REQUIRE(context->AppendAssistant({"", "", {{"c1", "bash", "{}"}}}).ok());
  auto result = context->AppendToolResult({"c1", "output", false});
  REQUIRE(result.ok());
  const std::string assistant = context->Segments()[1].id;
  const std::string before = MustBuild(*context).body;

  HistoryEdit orphan;
  orphan.edits.push_back({assistant, SegmentEdit::Action::kEvict, ""});
  Status s = context->ApplyEdit(orphan, "test@1", "test").status();
  CHECK(s.code() == StatusCode::kInvalidArgument);
  CHECK_THAT(s.message(), Catch::Contains("without its assistant tool call"));

  HistoryEdit unknown;
  unknown.edits.push_back({"s999", SegmentEdit::Action::kEvict, ""});
  CHECK_THAT(context->ApplyEdit(unknown, "test@1", "").status().message(), Catch::Contains("s999"));

  HistoryEdit mask_user;
  mask_user.edits.push_back({context->Segments()[0].id, SegmentEdit::Action::kMask, "x"});
  CHECK_THAT(context->ApplyEdit(mask_user, "test@1", "").status().message(), Catch::Contains("only tool results"));

  HistoryEdit twice;
  twice.edits.push_back({*result, SegmentEdit::Action::kMask, "x"});
  twice.edits.push_back({*result, SegmentEdit::Action::kMask, "y"});
  CHECK_THAT(context->ApplyEdit(twice, "test@1", "").status().message(), Catch::Contains("twice"));
  CHECK(MustBuild(*context).body == before);  // refused whole

  // Evicting the call with its result is fine.
  HistoryEdit pair;
  pair.edits.push_back({assistant, SegmentEdit::Action::kEvict, ""});
  pair.edits.push_back({*result, SegmentEdit::Action::kEvict, ""});
  auto report = context->ApplyEdit(pair, "test@1", "manual");
  REQUIRE(report.ok());
  CHECK(report->evicted == 2);
  CHECK(report->boundary_segment_id == assistant);
  nlohmann::json j = nlohmann::json::parse(MustBuild(*context).body);
  CHECK(j["messages"].size() == 1);
}

// A mask changes no segment's part in the pairing, so its pairing is not checked by walking the
// history; an edit while a call is open is refused before that.
TEST_CASE("a mask is refused while a call is open and applied once it is answered", "[compact]") {
  auto context = testing::NewContext();
  REQUIRE(context->AppendUser("task").ok());
  REQUIRE(context->AppendAssistant({"", "", {{"c1", "bash", "{}"}}}).ok());
  auto first = context->AppendToolResult({"c1", "first output", false});
  REQUIRE(first.ok());
  REQUIRE(context->AppendAssistant({"", "", {{"c2", "bash", "{}"}}}).ok());
  HistoryEdit mask;
  mask.edits.push_back({*first, SegmentEdit::Action::kMask, "[masked]"});
  const Status open = context->ApplyEdit(mask, "test@1", "test").status();
  CHECK(open.code() == StatusCode::kFailedPrecondition);
  CHECK_THAT(open.message(), Catch::Contains("unanswered (c2)"));
  REQUIRE(context->AppendToolResult({"c2", "second output", false}).ok());
  REQUIRE(context->ApplyEdit(mask, "test@1", "test").ok());
  const std::string body = MustBuild(*context).body;
  CHECK(body.find("first output") == std::string::npos);
  CHECK(body.find("second output") != std::string::npos);
}

TEST_CASE("context_recall: the schema asks for recall_id and pages by offset and max_tokens",
          "[compact][recall]") {
  nlohmann::json schema = nlohmann::json::parse(RecallToolSchema());
  CHECK(schema.dump() == RecallToolSchema());  // canonical: byte-stable in the tools layer
  CHECK(schema["function"]["name"] == kRecallToolName);
  const nlohmann::json& parameters = schema["function"]["parameters"];
  CHECK(parameters["required"] == nlohmann::json::array({"recall_id"}));
  CHECK(parameters["properties"]["recall_id"]["type"] == "string");
  CHECK(parameters["properties"]["offset"]["type"] == "integer");
  CHECK(parameters["properties"]["max_tokens"]["type"] == "integer");
}

TEST_CASE("context_recall: a long original comes in pages that continue where the last ended",
          "[compact][recall]") {
  auto context = testing::NewContext();
  REQUIRE(context->SetTools("[" + RecallToolSchema() + "]").ok());
  REQUIRE(context->AppendUser("task").ok());
  REQUIRE(context->AppendAssistant({"", "", {{"c1", "bash", "{}"}}}).ok());
  const std::string original = Output(2, 40);
  auto result = context->AppendToolResult({"c1", original, false});
  REQUIRE(result.ok());
  HistoryEdit mask;
  mask.edits.push_back({*result, SegmentEdit::Action::kMask, "[masked]"});
  REQUIRE(context->ApplyEdit(mask, "test@1", "").ok());
  const std::string recall_id = context->Find(*result)->recall_id;
  auto ask = [&](const std::string& id, const std::string& arguments, size_t cap) {
    REQUIRE(context->AppendAssistant({"", "", {{id, kRecallToolName, arguments}}}).ok());
    auto answer = context->AnswerRecall(id, cap);
    REQUIRE(answer.ok());
    return context->Find(*answer)->content;
  };
  // The call's max_tokens bounds the page, which says how to go on.
  const std::string first = ask("c2", R"({"recall_id":")" + recall_id + R"(","max_tokens":60})", 0);
  REQUIRE_THAT(first, Catch::StartsWith("[" + recall_id + ": bytes 0-"));
  const size_t end = std::stoul(first.substr(first.find('-', recall_id.size() + 1) + 1));
  CHECK(end < original.size());
  CHECK(first.find("]\n" + original.substr(0, end) + "\n[") != std::string::npos);
  CHECK_THAT(first, Catch::EndsWith(std::to_string(original.size() - end) +
                                    " bytes remain: call context_recall with recall_id \"" +
                                    recall_id + "\" and offset " + std::to_string(end) + "]"));
  // The next page starts at that offset; the caller's limit (the recall share) bounds it too.
  const std::string second = ask("c3", R"({"recall_id":")" + recall_id + R"(","offset":)" +
                                           std::to_string(end) + "}", 60);
  CHECK_THAT(second, Catch::StartsWith("[" + recall_id + ": bytes " + std::to_string(end) + "-"));
  CHECK(second.find("bytes remain") != std::string::npos);
  // The rest at once without a limit; an offset past the end is explained, not an error.
  const std::string rest = ask("c4", R"({"recall_id":")" + recall_id + R"(","offset":)" +
                                         std::to_string(end) + "}", 0);
  CHECK_THAT(rest, Catch::EndsWith(original.substr(end) + "\n[end of " + recall_id + "]"));
  const std::string past = ask("c5", R"({"recall_id":")" + recall_id + R"(","offset":999999})", 0);
  CHECK_THAT(past, Catch::Contains("offset 999999 is past the end of " + recall_id));
  const std::string unnamed = ask("c6", R"({"offset":3})", 0);
  CHECK_THAT(unnamed, Catch::Contains("context_recall needs {\"recall_id\""));
}

TEST_CASE("context_recall: the schema is a valid tool and recall appends the original", "[compact][recall]") {
  auto context = testing::NewContext();
  REQUIRE(context->SetTools("[" + RecallToolSchema() + "]").ok());
  REQUIRE(context->AppendUser("task").ok());
  REQUIRE(context->AppendAssistant({"", "", {{"c1", "bash", "{}"}}}).ok());
  auto result = context->AppendToolResult({"c1", Output(1, 30), false});
  REQUIRE(result.ok());
  HistoryEdit mask;
  mask.edits.push_back({*result, SegmentEdit::Action::kMask, "[masked]"});
  REQUIRE(context->ApplyEdit(mask, "test@1", "").ok());
  const std::string recall_id = context->Find(*result)->recall_id;
  const std::string before = MustBuild(*context).body;

  REQUIRE(context->AppendAssistant({"", "", {{"c2", kRecallToolName, "{\"recall_id\": \"" + recall_id + "\"}"}}}).ok());
  CHECK(context->AnswerRecall("c9").status().code() == StatusCode::kInvalidArgument);
  auto answer = context->AnswerRecall("c2");
  REQUIRE(answer.ok());
  const std::string original = Output(1, 30);
  // Without max_tokens (the call's or the caller's), the one page is the whole original.
  CHECK(context->Find(*answer)->content == "[" + recall_id + ": bytes 0-" +
                                               std::to_string(original.size()) + " of " +
                                               std::to_string(original.size()) + "]\n" +
                                               original + "\n[end of " + recall_id + "]");
  const std::string after = MustBuild(*context).body;
  const size_t end = before.rfind(']');
  CHECK(after.compare(0, end, before, 0, end) == 0);  // recall only appends

  REQUIRE(context->AppendAssistant({"", "", {{"c3", kRecallToolName, R"({"recall_id": "r-nothing"})"}}}).ok());
  auto missing = context->AnswerRecall("c3");
  REQUIRE(missing.ok());
  CHECK_THAT(context->Find(*missing)->content, Catch::Contains("nothing is kept under recall id r-nothing"));
}

TEST_CASE("baselines: sliding drops the oldest turns, last-n masks all but the last n", "[compact][baselines]") {
  auto sliding = MakeSlidingWindowPolicy();
  auto context = BudgetedContext(sliding.get(), 3000, 1.0, 1.0);
  REQUIRE(context->AppendUser("task").ok());
  for (int t = 1; t <= 30; ++t) {
    Turn(*context, t, 10);
    BuiltRequest request = MustBuild(*context);
    CHECK(request.input_tokens <= 3000);
    CHECK(PairingError(request.body).empty());
  }
  REQUIRE_FALSE(context->Compactions().empty());
  CHECK(context->Compactions().front().policy == "sliding@1");
  CHECK(context->Segments()[0].state == SegmentState::kEvicted);  // the task went first

  auto last_n = MakeLastNPolicy(5);
  auto masked = BudgetedContext(last_n.get(), 100000, 1.0, 1.0);
  REQUIRE(masked->AppendUser("task").ok());
  for (int t = 1; t <= 12; ++t) {
    Turn(*masked, t, 5);
    (void)MustBuild(*masked);
  }
  size_t live = 0, omitted = 0;
  for (const Segment& s : masked->Segments()) {
    if (s.kind != SegmentKind::kToolResult && s.kind != SegmentKind::kErrorLog) continue;
    if (s.state == SegmentState::kLive) ++live;
    if (s.state == SegmentState::kMasked) {
      ++omitted;
      CHECK_THAT(s.content, Catch::StartsWith("[Old tool output omitted:"));
    }
  }
  CHECK(live == 5);
  CHECK(omitted == 7);
  CHECK(MakePolicyByName("strata").ok());
  CHECK_THAT(MakePolicyByName("lru").status().message(), Catch::Contains("known: strata, none, sliding, last-n"));
}

TEST_CASE(
    "above the hard limit a plan within the protections that cannot fit gives way to one that "
    "frees more",
    "[compact]") {
  // By hand (no tokenizer: 4 bytes a token, no per-message overhead): the task, a turn with a small
  // result, then three turns whose results are 3,000 tokens each, over a limit of 7,000. Within
  // the configured protections (the last 2 turns, the last 3 results) only the first turn can go,
  // which frees at most 140 tokens; relaxed to keep the latest result only, masking r3 (and r2)
  // fits.
  std::vector<Segment> segments;
  auto add = [&](std::string id, SegmentKind kind, int64_t turn, size_t tokens) -> Segment& {
    Segment s;
    s.id = std::move(id);
    s.kind = kind;
    s.turn = turn;
    s.content = std::string(tokens * 4, '.');
    s.tokens = tokens;
    segments.push_back(std::move(s));
    return segments.back();
  };
  add("task", SegmentKind::kUser, 0, 100);
  const size_t result_tokens[] = {120, 3000, 3000, 3000};
  for (int t = 1; t <= 4; ++t) {
    const std::string n = std::to_string(t);
    add("a" + n, SegmentKind::kToolCall, t, 20).tool_calls = {
        {"c" + n, "bash", "{\"command\":\"make " + n + "\"}"}};
    Segment& r = add("r" + n, SegmentKind::kToolResult, t, result_tokens[t - 1]);
    r.name = "bash";
    r.tool_call_id = "c" + n;
  }
  CompactionInput in;
  for (const Segment& s : segments) in.history.push_back(&s);
  for (const Segment& s : segments) in.total_tokens += s.tokens;
  in.history_tokens = in.total_tokens;  // 9,300
  in.limit_tokens = 7000;
  in.trigger_tokens = 6300;
  in.turn = 4;
  for (const bool cost_model : {false, true}) {
    INFO("cost model " << cost_model);
    StrataPolicyOptions options;
    options.cost_model = cost_model;
    auto policy = MakeStrataPolicy(options);
    const HistoryEdit edit = Must(policy->Plan(in));
    std::set<std::string> masked;
    size_t freed = 0;
    for (const SegmentEdit& e : edit.edits) {
      if (e.action != SegmentEdit::Action::kMask) continue;
      masked.insert(e.segment_id);
      freed += (e.segment_id == "r1" ? 120 : 3000) - e.placeholder.size() / 4;
    }
    for (const SummaryEdit& summary : edit.summaries) {
      for (const std::string& id : summary.replaces) {
        for (const Segment& s : segments) freed += s.id == id ? s.tokens : 0;
      }
      freed -= summary.content.size() / 4;
    }
    CHECK(masked.count("r3") == 1);
    CHECK(masked.count("r4") == 0);  // the latest result stays
    CHECK(in.total_tokens - freed <= in.limit_tokens);
  }
}

TEST_CASE("exclude_tools results and the last turns are never altered", "[compact]") {
  StrataPolicyOptions options;
  options.exclude_tools = {"read_spec"};
  auto policy = MakeStrataPolicy(options);
  auto context = BudgetedContext(policy.get(), 6000, 0.9, 0.5);
  REQUIRE(context->AppendUser("task").ok());
  REQUIRE(context->AppendAssistant({"", "", {{"spec", "read_spec", "{}"}}}).ok());
  const std::string spec = std::string("SPEC: ") + std::string(2000, 's');
  REQUIRE(context->AppendToolResult({"spec", spec, false}).ok());
  for (int t = 1; t <= 30; ++t) {
    Turn(*context, t, 10);
    (void)MustBuild(*context);
  }
  REQUIRE_FALSE(context->Compactions().empty());
  for (const Segment& s : context->Segments()) {
    if (s.tool_call_id == "spec") CHECK(s.content == spec);
  }
}

}  // namespace
}  // namespace strata

namespace strata {
namespace {

TEST_CASE("a masked placeholder states the size of the original, not of what hygiene kept",
          "[compact]") {
  StrataPolicyOptions options;
  options.mask_after_use = false;
  auto policy = MakeStrataPolicy(options);
  HygieneOptions hygiene;
  hygiene.max_segment_tokens = 2427;  // a 14,679-byte output keeps about 9,700 bytes
  auto context = BudgetedContext(policy.get(), 6000, 0.9, 0.5, hygiene);
  REQUIRE(context->AppendUser("Fix the bug in src/.").ok());
  std::string big;
  for (int i = 0; big.size() < 14679; ++i) big += "src/big.py:" + std::to_string(i) + ": def f(value): pass\n";
  big.resize(14679);
  REQUIRE(context->AppendAssistant({"read it", "", {{"call_0", "bash", R"({"command": "cat big"})"}}}).ok());
  REQUIRE(context->AppendToolResult({"call_0", big, false}).ok());
  const Segment* kept = nullptr;
  for (const Segment& s : context->Segments()) {
    if (s.tool_call_id == "call_0") kept = context->Find(s.id);
  }
  REQUIRE(kept != nullptr);
  REQUIRE(kept->hygiene == HygieneAction::kTruncated);
  const size_t kept_bytes = kept->content.size();
  REQUIRE(kept_bytes < 14679);
  for (int t = 1; t <= 4; ++t) Turn(*context, t, 12);

  StatusOr<std::optional<CompactionReport>> compacted = context->Compact(/*force=*/true);
  REQUIRE(compacted.ok());
  REQUIRE(compacted->has_value());
  const Segment* masked = context->Find(kept->id);
  REQUIRE(masked->state == SegmentState::kMasked);
  CHECK_THAT(masked->content, Catch::Contains(", 14,679 bytes"));
  std::string kept_text = std::to_string(kept_bytes);  // e.g. "9,708", as placeholders write it
  kept_text.insert(kept_text.size() - 3, ",");
  CHECK_THAT(masked->content, !Catch::Contains(kept_text + " bytes"));

  // The function itself: the original's size when given, else the content's.
  Segment result;
  result.content = "abc";
  CHECK_THAT(MaskPlaceholder(result, nullptr, "r-1", 0), Catch::Contains(", 3 bytes"));
  CHECK_THAT(MaskPlaceholder(result, nullptr, "r-1", 0, {}, 14679), Catch::Contains(", 14,679 bytes"));
}

}  // namespace
}  // namespace strata

namespace strata {
namespace {

// A custom summarizer: a fixed text, under its own name.
class FixedSummarizer final : public Summarizer {
 public:
  std::string Name() const override { return "handwritten@2"; }
  StatusOr<std::string> Summarize(const std::vector<const Segment*>& span, size_t,
                                  const Tokenizer&) override {
    return "[summary of " + std::to_string(span.size()) + " messages]";
  }
};

TEST_CASE("a custom summarizer's name is recorded on its summaries and in the report", "[compact]") {
  FixedSummarizer summarizer;
  StrataPolicyOptions options;
  options.summarizer = &summarizer;
  auto policy = MakeStrataPolicy(options);
  auto context = BudgetedContext(policy.get(), 6000, 0.9, 0.5);
  REQUIRE(context->AppendUser("TASK: fix module parsing").ok());
  std::optional<CompactionReport> summarized;
  for (int t = 1; t <= 40 && !summarized; ++t) {
    const std::string id = "call_" + std::to_string(t);
    REQUIRE(context->AppendAssistant({"THOUGHT: " + std::string(600, 'a' + t % 26), "",
                                      {{id, "bash", R"({"command": "ls"})"}}}).ok());
    REQUIRE(context->AppendToolResult({id, "file_" + std::to_string(t) + ".py", false}).ok());
    BuiltRequest request = MustBuild(*context);
    if (request.compaction && request.compaction->summarized > 0) summarized = request.compaction;
  }
  REQUIRE(summarized);
  CHECK(summarized->policy == "strata@1");
  CHECK(summarized->summarizer == "handwritten@2");
  CHECK_THAT(CompactionReportJson(*summarized), Catch::Contains(R"("summarizer":"handwritten@2")"));
  CHECK(context->Compactions().back().summarizer == "handwritten@2");
  size_t summaries = 0;
  for (const Segment& s : context->Segments()) {
    if (s.kind != SegmentKind::kSummary) continue;
    ++summaries;
    CHECK(s.name == "handwritten@2");
    CHECK_THAT(s.content, Catch::StartsWith("[summary of "));
  }
  CHECK(summaries > 0);
  // A compaction without a summary names no summarizer.
  CompactionReport masked_only;
  masked_only.masked = 1;
  CHECK_THAT(CompactionReportJson(masked_only), !Catch::Contains("summarizer"));
}

// A summarizer that counts its calls.
class CountingSummarizer final : public Summarizer {
 public:
  std::string Name() const override { return "counting@1"; }
  StatusOr<std::string> Summarize(const std::vector<const Segment*>& span, size_t,
                                  const Tokenizer&) override {
    ++calls;
    return "[summary of " + std::to_string(span.size()) + " messages]";
  }
  int calls = 0;
};

TEST_CASE("the build a prediction planned on a copy reuses its plan, a change plans anew",
          "[compact][incremental]") {
  CountingSummarizer summarizer;
  StrataPolicyOptions options;
  options.summarizer = &summarizer;
  auto policy = MakeStrataPolicy(options);
  auto context = BudgetedContext(policy.get(), 6000, 0.9, 0.5);
  REQUIRE(context->AppendUser("TASK: fix module parsing").ok());
  bool checked = false;
  int turns = 0;
  for (int t = 1; t <= 40 && !checked; ++t) {
    turns = t;
    const std::string id = "call_" + std::to_string(t);
    REQUIRE(context->AppendAssistant({"THOUGHT: " + std::string(600, 'a' + t % 26), "",
                                      {{id, "bash", R"({"command": "ls"})"}}}).ok());
    REQUIRE(context->AppendToolResult({id, "file_" + std::to_string(t) + ".py", false}).ok());
    // The prediction: the same context restored into a copy, built there.
    auto copy = Context::Restore(context->options(), context->Snapshot()).value();
    const int before = summarizer.calls;
    BuiltRequest predicted = MustBuild(*copy);
    if (!predicted.compaction || predicted.compaction->summarized == 0) {
      MustBuild(*context);
      continue;
    }
    REQUIRE(summarizer.calls == before + 1);
    BuiltRequest built = MustBuild(*context);  // nothing changed since: the same plan
    CHECK(summarizer.calls == before + 1);
    REQUIRE(built.compaction);
    CHECK(built.body == predicted.body);
    CHECK(built.compaction->summarized == predicted.compaction->summarized);
    CHECK(built.compaction->boundary_segment_id == predicted.compaction->boundary_segment_id);
    checked = true;
  }
  REQUIRE(checked);
  // A changed input (a segment's content differs under the same id) is planned again.
  auto a = BudgetedContext(policy.get(), 6000, 0.9, 0.5);
  auto b = BudgetedContext(policy.get(), 6000, 0.9, 0.5);
  for (auto* c : {a.get(), b.get()}) {
    REQUIRE(c->AppendUser("TASK: fix module parsing").ok());
    for (int t = 1; t <= turns; ++t) {
      const std::string id = "call_" + std::to_string(t);
      const char letter = static_cast<char>((c == a.get() ? 'a' : 'b') + t % 20);
      REQUIRE(c->AppendAssistant({"THOUGHT: " + std::string(600, letter), "",
                                  {{id, "bash", R"({"command": "ls"})"}}}).ok());
      REQUIRE(c->AppendToolResult({id, "file_" + std::to_string(t) + ".py", false}).ok());
    }
  }
  const int before = summarizer.calls;
  BuiltRequest first = MustBuild(*a);
  BuiltRequest second = MustBuild(*b);
  REQUIRE(first.compaction);
  REQUIRE(second.compaction);
  REQUIRE(first.compaction->summarized > 0);
  REQUIRE(second.compaction->summarized > 0);
  CHECK(summarizer.calls == before + 2);  // same ids, tokens and turns; other bytes
}

TEST_CASE("a placeholder names the exit status the output shows", "[compact]") {
  auto exit_of = [](std::string content) {
    Segment result;
    result.content = std::move(content);
    std::string text = MaskPlaceholder(result, nullptr, "r-1", 0);
    size_t at = text.find(", exit ");
    if (at == std::string::npos) return std::string();
    return text.substr(at + 7, text.find(';', at) - at - 7);
  };
  CHECK(exit_of("<returncode>2</returncode>\nboom") == "2");
  CHECK(exit_of("ran\nexit code 1\nexit code 3\n") == "3");           // the last one
  CHECK(exit_of("Exit status: 7 then exit code 12345 exit code x") == "7");  // no number: next marker
  CHECK(exit_of("exit code: 4") == "4");
  CHECK(exit_of("make: exit status -1") == "-1");
  CHECK(exit_of("no status here; exit codes vary") == "");
  CHECK(exit_of("xit code 5") == "");
}

}  // namespace
}  // namespace strata
