#include "agent/prompt_tokens.h"

#include <algorithm>
#include <optional>
#include <utility>

#include "core/text_util.h"  // CommonPrefix
#include "strata/tokenizer_spec.h"
#include "tokenize/shared_render.h"

namespace strata::agent_internal {

namespace {

// Makes `kept` equal to `next`, writing only from where they differ; returns that offset.
size_t UpdateInPlace(std::string& kept, std::string_view next) {
  const size_t prefix = internal::CommonPrefix(kept, next);
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

bool PromptTokens::IsLastRender(std::string_view text) const {
  // last_.text is held here, so nothing can change or free it: the same address and size are
  // the same bytes.
  return last_.text != nullptr && last_.serial != 0 && text.data() == last_.text->data() &&
         text.size() == last_.text->size();
}

void PromptTokens::Derive(Lineage* lineage) const {
  lineage->serial = last_.serial;
  lineage->known = last_.text != nullptr ? last_.text->size() : 0;
}

void PromptTokens::Carry(Lineage* lineage, uint64_t previous) const {
  if (lineage->serial == 0) return;
  if (last_.serial != 0 && last_.base_serial == lineage->serial) {  // continues it directly
    lineage->known = last_.kept_bytes;
  } else if (last_.serial != 0 && previous != 0 && last_.base_serial == previous &&
             lineage->known != kUnknown) {  // continues the render that continued it
    lineage->known = std::min(lineage->known, last_.kept_bytes);
  } else {
    lineage->known = kUnknown;
  }
}

const std::vector<int32_t>& PromptTokens::EncodeLocked(std::string_view text) {
  const bool render = IsLastRender(text);
  const size_t known = render ? Known(encoded_from_) : kUnknown;
  const std::vector<int32_t>& ids =
      known != kUnknown ? encoder_->Encode(text, known) : encoder_->Encode(text);
  if (render) {
    Derive(&encoded_from_);
  } else {
    encoded_from_ = Lineage();
  }
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
    const ChatTemplate& chat_template, std::string_view body, std::optional<size_t>* overhead,
    const tokenize_internal::ContinuedBody* continued, uint64_t* parsed_body) {
  if (parsed_body != nullptr) *parsed_body = 0;
  // Held while rendering, so that what is kept of the last render belongs to it.
  internal::MutexLock lock(mu_);
  // strata's templates (renderings with a serial) find the same body again in their own memo and
  // hand back the same rendering, so only other templates need the body kept and compared here.
  const bool same_template = render_template_ == &chat_template && last_.text != nullptr;
  size_t prefix = 0;
  if (same_template && last_.serial == 0) {
    prefix = internal::CommonPrefix(last_body_, body);
    if (prefix == body.size() && prefix == last_body_.size()) {
      if (overhead != nullptr) *overhead = last_.overhead_tokens;
      return last_.text;
    }
  }
  // Let go of the previous render first: held by nobody else, the template continues it in its
  // own buffer instead of copying it (its serial still says what the encoder and the chain hold).
  last_.text.reset();
  const uint64_t previous = last_.serial;
  StatusOr<tokenize_internal::SharedRender> render =
      tokenize_internal::RenderSharedWithOverhead(chat_template, body, continued);
  if (!render.ok()) {
    last_ = tokenize_internal::SharedRender();
    last_body_.clear();
    Carry(&encoded_from_, 0);
    Carry(&chain_from_, 0);
    return render.status();
  }
  render_template_ = &chat_template;
  last_ = std::move(render).value();
  Carry(&encoded_from_, previous);
  Carry(&chain_from_, previous);
  if (last_.serial == 0) {
    last_body_.resize(prefix);
    last_body_.append(body.substr(prefix));
  } else {
    last_body_.clear();
  }
  if (overhead != nullptr) *overhead = last_.overhead_tokens;
  if (parsed_body != nullptr) *parsed_body = last_.parsed_body;
  return last_.text;
}

std::shared_ptr<const PromptBlocks> PromptTokens::Hash(std::string_view text, std::string_view salt,
                                                       const PrefixCacheOptions& options) {
  if (exact_ && !splits_) {  // each distinct prompt is encoded whole: HashPromptIds continues
    internal::MutexLock lock(mu_);
    const std::vector<int32_t>& ids = EncodeLocked(text);
    if (!ids.empty() || text.empty()) return std::make_shared<PromptBlocks>(HashPromptIds(ids, salt, options));
    return std::make_shared<PromptBlocks>(HashPrompt(text, salt, nullptr, options));
  }
  internal::MutexLock lock(mu_);
  // A caller still holding the last chain keeps it as it is: this one continues a copy.
  if (chain_.use_count() > 1) chain_ = std::make_shared<PromptBlocks>(*chain_);
  PromptBlocks& chain = *chain_;
  const bool same_shape = has_chain_ && chain.salt == salt &&
                          chain_options_.block_tokens == options.block_tokens &&
                          chain_options_.bytes_per_token == options.bytes_per_token;
  const std::vector<int32_t>* ids = exact_ ? &EncodeLocked(text) : nullptr;
  const bool of_ids = ids != nullptr && (!ids->empty() || text.empty());
  const bool render = IsLastRender(text);
  size_t unchanged = 0;
  if (of_ids) {
    unchanged = same_shape && chain_of_ids_ ? chain_valid_ids_ : 0;
  } else {
    // The render says how much of the text the chain was hashed from it starts with; otherwise
    // the kept copy of that text is compared (and kept up to date only then).
    size_t prefix = render && !chain_of_ids_ ? Known(chain_from_) : kUnknown;
    if (prefix != kUnknown) {
      chain_text_valid_ = false;
    } else if (chain_text_valid_) {
      prefix = UpdateInPlace(chain_text_, text);
    } else {
      chain_text_.assign(text);
      chain_text_valid_ = true;
      prefix = 0;
    }
    unchanged = same_shape && !chain_of_ids_ ? prefix : 0;
  }
  if (!same_shape) chain = PromptBlocks{std::string(salt), {}, 0, 16, 0};
  if (of_ids) {
    ContinuePromptIds(*ids, unchanged, options, &chain);
    chain_valid_ids_ = ids->size();
  } else {
    ContinuePromptText(text, unchanged, options, &chain);
  }
  if (!of_ids && render) {
    Derive(&chain_from_);
  } else {
    chain_from_ = Lineage();
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
  return Count(request_body, nullptr);
}

StatusOr<size_t> IncrementalRequestCounter::CountRendered(std::string_view request_body,
                                                          const RenderContinuation& render) const {
  return Count(request_body, &render);
}

StatusOr<size_t> IncrementalRequestCounter::Count(std::string_view request_body,
                                                  const RenderContinuation* render) const {
  tokenize_internal::ContinuedBody continued;
  {
    internal::MutexLock lock(mu_);
    // The render counted last is the one this body's render follows: the template's parse
    // continues that body from the bytes the context says are unchanged.
    if (render != nullptr && render->previous_render_serial != 0 &&
        render->previous_render_serial == counted_render_) {
      continued = {counted_parsed_body_, render->unchanged_bytes};
    }
    // Not held while rendering: the render continuing the last one reuses its buffer only when
    // nobody else holds it.
    counted_.reset();
  }
  // The render's parse gives the overhead too (strata's templates): the body is parsed once.
  std::optional<size_t> overhead;
  uint64_t parsed_body = 0;
  StatusOr<std::shared_ptr<const std::string>> text =
      tokens_->Render(*template_, request_body, &overhead,
                      continued.parsed_body != 0 ? &continued : nullptr, &parsed_body);
  if (!text.ok()) {
    internal::MutexLock lock(mu_);
    counted_render_ = 0;
    return text.status();
  }
  if (!overhead) {
    STRATA_ASSIGN_OR_RETURN(overhead, template_->OverheadTokens(request_body));
  }
  const size_t count = tokens_->Count(**text) + *overhead;
  internal::MutexLock lock(mu_);
  counted_ = std::move(text).value();
  counted_body_size_ = request_body.size();
  counted_render_ = render != nullptr ? render->render_serial : 0;
  counted_parsed_body_ = parsed_body;
  return count;
}

void IncrementalRequestCounter::Forget() {
  internal::MutexLock lock(mu_);
  counted_.reset();
}

std::shared_ptr<const std::string> IncrementalRequestCounter::TakeCounted(size_t body_size) {
  internal::MutexLock lock(mu_);
  std::shared_ptr<const std::string> text = std::move(counted_);
  counted_.reset();
  return text != nullptr && counted_body_size_ == body_size ? text : nullptr;
}

std::shared_ptr<const std::string> IncrementalRequestCounter::TakeRender(uint64_t render_serial) {
  internal::MutexLock lock(mu_);
  std::shared_ptr<const std::string> text = std::move(counted_);
  counted_.reset();
  return text != nullptr && render_serial != 0 && counted_render_ == render_serial ? text : nullptr;
}

}  // namespace strata::agent_internal
