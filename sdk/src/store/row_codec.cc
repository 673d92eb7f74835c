#include "store/row_codec.h"

namespace strata::store_internal {

Status DecodeSegmentNumbers(const SegmentNumbers& numbers, std::string_view agent_id,
                            const std::string& where, Segment& segment) {
  struct Column {
    const std::optional<int64_t>& value;
    const char* name;
    int64_t max;  // valid values: 0..max
  };
  // The volatile layer and kind are never persisted (ApplyChange skips them).
  const Column columns[] = {{numbers.seq, "seq", INT64_MAX},
                            {numbers.kind, "kind", static_cast<int>(SegmentKind::kSummary)},
                            {numbers.layer, "layer", static_cast<int>(Layer::kHistory)},
                            {numbers.state, "state", static_cast<int>(SegmentState::kEvicted)},
                            {numbers.hygiene, "hygiene", static_cast<int>(HygieneAction::kFolded)},
                            {numbers.tokens, "tokens", INT64_MAX}};
  for (const Column& column : columns) {
    if (column.value && *column.value >= 0 && *column.value <= column.max) continue;
    return DataLossError("segment \"" + segment.id + "\" of agent \"" + std::string(agent_id) +
                         "\" in " + where + " is damaged: column " + column.name + " holds " +
                         (column.value ? std::to_string(*column.value) : std::string("NULL")) +
                         (column.max == INT64_MAX
                              ? std::string(" (must not be negative)")
                              : " (valid: 0.." + std::to_string(column.max) + ")") +
                         "; restore the store from a backup or delete the agent");
  }
  segment.seq = static_cast<uint64_t>(*numbers.seq);
  segment.position = numbers.position;
  segment.kind = static_cast<SegmentKind>(*numbers.kind);
  segment.layer = static_cast<Layer>(*numbers.layer);
  segment.state = static_cast<SegmentState>(*numbers.state);
  segment.hygiene = static_cast<HygieneAction>(*numbers.hygiene);
  segment.turn = numbers.turn;
  segment.tokens = static_cast<size_t>(*numbers.tokens);
  segment.pinned = numbers.pinned != 0;
  segment.order = numbers.order;
  return Status::Ok();
}

StatusOr<StatusCode> DecodeRecordCode(int64_t code, const std::string& request_id,
                                      std::string_view agent_id, const std::string& where) {
  constexpr int kLast = static_cast<int>(StatusCode::kUnauthenticated);
  if (code < 0 || code > kLast) {
    return DataLossError("request record \"" + request_id + "\" of agent \"" +
                         std::string(agent_id) + "\" in " + where +
                         " is damaged: column code holds " + std::to_string(code) + " (valid: 0.." +
                         std::to_string(kLast) + ")");
  }
  return static_cast<StatusCode>(code);
}

}  // namespace strata::store_internal
