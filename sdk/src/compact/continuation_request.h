// The request of MakeLlmSummarizer's cache-keeping mode (strata/builtin_policies.h): the agent's
// previous request body up to the end of its messages, byte for byte, then one user message that
// names the span to summarize and the budget, then the request's own fields with the output cap,
// stream and request id of the summary request. Private to strata::compact.
#ifndef STRATA_SRC_COMPACT_CONTINUATION_REQUEST_H_
#define STRATA_SRC_COMPACT_CONTINUATION_REQUEST_H_

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "strata/segment.h"
#include "strata/status.h"

namespace strata::compact_internal {

// A summary request continuing a previous one.
struct ContinuationRequest {
  std::string body;   // previous body's bytes up to the end of its messages, then the instruction
  std::string model;  // the previous request's model (the summary request's)
  size_t first_message = 0;  // 0-based index of the span's first message in the previous request
};

// The summary request for `span` continuing `previous_body` (a Chat Completions body): the span
// is found among its messages (consecutive messages whose contents are the span's segments'),
// and named in the instruction by position (1-based), its first message's opening words and the
// recall ids of its segments, with `max_tokens` as the bound and `instruction` as the task.
// "max_tokens" (or "max_completion_tokens", whichever the body has) becomes `max_tokens`,
// "stream" false (no "stream_options"), "request_id" and "rid" `request_id` when given.
// INVALID_ARGUMENT saying why when the body has no messages array or the span is not in it.
StatusOr<ContinuationRequest> MakeContinuationRequest(std::string_view previous_body,
                                                      const std::vector<const Segment*>& span,
                                                      size_t max_tokens,
                                                      const std::string& instruction,
                                                      const std::string& request_id);

// The recall ids of `span` that `text` does not mention, as a line to append to the summary
// ("\n[strata: recall ids of what it leaves out: r-... r-...]"); "" when it mentions them all.
std::string OmittedRecallIdsLine(const std::vector<const Segment*>& span, const std::string& text);

}  // namespace strata::compact_internal

#endif  // STRATA_SRC_COMPACT_CONTINUATION_REQUEST_H_
