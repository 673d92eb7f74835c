// The strata policy keeps what it derives from each segment's bytes from one plan to the next
// (compact/segment_facts.h) and, without the cost model, looks only at the latest candidates that
// reach a plan's need. Both must change nothing: on every fixture trace, under budgets that make it
// compact many times, a context planning with one long-lived policy builds every request byte for
// byte as a context whose every plan is made by a fresh policy that derives everything and looks at
// every candidate (the whole computation): the same bodies, counts, compaction reports and
// explanations.
#include "compact/segment_facts.h"

#include <algorithm>
#include <catch2/catch.hpp>
#include <deque>
#include <functional>
#include <memory>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "compact/strata_policy.h"
#include "core/identifiers.h"
#include "strata/builtin_policies.h"
#include "strata/replay/trace.h"
#include "strata/tokenizer.h"
#include "testing/context_testing.h"
#include "testing/traces.h"

namespace strata {
namespace {

// Plans each input with a policy made for it alone: no kept facts, no plan memo, no early stop.
class WholeComputationPolicy final : public CompactionPolicy {
 public:
  explicit WholeComputationPolicy(StrataPolicyOptions options) : options_(std::move(options)) {}
  std::string Name() const override { return Fresh()->Name(); }
  bool ShouldCompact(const CompactionInput& input) const override {
    return Fresh()->ShouldCompact(input);
  }
  StatusOr<HistoryEdit> Plan(const CompactionInput& input) override {
    ++plans;
    return Fresh()->Plan(input);
  }
  size_t plans = 0;

