// Append-time hygiene of tool outputs (docs/concepts.md): pure text functions used by
// Context::AppendToolResult. Each returns the text to render; the caller keeps the original.
#ifndef STRATA_CORE_HYGIENE_H_
#define STRATA_CORE_HYGIENE_H_

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

#include "strata/context.h"

namespace strata::internal {

// True for text that reads as an error log: a Python traceback, or a line that starts with an
// "...Error:" / "...Exception:" / "error:" / "fatal:" / "panic:" prefix.
bool LooksLikeErrorLog(std::string_view text);

// Folds an error log: runs of >= options.min_repeat_run identical consecutive lines become the line
// once plus "[strata: previous line repeated N more times]"; each Python traceback with more than
// two frames keeps its header, first and last frames and the error line, with the frames between
// replaced by one "[strata: N frames omitted ...]" line that names `recall_id`. std::nullopt when
// folding would not make the text shorter.
std::optional<std::string> FoldErrorLog(std::string_view text, const HygieneOptions& options,
                                         std::string_view recall_id);

// Keeps about head_bytes from the start and tail_bytes from the end of `text`, cut at line
// boundaries when one is near (and always at UTF-8 boundaries), with a marker line between that
// says how many bytes and about how many tokens were cut and names `recall_id`.
std::string KeepHeadAndTail(std::string_view text, size_t head_bytes, size_t tail_bytes,
                            double bytes_per_token, std::string_view recall_id);

// The one-line reference rendered in place of an output identical to an earlier call's.
// It names what the output mentions, so that the names survive if the earlier output is later
// masked.
std::string DuplicateReference(std::string_view earlier_call_id, std::string_view tool_name,
                               std::string_view output, std::string_view recall_id);

// "1,234,567".
std::string WithThousands(size_t n);

}  // namespace strata::internal

#endif  // STRATA_CORE_HYGIENE_H_
