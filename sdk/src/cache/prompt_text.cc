// RenderPromptText: the prompt text of a request under the default GLM template ("glm-5.3", the
// exact renderer of strata/chat_template.h), with the byte offset of each message. There is one
// GLM prompt renderer; this is a convenience over it for callers that configure no template.
#include <utility>

#include "strata/chat_template.h"
#include "strata/prefix_cache.h"

namespace strata {

StatusOr<PromptText> RenderPromptText(std::string_view request_body) {
  static const ChatTemplate* const kDefault = MakeGlm5ChatTemplate().release();
  STRATA_ASSIGN_OR_RETURN(RenderedPrompt rendered, kDefault->RenderWithOffsets(request_body));
  PromptText prompt;
  prompt.text = std::move(rendered.text);
  prompt.message_offsets = std::move(rendered.message_offsets);
  prompt.tools_bytes = rendered.preamble_bytes;
  return prompt;
}

}  // namespace strata
