// The rows of segments and request records as both store backends select and decode them
// (private to strata::store). Enum and count columns index arrays and switch statements
// downstream, so a damaged row is refused here, naming it (DATA_LOSS), rather than cast into an
// out-of-range value; SQLite and PostgreSQL refuse it in the same words.
//
// A backend reads a row through a `Row` with `int64_t Int(col)`, `double Real(col)`,
// `std::string Text(col)`, `std::string Bytes(col)` (a binary column) and `bool IsNull(col)`,
// `col` counting from 0 in the order of kSegmentColumns or kRequestColumns.
#ifndef STRATA_SRC_STORE_ROW_CODEC_H_
#define STRATA_SRC_STORE_ROW_CODEC_H_

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "store/tool_calls_codec.h"
#include "strata/record.h"
#include "strata/segment.h"
#include "strata/status.h"

namespace strata::store_internal {

// The columns of a segment row, in the order both backends write and select them (the tables
// differ in name only; SQLite's also has an unused column `sensitive`, never selected).
inline constexpr const char* kSegmentColumns =
    "id, seq, position, kind, layer, state, hygiene, turn, tokens, pinned, ord, version, name, "
    "tool_call_id, recall_id, duplicate_of, reasoning, tool_calls, content, content_hash, policy";
// Where the content columns are in kSegmentColumns: inline bytes, or the hash of a blob.
inline constexpr int kSegmentContentColumn = 18;
inline constexpr int kSegmentContentHashColumn = 19;

// The columns of a request record row (after the agent), in the order both backends write and
// select them.
inline constexpr const char* kRequestColumns =
    "request_id, pool, endpoint, model, started_ms, input_tokens, cached_reported, "
    "cached_predicted, output_tokens, reasoning_tokens, queue_wait_ms, ttft_ms, decode_ms, "
    "total_ms, kv_cache_bytes, finish_reason, attempts, http_status, code, error, degradation, "
    "degradation_notes, purpose";

// "<sigil>1, <sigil>2, ..." for the agent and every column of kRequestColumns: the parameters of
// an INSERT of one request row, so that the statement and the column list cannot fall out of step
// ('?' for SQLite, '$' for PostgreSQL).
inline std::string RequestInsertParameters(char sigil) {
  int parameters = 2;  // the agent and the first column; then one more after each comma
  for (const char* c = kRequestColumns; *c != '\0'; ++c) parameters += *c == ',' ? 1 : 0;
  std::string out;
  for (int i = 1; i <= parameters; ++i) {
    if (i > 1) out += ", ";
    out += sigil;
    out += std::to_string(i);
  }
  return out;
}

// The numeric columns of a stored segment as read (std::nullopt: NULL).
struct SegmentNumbers {
  // Checked: enums within the values this build defines, counts not negative, none NULL.
  std::optional<int64_t> seq, kind, layer, state, hygiene, tokens;
  int64_t position = 0;
  int64_t turn = 0;
  int64_t pinned = 0;
  int64_t order = 0;
};

// Sets the numeric fields of `segment` (its id already set) from `numbers`. DATA_LOSS naming the
// segment, `agent_id`, `where` (the store), the column and its value when a checked column is
// out of range; `segment` is then unspecified.
Status DecodeSegmentNumbers(const SegmentNumbers& numbers, std::string_view agent_id,
                            const std::string& where, Segment& segment);

// The `code` column of request record `request_id`; DATA_LOSS naming it when no StatusCode.
StatusOr<StatusCode> DecodeRecordCode(int64_t code, const std::string& request_id,
                                      std::string_view agent_id, const std::string& where);

// The segment of a row selected as kSegmentColumns, all but its content (the caller's: inline,
// or a blob each backend reads its own way). DATA_LOSS naming the segment, `agent_id` and
// `where` (the store) when the row is damaged.
template <typename Row>
StatusOr<Segment> DecodeSegmentRow(const Row& row, std::string_view agent_id,
                                   const std::string& where) {
  auto number = [&row](int col) {
    return row.IsNull(col) ? std::optional<int64_t>() : std::optional<int64_t>(row.Int(col));
  };
  Segment s;
  s.id = row.Text(0);
  SegmentNumbers numbers;
  numbers.seq = number(1);
  numbers.position = row.Int(2);
  numbers.kind = number(3);
  numbers.layer = number(4);
  numbers.state = number(5);
  numbers.hygiene = number(6);
  numbers.turn = row.Int(7);
  numbers.tokens = number(8);
  numbers.pinned = row.Int(9);
  numbers.order = row.Int(10);
  STRATA_RETURN_IF_ERROR(DecodeSegmentNumbers(numbers, agent_id, where, s));
  s.version = row.Text(11);
  s.name = row.Text(12);
  s.tool_call_id = row.Text(13);
  s.recall_id = row.Text(14);
  s.duplicate_of = row.Text(15);
  s.reasoning = row.Bytes(16);
  if (!DecodeToolCalls(row.Bytes(17), s.tool_calls)) {
    return DataLossError("segment " + s.id + " of agent \"" + std::string(agent_id) +
                         "\" has damaged tool calls in " + where);
  }
  s.policy = row.Text(20);
  return s;
}

// The request record of agent `agent_id` in a row selected as kRequestColumns. DATA_LOSS naming
// it and `where` when the row is damaged.
template <typename Row>
StatusOr<RequestRecord> DecodeRequestRow(const Row& row, std::string_view agent_id,
                                         const std::string& where) {
  RequestRecord r;
  r.agent_id = std::string(agent_id);
  r.request_id = row.Text(0);
  r.pool = row.Text(1);
  r.endpoint = row.Text(2);
  r.model = row.Text(3);
  r.started_unix_ms = row.Int(4);
  r.input_tokens = row.Int(5);
  if (!row.IsNull(6)) r.cached_tokens_reported = row.Int(6);
  r.cached_tokens_predicted = row.Int(7);
  r.output_tokens = row.Int(8);
  r.reasoning_tokens = row.Int(9);
  r.queue_wait_ms = row.Real(10);
  r.ttft_ms = row.Real(11);
  r.decode_ms = row.Real(12);
  r.total_ms = row.Real(13);
  r.kv_cache_bytes = row.Int(14);
  r.finish_reason = row.Text(15);
  r.attempts = static_cast<int>(row.Int(16));
  r.http_status = static_cast<int>(row.Int(17));
  STRATA_ASSIGN_OR_RETURN(r.code, DecodeRecordCode(row.Int(18), r.request_id, agent_id, where));
  r.error = row.Text(19);
  r.degradation = row.Text(20);
  r.degradation_notes = row.Text(21);
  r.purpose = row.Text(22);
  return r;
}

}  // namespace strata::store_internal

#endif  // STRATA_SRC_STORE_ROW_CODEC_H_
