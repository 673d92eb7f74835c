#include "agent/prompt_tokens.h"

#include <algorithm>
#include <utility>

#include "strata/tokenizer_spec.h"

namespace strata::agent_internal {

PromptTokens::PromptTokens(const Tokenizer* tokenizer, std::vector<std::string> markers)
    : tokenizer_(tokenizer) {
  exact_ = tokenizer_ != nullptr && !tokenizer_->IsEstimate();
  // Only a byte-level BPE run by strata matches added tokens on the raw text first; and only
  // markers that are one added token each are safe places to cut.
  if (!exact_ || tokenizer_->Name().rfind("hf-bpe:", 0) != 0) return;
  for (std::string& marker : markers) {
    if (!TokenId(*tokenizer_, marker).ok() || tokenizer_->Encode(marker).size() != 1) return;
  }
  markers_ = std::move(markers);
}

std::vector<int32_t> PromptTokens::EncodeLocked(std::string_view text) {
  if (text == last_text_) return last_ids_;
  std::vector<int32_t> ids;
  if (markers_.empty()) {
    ids = tokenizer_->Encode(text);
  } else {
    std::unordered_map<std::string, std::vector<int32_t>> kept;
    size_t start = 0;
    while (start < text.size()) {
      size_t next = std::string_view::npos;
      for (const std::string& marker : markers_) {
        size_t at = text.find(marker, start + 1);
        if (at < next) next = at;
      }
      if (next == std::string_view::npos) next = text.size();
      std::string piece(text.substr(start, next - start));
      auto it = pieces_.find(piece);
      std::vector<int32_t> piece_ids = it != pieces_.end() ? it->second : tokenizer_->Encode(piece);
      ids.insert(ids.end(), piece_ids.begin(), piece_ids.end());
      kept.emplace(std::move(piece), std::move(piece_ids));
      start = next;
    }
    pieces_ = std::move(kept);  // what the next prompt most likely repeats
  }
  last_text_ = std::string(text);
  last_ids_ = ids;
  return ids;
}

std::vector<int32_t> PromptTokens::Encode(std::string_view text) {
  if (!exact_) return {};
  std::lock_guard<std::mutex> lock(mu_);
  return EncodeLocked(text);
}

size_t PromptTokens::Count(std::string_view text) {
  if (!exact_) return tokenizer_ != nullptr ? tokenizer_->Count(text) : (text.size() + 3) / 4;
  std::lock_guard<std::mutex> lock(mu_);
  if (text == last_text_) return last_ids_.size();
  return EncodeLocked(text).size();
}

StatusOr<std::string> PromptTokens::Render(const ChatTemplate& chat_template,
                                           std::string_view body) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!last_body_.empty() && body == last_body_) return last_render_;
  }
  STRATA_ASSIGN_OR_RETURN(std::string text, chat_template.Render(body));
  std::lock_guard<std::mutex> lock(mu_);
  last_body_ = std::string(body);
  last_render_ = text;
  return text;
}

PromptBlocks PromptTokens::Hash(std::string_view text, std::string_view salt,
                                const PrefixCacheOptions& options) {
  if (!exact_) return HashPrompt(text, salt, tokenizer_, options);
  std::vector<int32_t> ids = Encode(text);
  if (ids.empty() && !text.empty()) return HashPrompt(text, salt, nullptr, options);
  return HashPromptIds(ids, salt, options);
}

std::string IncrementalRequestCounter::Name() const {
  return template_->Name() + "+" + tokenizer_->Name();
}

StatusOr<size_t> IncrementalRequestCounter::CountRequest(std::string_view request_body) const {
  STRATA_ASSIGN_OR_RETURN(std::string text, tokens_->Render(*template_, request_body));
  STRATA_ASSIGN_OR_RETURN(size_t overhead, template_->OverheadTokens(request_body));
  return tokens_->Count(text) + overhead;
}

}  // namespace strata::agent_internal
