#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

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

TEST_CASE("two chains share the leading hashes a comparison of every block finds", "[cache]") {
  PrefixCacheOptions options;
  options.block_tokens = 4;  // 16-byte blocks
  std::mt19937 random(7);
  const std::string base(1000, 'a');
  const PromptBlocks whole = HashPrompt(base, "s", nullptr, options);
  for (int trial = 0; trial < 200; ++trial) {
    // A copy of `base` changed at one byte (or not at all), and cut or grown at its end.
    std::string other = base;
    const size_t at = random() % (base.size() + 1);
    if (at < base.size()) other[at] = 'b';
    other.resize(random() % 1200, 'c');
    const PromptBlocks chain = HashPrompt(other, trial % 10 == 0 ? "t" : "s", nullptr, options);
    size_t linear = 0;
    while (linear < whole.hashes.size() && linear < chain.hashes.size() &&
           whole.hashes[linear] == chain.hashes[linear]) {
      ++linear;
    }
    CHECK(SharedChainPrefix(whole.hashes, chain.hashes) == linear);
    CHECK(SharedChainPrefix(chain.hashes, whole.hashes) == linear);
  }
  CHECK(SharedChainPrefix({}, whole.hashes) == 0);
  CHECK(SharedChainPrefix(whole.hashes, whole.hashes) == whole.hashes.size());
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

// Blocks of one byte, one token each, at most `capacity` of them held.
PrefixCacheOptions ByteBlocks(size_t capacity) {
  PrefixCacheOptions options;
  options.block_tokens = 1;
  options.bytes_per_token = 1;
  options.capacity_blocks = capacity;
  return options;
}

TEST_CASE("the model evicts least recently used blocks beyond capacity", "[cache]") {
  const PrefixCacheOptions options = ByteBlocks(10);
  PrefixCacheModel model(options);
  PromptBlocks a = HashPrompt("aaaaaaa", "", nullptr, options);  // 7 blocks
  PromptBlocks b = HashPrompt("bbbbbbb", "", nullptr, options);  // 7 blocks
  model.Insert(a);
  model.Insert(b);
  CHECK(model.size_blocks() == 10);
  CHECK(model.Lookup(b) == 6);  // all cacheable blocks of b
  CHECK(model.Lookup(a) == 0);  // a's first blocks were the oldest
}

TEST_CASE("blocks are counted by salt as they are inserted and evicted", "[cache]") {
  const PrefixCacheOptions options = ByteBlocks(10);
  PrefixCacheModel model(options);
  model.Insert(HashPrompt("aaaaaaa", "tenant-a", nullptr, options));  // 7 blocks
  CHECK(model.blocks_for_salt("tenant-a") == 7);
  model.Insert(HashPrompt("bbbbbbb", "tenant-b", nullptr, options));  // 7 more: 4 of a's go
  CHECK(model.blocks_for_salt("tenant-a") == 3);
  CHECK(model.blocks_for_salt("tenant-b") == 7);
  model.Insert(HashPrompt("ccccccc", "tenant-b", nullptr, options));  // a's last 3 and 4 of b's
  CHECK(model.blocks_for_salt("tenant-a") == 0);
  CHECK(model.blocks_for_salt("tenant-b") == 10);
  // A salt whose every block was evicted is counted again from its next insert.
  model.Insert(HashPrompt("aaaa", "tenant-a", nullptr, options));
  CHECK(model.blocks_for_salt("tenant-a") == 4);
  CHECK(model.blocks_for_salt("tenant-b") == 6);
  CHECK(model.size_blocks() == 10);
}

// HashPromptIds continues the kept chain whose ids share the longest prefix with the new ones (an
// agent's prompts grow turn by turn); the result must be that of hashing every block. The cold
// chain of each prompt is computed first, after eight chains under other salts have pushed every
// kept chain of this salt out (the memo keeps eight).
TEST_CASE("block chains continued from an earlier prompt equal chains hashed whole", "[cache]") {
  PrefixCacheOptions options;
  options.block_tokens = 4;
  std::mt19937 rng(7);
  std::vector<std::vector<int32_t>> prompts;
  std::vector<int32_t> ids;
  for (int turn = 0; turn < 12; ++turn) {
    for (int i = 0; i < 9 + turn; ++i) ids.push_back(static_cast<int32_t>(rng() % 50000));
    prompts.push_back(ids);
    if (turn == 5) {
      std::vector<int32_t> edited = ids;
      edited[13] ^= 1;  // an edit inside block 3
      prompts.push_back(edited);
      prompts.push_back(std::vector<int32_t>(ids.begin(), ids.begin() + 10));  // a shorter prompt
    }
  }
  auto evict = [&] {
    for (int i = 0; i < 8; ++i) HashPromptIds({1, 2, 3, 4, 5}, "other-" + std::to_string(i), options);
  };
  std::vector<PromptBlocks> cold;
  for (const auto& p : prompts) {
    evict();
    cold.push_back(HashPromptIds(p, "agent", options));
  }
  evict();
  for (size_t i = 0; i < prompts.size(); ++i) {
    INFO("prompt " << i);
    const PromptBlocks warm = HashPromptIds(prompts[i], "agent", options);
    CHECK(warm.hashes == cold[i].hashes);
    CHECK(warm.prompt_tokens == cold[i].prompt_tokens);
    CHECK(warm.cacheable_blocks == cold[i].cacheable_blocks);
  }
  // Another salt or block size never continues this salt's chains.
  CHECK(HashPromptIds(prompts.back(), "agent-2", options).hashes != cold.back().hashes);
  PrefixCacheOptions eight = options;
  eight.block_tokens = 8;
  CHECK(HashPromptIds(prompts.back(), "agent", eight).hashes.size() == prompts.back().size() / 8);
}

// The model takes a fast path when a prompt shares leading blocks with the chain inserted just
// before; its answers and its evictions must stay those of a plain LRU of blocks, also when other
// chains, other salts, shorter prompts, repeated blocks and evictions come between.
TEST_CASE("the model's answers equal a plain LRU of blocks", "[cache]") {
  PrefixCacheOptions options;
  options.block_tokens = 2;
  options.capacity_blocks = 60;
  PrefixCacheModel model(options);
  std::vector<uint64_t> lru;  // the reference: front = most recent
  auto reference = [&](const PromptBlocks& blocks) {
    size_t hits = 0;
    while (hits < blocks.cacheable_blocks &&
           std::find(lru.begin(), lru.end(), blocks.hashes[hits]) != lru.end())
      ++hits;
    for (uint64_t h : blocks.hashes) {
      lru.erase(std::remove(lru.begin(), lru.end(), h), lru.end());
      lru.insert(lru.begin(), h);
    }
    if (lru.size() > options.capacity_blocks) lru.resize(options.capacity_blocks);
    return static_cast<int64_t>(hits * blocks.block_tokens);
  };
  std::mt19937 rng(11);
  std::vector<std::vector<int32_t>> agents(3);
  for (int step = 0; step < 400; ++step) {
    INFO("step " << step);
    auto& ids = agents[rng() % agents.size()];
    switch (rng() % 6) {
      case 0:  // the agent's prompt is cut short (compaction)
        ids.resize(ids.size() / 2);
        break;
      case 1:  // an edit in the middle
        if (!ids.empty()) ids[rng() % ids.size()] ^= 7;
        break;
      default:  // the prompt grows
        for (int i = 0, n = static_cast<int>(rng() % 9); i < n; ++i)
          ids.push_back(static_cast<int32_t>(rng() % 1000));
    }
    const std::string salt = rng() % 10 == 0 ? "other" : "";
    PromptBlocks blocks = HashPromptIds(ids, salt, options);
    if (rng() % 8 == 0 && blocks.hashes.size() > 2) {
      // A chain that repeats one of its blocks (never made by hashing; PromptBlocks is open).
      blocks.hashes.insert(blocks.hashes.begin() + blocks.hashes.size() / 2, blocks.hashes[1]);
      blocks.cacheable_blocks = std::min(blocks.cacheable_blocks, blocks.hashes.size());
    }
    if (rng() % 5 == 0) {
      size_t hits = 0;
      while (hits < blocks.cacheable_blocks &&
             std::find(lru.begin(), lru.end(), blocks.hashes[hits]) != lru.end())
        ++hits;
      CHECK(model.Lookup(blocks) == static_cast<int64_t>(hits * blocks.block_tokens));
    }
    CHECK(model.LookupAndInsert(blocks) == reference(blocks));
    CHECK(model.size_blocks() == lru.size());
  }
}

}  // namespace
}  // namespace strata
