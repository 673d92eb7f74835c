// A light scan of JSON text (private to strata; any component that links strata::core may include
// it): where a value, a string or an array's elements begin and end, without parsing or
// validating them. The chat template's request parse and the sidecar proxy's request bodies use
// it to find the parts of a text that changed since an earlier one (whatever the scan passes over
// is validated when those parts are parsed); compact's summary request uses it to find where a
// body it built, valid already, ends its messages.
#ifndef STRATA_CORE_JSON_SCAN_H_
#define STRATA_CORE_JSON_SCAN_H_

#include <cstddef>
#include <string_view>
#include <utility>
#include <vector>

namespace strata::internal {

// ' ', '\t', '\n' or '\r'.
inline bool IsJsonSpace(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

// The first position at or after `i` that is not JSON whitespace (t.size() at the end).
size_t SkipJsonSpace(std::string_view t, size_t i);

// The end (one past the closing quote) of the JSON string starting at t[pos] == '"', or npos.
size_t SkipJsonString(std::string_view t, size_t pos);

// The end of the JSON value starting at t[pos] (a string, an object or array by its brackets, a
// scalar up to the next ',', '}', ']' or space), or npos. Not validated.
size_t SkipJsonValue(std::string_view t, size_t pos);

// Cuts the elements of an array from t[j], just after its '[' (`after_element` false) or just
// after an element (true), appending each one's [begin, end) to *elements. One past the array's
// ']', or npos when the text is not an array there.
size_t SplitJsonArray(std::string_view t, size_t j, bool after_element,
                      std::vector<std::pair<size_t, size_t>>* elements);

}  // namespace strata::internal

#endif  // STRATA_CORE_JSON_SCAN_H_
