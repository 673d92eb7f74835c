// json_body.h — why a request body is not JSON, said precisely (the HTTP proxy's 400s).
//
// Thread safety: a pure function.
#ifndef STRATA_APPS_STRATA_SIDECAR_JSON_BODY_H_
#define STRATA_APPS_STRATA_SIDECAR_JSON_BODY_H_

#include <string>
#include <string_view>

namespace strata::sidecar {

// What is wrong with `text`, which does not parse as JSON, as a message that starts with `what`:
// the offset of the first byte that is not UTF-8, else the parser's reason and position (a lone
// UTF-16 surrogate escape, a number out of range such as 1e400, a syntax error). The message is
// valid UTF-8 and quotes at most a few bytes of `text`. "" when `text` is valid JSON.
std::string DescribeJsonError(std::string_view text, std::string_view what);

// The offset of the first byte of `text` that does not start or continue a valid UTF-8 character
// (overlong forms, surrogates and values above U+10FFFF included); npos when it is all valid.
size_t FirstInvalidUtf8(std::string_view text);

}  // namespace strata::sidecar

#endif  // STRATA_APPS_STRATA_SIDECAR_JSON_BODY_H_
