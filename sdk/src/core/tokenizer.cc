// The interfaces of strata/tokenizer.h (Tokenizer, ChatTemplate, RequestTokenCounter): what they
// define beyond their pure virtual functions. The estimator, which implements Tokenizer, is in
// estimate_tokenizer.cc.
#include "strata/tokenizer.h"

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

}  // namespace strata
