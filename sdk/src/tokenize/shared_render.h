// A chat template's shared render and its overhead tokens from one parse of the request, for the
// request counter (private to strata).
#ifndef STRATA_SRC_TOKENIZE_SHARED_RENDER_H_
#define STRATA_SRC_TOKENIZE_SHARED_RENDER_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "strata/chat_template.h"
#include "strata/status.h"

namespace strata::tokenize_internal {

// A render handed out by RenderSharedWithOverhead.
struct SharedRender {
  std::shared_ptr<const std::string> text;  // never changes while held
  // OverheadTokens of the request from the render's own parse (strata's templates); empty for
  // other templates (call OverheadTokens).
  std::optional<size_t> overhead_tokens;
  // This rendering's serial (never reused; 0 for other templates) and the one it continues:
  // (*text)[0, kept_bytes) is byte for byte the first kept_bytes of rendering `base_serial`'s
  // text (0: it continues none), so a caller that derived something from that text (block
  // hashes, token ids) need not compare those bytes again.
  uint64_t serial = 0;
  uint64_t base_serial = 0;
  size_t kept_bytes = 0;
};

// chat_template.RenderShared(request_json) and, for strata's own templates, OverheadTokens and
// the continuation above from the same parse (a count then parses the request once, not twice).
StatusOr<SharedRender> RenderSharedWithOverhead(const ChatTemplate& chat_template,
                                                std::string_view request_json);

}  // namespace strata::tokenize_internal

#endif  // STRATA_SRC_TOKENIZE_SHARED_RENDER_H_
