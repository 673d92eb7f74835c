// The chat templates' process-wide memos (template_request.cc, template_render.cc): the bodies
// ParseRequest split last, the normalised messages by their text, and the last renderings (each
// continued only by the template instance that made it, so a new instance starts without any).
#ifndef STRATA_SRC_TOKENIZE_TEMPLATE_MEMO_H_
#define STRATA_SRC_TOKENIZE_TEMPLATE_MEMO_H_

#include <cstddef>

namespace strata::tokenize_internal {

// Forgets the kept bodies, messages and renderings, so that the next request is parsed and
// rendered whole (tests compare the memoised path with it).
void ClearChatTemplateMemos();

// The message memo's bound: the sum of its entries' charges stays at or below it.
inline constexpr size_t kMessageMemoMaxBytes = size_t{32} << 20;
// What one entry is charged: its text, about twice that for the parsed message, and the memo's
// entry and slots.
inline constexpr size_t kMessageMemoEntryOverhead = 256;
constexpr size_t MessageMemoCharge(size_t text_bytes) {
  return 3 * text_bytes + kMessageMemoEntryOverhead;
}

struct MessageMemoStats {
  size_t entries = 0;
  size_t text_bytes = 0;     // the texts held (the keys)
  size_t charged_bytes = 0;  // the sum of MessageMemoCharge over the entries
};
MessageMemoStats ChatTemplateMessageMemoStats();

// How often a kept body (ParseRequest) or a kept rendering was continued in its own buffer, which
// nobody else held any more, instead of copied (tests check that the in-place path is taken).
struct InPlaceStats {
  size_t bodies = 0;
  size_t renders = 0;
  size_t bodies_moved = 0;  // of `bodies`, those whose text outgrew its buffer and moved
};
InPlaceStats ChatTemplateInPlaceStats();
void CountInPlace(bool render, bool moved = false);

}  // namespace strata::tokenize_internal

#endif  // STRATA_SRC_TOKENIZE_TEMPLATE_MEMO_H_
