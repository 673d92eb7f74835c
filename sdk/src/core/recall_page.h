// The context_recall contract's pages (strata/compaction_policy.h RecallToolSchema()): a call
// {"recall_id", "offset", "max_tokens"} gets the page of the original under recall_id that starts
// at byte `offset` and holds at most `max_tokens` tokens, with a header line naming its bytes and
// a footer saying how to continue. Context::AnswerRecall answers with these; private to the
// components (sdk/src is on their include path).
#ifndef STRATA_SRC_CORE_RECALL_PAGE_H_
#define STRATA_SRC_CORE_RECALL_PAGE_H_

#include <cstddef>
#include <string>
#include <string_view>

#include "strata/context.h"
#include "strata/status.h"
#include "strata/tokenizer.h"

namespace strata::internal {

// What a context_recall call asks for.
struct RecallRequest {
  std::string recall_id;  // "" when the arguments name none
  size_t offset = 0;      // byte offset in the original; 0 when absent
  size_t max_tokens = 0;  // 0 when absent
};

// The arguments of a context_recall call; INVALID_ARGUMENT (saying what is expected) when they are
// not a JSON object with a string recall_id. An offset or max_tokens that is not a non-negative
// integer counts as absent.
StatusOr<RecallRequest> ParseRecallArguments(std::string_view arguments);

// The page of `original` (kept under `recall_id`) from byte `offset` (moved back to a UTF-8
// character boundary) of at most `max_tokens` tokens counted by `tokenizer` (0: the whole rest),
// cut preferably after a line. OUT_OF_RANGE for an offset past the end.
StatusOr<RecallPage> PageOf(std::string_view recall_id, std::string_view original, size_t offset,
                            size_t max_tokens, const Tokenizer& tokenizer);

// The tool result answering a call with `page`: "[<id>: bytes <a>-<b> of <n>]\n<page>\n" then
// "[<k> bytes remain: call context_recall with recall_id "<id>" and offset <b>]" or
// "[end of <id>]".
std::string RecallAnswerText(const RecallPage& page);

}  // namespace strata::internal

#endif  // STRATA_SRC_CORE_RECALL_PAGE_H_
