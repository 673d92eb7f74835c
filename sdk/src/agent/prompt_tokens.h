// Token ids of successive prompts, computed incrementally (private to strata::agent).
//
// An agent's prompts grow at their end and repeat their beginning. With a Hugging Face byte-level
// BPE tokenizer whose file declares the chat template's role markers as added tokens, the prompt is
// cut before each marker: added tokens are matched on the raw text before anything else, so the ids
// of the pieces, concatenated, are exactly the ids of the whole text. Each piece's ids are kept
// (keyed by its bytes) for the next prompt, so only new or changed messages are encoded again.
// Other tokenizers (SentencePiece adds a dummy prefix per call; estimators have no ids) encode the
// whole text, still once per distinct prompt (the budget count and the block hashes share it).
//
// Thread safety: thread-safe (one mutex).
#ifndef STRATA_SRC_AGENT_PROMPT_TOKENS_H_
#define STRATA_SRC_AGENT_PROMPT_TOKENS_H_

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "strata/chat_template.h"
#include "strata/prefix_cache.h"
#include "strata/tokenizer.h"

namespace strata::agent_internal {

class PromptTokens {
 public:
  // `markers`: texts the prompt may be cut before (e.g. "<|user|>"); used only when each is one
  // added token of `tokenizer` (checked here). Neither pointer is owned.
  PromptTokens(const Tokenizer* tokenizer, std::vector<std::string> markers);

  bool exact() const { return exact_; }
  bool splits() const { return !markers_.empty(); }

  // Ids of `text` (exact tokenizers), equal to tokenizer->Encode(text).
  std::vector<int32_t> Encode(std::string_view text);
  // Tokens of `text`: Encode().size() for exact tokenizers, else tokenizer->Count(text).
  size_t Count(std::string_view text);
  // chat_template.Render(body), reusing the last render when `body` is the same (the budget count
  // and the block hashes of one request render it once).
  StatusOr<std::string> Render(const ChatTemplate& chat_template, std::string_view body);
  // The block hash chain of `text` under `salt`, equal to HashPrompt(text, salt, tokenizer,
  // options).
  PromptBlocks Hash(std::string_view text, std::string_view salt,
                    const PrefixCacheOptions& options);

 private:
  std::vector<int32_t> EncodeLocked(std::string_view text);

  const Tokenizer* tokenizer_;
  bool exact_ = false;
  std::vector<std::string> markers_;  // empty: no splitting
  std::mutex mu_;
  std::string last_text_;          // guarded by mu_
  std::vector<int32_t> last_ids_;  // guarded by mu_
  std::string last_body_;          // guarded by mu_
  std::string last_render_;        // guarded by mu_: Render(last_body_)
  // Ids of the pieces of the last prompt, by piece bytes. Guarded by mu_.
  std::unordered_map<std::string, std::vector<int32_t>> pieces_;
};

// A RequestTokenCounter over PromptTokens: chat template render, then incremental encoding.
class IncrementalRequestCounter final : public RequestTokenCounter {
 public:
  IncrementalRequestCounter(const ChatTemplate* chat_template, const Tokenizer* tokenizer,
                            PromptTokens* tokens)
      : template_(chat_template), tokenizer_(tokenizer), tokens_(tokens) {}
  std::string Name() const override;
  StatusOr<size_t> CountRequest(std::string_view request_body) const override;

 private:
  const ChatTemplate* template_;
  const Tokenizer* tokenizer_;
  PromptTokens* tokens_;
};

}  // namespace strata::agent_internal

#endif  // STRATA_SRC_AGENT_PROMPT_TOKENS_H_
