// The chat templates' process-wide memos (chat_template.cc): the bodies ParseRequest split last,
// the normalised messages by their text, and the last renderings (each continued only by the
// template instance that made it, so a new instance starts without any).
#ifndef STRATA_SRC_TOKENIZE_TEMPLATE_MEMO_H_
#define STRATA_SRC_TOKENIZE_TEMPLATE_MEMO_H_

namespace strata::tokenize_internal {

// Forgets the kept bodies, messages and renderings, so that the next request is parsed and
// rendered whole (tests compare the memoised path with it).
void ClearChatTemplateMemos();

}  // namespace strata::tokenize_internal

#endif  // STRATA_SRC_TOKENIZE_TEMPLATE_MEMO_H_