 private:
  std::unique_ptr<CompactionPolicy> Fresh() const {
    return compact_internal::MakeStrataPolicyConsideringEveryCandidate(options_);
  }
  StrataPolicyOptions options_;
};

// What one request of a replay is, as text: body, counts and every compaction of its build.
struct Request {
  std::string body;
  size_t input_tokens = 0;
  std::string compactions;
};

std::string Describe(const CompactionReport& r) {
  std::string out = r.policy + "|" + r.reason + "|" + std::to_string(r.boundary_index) + "|" +
                    r.boundary_segment_id + "|" + std::to_string(r.tokens_before) + "|" +
                    std::to_string(r.tokens_after) + "|" + std::to_string(r.invalidated_tokens) +
                    "|" + std::to_string(r.masked) + "|" + std::to_string(r.evicted) + "|" +
                    std::to_string(r.summarized) + "|" + std::to_string(r.reasoning_dropped) + "|" +
                    std::to_string(r.rounds) + "|" + r.summarizer + "\n";
  return out + ExplainCompaction(r);
}

std::vector<Request> Replay(const std::vector<TraceMessage>& trace, CompactionPolicy& policy,
                            size_t budget, size_t* compactions) {
  ContextOptions options;
  options.compaction = &policy;
  Budget b;
  b.window = static_cast<int64_t>(budget);
  b.reserve_output = b.reserve_reasoning = b.reserve_headroom = 0;
  options.budget = b;
  auto context = testing::NewContext(options);
  std::vector<Request> requests;
  Status replayed = ReplayTrace(trace, *context, [&](const TraceMessage&, const BuiltRequest& built) {
    Request r{built.body, built.input_tokens, ""};
    if (built.compaction) r.compactions = Describe(*built.compaction);
    requests.push_back(std::move(r));
    return Status::Ok();
  });
  // A budget too small for a trace's pinned or latest content fails the same way in both.
  if (!replayed.ok()) requests.push_back({"error: " + replayed.ToString(), 0, ""});
  *compactions = context->Compactions().size();
  return requests;
}

size_t PeakTokens(const std::vector<TraceMessage>& trace) {
  auto context = testing::NewContext();
  size_t peak = 0;
  Status replayed = ReplayTrace(trace, *context, [&](const TraceMessage&, const BuiltRequest& built) {
    peak = std::max(peak, built.input_tokens);
    return Status::Ok();
  });
  REQUIRE(replayed.ok());
  return peak;
}

TEST_CASE("kept segment facts and the early stop plan as the whole computation on every fixture trace",
          "[compact][facts]") {
  size_t traces = 0, requests = 0, compactions = 0, whole_plans = 0;
  for (const std::string& file : testing::TestTraceFiles()) {
    auto trace = ReadTrace(file);
    REQUIRE(trace.ok());
    const size_t peak = PeakTokens(*trace);
    for (bool cost_model : {false, true}) {
      for (size_t divisor : {2, 4}) {
        StrataPolicyOptions options;
        options.cost_model = cost_model;
        const size_t budget = std::max<size_t>(2000, peak / divisor);
        INFO(file << " cost_model " << cost_model << " budget " << budget);
        auto kept = MakeStrataPolicy(options);
        WholeComputationPolicy whole(options);
        size_t kept_compactions = 0, whole_compactions = 0;
        const std::vector<Request> a = Replay(*trace, *kept, budget, &kept_compactions);
        const std::vector<Request> b = Replay(*trace, whole, budget, &whole_compactions);
        REQUIRE(a.size() == b.size());
        for (size_t k = 0; k < a.size(); ++k) {
          INFO("request " << k);
          REQUIRE(a[k].compactions == b[k].compactions);
          REQUIRE(a[k].input_tokens == b[k].input_tokens);
          REQUIRE(a[k].body == b[k].body);
        }
        CHECK(kept_compactions == whole_compactions);
        requests += a.size();
        compactions += kept_compactions;
        whole_plans += whole.plans;
      }
    }
    ++traces;
  }
  CHECK(traces >= 19);
  // The budgets make the policy work: many plans, many of them applied.
  CHECK(whole_plans > 1000);
  CHECK(compactions > 300);
  CHECK(requests > 1500);
}

// Context::PreviewBuild before every request of every fixture trace, under budgets that make the
// strata policy compact many times: the prediction is the Build() that follows (bytes, count,
// compaction report), and predicting changes none of the builds of a replay without predictions.
// Each compacting prediction copies the context into the copy the last one kept.
// The same random run of appends, builds, predictions, masks, pins, rewinds to a mark and rewinds
// to an older snapshot (the history shrinks, then other segments take the indices) on two contexts:
// one planning with a long-lived strata policy (kept facts, call tables, names, trust in the
// context's unchanged entries), the other with a fresh policy for every plan. Every build must be
// the same, byte for byte.
TEST_CASE(
    "a long-lived strata policy plans as fresh ones through rewinds, edits, pins and predictions",
    "[compact][facts]") {
  for (bool cost_model : {true, false}) {
    StrataPolicyOptions options;
    options.cost_model = cost_model;
    auto kept_policy = MakeStrataPolicy(options);
    WholeComputationPolicy whole(options);
    auto make = [](CompactionPolicy* policy) {
      ContextOptions o;
      o.compaction = policy;
      Budget b;
      b.window = 6000;
      b.reserve_output = b.reserve_reasoning = b.reserve_headroom = 0;
      o.budget = b;
      return testing::NewContext(o);
    };
    std::unique_ptr<Context> contexts[2] = {make(kept_policy.get()), make(&whole)};
    std::mt19937 random(cost_model ? 5 : 6);
    auto pick = [&](int n) { return static_cast<int>(random() % static_cast<unsigned>(n)); };
    std::vector<ContextSnapshot> snapshots[2];
    std::vector<std::string> results;
    size_t builds = 0, compactions = 0, rewinds = 0;
    for (auto& c : contexts) REQUIRE(c->AppendUser("Fix the failing test in src/app.py.").ok());
    for (int step = 0; step < 400; ++step) {
      const int drawn = pick(14);
      const int op = drawn >= 12 ? 4 : drawn;  // builds twice as often as the other changes
      const std::string call = "call_" + std::to_string(step);
      std::string output;
      for (int line = 0, n = 1 + pick(30); line < n; ++line) {
        output += "def handler_" + std::to_string(pick(60)) + "(): return route_" +
                  std::to_string(pick(60)) + "\n";
      }
      const std::string args = "{\"path\":\"src/mod_" + std::to_string(pick(8)) + ".py\"}";
      const std::string target =
          results.empty() ? ""
                          : results[static_cast<size_t>(pick(static_cast<int>(results.size())))];
      const bool pin = pick(2) == 0;
      for (int side = 0; side < 2; ++side) {
        Context& c = *contexts[side];
        switch (op) {
          case 0:
          case 1:
          case 2:
          case 3: {  // a call (repeated arguments supersede) and its result, some with reasoning
            std::string reasoning;
            for (int k = 0; step % 3 == 0 && k < 8; ++k)
              reasoning += "First I check " + args + " for the handler it routes to. ";
            REQUIRE(c.AppendAssistant({"", reasoning, {{call, "read_file", args}}}).ok());
            StatusOr<std::string> r = c.AppendToolResult({call, output, false});
            REQUIRE(r.ok());
            if (side == 0) results.push_back(*r);
            break;
          }
          case 4: {  // a build
            StatusOr<BuiltRequest> built = c.Build();
            REQUIRE(built.ok());
            break;
          }
          case 5:  // a prediction
            REQUIRE(c.PreviewBuild().ok());
            break;
          case 6: {  // a mask of a result, when it still is one that can be masked
            if (target.empty()) break;
            HistoryEdit edit;
            edit.edits.push_back({target, SegmentEdit::Action::kMask, "[m]"});
            (void)c.ApplyEdit(edit, "test@1", "test");
            break;
          }
          case 7:  // a pin or an unpin
            if (!target.empty() && c.Find(target) != nullptr) (void)c.SetPinned(target, pin);
            break;
          case 8:  // a snapshot to come back to
            snapshots[side].push_back(c.Snapshot());
            break;
          case 9:  // back to an older snapshot: the history shrinks and other segments follow
            if (!snapshots[side].empty()) {
              REQUIRE(c.Rewind(snapshots[side].back()).ok());
              snapshots[side].pop_back();
              rewinds += side == 0;
            }
            break;
          case 10:  // a mark, a change and a rewind to it
            c.Mark();
            REQUIRE(c.AppendUser("undone").ok());
            REQUIRE(c.RewindToMark().ok());
            break;
          default:
            REQUIRE(c.AppendUser("go on with " + args).ok());
            break;
        }
      }
      if (op != 4) continue;
      // Both built: the same request and the same compaction.
      StatusOr<BuiltRequest> a = contexts[0]->Preview();
      StatusOr<BuiltRequest> b = contexts[1]->Preview();
      INFO("step " << step << " cost_model " << cost_model);
      REQUIRE(a.ok() == b.ok());
      if (a.ok()) REQUIRE(a->body == b->body);
      REQUIRE(contexts[0]->Compactions().size() == contexts[1]->Compactions().size());
      if (!contexts[0]->Compactions().empty()) {
        CHECK(Describe(contexts[0]->Compactions().back()) ==
              Describe(contexts[1]->Compactions().back()));
      }
      ++builds;
      compactions = contexts[0]->Compactions().size();
    }
    size_t reasoning_dropped = 0;
    for (const CompactionReport& r : contexts[0]->Compactions())
      reasoning_dropped += r.reasoning_dropped;
    INFO("builds " << builds << ", compactions " << compactions << ", rewinds " << rewinds
                   << ", reasoning dropped " << reasoning_dropped);
    CHECK(reasoning_dropped > 0);
    CHECK(builds > 40);
    CHECK(compactions > 3);
    CHECK(rewinds > 5);
  }
}

TEST_CASE("every build of every fixture trace is the prediction made just before it",
          "[compact][predict]") {
  size_t requests = 0, predicted_compactions = 0;
  for (const std::string& file : testing::TestTraceFiles()) {
    auto trace = ReadTrace(file);
    REQUIRE(trace.ok());
    const size_t budget = std::max<size_t>(2000, PeakTokens(*trace) / 3);
    INFO(file << " budget " << budget);
    auto plain_policy = MakeStrataPolicy();
    size_t plain_compactions = 0;
    const std::vector<Request> plain = Replay(*trace, *plain_policy, budget, &plain_compactions);

    auto policy = MakeStrataPolicy();
    ContextOptions options;
    options.compaction = policy.get();
    Budget b;
    b.window = static_cast<int64_t>(budget);
    b.reserve_output = b.reserve_reasoning = b.reserve_headroom = 0;
    options.budget = b;
    auto context = testing::NewContext(options);
    std::vector<std::string> system_prompts;
    size_t k = 0;
    for (const TraceMessage& m : *trace) {
      if (m.role == TraceRole::kSystem) {
        system_prompts.push_back(m.content);
        continue;
      }
      if (!system_prompts.empty()) {
        REQUIRE(context->SetSystemPrompts(system_prompts).ok());
        system_prompts.clear();
      }
      if (m.role == TraceRole::kUser) {
        REQUIRE(context->AppendUser(m.content).ok());
      } else if (m.role == TraceRole::kTool) {
        REQUIRE(context->AppendToolResult(ToolResult{m.tool_call_id, m.content, false}).ok());
      } else if (m.role == TraceRole::kAssistant) {
        INFO("request " << k);
        const size_t compactions_before = context->Compactions().size();
        const StatusOr<BuiltRequest> predicted = context->PreviewBuild();
        CHECK(context->Compactions().size() == compactions_before);
        const StatusOr<BuiltRequest> built = context->Build();
        REQUIRE(predicted.ok() == built.ok());
        if (!built.ok()) {
          CHECK(predicted.status().message() == built.status().message());
          break;  // a budget too small for the trace: the replay without predictions stops here too
        }
        REQUIRE(k < plain.size());
        CHECK(built->body == plain[k].body);
        REQUIRE(predicted->body == built->body);
        CHECK(predicted->input_tokens == built->input_tokens);
        REQUIRE(predicted->compaction.has_value() == built->compaction.has_value());
        if (built->compaction) {
          ++predicted_compactions;
          CHECK(Describe(*predicted->compaction) == Describe(*built->compaction));
        }
        ++k;
        ++requests;
        REQUIRE(context->AppendAssistant(AssistantMessage{m.content, m.reasoning, m.tool_calls}).ok());
      }
    }
  }
  CHECK(requests > 400);
  CHECK(predicted_compactions > 50);
}

}  // namespace
}  // namespace strata

