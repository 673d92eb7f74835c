// strata's values as ContextService messages, and GetMessages' conversation (service_convert.h).
#include "service_convert.h"

#include <algorithm>
#include <set>

#include "core/utf8.h"

namespace strata::sidecar {
namespace {

// RequestRecord.endpoint as tenants see it: which upstream (a URL, a pool replica) stays hidden.
constexpr char kHiddenEndpoint[] = "upstream";

// The policy the proxy records on the history segments a client's edit replaced (reconcile.h
// kReconcilePolicy): not part of the conversation any more.
constexpr char kReplacedPolicy[] = "proxy-reconcile@1";

}  // namespace

std::string LocalOf(const std::string& stored_id) {
  size_t slash = stored_id.find('/');
  return slash == std::string::npos ? stored_id : stored_id.substr(slash + 1);
}

void FillLayer(Layer layer, const LayerUsage& usage, v1::LayerTokens* out) {
  out->set_layer(std::string(LayerName(layer)));
  out->set_segments(static_cast<int64_t>(usage.segments));
  out->set_bytes(static_cast<int64_t>(usage.bytes));
  out->set_tokens(static_cast<int64_t>(usage.tokens));
}

void FillReport(const CompactionReport& r, v1::CompactionReport* out) {
  out->set_policy(r.policy);
  out->set_reason(r.reason);
  out->set_turn(r.turn);
  out->set_tokens_before(static_cast<int64_t>(r.tokens_before));
  out->set_tokens_after(static_cast<int64_t>(r.tokens_after));
  out->set_boundary_segment_id(r.boundary_segment_id);
  out->set_boundary_index(static_cast<int64_t>(r.boundary_index));
  out->set_invalidated_tokens(static_cast<int64_t>(r.invalidated_tokens));
  out->set_masked(static_cast<int64_t>(r.masked));
  out->set_evicted(static_cast<int64_t>(r.evicted));
  out->set_summarized(static_cast<int64_t>(r.summarized));
  out->set_reasoning_dropped(static_cast<int64_t>(r.reasoning_dropped));
  out->set_rounds(static_cast<int64_t>(r.rounds));
  out->set_expected_saving(r.explanation.expected_saving);
  out->set_invalidation_cost(r.explanation.invalidation_cost);
  out->set_json(CompactionReportJson(r));
}

// A record's text fields may hold upstream text, and records stored before it was cleaned where it
// enters may hold any bytes: a proto string must be valid UTF-8 (Python's protobuf refuses the
// whole message otherwise), so they are sent through ToValidUtf8.
void FillRecord(const RequestRecord& r, v1::RequestRecord* out) {
  using internal::ToValidUtf8;
  out->set_agent_id(LocalOf(r.agent_id));
  out->set_request_id(r.request_id);
  out->set_pool(r.pool);
  // The upstream's address is the sidecar's (config views hide endpoint.base_url too).
  out->set_endpoint(r.endpoint.empty() ? "" : kHiddenEndpoint);
  out->set_model(ToValidUtf8(r.model));
  out->set_started_unix_ms(r.started_unix_ms);
  out->set_input_tokens(r.input_tokens);
  if (r.cached_tokens_reported) out->set_cached_tokens_reported(*r.cached_tokens_reported);
  out->set_cached_tokens_predicted(r.cached_tokens_predicted);
  out->set_output_tokens(r.output_tokens);
  out->set_reasoning_tokens(r.reasoning_tokens);
  out->set_queue_wait_ms(r.queue_wait_ms);
  out->set_degradation(r.degradation);
  out->set_degradation_notes(ToValidUtf8(r.degradation_notes));
  out->set_ttft_ms(r.ttft_ms);
  out->set_decode_ms(r.decode_ms);
  out->set_total_ms(r.total_ms);
  out->set_kv_cache_bytes(r.kv_cache_bytes);
  out->set_finish_reason(ToValidUtf8(r.finish_reason));
  out->set_attempts(r.attempts);
  out->set_http_status(r.http_status);
  out->set_code(StatusCodeName(r.code));
  out->set_error(ToValidUtf8(r.error));
}

void FillGrowth(const GrowthPoint& g, v1::GrowthPoint* out) {
  out->set_turn(g.turn);
  out->set_unix_ms(g.unix_ms);
  for (int i = 0; i < kLayerCount; ++i) {
    v1::LayerTokens* layer = out->add_layers();
    layer->set_layer(std::string(LayerName(static_cast<Layer>(i))));
    layer->set_tokens(g.layer_tokens[i]);
  }
  out->set_compactions(g.compactions);
  out->set_invalidated_tokens(g.invalidated_tokens);
  out->set_summary_input_tokens(g.summary_input_tokens);
  out->set_summary_cached_tokens(g.summary_cached_tokens);
  out->set_summary_output_tokens(g.summary_output_tokens);
}

// One delta of the answer as a stream event of Complete.
v1::CompleteEvent DeltaEvent(const StreamDelta& d) {
  v1::CompleteEvent event;
  v1::Delta* delta = event.mutable_delta();
  switch (d.kind) {
    case StreamDelta::Kind::kContent:
      delta->set_kind(v1::Delta::KIND_CONTENT);
      break;
    case StreamDelta::Kind::kReasoning:
      delta->set_kind(v1::Delta::KIND_REASONING);
      break;
    case StreamDelta::Kind::kToolCallArguments:
      delta->set_kind(v1::Delta::KIND_TOOL_CALL_ARGUMENTS);
      break;
  }
  delta->set_text(d.text);
  delta->set_tool_call_index(d.tool_call_index);
  delta->set_tool_call_id(d.tool_call_id);
  delta->set_tool_name(d.tool_name);
  return event;
}

void FillPrefixBreak(const PrefixBreakEvent& e, v1::PrefixBreak* out) {
  out->set_kind(std::string(PrefixBreakKindName(e.kind)));
  out->set_reason(e.reason);
  out->set_segment_id(e.segment_id);
  out->set_layer(e.layer);
  out->set_predicted_cached_tokens(e.predicted_cached_tokens);
  if (e.reported_cached_tokens) out->set_reported_cached_tokens(*e.reported_cached_tokens);
  out->set_previous_prompt_tokens(e.previous_prompt_tokens);
}

// `user_segment`: the id of the user message Complete appended ("" when it appended none).
void FillTurn(const Turn& turn, const std::string& user_segment, v1::Turn* out) {
  FillRecord(turn.record, out->mutable_record());
  out->set_assistant_segment_id(turn.assistant_segment_id);
  out->set_user_segment_id(user_segment);
  out->set_content(turn.response.content);
  out->set_reasoning(turn.response.reasoning);
  for (const ToolCall& c : turn.response.tool_calls) {
    v1::ToolCall* call_out = out->add_tool_calls();
    call_out->set_id(c.id);
    call_out->set_name(c.name);
    call_out->set_arguments(c.arguments);
  }
  out->set_finish_reason(turn.response.finish_reason);
  for (const CompactionReport& r : turn.compactions) FillReport(r, out->add_compactions());
  if (turn.prefix_break) FillPrefixBreak(*turn.prefix_break, out->mutable_prefix_break());
  for (const std::string& cause : turn.break_causes) out->add_break_causes(cause);
  FillGrowth(turn.growth, out->mutable_growth());
}

Status CheckSomethingToSend(const Agent& agent, bool user_message) {
  if (user_message) return Status::Ok();
  const Segment* last = nullptr;
  for (const Segment& s : agent.context().Segments()) {
    const bool rendered = s.state == SegmentState::kLive || s.state == SegmentState::kMasked;
    if (s.layer == Layer::kHistory && rendered) last = &s;
  }
  if (last == nullptr || last->kind != SegmentKind::kAssistant) return Status::Ok();
  return FailedPreconditionError(
      "nothing to send: the agent's last message (" + last->id +
      ") is the assistant's reply; give Complete a user_message, or append a user message first "
      "(AppendUser)");
}

namespace {

std::string_view RoleOf(SegmentKind kind) {
  switch (kind) {
    case SegmentKind::kUser:
      return "user";
    case SegmentKind::kAssistant:
    case SegmentKind::kToolCall:
      return "assistant";
    case SegmentKind::kToolResult:
    case SegmentKind::kErrorLog:
      return "tool";
    default:
      return "";  // summaries and the stable layers are not messages of the conversation
  }
}

// The history segment as the message a client sent or was given: its original content.
v1::ConversationMessage MessageOf(const Context& context, const Segment& s,
                                  const std::set<std::string>& open) {
  using internal::ToValidUtf8;
  v1::ConversationMessage m;
  m.set_role(std::string(RoleOf(s.kind)));
  std::string content = s.content;
  if (!s.recall_id.empty()) {
    StatusOr<std::string> original = context.Recall(s.recall_id);
    if (original.ok()) content = std::move(original).value();
  }
  m.set_content(ToValidUtf8(content));
  m.set_reasoning(ToValidUtf8(s.reasoning));
  for (const ToolCall& c : s.tool_calls) {
    v1::ToolCall* call = m.add_tool_calls();
    call->set_id(ToValidUtf8(c.id));
    call->set_name(ToValidUtf8(c.name));
    call->set_arguments(ToValidUtf8(c.arguments));
    if (open.count(c.id)) m.add_open_tool_call_ids(ToValidUtf8(c.id));
  }
  m.set_tool_call_id(ToValidUtf8(s.tool_call_id));
  m.set_segment_id(s.id);
  m.set_state(std::string(SegmentStateName(s.state)));
  return m;
}

}  // namespace

Status FillMessages(const Agent& agent, int64_t offset, int64_t page_size,
                    v1::GetMessagesResponse* out) {
  const Context& context = agent.context();
  const std::vector<std::string> open_calls = context.OpenToolCalls();
  const std::set<std::string> open(open_calls.begin(), open_calls.end());
  int64_t index = 0;  // of the conversation's messages
  for (const Segment& s : context.Segments()) {
    const bool system = s.layer == Layer::kSystem;
    if (!system && (s.layer != Layer::kHistory || RoleOf(s.kind).empty() ||
                    (s.state == SegmentState::kEvicted && s.policy == kReplacedPolicy))) {
      continue;
    }
    if (index >= offset + page_size) {
      out->set_next_page_token(std::to_string(offset + page_size));
      break;
    }
    if (index++ < offset) continue;
    if (system) {
      v1::ConversationMessage* m = out->add_messages();
      m->set_role("system");
      m->set_content(internal::ToValidUtf8(s.content));
    } else {
      *out->add_messages() = MessageOf(context, s, open);
    }
  }
  return Status::Ok();
}

}  // namespace strata::sidecar
