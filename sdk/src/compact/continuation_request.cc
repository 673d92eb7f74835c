#include "compact/continuation_request.h"

#include <nlohmann/json.hpp>
#include <set>

#include "compact/common.h"
#include "core/json_scan.h"
#include "core/utf8.h"

namespace strata::compact_internal {
namespace {

// Bytes of the span's first message quoted in the instruction.
constexpr size_t kQuotedOpeningBytes = 120;

// The body was parsed already, so the light scan meets only valid JSON.
using internal::SkipJsonSpace;
using internal::SkipJsonValue;

// The offset of the ']' that closes the top-level "messages" array; npos when there is none.
size_t MessagesClose(std::string_view body) {
  const size_t at = SkipJsonSpace(body, 0);
  if (at >= body.size() || body[at] != '{') return std::string_view::npos;
  size_t close = std::string_view::npos;
  internal::WalkJsonObject(body, at + 1, /*after_member=*/false,
                           [&](std::string_view key, size_t value) -> size_t {
                             const size_t value_end = SkipJsonValue(body, value);
                             if (key != "messages" || value_end == std::string_view::npos)
                               return value_end;
                             if (body[value] == '[') close = value_end - 1;
                             return std::string_view::npos;  // found: the walk stops here
                           });
  return close;
}

std::string ContentOf(const nlohmann::ordered_json& message) {
  auto content = message.find("content");
  if (content == message.end() || !content->is_string()) return "";
  return content->get<std::string>();
}

// The index of the first of span.size() consecutive messages holding the span's contents.
size_t FindSpan(const nlohmann::ordered_json& messages, const std::vector<const Segment*>& span) {
  if (span.empty() || messages.size() < span.size()) return std::string_view::npos;
  for (size_t i = 0; i + span.size() <= messages.size(); ++i) {
    size_t k = 0;
    while (k < span.size() && ContentOf(messages[i + k]) == span[k]->content) ++k;
    if (k == span.size()) return i;
  }
  return std::string_view::npos;
}

std::string Instruction(const std::vector<const Segment*>& span, size_t first, size_t max_tokens,
                        const std::string& role, const std::string& task) {
  std::string opening = internal::Utf8Prefix(span.front()->content, kQuotedOpeningBytes);
  for (char& c : opening) {
    if (c == '\n' || c == '\r') c = ' ';
  }
  std::string text = "[strata: compaction] Summarize messages " + std::to_string(first + 1) +
                     " to " + std::to_string(first + span.size()) +
                     " of this conversation (counting its first message as 1; the first of them "
                     "is the " + role + " message beginning \"" + opening + "\"), in at most " +
                     std::to_string(max_tokens) + " tokens. " + task +
                     " Answer with the summary only; do not call tools.";
  std::set<std::string> seen;
  std::string ids;
  for (const Segment* s : span) {
    const std::string id = RecallIdOf(*s);
    if (seen.insert(id).second) ids += (ids.empty() ? "" : " ") + id;
  }
  if (!ids.empty()) text += " Their recall ids: " + ids + ".";
  return text;
}

// The fields after the messages (those before them are in the copied bytes), with the summary
// request's output cap, stream and id.
std::string Fields(const nlohmann::ordered_json& request, size_t max_tokens,
                   const std::string& request_id) {
  std::string out;
  bool capped = false, after_messages = false;
  for (auto it = request.begin(); it != request.end(); ++it) {
    const std::string& key = it.key();
    if (!after_messages) {
      after_messages = key == "messages";
      if (key == "max_tokens" || key == "max_completion_tokens") capped = true;
      continue;
    }
    if (key == "stream_options") continue;
    nlohmann::ordered_json value = it.value();
    if (key == "max_tokens" || key == "max_completion_tokens") {
      value = max_tokens;
      capped = true;
    } else if (key == "stream") {
      value = false;
    } else if ((key == "request_id" || key == "rid") && !request_id.empty()) {
      value = request_id;
    }
    out += "," + nlohmann::json(key).dump() + ":" +
           value.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  }
  if (!capped) out += ",\"max_tokens\":" + std::to_string(max_tokens);
  if (request.find("stream") == request.end()) out += ",\"stream\":false";
  return out;
}

}  // namespace

StatusOr<ContinuationRequest> MakeContinuationRequest(std::string_view previous_body,
                                                      const std::vector<const Segment*>& span,
                                                      size_t max_tokens,
                                                      const std::string& instruction,
                                                      const std::string& request_id) {
  nlohmann::ordered_json request = nlohmann::ordered_json::parse(previous_body, nullptr, false);
  if (!request.is_object() || !request.contains("messages") || !request["messages"].is_array() ||
      request["messages"].empty()) {
    return InvalidArgumentError("the previous request is not a Chat Completions body with messages");
  }
  const size_t close = MessagesClose(previous_body);
  if (close == std::string_view::npos) {
    return InvalidArgumentError("the end of the previous request's messages was not found");
  }
  const nlohmann::ordered_json& messages = request["messages"];
  const size_t first = FindSpan(messages, span);
  if (first == std::string_view::npos) {
    return InvalidArgumentError("the span to summarize (" + std::to_string(span.size()) +
                                " messages from segment " + span.front()->id +
                                ") is not among the previous request's messages");
  }
  const std::string role = messages[first].value("role", std::string("user"));
  nlohmann::ordered_json message = {
      {"role", "user"}, {"content", Instruction(span, first, max_tokens, role, instruction)}};
  ContinuationRequest out;
  out.first_message = first;
  if (request.contains("model") && request["model"].is_string()) {
    out.model = request["model"].get<std::string>();
  }
  out.body.reserve(previous_body.size() + 1024);
  out.body.append(previous_body.substr(0, close));
  out.body += "," + message.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) + "]";
  out.body += Fields(request, max_tokens, request_id);
  out.body += "}";
  return out;
}

std::string OmittedRecallIdsLine(const std::vector<const Segment*>& span, const std::string& text) {
  std::set<std::string> seen;
  std::string ids;
  for (const Segment* s : span) {
    const std::string id = RecallIdOf(*s);
    if (!seen.insert(id).second || text.find(id) != std::string::npos) continue;
    ids += (ids.empty() ? "" : " ") + id;
  }
  if (ids.empty()) return "";
  return "\n[strata: recall ids of what it leaves out: " + ids + "]";
}

}  // namespace strata::compact_internal
