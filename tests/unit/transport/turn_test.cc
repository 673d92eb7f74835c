// The turn module shared by the Client and the Agent (transport/turn.h): signatures, break causes,
// request ids.
#include "transport/turn.h"

#include <catch2/catch.hpp>
#include <set>

#include "testing/fake_clock.h"
#include "testing/scripted_transport.h"

namespace strata::turn_internal {
namespace {

std::unique_ptr<Context> NewContext() {
  ContextOptions options;
  options.agent.id = "turn-agent";
  auto context = Context::Create(options).value();
  REQUIRE(context->SetSystemPrompt("You are a test.").ok());
  REQUIRE(context->PutDocument(Layer::kDocs, Document{"guide", "Guide one.", "v1", 0}).ok());
  REQUIRE(context->AppendUser("Hello.").ok());
  return context;
}

TEST_CASE("request ids are <agent>-<tag>-<n>, the tag from the clock", "[transport][turn]") {
  testing::FakeClock clock;
  RequestIds ids(&clock);
  const std::string first = ids.Next("a");
  REQUIRE(first.size() == std::string("a-xxxxxx-1").size());
  CHECK(first.rfind("a-", 0) == 0);
  CHECK(first.substr(first.size() - 2) == "-1");
  CHECK(ids.Next("b").substr(1) == first.substr(1, first.size() - 2) + "2");
  testing::FakeClock same;
  CHECK(RequestIds(&same).Next("a") == first);  // the same clock gives the same tag
}

TEST_CASE("signatures leave the volatile layer out and follow every rendered byte",
          "[transport][turn]") {
  auto context = NewContext();
  std::vector<SegmentSignature> before = context->Fingerprints();
  REQUIRE(before.size() == 3);
  REQUIRE(context->SetVolatile("now", "12:00").ok());
  CHECK(context->Fingerprints().size() == 3);
  REQUIRE(context->PutDocument(Layer::kDocs, Document{"guide", "Guide two.", "v2", 0}).ok());
  std::vector<SegmentSignature> after = context->Fingerprints();
  REQUIRE(after.size() == 3);
  std::string first_id;
  Layer first_layer = Layer::kHistory;
  std::vector<std::string> causes = BreakCauses(before, after, false, {}, &first_id, &first_layer);
  CHECK(causes == std::vector<std::string>{"doc version change (v1 -> v2)"});
  CHECK(first_layer == Layer::kDocs);
  CHECK(JoinCauses(causes) == "doc version change (v1 -> v2)");
  CHECK(JoinCauses({"a", "b", "c"}) == "a, b and c");
  CHECK(JoinCauses({}) == "unknown");
  causes = BreakCauses(before, after, true, {}, &first_id, &first_layer);
  CHECK(causes == std::vector<std::string>{"doc version change (v1 -> v2)", "compaction"});
}

TEST_CASE("break causes come from the signatures after the first difference, in their order",
          "[transport][turn]") {
  auto sig = [](std::string id, Layer layer, uint64_t hash, std::string version = "",
                SegmentState state = SegmentState::kLive) {
    return SegmentSignature{std::move(id), layer, SegmentKind::kUser, state, std::move(version), hash};
  };
  const std::vector<SegmentSignature> before = {
      sig("system", Layer::kSystem, 1),  sig("tools", Layer::kTools, 2),
      sig("doc", Layer::kDocs, 3, "v1"), sig("index", Layer::kIndex, 4, "v1"),
      sig("h1", Layer::kHistory, 5),     sig("h2", Layer::kHistory, 6),
      sig("h3", Layer::kHistory, 7)};
  std::string first_id;
  Layer first_layer = Layer::kHistory;
  // The same first four, then h2 dropped, h3 masked and a new history segment.
  std::vector<SegmentSignature> after = {before[0],
                                         before[1],
                                         before[2],
                                         before[3],
                                         before[4],
                                         sig("h3", Layer::kHistory, 9, "", SegmentState::kMasked),
                                         sig("h4", Layer::kHistory, 10)};
  CHECK(BreakCauses(before, after, false, {}, &first_id, &first_layer) ==
        std::vector<std::string>{"compaction"});
  CHECK(first_id == "h3");
  // A document removed and the index changed after an unchanged system prompt, tools and h1 (the
  // stable segments come first in a request; here only their order among themselves matters).
  after = {before[0], before[1], sig("index", Layer::kIndex, 44, "v2"),
           before[4], before[5], before[6]};
  CHECK(BreakCauses(before, after, false, {}, &first_id, &first_layer) ==
        std::vector<std::string>{"doc version change (v1 -> v2)", "document removed"});
  CHECK(first_id == "index");
  CHECK(first_layer == Layer::kIndex);
  // Only history bytes changed past the shared part.
  after = before;
  after[5].hash = 66;
  CHECK(BreakCauses(before, after, false, {}, &first_id, &first_layer) ==
        std::vector<std::string>{"history segment changed"});
  CHECK(first_id == "h2");
  CHECK(BreakCauses(before, before, false, {}, &first_id, &first_layer).empty());
}

TEST_CASE("Fnv64 continues from the hash it is given", "[transport][turn]") {
  CHECK(Fnv64("") == 1469598103934665603ULL);
  // The offset basis stored signatures and cache states were written with (not FNV's published
  // 14695981039346656037): a changed value would make every stored cache state unreadable.
  CHECK(Fnv64("a") == 0x44bd8ad473cd9906ULL);
  CHECK(Fnv64("b", Fnv64("a")) == Fnv64("ab"));
}

// Two turns of the same context; the second is answered with `reported` cached tokens, below
// what the model predicts. Returns the second turn's break (a shortfall).
std::optional<PrefixBreakEvent> ShortfallAt(Context& context, int64_t reported_share_of_1000,
                                            std::string* prompt) {
  testing::FakeClock clock;
  testing::ScriptedTransport transport;
  PrefixCacheModel model;
  TemplatePromptModel prompts(nullptr, nullptr, PrefixCacheOptions{});
  TurnEnv env;
  env.transport = &transport;
  env.clock = &clock;
  env.model = &model;
  env.prompt = &prompts;
  PrefixReference reference;
  std::optional<PrefixBreakEvent> last;
  for (int turn = 0; turn < 2; ++turn) {
    TurnRun run(env, context, "r-" + std::to_string(turn));
    REQUIRE(run.Build(context, {}, reference).ok());
    Response answer;
    answer.content = "ok";
    answer.usage.reported = true;
    answer.usage.prompt_tokens = run.blocks().prompt_tokens;
    answer.usage.cached_tokens =
        turn == 0 ? 0 : run.blocks().prompt_tokens * reported_share_of_1000 / 1000;
    transport.Respond(answer);
    Response response;
    REQUIRE(run.Send(run.CallFor(CallOptions{}), &response).ok());
    run.Finish(response, &reference);
    last = run.prefix_break();
    *prompt = RenderPromptText(run.built().body).value().text;
  }
  return last;
}

// A TemplatePromptModel that counts how it is asked for prompts.
class CountingPromptModel final : public PromptModel {
 public:
  StatusOr<SharedPrompt> Render(std::string_view body) override {
    ++renders;
    return inner.Render(body);
  }
  void BeginBuild() override { ++begun; }
  StatusOr<SharedPrompt> RenderBuilt(std::string_view body) override {
    ++built;
    return inner.Render(body);
  }
  size_t Count(std::string_view text) override { return inner.Count(text); }
  std::shared_ptr<const PromptBlocks> Hash(std::string_view text, std::string_view salt) override {
    return inner.Hash(text, salt);
  }
  bool exact() const override { return inner.exact(); }
  size_t bytes_per_token() const override { return inner.bytes_per_token(); }
  TemplatePromptModel inner{nullptr, nullptr, PrefixCacheOptions{}};
  int renders = 0, begun = 0, built = 0;
};

TEST_CASE("a built request is analysed from the render its build made, another by rendering it",
          "[transport][turn]") {
  auto context = NewContext();
  testing::FakeClock clock;
  testing::ScriptedTransport transport;
  PrefixCacheModel model;
  CountingPromptModel prompts;
  TurnEnv env;
  env.transport = &transport;
  env.clock = &clock;
  env.model = &model;
  env.prompt = &prompts;
  TurnRun run(env, *context, "r-1");
  REQUIRE(run.Build(*context, {}, PrefixReference{}).ok());
  CHECK(prompts.begun == 1);
  CHECK(prompts.built == 1);
  CHECK(prompts.renders == 0);
  CHECK(run.blocks().prompt_tokens > 0);
  // A request the build did not make (a pool's degradation sent another) is rendered.
  REQUIRE(run.Analyze(*context, run.built(), PrefixReference{}, false).ok());
  CHECK(prompts.renders == 1);
  CHECK(prompts.built == 1);
}

TEST_CASE("the reference advanced in place equals the one the request gives, turn after turn",
          "[transport][turn]") {
  auto context = NewContext();
  testing::FakeClock clock;
  testing::ScriptedTransport transport;
  PrefixCacheModel model;
  TemplatePromptModel prompts(nullptr, nullptr, PrefixCacheOptions{});
  TurnEnv env;
  env.transport = &transport;
  env.clock = &clock;
  env.model = &model;
  env.prompt = &prompts;
  PrefixReference reference;
  std::vector<std::string> results;
  for (int turn = 0; turn < 12; ++turn) {
    INFO("turn " << turn);
    if (turn % 4 == 3) {  // a masked result: the reference changes from it on
      HistoryEdit edit;
      edit.edits.push_back({results[results.size() / 2], SegmentEdit::Action::kMask, "[masked]"});
      context->ApplyEdit(edit, "test@1", "test").status().IgnoreError();
    }
    if (turn % 5 == 4) {  // a new document version: from the stable layers on
      REQUIRE(context->PutDocument(Layer::kDocs, Document{"guide", "Guide " + std::to_string(turn),
                                                          "v" + std::to_string(turn), 0})
                  .ok());
    }
    TurnRun run(env, *context, "r-" + std::to_string(turn));
    REQUIRE(run.Build(*context, {}, reference).ok());
    const std::vector<SegmentFingerprint> signatures = context->Fingerprints();
    const std::string prompt = RenderPromptText(run.built().body).value().text;
    const PromptBlocks whole = HashPrompt(prompt, "", nullptr, PrefixCacheOptions{});
    CHECK(run.blocks().hashes == whole.hashes);
    transport.Respond(Response{});
    Response response;
    REQUIRE(run.Send(run.CallFor(CallOptions{}), &response).ok());
    run.Finish(response, &reference);
    REQUIRE(reference.history_blocks == run.history_blocks());
    REQUIRE(static_cast<size_t>(reference.history_blocks) <= whole.hashes.size());
    CHECK(reference.hashes == std::vector<uint64_t>(whole.hashes.begin(),
                                                    whole.hashes.begin() + reference.history_blocks));
    REQUIRE(reference.signatures.size() == signatures.size());
    for (size_t i = 0; i < signatures.size(); ++i) {
      CHECK(reference.signatures[i].id == signatures[i].id);
      CHECK(reference.signatures[i].state == signatures[i].state);
      CHECK(reference.signatures[i].version == signatures[i].version);
      CHECK(reference.signatures[i].hash == signatures[i].hash);
    }
    REQUIRE(context->AppendAssistant({"", "", {{"c" + std::to_string(turn), "read", "{}"}}}).ok());
    results.push_back(*context->AppendToolResult(
        {"c" + std::to_string(turn), "output " + std::string(200 + turn * 10, 'o'), false}));
  }
}

TEST_CASE("a server shortfall names the segment whose message its cache ends in",
          "[transport][turn]") {
  ContextOptions options;
  options.agent.id = "turn-agent";
  auto context = Context::Create(options).value();
  REQUIRE(context->SetSystemPrompt("You are a test. " + std::string(2000, 's')).ok());
  REQUIRE(
      context->PutDocument(Layer::kDocs, Document{"guide", std::string(2000, 'g'), "v1", 0}).ok());
  const std::string user = *context->AppendUser("MIDDLE " + std::string(2000, 'u'));
  const std::string reply = *context->AppendAssistant({"LAST " + std::string(2000, 'r'), "", {}});
  const bool with_volatile = GENERATE(false, true);
  if (with_volatile) REQUIRE(context->SetVolatile("now", std::string(2000, 'v')).ok());
  std::string prompt;

  std::optional<PrefixBreakEvent> at_start = ShortfallAt(*context, 0, &prompt);
  REQUIRE(at_start.has_value());
  CHECK(at_start->kind == PrefixBreakEvent::Kind::kServerShortfall);
  CHECK(at_start->layer == "tools");  // the template's preamble
  CHECK(at_start->segment_id.empty());
  // The share of the prompt's bytes that ends 500 bytes past `marker`.
  auto share_past = [&](const std::string& marker) {
    const size_t at = prompt.find(marker);
    REQUIRE(at != std::string::npos);
    return static_cast<int64_t>((at + 500) * 1000 / prompt.size());
  };

  std::optional<PrefixBreakEvent> in_system =
      ShortfallAt(*context, share_past("You are a test."), &prompt);
  REQUIRE(in_system.has_value());
  CHECK(in_system->layer == "system");  // the stable layers are one message
  CHECK(in_system->segment_id == context->Fingerprints().front().id);

  std::optional<PrefixBreakEvent> in_user = ShortfallAt(*context, share_past("MIDDLE "), &prompt);
  REQUIRE(in_user.has_value());
  CHECK(in_user->segment_id == user);
  CHECK(in_user->layer == "history");

  // Near the end: the volatile message when there is one, else the last reply.
  std::optional<PrefixBreakEvent> at_end = ShortfallAt(*context, 950, &prompt);
  REQUIRE(at_end.has_value());
  CHECK(at_end->segment_id == (with_volatile ? "volatile:now" : reply));
  CHECK(at_end->layer == (with_volatile ? "volatile" : "history"));
}

}  // namespace
}  // namespace strata::turn_internal
