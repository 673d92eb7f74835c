#include "agent/prompt_tokens.h"

#include <algorithm>
#include <utility>

#include "strata/tokenizer_spec.h"
#include "tokenize/exact_tokenizer.h"  // CommonPrefix

namespace strata::agent_internal {

namespace {

// Makes `kept` equal to `next`, writing only from where they differ; returns that offset.
size_t UpdateInPlace(std::string& kept, std::string_view next) {
  const size_t prefix = tokenize_internal::CommonPrefix(kept, next);
  if (prefix == kept.size() && prefix == next.size()) return prefix;
  kept.resize(prefix);
  kept.append(next.substr(prefix));
  return prefix;
}

}  // namespace

PromptTokens::PromptTokens(const Tokenizer* tokenizer, std::vector<std::string> markers)
    : tokenizer_(tokenizer) {
  (void)markers;  // the tokenizer's own cut points hold whether or not the markers are tokens
  exact_ = tokenizer_ != nullptr && !tokenizer_->IsEstimate();
  if (!exact_) return;
  encoder_ = std::make_unique<IncrementalEncoder>(*tokenizer_);
  // Only a byte-level BPE run by strata has cut points (ExactTokenizer::FindCuts).
  splits_ = tokenizer_->Name().rfind("hf-bpe:", 0) == 0;
}

const std::vector<int32_t>& PromptTokens::EncodeLocked(std::string_view text) {
  const std::vector<int32_t>& ids = encoder_->Encode(text);
  chain_valid_ids_ = std::min(chain_valid_ids_, encoder_->unchanged());
  return ids;
}

std::vector<int32_t> PromptTokens::Encode(std::string_view text) {
  if (!exact_) return {};
  internal::MutexLock lock(mu_);
  return EncodeLocked(text);
}

size_t PromptTokens::Count(std::string_view text) {
  if (!exact_) return tokenizer_ != nullptr ? tokenizer_->Count(text) : (text.size() + 3) / 4;
  internal::MutexLock lock(mu_);
  return EncodeLocked(text).size();
}

StatusOr<std::shared_ptr<const std::string>> PromptTokens::Render(
    const ChatTemplate& chat_template, std::string_view body) {
  // Held while rendering, so that the body compared is the one the kept render belongs to.
  internal::MutexLock lock(mu_);
  const size_t prefix =
      render_template_ == &chat_template ? tokenize_internal::CommonPrefix(last_body_, body) : 0;
  if (render_template_ == &chat_template && prefix == body.size() &&
      prefix == last_body_.size() && last_render_ != nullptr) {
    return last_render_;
  }
  STRATA_ASSIGN_OR_RETURN(std::shared_ptr<const std::string> text,
                          chat_template.RenderShared(body));
  render_template_ = &chat_template;
  last_body_.resize(prefix);
  last_body_.append(body.substr(prefix));
  last_render_ = std::move(text);
  return last_render_;
}

PromptBlocks PromptTokens::Hash(std::string_view text, std::string_view salt,
                                const PrefixCacheOptions& options) {
  if (exact_ && !splits_) {  // each distinct prompt is encoded whole: HashPromptIds continues
    internal::MutexLock lock(mu_);
    const std::vector<int32_t>& ids = EncodeLocked(text);
    if (!ids.empty() || text.empty()) return HashPromptIds(ids, salt, options);
    return HashPrompt(text, salt, nullptr, options);
  }
  internal::MutexLock lock(mu_);
  const bool same_shape = has_chain_ && chain_.salt == salt &&
                          chain_options_.block_tokens == options.block_tokens &&
                          chain_options_.bytes_per_token == options.bytes_per_token;
  const std::vector<int32_t>* ids = exact_ ? &EncodeLocked(text) : nullptr;
  const bool of_ids = ids != nullptr && (!ids->empty() || text.empty());
  size_t unchanged = 0;
  if (of_ids) {
    unchanged = same_shape && chain_of_ids_ ? chain_valid_ids_ : 0;
  } else {
    const size_t prefix = UpdateInPlace(chain_text_, text);
    unchanged = same_shape && !chain_of_ids_ ? prefix : 0;
  }
  if (!same_shape) chain_ = PromptBlocks{std::string(salt), {}, 0, 16, 0};
  if (of_ids) {
    ContinuePromptIds(*ids, unchanged, options, &chain_);
    chain_valid_ids_ = ids->size();
  } else {
    ContinuePromptText(text, unchanged, options, &chain_);
  }
  has_chain_ = true;
  chain_of_ids_ = of_ids;
  chain_options_ = options;
  return chain_;
}

std::string IncrementalRequestCounter::Name() const {
  return template_->Name() + "+" + tokenizer_->Name();
}

StatusOr<size_t> IncrementalRequestCounter::CountRequest(std::string_view request_body) const {
  STRATA_ASSIGN_OR_RETURN(std::shared_ptr<const std::string> text,
                          tokens_->Render(*template_, request_body));
  STRATA_ASSIGN_OR_RETURN(size_t overhead, template_->OverheadTokens(request_body));
  return tokens_->Count(*text) + overhead;
}

}  // namespace strata::agent_internal
