// JSON forms of RequestRecord and PrefixBreakEvent (strata/record.h), and the JSON lines sink.
#include "strata/record.h"

#include <nlohmann/json.hpp>
#include <ostream>

namespace strata {

std::string_view PrefixBreakKindName(PrefixBreakEvent::Kind kind) {
  return kind == PrefixBreakEvent::Kind::kPrefixChanged ? "prefix_changed" : "server_shortfall";
}

std::string PrefixBreakEvent::ToString() const {
  std::string s = std::string(PrefixBreakKindName(kind)) + " agent=" + agent_id + " request=" + request_id +
                  " predicted=" + std::to_string(predicted_cached_tokens);
  if (reported_cached_tokens) s += " reported=" + std::to_string(*reported_cached_tokens);
  s += " previous=" + std::to_string(previous_prompt_tokens);
  if (!segment_id.empty()) s += " segment=" + segment_id + " (" + layer + ")";
  s += ": " + reason;
  return s;
}

std::string RequestRecordJson(const RequestRecord& r) {
  nlohmann::ordered_json j;
  j["type"] = "request";
  j["agent_id"] = r.agent_id;
  j["request_id"] = r.request_id;
  j["pool"] = r.pool;
  j["endpoint"] = r.endpoint;
  j["model"] = r.model;
  if (r.purpose != "turn") j["purpose"] = r.purpose;
  j["started_unix_ms"] = r.started_unix_ms;
  j["input_tokens"] = r.input_tokens;
  if (r.cached_tokens_reported) {
    j["cached_tokens_reported"] = *r.cached_tokens_reported;
  } else {
    j["cached_tokens_reported"] = nullptr;
  }
  j["cached_tokens_predicted"] = r.cached_tokens_predicted;
  j["output_tokens"] = r.output_tokens;
  j["reasoning_tokens"] = r.reasoning_tokens;
  j["queue_wait_ms"] = r.queue_wait_ms;
  if (!r.degradation.empty()) j["degradation"] = r.degradation;
  if (!r.degradation_notes.empty()) j["degradation_notes"] = r.degradation_notes;
  j["ttft_ms"] = r.ttft_ms;
  j["decode_ms"] = r.decode_ms;
  j["total_ms"] = r.total_ms;
  j["kv_cache_bytes"] = r.kv_cache_bytes;
  j["finish_reason"] = r.finish_reason;
  j["attempts"] = r.attempts;
  j["http_status"] = r.http_status;
  j["code"] = StatusCodeName(r.code);
  j["error"] = r.error;
  return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

std::string PrefixBreakEventJson(const PrefixBreakEvent& e, bool with_type_and_agent) {
  nlohmann::ordered_json j;
  if (with_type_and_agent) j["type"] = "prefix_break";
  j["kind"] = std::string(PrefixBreakKindName(e.kind));
  if (with_type_and_agent) j["agent_id"] = e.agent_id;
  j["request_id"] = e.request_id;
  j["predicted_cached_tokens"] = e.predicted_cached_tokens;
  if (e.reported_cached_tokens) {
    j["reported_cached_tokens"] = *e.reported_cached_tokens;
  } else {
    j["reported_cached_tokens"] = nullptr;
  }
  j["previous_prompt_tokens"] = e.previous_prompt_tokens;
  j["segment_id"] = e.segment_id;
  j["layer"] = e.layer;
  j["reason"] = e.reason;
  return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

Status JsonLinesRecordSink::Write(const RequestRecord& record) {
  std::string line = RequestRecordJson(record);
  std::lock_guard<std::mutex> lock(mu_);
  out_ << line << '\n';
  out_.flush();
  if (!out_) return DataLossError("could not write a request record to the JSON lines stream");
  return Status();
}

Status JsonLinesRecordSink::WriteEvent(const PrefixBreakEvent& event) {
  std::string line = PrefixBreakEventJson(event);
  std::lock_guard<std::mutex> lock(mu_);
  out_ << line << '\n';
  out_.flush();
  if (!out_) return DataLossError("could not write an event to the JSON lines stream");
  return Status();
}

}  // namespace strata
