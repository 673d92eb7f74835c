// Context, appends to the history: user and assistant messages, tool results with append-time
// hygiene (deduplication, error-log folding, head-and-tail truncation; the original is kept for
// context_recall), pinning, and the tool-call pairing the appends maintain.
#include <algorithm>
#include <nlohmann/json.hpp>
#include <unordered_set>

#include "core/context_impl.h"
#include "core/hygiene.h"
#include "core/recall_page.h"
#include "core/text_util.h"

namespace strata {

using internal::JoinNames;
using internal::kNoOffset;
using internal::OutputKey;
using internal::ValidateUtf8;

StatusOr<std::string> Context::Impl::AppendUser(std::string content) {
  STRATA_RETURN_IF_ERROR(ValidateUtf8(content, "user message"));
  STRATA_RETURN_IF_ERROR(RequireNoOpenCalls("append a user message"));
  Segment s = NewHistorySegment(SegmentKind::kUser, turn_);
  s.content = std::move(content);
  s.tokens = CountTokens(s);
  ContextChange change;
  change.upserted.push_back(s);
  STRATA_RETURN_IF_ERROR(Record(change, turn_));
  return ApplyHistoryAppend(std::move(s));
}

StatusOr<std::string> Context::Impl::AppendAssistant(AssistantMessage message) {
  STRATA_RETURN_IF_ERROR(ValidateUtf8(message.content, "assistant content"));
  STRATA_RETURN_IF_ERROR(ValidateUtf8(message.reasoning, "assistant reasoning"));
  std::unordered_set<std::string> ids;
  for (size_t i = 0; i < message.tool_calls.size(); ++i) {
    const ToolCall& call = message.tool_calls[i];
    const std::string where = "tool_calls[" + std::to_string(i) + "]";
    if (call.id.empty()) return InvalidArgumentError(where + " has an empty id");
    STRATA_RETURN_IF_ERROR(ValidateUtf8(call.id, where + ".id"));
    STRATA_RETURN_IF_ERROR(ValidateUtf8(call.name, where + ".name"));
    STRATA_RETURN_IF_ERROR(ValidateUtf8(call.arguments, where + ".arguments"));
    if (call.name.empty()) {
      return InvalidArgumentError(where + " (id \"" + call.id + "\") has an empty function name");
    }
    if (!ids.insert(call.id).second) {
      return InvalidArgumentError(where + ": duplicate tool call id \"" + call.id +
                                  "\" in one assistant message");
    }
  }
  STRATA_RETURN_IF_ERROR(RequireNoOpenCalls("append an assistant message"));
  const int64_t new_turn = turn_ + 1;
  Segment s = NewHistorySegment(
      message.tool_calls.empty() ? SegmentKind::kAssistant : SegmentKind::kToolCall, new_turn);
  s.content = std::move(message.content);
  s.reasoning = std::move(message.reasoning);
  s.tool_calls = std::move(message.tool_calls);
  s.tokens = CountTokens(s);
  ContextChange change;
  change.upserted.push_back(s);
  STRATA_RETURN_IF_ERROR(Record(change, new_turn));
  turn_ = new_turn;
  RegisterCalls(s);
  return ApplyHistoryAppend(std::move(s));
}

StatusOr<std::string> Context::Impl::AppendToolResult(ToolResult result) {
  STRATA_RETURN_IF_ERROR(ValidateUtf8(result.tool_call_id, "tool_call_id"));
  STRATA_RETURN_IF_ERROR(
      ValidateUtf8(result.content, "tool result for \"" + result.tool_call_id + "\""));
  if (std::find(open_calls_.begin(), open_calls_.end(), result.tool_call_id) == open_calls_.end()) {
    std::string known = open_calls_.empty() ? "no call is open" : "open: " + JoinNames(open_calls_);
    std::string why = FindLastCall(result.tool_call_id) ? " (that call was already answered)" : "";
    return InvalidArgumentError(
        "tool result for unknown tool_call_id \"" + result.tool_call_id + "\"" + why + " (" +
        known + "); a tool result must answer a call of the last assistant message");
  }
  const ToolCall& call = *FindLastCall(result.tool_call_id);
  Segment s = NewHistorySegment(SegmentKind::kToolResult, turn_);
  s.tool_call_id = result.tool_call_id;
  s.name = call.name;
  ContextChange change;
  std::string output_key;
  ApplyHygiene(s, std::move(result.content), result.is_error, call, change, output_key);
  s.tokens = CountTokens(s);
  change.upserted.insert(change.upserted.begin(), s);
  STRATA_RETURN_IF_ERROR(Record(change, turn_));
  open_calls_.erase(std::find(open_calls_.begin(), open_calls_.end(), s.tool_call_id));
  if (!output_key.empty()) IndexOutput(std::move(output_key), s.tool_call_id);
  if (s.hygiene == HygieneAction::kDeduplicated) duplicates_of_[s.duplicate_of].push_back(s.id);
  for (auto& [id, original] : change.originals) recall_.emplace(id, std::move(original));
  CountHygiene(s, +1);
  return ApplyHistoryAppend(std::move(s));
}

Status Context::Impl::SetPinned(std::string_view segment_id, bool pinned) {
  auto it = index_.find(std::string(segment_id));
  if (it == index_.end()) return NotFoundError("no segment \"" + std::string(segment_id) + "\"");
  if (it->second.first != Layer::kHistory) {
    return InvalidArgumentError("segment \"" + std::string(segment_id) +
                                "\" is in a stable layer, which is always pinned");
  }
  Segment& s = history_[it->second.second];
  if (s.pinned == pinned) return Status::Ok();
  Segment updated = s;
  updated.pinned = pinned;
  ContextChange change;
  change.upserted.push_back(updated);
  STRATA_RETURN_IF_ERROR(Record(change, turn_));
  s.pinned = pinned;
  // The compaction input lists the segment changed from its entry on (the rendered before it).
  const size_t i = it->second.second;
  if (input_view_.valid && i < history_usage_before_.size())
    input_view_.Touch(history_usage_before_[i].segments);
  return Status::Ok();
}

StatusOr<std::string> Context::Impl::AnswerRecall(const std::string& tool_call_id,
                                                  size_t max_tokens) {
  const ToolCall* call = FindLastCall(tool_call_id);
  if (call == nullptr ||
      std::find(open_calls_.begin(), open_calls_.end(), tool_call_id) == open_calls_.end()) {
    return InvalidArgumentError(
        "\"" + tool_call_id + "\" is not an open tool call (open: " + JoinNames(open_calls_) + ")");
  }
  if (call->name != kRecallToolName) {
    return InvalidArgumentError("call \"" + tool_call_id + "\" is to \"" + call->name + "\", not " +
                                kRecallToolName);
  }
  std::string answer;
  StatusOr<internal::RecallRequest> request = internal::ParseRecallArguments(call->arguments);
  if (!request.ok() || request->recall_id.empty()) {
    answer = "[strata: " +
             (request.ok() ? std::string("context_recall needs a non-empty recall_id")
                           : request.status().message()) +
             "; the ids appear in masked, truncated and summarized content]";
  } else if (auto original = recall_.find(request->recall_id); original != recall_.end()) {
    size_t limit = request->max_tokens;
    if (max_tokens > 0) limit = limit == 0 ? max_tokens : std::min(limit, max_tokens);
    StatusOr<RecallPage> page = internal::PageOf(request->recall_id, original->second,
                                                 request->offset, limit, *tokenizer_);
    answer = page.ok() ? internal::RecallAnswerText(*page)
                       : "[strata: " + page.status().message() + "]";
  } else {
    answer = "[strata: nothing is kept under recall id " + request->recall_id + "]";
  }
  // The recalled original is appended as it is: hygiene would cut it again.
  Segment s = NewHistorySegment(SegmentKind::kToolResult, turn_);
  s.tool_call_id = tool_call_id;
  s.name = call->name;
  s.content = std::move(answer);
  s.tokens = CountTokens(s);
  ContextChange change;
  change.upserted.push_back(s);
  STRATA_RETURN_IF_ERROR(Record(change, turn_));
  open_calls_.erase(std::find(open_calls_.begin(), open_calls_.end(), tool_call_id));
  return ApplyHistoryAppend(std::move(s));
}

// The call `id` of the last assistant message that made tool calls, or nullptr.
const ToolCall* Context::Impl::FindLastCall(std::string_view id) const {
  if (last_call_segment_ == kNoOffset) return nullptr;
  for (const ToolCall& call : history_[last_call_segment_].tool_calls) {
    if (call.id == id) return &call;
  }
  return nullptr;
}

void Context::Impl::RegisterCalls(const Segment& s) {
  // `s` is about to be appended at history_.size().
  open_calls_.clear();
  last_call_segment_ = s.tool_calls.empty() ? kNoOffset : history_.size();
  for (const ToolCall& call : s.tool_calls) {
    open_calls_.push_back(call.id);
  }
}

void Context::Impl::IndexOutput(std::string key, const std::string& call) {
  auto [entry, added] = output_index_.try_emplace(std::move(key), call);
  if (added) output_keys_of_call_[call].push_back(entry->first);
}

void Context::Impl::CountHygiene(const Segment& s, int sign) {
  size_t* counter = nullptr;
  switch (s.hygiene) {
    case HygieneAction::kTruncated:
      counter = &counters_.truncated;
      break;
    case HygieneAction::kDeduplicated:
      counter = &counters_.deduplicated;
      break;
    case HygieneAction::kFolded:
      counter = &counters_.folded;
      break;
    case HygieneAction::kNone:
      return;
  }
  *counter += sign;
  auto original = recall_.find(s.recall_id);
  if (original != recall_.end() && original->second.size() > s.content.size()) {
    counters_.bytes_saved_by_hygiene += sign * (original->second.size() - s.content.size());
  }
}

// Decides what a tool result renders as. Fills s.content, s.kind, s.hygiene, s.recall_id,
// s.duplicate_of; adds the kept original to change.originals; sets output_key when this output
// should be indexed for later deduplication.
void Context::Impl::ApplyHygiene(Segment& s, std::string content, bool is_error,
                                 const ToolCall& call, ContextChange& change,
                                 std::string& output_key) const {
  const HygieneOptions& h = options_.hygiene;
  const bool error_log = is_error || internal::LooksLikeErrorLog(content);
  if (error_log) s.kind = SegmentKind::kErrorLog;
  // The original's recall id, hashed only when hygiene alters the output (most outputs are kept
  // as they are, and a mask later names its own).
  std::string recall_id;
  auto id = [&]() -> const std::string& {
    if (recall_id.empty()) recall_id = RecallIdFor(content);
    return recall_id;
  };

  if (h.deduplicate && content.size() >= h.min_bytes) {
    std::string key = OutputKey(call.name, call.arguments, content);
    auto earlier = output_index_.find(key);
    if (earlier != output_index_.end()) {
      s.hygiene = HygieneAction::kDeduplicated;
      s.duplicate_of = earlier->second;
      s.recall_id = id();
      s.content = internal::DuplicateReference(earlier->second, call.name, content, id());
      KeepOriginal(recall_id, std::move(content), change);
      return;
    }
    output_key = std::move(key);
  }

  std::string rendered = content;
  if (error_log && h.fold_error_logs && content.size() >= h.min_bytes) {
    if (auto folded = internal::FoldErrorLog(rendered, h, id())) {
      rendered = std::move(*folded);
      s.hygiene = HygieneAction::kFolded;
    }
  }
  if (h.max_segment_tokens > 0) {
    const size_t tokens = tokenizer_->Count(rendered);
    if (tokens > h.max_segment_tokens) {
      const double bytes_per_token = static_cast<double>(rendered.size()) / tokens;
      const double keep_bytes = bytes_per_token * static_cast<double>(h.max_segment_tokens);
      const double head_share = std::clamp(h.head_share, 0.0, 1.0);
      // Leave room for the marker line (about 40 tokens).
      const double budget = std::max(0.0, keep_bytes - 40 * bytes_per_token);
      rendered = internal::KeepHeadAndTail(rendered, static_cast<size_t>(budget * head_share),
                                           static_cast<size_t>(budget * (1 - head_share)),
                                           bytes_per_token, id());
      s.hygiene = HygieneAction::kTruncated;
    }
  }
  if (s.hygiene != HygieneAction::kNone) {
    s.recall_id = id();
    KeepOriginal(recall_id, std::move(content), change);
  }
  s.content = std::move(rendered);
}

void Context::Impl::KeepOriginal(const std::string& recall_id, std::string original,
                                 ContextChange& change) const {
  if (!options_.keep_originals || recall_.count(recall_id)) return;
  change.originals.emplace_back(recall_id, std::move(original));
}

}  // namespace strata
