// The interfaces of strata/tokenizer.h (Tokenizer, ChatTemplate, RequestTokenCounter): what they
// define beyond their pure virtual functions. The estimator, which implements Tokenizer, is in
// estimate_tokenizer.cc.
#include "strata/tokenizer.h"

#include <memory>
#include <string>
#include <utility>

namespace strata {

// The default: the text alone, no offsets (templates that know where messages start override it).
StatusOr<RenderedPrompt> ChatTemplate::RenderWithOffsets(std::string_view request_json) const {
  STRATA_ASSIGN_OR_RETURN(std::string text, Render(request_json));
  RenderedPrompt p;
  p.text = std::move(text);
  return p;
}

StatusOr<std::shared_ptr<const std::string>> ChatTemplate::RenderShared(
    std::string_view request_json) const {
  STRATA_ASSIGN_OR_RETURN(std::string text, Render(request_json));
  return std::make_shared<const std::string>(std::move(text));
}

}  // namespace strata
