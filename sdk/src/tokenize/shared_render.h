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

// A request body known to continue one the template parsed earlier: that body's id
// (SharedRender::parsed_body) and how many leading bytes the two are known to share. Its parse then
// does not compare those bytes to find the body it continues.
struct ContinuedBody {
  uint64_t parsed_body = 0;
  size_t unchanged_bytes = 0;
};

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
  // The id of the request's parsed body in the template's memo (0: none), for a ContinuedBody.
  uint64_t parsed_body = 0;
};

// How many leading bytes of `render`'s text are known to be those of the rendering `serial` (one a
// caller derived something from): all of them when it is that rendering, the kept bytes when it
// continues it; nullopt otherwise, and for serial 0 (a text without one).
inline std::optional<size_t> KnownPrefixOf(const SharedRender& render, uint64_t serial) {
  if (serial == 0 || render.text == nullptr) return std::nullopt;
  if (serial == render.serial) return render.text->size();
  if (serial == render.base_serial) return render.kept_bytes;
  return std::nullopt;
}

// chat_template.RenderShared(request_json) and, for strata's own templates, OverheadTokens and
// the continuation above from the same parse (a count then parses the request once, not twice).
// `continued` (may be null): what request_json is known to share with a body parsed earlier; it
// must be true (the bytes are not compared again).
StatusOr<SharedRender> RenderSharedWithOverhead(const ChatTemplate& chat_template,
                                                std::string_view request_json,
                                                const ContinuedBody* continued = nullptr);

}  // namespace strata::tokenize_internal

#endif  // STRATA_SRC_TOKENIZE_SHARED_RENDER_H_
