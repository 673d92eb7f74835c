// strata/prefix_cache.h — a model of a server's prefix (KV) cache.
//
// Servers reuse the KV of a previously seen prompt prefix block by block: a block is reusable when
// it and every block before it are identical (a chain of block hashes) and were computed under
// the same cache_salt. PrefixCacheModel replays that rule: per salt, a chain of block hashes,
// LRU-bounded. strata's Client uses it to predict `cached_tokens` before sending; strata-sim uses
// the same code as its cache, so with the same block size the prediction is exact unless the
// server evicted blocks.
//
// Blocks are counted in tokens. With an exact tokenizer the prompt text is encoded and blocks are
// `block_tokens` token ids; with an estimator, blocks are `block_tokens * bytes_per_token` bytes.
// The prompt text is the chat template's (strata/chat_template.h); RenderPromptText() renders it
// with the default GLM-5.3 template.
//
//   strata::PrefixCacheOptions options;
//   options.block_tokens = 16;
//   strata::PrefixCacheModel model(options);
//   strata::PromptBlocks blocks = strata::HashPrompt(prompt_text, salt, nullptr, model.options());
//   int64_t predicted = model.Lookup(blocks);
//   ... send ...
//   model.Insert(blocks);
//
// Thread safety: PrefixCacheModel is thread-safe. The free functions are pure.
#ifndef STRATA_PREFIX_CACHE_H_
#define STRATA_PREFIX_CACHE_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "strata/status.h"
#include "strata/tokenizer.h"

namespace strata {

// The shape of the modelled cache.
struct PrefixCacheOptions {
  // Tokens per block. vLLM's default is 16; hybrid models such as GLM-5.3-Flash use large blocks
  // (e.g. 512). Must be > 0. Default 16.
  size_t block_tokens = 16;
  // Bytes per token when counting with an estimator (byte blocks). Must be > 0. Default 4.
  size_t bytes_per_token = 4;
  // Blocks kept over all salts before the least recently used are evicted. Default 1,000,000
  // (16M tokens at 16 tokens a block; about 24 MB of model state).
  size_t capacity_blocks = 1000000;
};

// The rendered prompt of a request and where each message starts in it.
struct PromptText {
  std::string text;  // the prompt as the chat template renders it
  // message_offsets[i]: byte offset of messages[i] in text. The tools block, when present, comes
  // first, at offset 0.
  std::vector<size_t> message_offsets;
  // Length of the text before the first message: the template's prefix, reasoning-effort line
  // and tools block.
  size_t tools_bytes = 0;
};

// The prompt text of an OpenAI Chat Completions body under the "glm-5.3" chat template
// (MakeGlm5ChatTemplate() of strata/chat_template.h: the exact GLM-5.3-Flash template), with the
// offset of each message. Fields the template does not read (cache_salt, stream, ...) do not
// change the text. Errors: those of ChatTemplate::Render (INVALID_ARGUMENT naming the field).
StatusOr<PromptText> RenderPromptText(std::string_view request_body);

// The block hash chain of a prompt under a salt.
struct PromptBlocks {
  std::string salt;  // the cache salt the chain is seeded with
  std::vector<uint64_t> hashes;  // one per full block; hashes[i] covers blocks 0..i
  int64_t prompt_tokens = 0;     // tokens of the whole prompt
  size_t block_tokens = 16;  // tokens per block
  // Blocks that may be served from cache: servers always compute the last prompt token, so
  // only full blocks before it count, min(hashes.size(), (prompt_tokens - 1) / block_tokens).
  size_t cacheable_blocks = 0;
};

// Splits `text` into blocks (token ids when `tokenizer` is exact, else byte blocks) and hashes
// them as a chain seeded by `salt`. `tokenizer` may be nullptr (byte blocks).
PromptBlocks HashPrompt(std::string_view text, std::string_view salt, const Tokenizer* tokenizer,
                        const PrefixCacheOptions& options);

// The block hash chain of a prompt already encoded into token ids `ids` (an exact tokenizer's):
// equal to HashPrompt() of the text those ids encode, without encoding it again.
PromptBlocks HashPromptIds(const std::vector<int32_t>& ids, std::string_view salt,
                           const PrefixCacheOptions& options);

// Continues a chain to a changed prompt: `blocks` holds the chain of an earlier prompt under some
// salt (from HashPromptIds, HashPrompt or these functions, with the same block_tokens and, for
// text, bytes_per_token as `options`), whose first `unchanged` ids (bytes, for text) are the new
// prompt's too. Its blocks inside that prefix are kept and the rest hashed again, so that a prompt
// that grows at its end costs its new blocks. Afterwards *blocks equals HashPromptIds(ids,
// blocks->salt, options) (HashPrompt(text, blocks->salt, nullptr, options) for text). An
// `unchanged` beyond what the two prompts share gives a wrong chain.
void ContinuePromptIds(const std::vector<int32_t>& ids, size_t unchanged,
                       const PrefixCacheOptions& options, PromptBlocks* blocks);
// ContinuePromptIds for byte blocks: `text` is the new prompt, `unchanged` counts bytes.
void ContinuePromptText(std::string_view text, size_t unchanged, const PrefixCacheOptions& options,
                        PromptBlocks* blocks);

// How many leading hashes two chains share. Each hash covers its block and every block before it,
// so the chains agree up to some index and differ from there on: found by bisection, in
// O(log n) comparisons, not one per block.
size_t SharedChainPrefix(const std::vector<uint64_t>& a, const std::vector<uint64_t>& b);

// A model of a server's prefix (KV) cache: block hash chains per salt, LRU eviction.
// Thread-safe.
class PrefixCacheModel {
 public:
  // An empty cache.
  explicit PrefixCacheModel(PrefixCacheOptions options = {});
  ~PrefixCacheModel();
  PrefixCacheModel(const PrefixCacheModel&) = delete;
  PrefixCacheModel& operator=(const PrefixCacheModel&) = delete;

  // The options it was created with.
  const PrefixCacheOptions& options() const;

  // Tokens a server would serve from cache: the number of leading cacheable blocks present,
  // times block_tokens. Does not change recency.
  int64_t Lookup(const PromptBlocks& blocks) const;
  // Marks every block of `blocks` as computed (most recently used), evicting the least recently
  // used blocks beyond capacity.
  void Insert(const PromptBlocks& blocks);
  // Lookup then Insert, atomically (what a server does per request).
  int64_t LookupAndInsert(const PromptBlocks& blocks);

  // Blocks held over all salts.
  size_t size_blocks() const;
  // Blocks currently held for `salt`.
  size_t blocks_for_salt(std::string_view salt) const;
  void Clear();  // forgets every block held

 private:
  class Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace strata

#endif  // STRATA_PREFIX_CACHE_H_
