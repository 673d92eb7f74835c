// Keeping secrets (API keys, passwords in endpoint URLs) out of messages, records and traces, and
// header values that could inject headers out of requests. RedactUrl() itself is public
// (strata/transport.h) so that applications print endpoints the same way.
#ifndef STRATA_SRC_TRANSPORT_REDACT_H_
#define STRATA_SRC_TRANSPORT_REDACT_H_

#include <string>
#include <string_view>
#include <vector>

#include "strata/transport.h"

namespace strata::transport_internal {

// The password of a URL's user:password@ part, as written (percent-encoded); "" when none.
std::string UrlPassword(std::string_view url);

// True when the URL's host is loopback: localhost, 127.0.0.0/8 or [::1].
bool IsLoopbackUrl(std::string_view url);

// A header that can be sent as is: a non-empty token name and a value without control characters
// (CR/LF would start a new header). Tab is allowed in values.
bool ValidHeader(std::string_view name, std::string_view value);

// `text` with control characters shown as \xHH, for messages.
std::string Printable(std::string_view text);

// `text` with every occurrence of each non-empty secret replaced by "[redacted]", and the value
// of Authorization / Proxy-Authorization header lines replaced too.
std::string Scrub(std::string_view text, const std::vector<std::string>& secrets);

// A transport's error as it may leave the transport (into a Status, a RequestRecord, a proto
// string, a JSON body): its message Scrub()bed of `secrets` (an upstream that quotes the API key
// or the Authorization header in its error gets "[redacted]") and with invalid UTF-8 replaced by
// U+FFFD (core/utf8.h). An OK status is returned as is.
Status UpstreamStatus(const Status& status, const std::vector<std::string>& secrets);

}  // namespace strata::transport_internal

#endif  // STRATA_SRC_TRANSPORT_REDACT_H_
