// strata/record.h — what was measured for one request.
//
// The Client fills one RequestRecord per request it sends (success or failure); sinks (the SQLite
// store, JSON lines) persist or export it.
//
// Thread safety: plain value type.
#ifndef STRATA_RECORD_H_
#define STRATA_RECORD_H_

#include <cstdint>
#include <optional>
#include <string>

#include "strata/status.h"

namespace strata {

// One request as sent and answered: identity, tokens (reported and predicted), timings, outcome.
struct RequestRecord {
  std::string agent_id;  // the agent the request was built for
  std::string request_id;  // the id sent to the server (request_id / rid / X-Request-Id)
  std::string pool;        // length pool the request was admitted to; "" when not scheduled
  std::string endpoint;    // base URL or gRPC target
  std::string model;  // the request's model field
  int64_t started_unix_ms = 0;  // wall-clock start, milliseconds since the Unix epoch

  int64_t input_tokens = 0;  // prompt tokens as reported by the server (else as counted by strata)
  std::optional<int64_t> cached_tokens_reported;  // prompt_tokens_details.cached_tokens, if given
  int64_t cached_tokens_predicted = 0;            // strata's prefix-cache model
  int64_t output_tokens = 0;  // completion tokens as reported by the server
  int64_t reasoning_tokens = 0;  // of which reasoning, as reported by the server

  double queue_wait_ms = 0;  // time waiting for admission before sending
  // The degradation step a length pool applied (strata/pools.h): "" none, "compact", "fork",
  // "wait" (admitted after queueing) or "refuse"; and why earlier steps of the ladder were skipped.
  std::string degradation;
  std::string degradation_notes;  // why earlier steps were skipped
  double ttft_ms = 0;        // time to first token (prefill)
  double decode_ms = 0;      // first token to last token
  double total_ms = 0;       // whole call including retries
  int64_t kv_cache_bytes = 0;  // estimated KV cache held by the request at its peak

  std::string finish_reason;  // stop, length, tool_calls, content_filter, abort; "" on error
  int attempts = 0;           // 1 + retries
  int http_status = 0;        // last HTTP status (0 for gRPC or when no response arrived)
  StatusCode code = StatusCode::kOk;  // outcome
  std::string error;                  // message when code != kOk
};

}  // namespace strata

#endif  // STRATA_RECORD_H_
