// Token ids of successive prompts, their renders and block hashes, computed incrementally
// (private to strata::agent).
//
// An agent's prompts grow at their end and repeat their beginning. Each result here continues the
// previous one and touches only what changed: the prompt is encoded by an IncrementalEncoder (a
// Hugging Face byte-level BPE run by strata is cut where its file allows: before an added token and
// after a newline that nothing merges across, found per tokenizer file, so the template's role
// markers need not be added tokens), the block hash chain keeps the blocks of the unchanged ids
// (bytes, for estimators), and the render of a body updates the kept copies in place. Other exact
// tokenizers (SentencePiece adds a dummy prefix per call) encode each distinct prompt whole, once
// (the budget count and the block hashes share it).
//
// Thread safety: thread-safe (one mutex).
#ifndef STRATA_SRC_AGENT_PROMPT_TOKENS_H_
#define STRATA_SRC_AGENT_PROMPT_TOKENS_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/thread_annotations.h"
#include "strata/chat_template.h"
#include "strata/prefix_cache.h"
#include "strata/tokenizer.h"
#include "strata/tokenizer_spec.h"
#include "tokenize/shared_render.h"

namespace strata::agent_internal {

class PromptTokens {
 public:
  // `markers`: the chat template's role markers (e.g. "<|user|>"). Cutting no longer depends on
  // them (the tokenizer's own cut points are used); they are accepted for the callers that name
  // them. `tokenizer` is not owned.
  PromptTokens(const Tokenizer* tokenizer, std::vector<std::string> markers);

  bool exact() const { return exact_; }
  // Whether prompts are encoded from the last cut inside what they share with the previous one.
  bool splits() const { return splits_; }

  // Ids of `text` (exact tokenizers), equal to tokenizer->Encode(text).
  std::vector<int32_t> Encode(std::string_view text);
  // Tokens of `text`: Encode().size() for exact tokenizers, else tokenizer->Count(text).
  size_t Count(std::string_view text);
  // chat_template.Render(body), reusing the last render when `body` is the same (the budget count
  // and the block hashes of one request render it once): strata's templates hand back the same
  // rendering for the same body from their own memo, so no copy of the body is kept for them.
  // The text is shared with the memo, not copied, and never changes once returned. With
  // `overhead`: set to chat_template.OverheadTokens(body) from the render's own parse for
  // strata's templates, left empty for others.
  // `continued` (may be null): what `body` is known to share with a body parsed earlier
  // (tokenize_internal::ContinuedBody); *parsed_body (when given): this body's id in the
  // template's memo, for the next one (0: none).
  StatusOr<std::shared_ptr<const std::string>> Render(
      const ChatTemplate& chat_template, std::string_view body,
      std::optional<size_t>* overhead = nullptr,
      const tokenize_internal::ContinuedBody* continued = nullptr, uint64_t* parsed_body = nullptr);
  // Bytes of the last body kept to recognise it again: 0 after a render by strata's templates,
  // whose own memo recognises it (for tests).
  size_t kept_body_bytes() const {
    internal::MutexLock lock(mu_);
    return last_body_.size();
  }
  // The block hash chain of `text` under `salt`, equal to HashPrompt(text, salt, tokenizer,
  // options). The chain is this object's own, shared: the next call continues it in place when
  // no caller holds it any more, and copies it first otherwise.
  std::shared_ptr<const PromptBlocks> Hash(std::string_view text, std::string_view salt,
                                           const PrefixCacheOptions& options);

 private:
  static constexpr size_t kUnknown = static_cast<size_t>(-1);

  // The ids of `text` (the encoder's, valid until the next call); notes how many of them the kept
  // chain still covers.
  const std::vector<int32_t>& EncodeLocked(std::string_view text) STRATA_REQUIRES(mu_);
  // Whether `text` is the last render's text itself (not a copy).
  bool IsLastRender(std::string_view text) const STRATA_REQUIRES(mu_);
  // What the encoder's text or the byte chain was derived from: rendering `serial` (0: another
  // text), of whose text the last render's first `known` bytes are known to be (kUnknown: not
  // known). Renders that continue one another carry it along, so a build that renders twice
  // before the chain is hashed again still need not compare the bytes.
  struct Lineage {
    uint64_t serial = 0;
    size_t known = 0;
  };
  // `lineage` derived from the last render, whole.
  void Derive(Lineage* lineage) const STRATA_REQUIRES(mu_);
  // `lineage` carried from the render before the last one (`previous`, its serial) to the last.
  void Carry(Lineage* lineage, uint64_t previous) const STRATA_REQUIRES(mu_);
  // Leading bytes of the last render known to be those `lineage` was derived from, or kUnknown.
  static size_t Known(const Lineage& lineage) { return lineage.serial == 0 ? kUnknown : lineage.known; }

