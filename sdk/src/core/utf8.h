// Text from outside strata (upstream answers and error bodies, client requests, files) made safe
// for messages, records and JSON: cutting on a UTF-8 character boundary, replacing invalid UTF-8,
// and a JSON dump that never throws on such text. Every place that shortens text for a message or
// serializes outside text uses these, so a cut character or a stray byte can never make a later
// UTF-8 check (a tool result, a protobuf string, nlohmann's strict dump) fail.
//
//   std::string quoted = internal::Utf8Prefix(arguments, 80);     // "x\xC3\xA9...\xC3\xA9..."
//   std::string clean = internal::ToValidUtf8(upstream_body);     // invalid bytes -> U+FFFD
//   std::string body = internal::DumpOutsideJson(json{{"error", clean}});
//
// Private to strata (include "core/utf8.h" from a component that links strata::core).
// Thread safety: free functions without state.
#ifndef STRATA_CORE_UTF8_H_
#define STRATA_CORE_UTF8_H_

#include <cstddef>
#include <string>
#include <string_view>

namespace strata::internal {

// The largest n <= max_bytes such that text[0, n) does not end inside a UTF-8 character: when
// byte max_bytes continues a character that starts at most 3 bytes earlier, n is where that
// character starts. text.size() when max_bytes >= text.size(). Bytes that belong to no character
// (invalid UTF-8) are not walked over: n never moves back more than 3 bytes.
size_t Utf8Floor(std::string_view text, size_t max_bytes);

// `text` when it has at most `max_bytes` bytes; otherwise its first Utf8Floor(text, max_bytes)
// bytes followed by `marker` (the marker is not counted in max_bytes).
std::string Utf8Prefix(std::string_view text, size_t max_bytes, std::string_view marker = "...");

// True when `text` is valid UTF-8: no overlong forms, surrogates (U+D800-U+DFFF), code points above
// U+10FFFF, stray continuation bytes or truncated sequences.
bool IsValidUtf8(std::string_view text);

// `text` with each byte that is not part of a valid UTF-8 sequence replaced by U+FFFD (EF BF BD);
// valid text is returned unchanged.
std::string ToValidUtf8(std::string_view text);

// `value` (an nlohmann::json or nlohmann::ordered_json) as JSON text that never throws on invalid
// UTF-8 in its strings: such bytes become U+FFFD (error_handler_t::replace); non-ASCII text is
// written as UTF-8, not escaped. Use it for every dump of a value holding outside text.
template <typename Json>
std::string DumpOutsideJson(const Json& value, int indent = -1) {
  return value.dump(indent, ' ', /*ensure_ascii=*/false, Json::error_handler_t::replace);
}

}  // namespace strata::internal

#endif  // STRATA_CORE_UTF8_H_