namespace strata {
namespace {

// An input of `segments` with the given fingerprints.
CompactionInput InputOf(const std::vector<Segment>& segments,
                        const std::vector<uint64_t>& fingerprints) {
  CompactionInput in;
  for (const Segment& s : segments) in.history.push_back(&s);
  in.history_fingerprints = fingerprints;
  return in;
}

Segment ToolResult(std::string id, std::string content) {
  Segment s;
  s.id = std::move(id);
  s.kind = SegmentKind::kToolResult;
  s.content = std::move(content);
  return s;
}

TEST_CASE("kept facts are reused where a segment is unchanged and derived again where it changed",
          "[compact]") {
  compact_internal::SegmentFactsCache cache;
  std::vector<Segment> segments = {ToolResult("s1", "class AlphaModel: pass"),
                                   ToolResult("s2", "def beta_handler(): pass")};
  const CompactionInput first = InputOf(segments, {11, 22});
  compact_internal::SegmentFacts facts = cache.Begin(first);
  const std::vector<std::string>* alpha = &facts.ContentIds(0);
  CHECK_FALSE(facts.ContentIds(1).empty());
  CHECK(std::find(alpha->begin(), alpha->end(), "AlphaModel") != alpha->end());
  cache.Keep(std::move(facts));

  // The history grew, and s2 changed in place (same id, new bytes, new fingerprint).
  segments[1].content = "def gamma_handler(): pass";
  segments.push_back(ToolResult("s3", "class DeltaModel: pass"));
  const CompactionInput second = InputOf(segments, {11, 33, 44});
  compact_internal::SegmentFacts next = cache.Begin(second);
  CHECK(&next.ContentIds(0) == alpha);  // kept: the very list derived before
  const std::vector<std::string>& changed = next.ContentIds(1);
  CHECK(std::find(changed.begin(), changed.end(), "gamma_handler") != changed.end());
  CHECK(std::find(changed.begin(), changed.end(), "beta_handler") == changed.end());
  const std::vector<std::string>& added = next.ContentIds(2);
  CHECK(std::find(added.begin(), added.end(), "DeltaModel") != added.end());
  cache.Keep(std::move(next));

  // A segment gone from the middle (an eviction): the others' facts are found by id.
  segments.erase(segments.begin() + 1);
  const CompactionInput third = InputOf(segments, {11, 44});
  compact_internal::SegmentFacts last = cache.Begin(third);
  CHECK(&last.ContentIds(0) == alpha);
  const std::vector<std::string>& moved = last.ContentIds(1);
  CHECK(std::find(moved.begin(), moved.end(), "DeltaModel") != moved.end());
}

TEST_CASE("a result's call identifiers are kept while its call's arguments stay the same",
          "[compact]") {
  compact_internal::SegmentFactsCache cache;
  std::vector<Segment> segments = {ToolResult("r1", "ok")};
  const CompactionInput input = InputOf(segments, {11});
  compact_internal::SegmentFacts facts = cache.Begin(input);
  const std::string first_arguments = "{\"path\":\"src/alpha_module.py\"}";
  const std::vector<std::string>* kept = &facts.CallIds(0, first_arguments);
  CHECK(std::find(kept->begin(), kept->end(), "src/alpha_module.py") != kept->end());
  CHECK(&facts.CallIds(0, first_arguments) == kept);  // not derived again
  cache.Keep(std::move(facts));

  // The next plan: the same arguments find the kept list; other arguments (the call is another
  // segment, edited without the result changing) are derived anew.
  compact_internal::SegmentFacts next = cache.Begin(input);
  CHECK(&next.CallIds(0, first_arguments) == kept);
  const std::vector<std::string>& other = next.CallIds(0, "{\"path\":\"lib/beta_module.py\"}");
  CHECK(std::find(other.begin(), other.end(), "lib/beta_module.py") != other.end());
  CHECK(std::find(other.begin(), other.end(), "src/alpha_module.py") == other.end());
}

// SegmentFacts::MessageNames(), kept from plan to plan, against the names of every message that is
// not a tool result derived anew, as the history grows, changes in place (messages and results),
// shrinks and moves.
TEST_CASE(
    "the messages' names kept from plan to plan equal those derived anew as the history changes",
    "[compact]") {
  std::mt19937 random(11);
  auto pick = [&](int n) { return static_cast<int>(random() % static_cast<unsigned>(n)); };
  auto name = [&] { return "src/module_" + std::to_string(pick(400)) + ".py"; };
  int made = 0;
  std::deque<Segment> history;
  compact_internal::SegmentFactsCache cache;
  auto fingerprint = [](const Segment& s) {
    std::string text = s.content;
    for (const ToolCall& c : s.tool_calls) text += "|" + c.arguments;
    return std::hash<std::string>()(text);
  };
  size_t continued_plans = 0;
  for (int plan = 0; plan < 600; ++plan) {
    const int change = pick(10);
    if (change < 6 || history.empty()) {
      for (int k = 0, n = 1 + pick(3); k < n; ++k) {
        Segment s;
        s.id = "seg-" + std::to_string(made++);
        const int kind = pick(3);
        s.kind = kind == 0 ? SegmentKind::kUser
                           : (kind == 1 ? SegmentKind::kToolCall : SegmentKind::kToolResult);
        s.content = "look at " + name() + " and " + name();
        if (kind == 1)
          s.tool_calls.push_back({"c" + s.id, "read", "{\"path\":\"" + name() + "\"}"});
        if (kind == 2) s.tool_call_id = "c" + s.id;
        history.push_back(std::move(s));
      }
    } else if (change < 8) {  // a message or a result changed in place
      Segment& s = history[static_cast<size_t>(pick(static_cast<int>(history.size())))];
      s.content = "now " + name();
    } else if (change == 8) {
      history.pop_back();
    } else {
      history.erase(history.begin() + pick(static_cast<int>(history.size())));
    }
    CompactionInput in;
    for (const Segment& s : history) {
      in.history.push_back(&s);
      in.history_fingerprints.push_back(fingerprint(s));
    }
    compact_internal::SegmentFacts facts = cache.Begin(in);
    continued_plans += facts.kept() > 0;
    std::set<std::string> expected;
    for (const Segment& s : history) {
      if (s.kind == SegmentKind::kToolResult) continue;
      std::string text = s.content;
      for (const ToolCall& c : s.tool_calls) text += "\n" + c.arguments;
      const auto ids = internal::RankedIdentifiers(text);  // held: the loop views it
      expected.insert(ids->begin(), ids->end());
    }
    // Asked at some plans only: the names catch up with every change since they were last asked
    // (a tail dropped and other segments appended where it was included).
    if (pick(3) == 0) {
      const auto& kept = facts.MessageNames();
      const std::set<std::string> got(kept.begin(), kept.end());
      INFO("plan " << plan);
      CHECK(got == expected);
    }
    cache.Keep(std::move(facts));
  }
  CHECK(continued_plans > 100);
}

// Counts the texts it is asked to count (a byte a token).
class CountingTokenizer final : public Tokenizer {
 public:
  std::string Name() const override { return "counting"; }
  bool IsEstimate() const override { return false; }
  std::vector<int32_t> Encode(std::string_view text) const override {
    return std::vector<int32_t>(text.size(), 1);
  }
  size_t Count(std::string_view text) const override {
    ++counted;
    return text.size();
  }
  mutable int counted = 0;
};

TEST_CASE("a segment's reasoning is counted once per tokenizer while it is unchanged",
          "[compact]") {
  compact_internal::SegmentFactsCache cache;
  Segment thought;
  thought.id = "a1";
  thought.kind = SegmentKind::kAssistant;
  thought.content = "done";
  thought.reasoning = "I should read the file first.";
  std::vector<Segment> segments = {thought};
  CountingTokenizer one, two;
  CompactionInput in = InputOf(segments, {7});
  in.tokenizer = &one;
  compact_internal::SegmentFacts facts = cache.Begin(in);
  CHECK(facts.ReasoningTokens(0) == thought.reasoning.size());
  CHECK(facts.ReasoningTokens(0) == thought.reasoning.size());
  cache.Keep(std::move(facts));
  facts = cache.Begin(in);  // the next plan
  CHECK(facts.ReasoningTokens(0) == thought.reasoning.size());
  CHECK(one.counted == 1);
  in.tokenizer = &two;  // another tokenizer counts again
  CHECK(facts.ReasoningTokens(0) == thought.reasoning.size());
  CHECK(two.counted == 1);
  cache.Keep(std::move(facts));
  segments[0].reasoning = "Changed my mind.";  // changed: its fingerprint too
  CompactionInput changed = InputOf(segments, {8});
  changed.tokenizer = &two;
  facts = cache.Begin(changed);
  CHECK(facts.ReasoningTokens(0) == segments[0].reasoning.size());
  CHECK(two.counted == 2);
}

}  // namespace
}  // namespace strata
