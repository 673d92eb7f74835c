// Canonical JSON text helpers (rendering rule 2): one escaping function and one canonicalizer used
// everywhere strata produces JSON, so equal values always give equal bytes.
#ifndef STRATA_CORE_JSON_TEXT_H_
#define STRATA_CORE_JSON_TEXT_H_

#include <string>
#include <string_view>

#include "strata/status.h"

namespace strata::internal {

// Appends `text` (valid UTF-8) as a JSON string literal: '"' and '\\' escaped, control characters
// as \b \f \n \r \t or \u00xx (lowercase hex), everything else (all non-ASCII UTF-8) passed through.
void AppendJsonString(std::string& out, std::string_view text);

// Size AppendJsonString would add, without producing it.
size_t JsonStringSize(std::string_view text);

// How deep arrays and objects may nest in JSON that strata re-serializes (tool arguments, tool
// schemas, extra request fields). Printing a value recurses once per level, so a hostile document
// nested tens of thousands deep would overflow the stack; real ones stay in the tens.
inline constexpr size_t kMaxJsonDepth = 512;

// OK when no array or object in `json_text` nests deeper than `max_depth` levels (a linear scan
// that skips strings; the text need not be valid JSON). Otherwise INVALID_ARGUMENT naming `what`,
// the limit and the byte offset where it was exceeded.
Status CheckJsonDepth(std::string_view json_text, std::string_view what, size_t max_depth = kMaxJsonDepth);

// Parses `json_text` and re-serializes it canonically: object keys sorted by their UTF-8 bytes,
// no whitespace, numbers in shortest round-trip form, strings escaped as AppendJsonString does.
// INVALID_ARGUMENT (naming `what` and the parse position) for malformed JSON, and (CheckJsonDepth)
// for JSON nested deeper than kMaxJsonDepth.
StatusOr<std::string> CanonicalizeJson(std::string_view json_text, std::string_view what);

}  // namespace strata::internal

#endif  // STRATA_CORE_JSON_TEXT_H_
