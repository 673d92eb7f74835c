// strata/record.h — what was measured for one request, and where records go.
//
// The Client (strata/client.h) fills one RequestRecord per request it sends (success or failure)
// and a PrefixBreakEvent when a request reused less of the prefix cache than expected; a RecordSink
// (the SQLite store's MakeStoreRecordSink, JsonLinesRecordSink) persists or exports them. Their JSON
// forms are defined here, once. Part of strata::core.
//
// Thread safety: RequestRecord and PrefixBreakEvent are plain value types; sinks must be
// thread-safe.
#ifndef STRATA_RECORD_H_
#define STRATA_RECORD_H_

#include <cstdint>
#include <mutex>
#include <ostream>
#include <optional>
#include <string>
#include <string_view>

#include "strata/status.h"

namespace strata {

// One request as sent and answered: identity, tokens (reported and predicted), timings, outcome.
struct RequestRecord {
  std::string agent_id;  // the agent the request was built for
  std::string request_id;  // the id sent to the server (request_id / rid / X-Request-Id)
  std::string pool;        // length pool the request was admitted to; "" when not scheduled
  std::string endpoint;    // base URL or gRPC target
  std::string model;  // the request's model field
  // Why it was sent: "turn" (an agent's or client's request) or "compaction" (a summarizer's
  // request for a summary, e.g. MakeLlmSummarizer's cache-keeping one). Default "turn".
  std::string purpose = "turn";
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

// Why a request reused less of the server's prefix cache than expected.
struct PrefixBreakEvent {
  // What kind of break.
  enum class Kind : int {
    // The rendered prompt diverged from the previous request's before its end.
    kPrefixChanged = 0,
    // The server reported fewer cached tokens than predicted by more than one block (eviction,
    // another replica, a different template or tokenizer).
    kServerShortfall = 1,
  };
  Kind kind = Kind::kPrefixChanged;  // what kind of break
  std::string agent_id;  // the agent whose request it was
  std::string request_id;  // the request that saw it
  int64_t predicted_cached_tokens = 0;  // cached tokens strata's prefix-cache model predicted
  std::optional<int64_t> reported_cached_tokens;  // cached tokens the server reported, if it did
  int64_t previous_prompt_tokens = 0;  // cacheable tokens of the previous request of this agent
  // The first segment that differs from the previous request (kPrefixChanged), or the segment the
  // server's cache stopped in (kServerShortfall); "" when unknown.
  std::string segment_id;
  std::string layer;   // LayerName of that segment, or "tools"
  // "tools changed", "doc version change", "compaction", "system prompt changed", "lint hit",
  // "server evicted or mismatched", "unknown".
  std::string reason;
  std::string ToString() const;  // one line for logs
};
// "prefix_changed" or "server_shortfall".
std::string_view PrefixBreakKindName(PrefixBreakEvent::Kind kind);

// Where RequestRecords and events go: JsonLinesRecordSink below, MakeStoreRecordSink (strata/store.h).
class RecordSink {
 public:
  virtual ~RecordSink() = default;
  // Must be thread-safe. A write that fails never fails the request: Client::Complete() reports
  // it as one of Completion::warnings and counts it (Client::record_write_failures()).
  virtual Status Write(const RequestRecord& record) = 0;
  // Writes a prefix-break event; the default drops it (a sink of records only).
  virtual Status WriteEvent(const PrefixBreakEvent& /*event*/) { return Status(); }
};

// One JSON object per line: {"type":"request",...fields of RequestRecord...} and
// {"type":"prefix_break",...}. Thread-safe. The stream must outlive the sink.
class JsonLinesRecordSink : public RecordSink {
 public:
  // Writes to `out`, which must outlive the sink.
  explicit JsonLinesRecordSink(std::ostream& out) : out_(out) {}
  Status Write(const RequestRecord& record) override;
  Status WriteEvent(const PrefixBreakEvent& event) override;  // a "prefix_break" line

 private:
  std::mutex mu_;
  std::ostream& out_;  // guarded by mu_
};

// The JSON object of a record: {"type":"request", ...every field of RequestRecord...}, one line.
std::string RequestRecordJson(const RequestRecord& record);

// The JSON object of an event: {"type":"prefix_break","kind":...,"agent_id":...,"request_id":...,
// ...}, one line. Without `with_type_and_agent` the "type" and "agent_id" keys are left out (the
// store's event payload, which keeps them in columns).
std::string PrefixBreakEventJson(const PrefixBreakEvent& event, bool with_type_and_agent = true);

}  // namespace strata

#endif  // STRATA_RECORD_H_
