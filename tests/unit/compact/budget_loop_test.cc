// The budget loop of Context::Build() with a compaction policy (context.cc) and the compaction
// defects a first real application found: compactions that raised the token count, several rounds
// per build, duplicate references to outputs compaction had hidden, summaries that lost recall ids.
#include <catch2/catch.hpp>
#include <regex>
#include <set>

#include "strata/builtin_policies.h"
#include "testing/context_testing.h"

namespace strata {
namespace {

using testing::PairingError;

std::set<std::string> RecallIds(const std::string& text) {
  std::set<std::string> ids;
  static const std::regex id("r-[0-9a-f]{16}");
  for (auto it = std::sregex_iterator(text.begin(), text.end(), id); it != std::sregex_iterator(); ++it) {
    ids.insert(it->str());
  }
  return ids;
}

// A tool output of about `tokens` tokens (4 bytes each) that names files and functions.
std::string Output(const std::string& tag, size_t tokens) {
  std::string out = "<returncode>0</returncode>\n";
  for (size_t i = 0; out.size() < tokens * 4; ++i) {
    out += "src/" + tag + "/mod_" + std::to_string(i % 17) + ".py:" + std::to_string(i) + ": def handler_" + tag +
           "_" + std::to_string(i) + "(request): pass\n";
  }
  return out;
}

TEST_CASE("newcomer scenario: 8,000-token budget, 30 turns of large and repeated outputs", "[compact][budget]") {
  // The documented small-budget settings: truncation at a quarter of the budget, deduplication on,
  // the budget's default trigger and target.
  for (const bool cost_model : {true, false}) {
    CAPTURE(cost_model);
    StrataPolicyOptions policy_options;
    policy_options.cost_model = cost_model;
    auto policy = MakeStrataPolicy(policy_options);
    ContextOptions options;
    options.agent.id = "newcomer";
    Budget budget;
    budget.window = 8000;
    budget.reserve_output = budget.reserve_reasoning = budget.reserve_headroom = 0;
    options.budget = budget;
    options.compaction = policy.get();
    options.hygiene.max_segment_tokens = 2000;
    auto context = testing::NewContext(options);
    REQUIRE(context->SetSystemPrompt("You are a coding agent with two tools: search and read_file.").ok());
    REQUIRE(context->AppendUser("Find why handler_api_3 fails and fix it.").ok());
    size_t builds_with_compaction = 0, extra_rounds_in_steady_state = 0;
    for (int turn = 1; turn <= 30; ++turn) {
      CAPTURE(turn);
      // Large outputs, and every third one repeats an earlier call exactly (deduplicated).
      const bool repeat = turn % 3 == 0;
      const std::string tool = turn % 2 ? "search" : "read_file";
      const std::string tag = repeat ? "api" : "m" + std::to_string(turn);
      const std::string arguments = "{\"query\":\"" + tag + "\"}";
      const std::string id = "call_" + std::to_string(turn);
      REQUIRE(context->AppendAssistant({"Looking at " + tag + " next.", "", {{id, repeat ? "search" : tool, arguments}}})
                  .ok());
      const size_t size = repeat ? 1500 : 600 + static_cast<size_t>(turn * 97 % 2500);
      REQUIRE(context->AppendToolResult({id, Output(tag, repeat ? 1500 : size), false}).ok());
      const size_t compactions_before = context->Compactions().size();
      auto request = context->Build();
      REQUIRE(request.ok());
      CHECK(request->input_tokens <= 8000);
      CHECK(PairingError(request->body).empty());
      const size_t rounds = context->Compactions().size() - compactions_before;
      if (rounds > 0) {
        ++builds_with_compaction;
        if (builds_with_compaction > 1 && rounds > 1) ++extra_rounds_in_steady_state;
        REQUIRE(request->compaction);
        CHECK(request->compaction->rounds == rounds);
        // No compaction raises the token count: each round's own report, and the build's.
        for (size_t k = compactions_before; k < context->Compactions().size(); ++k) {
          CHECK(context->Compactions()[k].tokens_after < context->Compactions()[k].tokens_before);
        }
        CHECK(request->compaction->tokens_after < request->compaction->tokens_before);
      }
    }
    CHECK(builds_with_compaction > 0);
    CHECK(extra_rounds_in_steady_state == 0);
  }
}

TEST_CASE("an edit that would not reduce the input tokens is not applied by Build", "[compact][budget]") {
  // A policy that proposes a placeholder longer than the output it masks.
  class Inflating final : public CompactionPolicy {
   public:
    std::string Name() const override { return "inflating@1"; }
    bool ShouldCompact(const CompactionInput& in) const override { return in.total_tokens > in.trigger_tokens; }
    StatusOr<HistoryEdit> Plan(const CompactionInput& in) override {
      ++plans;
      HistoryEdit edit;
      for (const Segment* s : in.history) {
        if (s->kind == SegmentKind::kToolResult && s->state == SegmentState::kLive) {
          edit.edits.push_back({s->id, SegmentEdit::Action::kMask, std::string(s->content.size() * 2, 'x')});
          break;
        }
      }
      return edit;
    }
    int plans = 0;
  } policy;
  ContextOptions options;
  options.agent.id = "inflate";
  Budget budget;
  budget.window = 4000;
  budget.reserve_output = budget.reserve_reasoning = budget.reserve_headroom = 0;
  budget.trigger = BudgetLimit::Fraction(0.5);
  budget.target = BudgetLimit::Fraction(0.4);
  options.budget = budget;
  options.compaction = &policy;
  auto context = testing::NewContext(options);
  REQUIRE(context->AppendUser("task").ok());
  REQUIRE(context->AppendAssistant({"", "", {{"c1", "bash", "{}"}}}).ok());
  REQUIRE(context->AppendToolResult({"c1", std::string(10000, 'o'), false}).ok());
  const std::string before = testing::MustPreview(*context).body;
  auto request = context->Build();
  REQUIRE(request.ok());  // above the trigger, within the limit: sent as it was
  CHECK_FALSE(request->compaction);
  CHECK(request->body == before);
  CHECK(context->Compactions().empty());
  CHECK(policy.plans == 1);  // not retried round after round
  auto forced = context->Compact(true);
  REQUIRE(forced.ok());
  CHECK_FALSE(forced->has_value());
}

TEST_CASE("a deduplicated result never points at an output compaction hid", "[compact][budget]") {
  ContextOptions options;
  options.agent.id = "dedup";
  auto context = testing::NewContext(options);
  REQUIRE(context->AppendUser("task").ok());
  const std::string output = Output("same", 400);
  REQUIRE(context->AppendAssistant({"", "", {{"c1", "bash", "{\"command\":\"ls\"}"}}}).ok());
  auto first = context->AppendToolResult({"c1", output, false});
  REQUIRE(first.ok());
  REQUIRE(context->AppendAssistant({"", "", {{"c2", "bash", "{\"command\":\"ls\"}"}}}).ok());
  auto second = context->AppendToolResult({"c2", output, false});
  REQUIRE(second.ok());
  auto find = [&](const std::string& id) {
    for (const Segment& s : context->Segments()) {
      if (s.id == id) return s;
    }
    FAIL("no segment " << id);
    return Segment{};
  };
  REQUIRE(find(*second).hygiene == HygieneAction::kDeduplicated);
  CHECK_THAT(find(*second).content, Catch::Contains("result of call c1"));

  HistoryEdit edit;
  edit.edits.push_back({*first, SegmentEdit::Action::kMask, "[masked output of ls; recall r-0000000000000000]"});
  auto report = context->ApplyEdit(edit, "test@1", "test");
  REQUIRE(report.ok());
  const Segment duplicate = find(*second);
  // The reference says the output is no longer shown and how to get it back.
  CHECK_THAT(duplicate.content, Catch::Contains("result of call c1, which is masked"));
  REQUIRE_FALSE(duplicate.recall_id.empty());
  CHECK_THAT(duplicate.content, Catch::Contains("context_recall " + duplicate.recall_id));
  auto original = context->Recall(duplicate.recall_id);
  REQUIRE(original.ok());
  CHECK(*original == output);
  CHECK(report->boundary_segment_id == *first);  // the rewrite does not move the boundary

  // A third identical output is rendered in full again, not as a reference to the hidden one.
  REQUIRE(context->AppendAssistant({"", "", {{"c3", "bash", "{\"command\":\"ls\"}"}}}).ok());
  auto third = context->AppendToolResult({"c3", output, false});
  REQUIRE(third.ok());
  CHECK(find(*third).hygiene != HygieneAction::kDeduplicated);
  CHECK(find(*third).content == output);
}

TEST_CASE("a restored context points each duplicate at an output compaction hid",
          "[compact][budget]") {
  ContextOptions options;
  options.agent.id = "dedup-restored";
  auto context = testing::NewContext(options);
  REQUIRE(context->AppendUser("task").ok());
  const std::string output = Output("same", 400);
  const std::string other = Output("other", 400);
  std::vector<std::string> ids;
  // c1 and c3 answer with `output`, c2 with `other`; c4 and c5 repeat c1's, c6 repeats c2's.
  const char* calls[][2] = {{"c1", "ls"}, {"c2", "pwd"}, {"c3", "ls"},
                            {"c4", "ls"}, {"c5", "ls"},  {"c6", "pwd"}};
  for (const auto& [call, command] : calls) {
    const std::string args = std::string("{\"command\":\"") + command + "\"}";
    REQUIRE(context->AppendAssistant({"", "", {{call, "bash", args}}}).ok());
    auto id =
        context->AppendToolResult({call, command == std::string("ls") ? output : other, false});
    REQUIRE(id.ok());
    ids.push_back(*id);
  }
  auto restored = Context::Restore(context->options(), context->Snapshot());
  REQUIRE(restored.ok());
  Context& c = **restored;
  auto find = [&](const std::string& id) {
    for (const Segment& s : c.Segments()) {
      if (s.id == id) return s;
    }
    FAIL("no segment " << id);
    return Segment{};
  };
  for (size_t i : {2, 3, 4}) CHECK_THAT(find(ids[i]).content, Catch::Contains("result of call c1"));
  CHECK_THAT(find(ids[5]).content, Catch::Contains("result of call c2"));

  HistoryEdit edit;
  edit.edits.push_back({ids[0], SegmentEdit::Action::kMask, "[masked output of ls]"});
  edit.edits.push_back({ids[3], SegmentEdit::Action::kMask, "[masked duplicate]"});
  auto applied = c.ApplyEdit(edit, "test@1", "test");
  INFO(applied.status().ToString());
  REQUIRE(applied.ok());
  // The live duplicates of c1 say it is hidden; the one the edit masks stays as the edit left it;
  // the duplicate of c2, which is still shown, is untouched.
  for (size_t i : {2, 4}) {
    CHECK_THAT(find(ids[i]).content, Catch::Contains("result of call c1, which is masked"));
    CHECK(find(ids[i]).policy == "test@1");
  }
  CHECK(find(ids[3]).state == SegmentState::kMasked);
  CHECK(find(ids[3]).content == "[masked duplicate]");
  CHECK_THAT(find(ids[5]).content, !Catch::Contains("which is"));

  // The next identical output is rendered in full; one identical to c2's still points at c2.
  REQUIRE(c.AppendAssistant(
               {"",
                "",
                {{"c7", "bash", "{\"command\":\"ls\"}"}, {"c8", "bash", "{\"command\":\"pwd\"}"}}})
              .ok());
  auto seventh = c.AppendToolResult({"c7", output, false});
  auto eighth = c.AppendToolResult({"c8", other, false});
  REQUIRE(seventh.ok());
  REQUIRE(eighth.ok());
  CHECK(find(*seventh).content == output);
  CHECK(find(*eighth).hygiene == HygieneAction::kDeduplicated);
  CHECK_THAT(find(*eighth).content, Catch::Contains("result of call c2"));
}

TEST_CASE("summaries keep the recall id of every item they omit", "[compact][summary]") {
  auto tokenizer = MakeEstimateTokenizer(4.0);
  std::vector<Segment> span;
  for (int t = 1; t <= 60; ++t) {
    Segment a;
    a.id = "a" + std::to_string(t);
    a.kind = SegmentKind::kToolCall;
    a.turn = t;
    a.content = "THOUGHT: step " + std::to_string(t) + " looks at src/pkg/file_" + std::to_string(t) + ".py";
    a.tool_calls = {{"c" + std::to_string(t), "bash", R"({"command": "cat src/pkg/file_)" + std::to_string(t) + R"(.py"})"}};
    a.tokens = a.content.size() / 4;
    span.push_back(a);
    Segment r;
    r.id = "r" + std::to_string(t);
    r.kind = SegmentKind::kToolResult;
    r.turn = t;
    r.tool_call_id = a.tool_calls[0].id;
    r.content = Output("f" + std::to_string(t), 100);
    r.tokens = r.content.size() / 4;
    span.push_back(r);
  }
  std::vector<const Segment*> pointers;
  for (const Segment& s : span) pointers.push_back(&s);
  auto summary = MakeExtractiveSummarizer()->Summarize(pointers, 1500, *tokenizer);
  REQUIRE(summary.ok());
  CHECK(tokenizer->Count(*summary) <= 1500);
  CHECK_THAT(*summary, Catch::Contains("items omitted; recall r-"));
  // Every summarized message is either kept as an item or its recall id (the id its original is
  // kept under) is listed.
  const std::set<std::string> ids = RecallIds(*summary);
  for (const Segment& s : span) {
    CAPTURE(s.id);
    if (s.kind == SegmentKind::kToolCall &&
        summary->find("- turn " + std::to_string(s.turn) + ": step " + std::to_string(s.turn) + " ") != std::string::npos) {
      continue;
    }
    CHECK(ids.count(RecallIdFor(s.content)) == 1);
  }
  // Merging that summary into a later one keeps them too.
  Segment earlier;
  earlier.id = "sum";
  earlier.kind = SegmentKind::kSummary;
  earlier.content = *summary;
  earlier.tokens = tokenizer->Count(*summary);
  std::vector<const Segment*> merged_span = {&earlier, &span[118], &span[119]};
  auto merged = MakeExtractiveSummarizer()->Summarize(merged_span, 1500, *tokenizer);
  REQUIRE(merged.ok());
  const std::set<std::string> merged_ids = RecallIds(*merged);
  for (const std::string& id : ids) CHECK(merged_ids.count(id) == 1);
}

TEST_CASE("Preview never changes the context, Build compacts where Preview fails", "[compact][budget]") {
  auto policy = MakeStrataPolicy();
  ContextOptions options;
  options.agent.id = "preview";
  Budget budget;
  budget.window = 3000;
  budget.reserve_output = budget.reserve_reasoning = budget.reserve_headroom = 0;
  options.budget = budget;
  options.compaction = policy.get();
  auto context = testing::NewContext(options);
  REQUIRE(context->AppendUser("Find the failing handler.").ok());
  for (int turn = 1; turn <= 8; ++turn) {
    const std::string id = "c" + std::to_string(turn);
    REQUIRE(context->AppendAssistant({"", "", {{id, "bash", "{\"command\":\"cat " + id + "\"}"}}}).ok());
    REQUIRE(context->AppendToolResult({id, Output(id, 500), false}).ok());
  }
  const size_t window = static_cast<size_t>(context->options().budget->window);
  REQUIRE(context->InputTokens() > window);  // above the limit
  const ContextSnapshot before = context->Snapshot();
  const ContextStats stats_before = context->Stats();

  // Preview: RESOURCE_EXHAUSTED, and the context is exactly as it was, however often it is called.
  for (int i = 0; i < 3; ++i) {
    auto preview = context->Preview();
    CHECK(preview.status().code() == StatusCode::kResourceExhausted);
    CHECK_THAT(preview.status().message(), Catch::Contains("call Build()"));
  }
  CHECK(context->Compactions().empty());
  const ContextSnapshot after = context->Snapshot();
  REQUIRE(after.segments.size() == before.segments.size());
  for (size_t i = 0; i < before.segments.size(); ++i) {
    CHECK(after.segments[i].id == before.segments[i].id);
    CHECK(after.segments[i].content == before.segments[i].content);
    CHECK(after.segments[i].state == before.segments[i].state);
  }
  CHECK(after.originals == before.originals);
  CHECK(context->Stats().segments == stats_before.segments);

  // Build compacts, and returns a request within the budget.
  auto built = context->Build();
  REQUIRE(built.ok());
  REQUIRE(built->compaction.has_value());
  CHECK(built->input_tokens <= built->limit_tokens);
  CHECK(context->Compactions().size() == 1);
  // Now within the budget, Preview renders exactly what Build would send, still without changing it.
  const size_t compactions = context->Compactions().size();
  auto preview = context->Preview();
  REQUIRE(preview.ok());
  CHECK(preview->body == built->body);
  CHECK_FALSE(preview->compaction.has_value());
  CHECK(context->Compactions().size() == compactions);
}

}  // namespace
}  // namespace strata
