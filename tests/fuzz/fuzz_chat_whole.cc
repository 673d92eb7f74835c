// Whole (non-streamed) answers and error bodies, as the transports read them: the first byte picks an
// HTTP status, the rest is the body. Bodies of 2xx answers go to ChatAssembler::AddJson (a whole
// chat.completion, or an error object with status 200); every body goes through StatusFromHttp and
// ErrorMessageFromBody, which must name an error for any non-2xx status. Every message is valid
// UTF-8, whatever the body's bytes (a quote must not cut a character, stray bytes are replaced).
#include <string>

#include "core/utf8.h"
#include "fuzz_util.h"
#include "transport/chat_parser.h"

namespace ti = strata::transport_internal;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  static const int kStatuses[] = {200, 201, 400, 401, 403, 404, 408, 409, 413, 422,
                                  429, 500, 502, 503, 504, 599, 302, 100};
  const int http = kStatuses[data[0] % (sizeof kStatuses / sizeof kStatuses[0])];
  const std::string_view body = strata::fuzz::AsText(data + 1, size - 1);

  ti::ChatAssembler assembler;
  strata::Status added = assembler.AddJson(body);
  STRATA_FUZZ_CHECK(added.ok() || !added.message().empty(), "a refused body without a reason");
  STRATA_FUZZ_CHECK(strata::internal::IsValidUtf8(added.message()),
                    "a refusal that is not valid UTF-8: " + added.message());
  strata::Response response;
  assembler.Finish(&response);

  strata::Status status = ti::StatusFromHttp(http, body);
  if (http < 200 || http >= 300) {
    STRATA_FUZZ_CHECK(!status.ok(), "an HTTP error status mapped to OK");
    STRATA_FUZZ_CHECK(!status.message().empty(), "an HTTP error without a message");
  }
  STRATA_FUZZ_CHECK(strata::internal::IsValidUtf8(status.message()),
                    "an HTTP error message that is not valid UTF-8: " + status.message());
  STRATA_FUZZ_CHECK(strata::internal::IsValidUtf8(ti::ErrorMessageFromBody(body)),
                    "an error body's message that is not valid UTF-8");
  // A Retry-After value (seconds or an HTTP date) read against a fixed "now": a delay of 0 or
  // more, or -1 for none.
  const double retry_after = ti::ParseRetryAfterSeconds(body.substr(0, 32), 1767225600);
  STRATA_FUZZ_CHECK(retry_after >= 0 || retry_after == -1, "a Retry-After below 0 other than -1");
  return 0;
}
