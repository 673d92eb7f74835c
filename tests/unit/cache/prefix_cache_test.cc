#include <catch2/catch.hpp>

#include <string>

#include "strata/prefix_cache.h"

namespace strata {
namespace {

std::string Body(const std::string& user, const std::string& extra = "") {
  return R"({"model":"m","tools":[{"type":"function","function":{"name":"bash"}}],"messages":[)"
         R"({"role":"system","content":"You are a coding agent. Follow the instructions carefully."},)"
         R"({"role":"user","content":")" + user + R"("}])" + extra + "}";
}

TEST_CASE("prompt text ignores request fields that are not part of the prompt", "[cache]") {
  auto a = RenderPromptText(Body("hello"));
  auto b = RenderPromptText(Body("hello", R"(,"cache_salt":"x","request_id":"r1","stream":true)"));
  REQUIRE(a.ok());
  REQUIRE(b.ok());
  CHECK(a->text == b->text);
  CHECK(a->text.rfind("[gMASK]<sop>", 0) == 0);
  CHECK(a->tools_bytes > 0);
  REQUIRE(a->message_offsets.size() == 2);
  // The exact GLM-5.3 prompt: the user turn follows its marker directly.
  CHECK(a->text.compare(a->message_offsets[1], 13, "<|user|>hello") == 0);
  CHECK(a->text.compare(a->message_offsets[0], 10, "<|system|>") == 0);
}

TEST_CASE("prompt text honours the clear_thinking the request carries", "[cache]") {
  // Past reasoning (before the last user turn): kept by default and with clear_thinking false,
  // cleared with clear_thinking true, as the GLM-5.3-Flash template does on the server.
  auto body = [](const std::string& kwargs) {
    return R"({"messages":[{"role":"user","content":"q1"},)"
           R"({"role":"assistant","content":"a1","reasoning_content":"r1"},)"
           R"({"role":"user","content":"q2"}])" + kwargs + "}";
  };
  auto by_default = RenderPromptText(body(""));
  auto kept = RenderPromptText(body(R"(,"chat_template_kwargs":{"clear_thinking":false})"));
  auto cleared = RenderPromptText(body(R"(,"chat_template_kwargs":{"clear_thinking":true})"));
  REQUIRE(by_default.ok());
  REQUIRE(kept.ok());
  REQUIRE(cleared.ok());
  CHECK(by_default->text.find("<|assistant|><think>r1</think>a1<|user|>q2") != std::string::npos);
  CHECK(kept->text == by_default->text);
  CHECK(cleared->text.find("<|assistant|><think></think>a1<|user|>q2") != std::string::npos);
}

TEST_CASE("prompt text refuses a body without messages", "[cache]") {
  CHECK(RenderPromptText("{}").status().code() == StatusCode::kInvalidArgument);
  CHECK(RenderPromptText("not json").status().code() == StatusCode::kInvalidArgument);
}

TEST_CASE("block chains: same prefix and salt share leading blocks, salts never do", "[cache]") {
  PrefixCacheOptions options;
  options.block_tokens = 4;  // 16-byte blocks
  std::string base(200, 'a');
  PromptBlocks one = HashPrompt(base + "tail-one", "s1", nullptr, options);
  PromptBlocks two = HashPrompt(base + "tail-two-longer", "s1", nullptr, options);
  PromptBlocks other = HashPrompt(base + "tail-one", "s2", nullptr, options);
  REQUIRE(one.hashes.size() >= 12);
  for (size_t i = 0; i < 12; ++i) {
    CHECK(one.hashes[i] == two.hashes[i]);
    CHECK(one.hashes[i] != other.hashes[i]);
  }
  CHECK(one.prompt_tokens == static_cast<int64_t>((base.size() + 8 + 3) / 4));
  // The last prompt token is always computed: at most (tokens - 1) / block tokens are cacheable.
  PromptBlocks exact = HashPrompt(std::string(64, 'x'), "", nullptr, options);
  CHECK(exact.hashes.size() == 4);
  CHECK(exact.cacheable_blocks == 3);
}

TEST_CASE("the model serves the leading cached blocks and keeps salts apart", "[cache]") {
  PrefixCacheOptions options;
  options.block_tokens = 4;
  PrefixCacheModel model(options);
  std::string text(160, 'q');
  PromptBlocks first = HashPrompt(text, "tenant-a", nullptr, options);
  CHECK(model.LookupAndInsert(first) == 0);
  CHECK(model.LookupAndInsert(first) == static_cast<int64_t>(first.cacheable_blocks * 4));
  PromptBlocks other = HashPrompt(text, "tenant-b", nullptr, options);
  CHECK(model.Lookup(other) == 0);
  CHECK(model.blocks_for_salt("tenant-a") == first.hashes.size());
  CHECK(model.blocks_for_salt("tenant-b") == 0);
  // A change in the middle keeps only the blocks before it.
  std::string changed = text;
  changed[50] = 'z';  // inside block 3 (bytes 48..63)
  CHECK(model.Lookup(HashPrompt(changed, "tenant-a", nullptr, options)) == 3 * 4);
}

TEST_CASE("the model evicts least recently used blocks beyond capacity", "[cache]") {
  PrefixCacheOptions options;
  options.block_tokens = 1;
  options.bytes_per_token = 1;
  options.capacity_blocks = 10;
  PrefixCacheModel model(options);
  PromptBlocks a = HashPrompt("aaaaaaa", "", nullptr, options);  // 7 blocks
  PromptBlocks b = HashPrompt("bbbbbbb", "", nullptr, options);  // 7 blocks
  model.Insert(a);
  model.Insert(b);
  CHECK(model.size_blocks() == 10);
  CHECK(model.Lookup(b) == 6);  // all cacheable blocks of b
  CHECK(model.Lookup(a) == 0);  // a's first blocks were the oldest
}

}  // namespace
}  // namespace strata