  const Tokenizer* tokenizer_;
  bool exact_ = false;
  bool splits_ = false;
  mutable internal::Mutex mu_;
  std::unique_ptr<IncrementalEncoder> encoder_ STRATA_GUARDED_BY(mu_);  // exact tokenizers
  // The render memo: the last body rendered by `render_template_` (kept, and updated in place from
  // where it differs from the next, only for templates whose renderings have no serial) and its
  // render (the template's kept text, ChatTemplate::RenderShared, shared with the callers).
  const ChatTemplate* render_template_ STRATA_GUARDED_BY(mu_) = nullptr;
  std::string last_body_ STRATA_GUARDED_BY(mu_);
  tokenize_internal::SharedRender last_ STRATA_GUARDED_BY(mu_);
  // The rendering (serial) whose text the encoder holds, and the one the byte chain was hashed
  // from; 0 when it was another text. A render continuing it tells how many bytes are the same,
  // so they are not compared again.
  Lineage encoded_from_ STRATA_GUARDED_BY(mu_);
  Lineage chain_from_ STRATA_GUARDED_BY(mu_);
  // The chain hashed last and what it was hashed from (ids: the encoder's text; bytes:
  // chain_text_).
  // chain_valid_ids_: leading ids of the encoder's current text the chain covers.
  bool has_chain_ STRATA_GUARDED_BY(mu_) = false;
  bool chain_of_ids_ STRATA_GUARDED_BY(mu_) = false;
  PrefixCacheOptions chain_options_ STRATA_GUARDED_BY(mu_);
  std::shared_ptr<PromptBlocks> chain_ STRATA_GUARDED_BY(mu_) = std::make_shared<PromptBlocks>();
  std::string chain_text_ STRATA_GUARDED_BY(mu_);
  bool chain_text_valid_ STRATA_GUARDED_BY(mu_) = true;  // false while chain_from_ says it
  size_t chain_valid_ids_ STRATA_GUARDED_BY(mu_) = 0;
};

// A RequestTokenCounter over PromptTokens: chat template render, then incremental encoding.
class IncrementalRequestCounter final : public RequestTokenCounter {
 public:
  IncrementalRequestCounter(const ChatTemplate* chat_template, const Tokenizer* tokenizer,
                            PromptTokens* tokens)
      : template_(chat_template), tokenizer_(tokenizer), tokens_(tokens) {}
  std::string Name() const override;
  StatusOr<size_t> CountRequest(std::string_view request_body) const override;
  // Continues the body counted last when `render` follows its render (the context's unchanged
  // bytes are not compared again).
  StatusOr<size_t> CountRendered(std::string_view request_body,
                                 const RenderContinuation& render) const override;

  // Drops the render kept of the last count.
  void Forget();
  // The render of the body counted last since Forget() (then dropped), or null when nothing was
  // counted since or that body was not `body_size` bytes long. A context's Build returns the
  // body it counted last, so this is that body's render, without rendering it again.
  std::shared_ptr<const std::string> TakeCounted(size_t body_size);
  // The render of the body counted last when CountRendered counted it as render `render_serial`
  // of a context (BuiltRequest::render_serial; never 0), then dropped; null otherwise. The serial
  // names one body, so this is that body's render whatever was counted before it.
  std::shared_ptr<const std::string> TakeRender(uint64_t render_serial);

 private:
  const ChatTemplate* template_;
  const Tokenizer* tokenizer_;
  PromptTokens* tokens_;
  mutable internal::Mutex mu_;
  // The count's body, of which render (0: a plain CountRequest), and its id in the template's
  // memo.
  StatusOr<size_t> Count(std::string_view request_body, const RenderContinuation* render) const;
  mutable std::shared_ptr<const std::string> counted_ STRATA_GUARDED_BY(mu_);
  mutable size_t counted_body_size_ STRATA_GUARDED_BY(mu_) = 0;
  mutable uint64_t counted_render_ STRATA_GUARDED_BY(mu_) = 0;
  mutable uint64_t counted_parsed_body_ STRATA_GUARDED_BY(mu_) = 0;
};

}  // namespace strata::agent_internal

#endif  // STRATA_SRC_AGENT_PROMPT_TOKENS_H_
