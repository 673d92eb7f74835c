// The chat templates' process-wide memos (chat_template.cc): the bodies ParseRequest split last
// and the normalised messages by their text. Each template instance also keeps its last renderings;
// a new instance starts without them.
#ifndef STRATA_SRC_TOKENIZE_TEMPLATE_MEMO_H_
#define STRATA_SRC_TOKENIZE_TEMPLATE_MEMO_H_

namespace strata::tokenize_internal {

// Forgets the kept bodies and messages, so that the next request is parsed whole (tests compare
// the memoised path with it).
void ClearChatTemplateMemos();

}  // namespace strata::tokenize_internal

#endif  // STRATA_SRC_TOKENIZE_TEMPLATE_MEMO_H_
