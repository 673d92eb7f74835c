#include "transport/chat_parser.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdlib>
#include <ctime>
#include <optional>
#include <string>
#include <vector>

#include "core/utf8.h"

namespace strata::transport_internal {
namespace {

using nlohmann::json;

std::string Str(const json& object, const char* name) {
  auto it = object.find(name);
  if (it == object.end() || !it->is_string()) return "";
  return it->get<std::string>();
}

// A token count as a server may send it: a non-negative integer up to kMaxTokenCount (a float
// only when integral). Anything else (1e300, -3, 2.5, "7") is treated as absent: converting it
// would be undefined (1e300 became INT64_MIN).
constexpr double kMaxTokenCount = 1e15;
std::optional<int64_t> Count(const json& value) {
  if (value.is_number_unsigned()) {
    uint64_t v = value.get<uint64_t>();
    if (v <= static_cast<uint64_t>(kMaxTokenCount)) return static_cast<int64_t>(v);
    return std::nullopt;
  }
  if (value.is_number_integer()) {
    int64_t v = value.get<int64_t>();
    if (v >= 0 && v <= static_cast<int64_t>(kMaxTokenCount)) return v;
    return std::nullopt;
  }
  if (value.is_number_float()) {
    double d = value.get<double>();
    if (std::isfinite(d) && d >= 0 && d <= kMaxTokenCount && d == std::floor(d)) return static_cast<int64_t>(d);
  }
  return std::nullopt;
}

int64_t Int(const json& object, const char* name) {
  auto it = object.find(name);
  if (it == object.end()) return 0;
  return Count(*it).value_or(0);
}

// Depth of a JSON value, without recursion (a hostile answer may nest 100,000 levels).
size_t Depth(const json& root) {
  size_t deepest = 0;
  std::vector<std::pair<const json*, size_t>> stack{{&root, 1}};
  while (!stack.empty()) {
    auto [value, depth] = stack.back();
    stack.pop_back();
    deepest = std::max(deepest, depth);
    if (value->is_structured()) {
      for (const json& child : *value) stack.emplace_back(&child, depth + 1);
    }
  }
  return deepest;
}

// The start of a payload's text for a message, cut at a UTF-8 boundary, invalid UTF-8 replaced.
// Used instead of re-serializing parsed JSON, which recurses once per nesting level.
std::string Excerpt(std::string_view text, size_t max_bytes = 300) {
  return internal::ToValidUtf8(internal::Utf8Prefix(text, max_bytes));
}

void ParseUsage(const json& usage, Usage* out) {
  if (!usage.is_object()) return;
  out->reported = true;
  out->prompt_tokens = Int(usage, "prompt_tokens");
  out->completion_tokens = Int(usage, "completion_tokens");
  out->total_tokens = Int(usage, "total_tokens");
  out->cached_tokens.reset();
  auto details = usage.find("prompt_tokens_details");
  if (details != usage.end() && details->is_object()) {
    auto cached = details->find("cached_tokens");
    if (cached != details->end()) {
      std::optional<int64_t> n = Count(*cached);
      // More cached than prompt tokens is as impossible as 1e300: recorded as not reported.
      if (n && (out->prompt_tokens == 0 || *n <= out->prompt_tokens)) out->cached_tokens = n;
    }
  }
  auto completion = usage.find("completion_tokens_details");
  if (completion != usage.end() && completion->is_object()) {
    out->reasoning_tokens = Int(*completion, "reasoning_tokens");
  } else if (usage.contains("reasoning_tokens")) {
    out->reasoning_tokens = Int(usage, "reasoning_tokens");  // SGLang reports it at the top level
  }
}

// True for an error payload: {"error": ...} or {"object":"error", ...}.
bool IsError(const json& payload) {
  if (!payload.is_object()) return false;
  if (payload.contains("error") && !payload["error"].is_null()) return true;
  return Str(payload, "object") == "error";
}

// `text` is the payload's own text: quoted (cut) when there is no message, never re-serialized.
std::string MessageOf(const json& payload, std::string_view text) {
  if (payload.contains("error")) {
    const json& error = payload["error"];
    if (error.is_object()) {
      std::string m = Str(error, "message");
      if (!m.empty()) return m;
    }
    if (error.is_string()) return error.get<std::string>();
  }
  std::string m = Str(payload, "message");
  if (!m.empty()) return m;
  m = Str(payload, "detail");
  if (!m.empty()) return m;
  return Excerpt(text);
}

int CodeOf(const json& payload) {
  const json* object = &payload;
  if (payload.contains("error") && payload["error"].is_object()) object = &payload["error"];
  auto it = object->find("code");
  int64_t code = 0;
  if (it != object->end() && it->is_number_integer()) code = it->get<int64_t>();
  if (it != object->end() && it->is_string()) code = std::atoi(it->get<std::string>().substr(0, 4).c_str());
  return code >= 100 && code <= 599 ? static_cast<int>(code) : 0;
}

bool LooksLikeContextLength(std::string_view message) {
  std::string lower(message);
  for (char& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return lower.find("context length") != std::string::npos ||
         lower.find("context_length") != std::string::npos ||
         lower.find("maximum context") != std::string::npos ||
         lower.find("too long") != std::string::npos;
}

}  // namespace

Status ChatAssembler::AddJson(std::string_view payload) {
  last_had_token_ = false;
  json j = json::parse(payload.begin(), payload.end(), nullptr, false);
  if (j.is_discarded() || !j.is_object()) {
    return DataLossError("malformed JSON in the server's answer: \"" + Excerpt(payload, 120) + "\"");
  }
  if (IsError(j)) {
    int code = CodeOf(j);
    Status s = StatusFromHttp(code >= 400 ? code : 500, payload);
    return Status(s.code(), "server error in stream: " + MessageOf(j, payload));
  }
  if (response_.id.empty()) response_.id = Str(j, "id");
  if (response_.model.empty()) response_.model = Str(j, "model");
  auto usage = j.find("usage");
  if (usage != j.end() && usage->is_object()) ParseUsage(*usage, &response_.usage);
  auto choices = j.find("choices");
  if (choices == j.end() || !choices->is_array()) return Status();
  for (const json& choice : *choices) {
    if (!choice.is_object()) continue;
    if (Int(choice, "index") != 0) continue;  // n > 1 is not used by strata
    const json* part = nullptr;
    bool whole = false;
    if (choice.contains("delta") && choice["delta"].is_object()) {
      part = &choice["delta"];
      response_.streamed = true;
    } else if (choice.contains("message") && choice["message"].is_object()) {
      part = &choice["message"];
      whole = true;
    }
    if (part != nullptr) {
      std::string content = Str(*part, "content");
      std::string reasoning = Str(*part, "reasoning_content");
      if (reasoning.empty()) reasoning = Str(*part, "reasoning");
      if (!content.empty() || !reasoning.empty()) has_token_ = last_had_token_ = true;
      response_.content += content;
      response_.reasoning += reasoning;
      const bool deltas = on_delta_ != nullptr && *on_delta_;
      if (deltas && !reasoning.empty())
        Emit(StreamDelta{StreamDelta::Kind::kReasoning, std::move(reasoning), 0, "", "", false});
      if (deltas && !content.empty())
        Emit(StreamDelta{StreamDelta::Kind::kContent, std::move(content), 0, "", "", false});
      auto calls = part->find("tool_calls");
      if (calls != part->end() && calls->is_array()) {
        int position = 0;
        for (const json& call : *calls) {
          if (!call.is_object()) continue;
          int index = call.contains("index") && call["index"].is_number_integer()
                          ? call["index"].get<int>()
                          : (whole ? position : 0);
          ++position;
          PartialCall& partial = calls_[index];
          std::string id = Str(call, "id");
          if (!id.empty()) partial.id = id;
          auto function = call.find("function");
          if (function != call.end() && function->is_object()) {
            partial.name += Str(*function, "name");
            auto args = function->find("arguments");
            if (args != function->end() && !args->is_null()) {
              if (!args->is_string() && Depth(*args) > kMaxArgumentsDepth) {
                // Arguments sent as a JSON value rather than its text (some servers do) are
                // re-serialized, which recurses per level, so only within a depth limit.
                return DataLossError("tool call arguments nested deeper than " + std::to_string(kMaxArgumentsDepth) +
                                     " levels in the server's answer (refused: a server never produces that)");
              }
              std::string fragment = args->is_string() ? args->get<std::string>() : args->dump();
              partial.arguments += fragment;
              if (deltas && !fragment.empty()) {
                Emit(StreamDelta{StreamDelta::Kind::kToolCallArguments, std::move(fragment), index,
                                 partial.id, partial.name, false});
              }
            }
          }
          has_token_ = last_had_token_ = true;
        }
      }
    }
    auto finish = choice.find("finish_reason");
    if (finish != choice.end() && finish->is_string()) response_.finish_reason = finish->get<std::string>();
  }
  return Status();
}

void ChatAssembler::Emit(StreamDelta delta) {
  if (!in_read_) {
    (*on_delta_)(delta);
    return;
  }
  if (held_) {
    held_->more_follows = true;
    (*on_delta_)(*held_);
  }
  held_ = std::move(delta);
}

void ChatAssembler::EndRead() {
  in_read_ = false;
  if (!held_) return;
  // Reset before the call: a callback that throws (it must not) leaves nothing held twice.
  StreamDelta last = std::move(*held_);
  held_.reset();
  (*on_delta_)(last);
}

void ChatAssembler::Finish(Response* out) {
  out->id = std::move(response_.id);
  out->model = std::move(response_.model);
  out->content = std::move(response_.content);
  out->reasoning = std::move(response_.reasoning);
  out->finish_reason = std::move(response_.finish_reason);
  out->usage = response_.usage;
  out->streamed = response_.streamed;
  out->tool_calls.clear();
  for (auto& [index, call] : calls_) {
    out->tool_calls.push_back(ToolCall{std::move(call.id), std::move(call.name), std::move(call.arguments)});
  }
}

std::string ErrorMessageFromBody(std::string_view body) {
  json j = json::parse(body.begin(), body.end(), nullptr, false);
  if (!j.is_discarded() && j.is_object()) return MessageOf(j, body);
  // Not JSON: the body's start as text (a cut character or a stray byte must not reach a message).
  std::string text = internal::ToValidUtf8(internal::Utf8Prefix(body, 300, ""));
  while (!text.empty() && std::isspace(static_cast<unsigned char>(text.back()))) text.pop_back();
  return text.empty() ? "(empty body)" : text;
}

Status StatusFromHttp(int http_status, std::string_view body) {
  std::string message = ErrorMessageFromBody(body);
  std::string prefix = "HTTP " + std::to_string(http_status) + ": ";
  switch (http_status) {
    case 400:
    case 413:
    case 422:
      if (LooksLikeContextLength(message)) {
        return ResourceExhaustedError(prefix + "prompt exceeds the endpoint's context length; "
                                      "compact the context or use a longer pool (server: " +
                                      message + ")");
      }
      return InvalidArgumentError(prefix + "the server rejected the request: " + message);
    case 401:
      return UnauthenticatedError(prefix + "check the API key: " + message);
    case 403:
      return PermissionDeniedError(prefix + message);
    case 404:
      return NotFoundError(prefix + "check the base URL and model name: " + message);
    case 408:
      return DeadlineExceededError(prefix + message);
    case 429:
      return ResourceExhaustedError(prefix + "rate limited or overloaded: " + message);
    default:
      break;
  }
  if (http_status >= 500) return UnavailableError(prefix + "server error: " + message);
  return UnknownError(prefix + message);
}

double ParseRetryAfterSeconds(std::string_view value, int64_t now_unix_seconds) {
  while (!value.empty() && std::isspace(static_cast<unsigned char>(value.front()))) value.remove_prefix(1);
  while (!value.empty() && std::isspace(static_cast<unsigned char>(value.back()))) value.remove_suffix(1);
  if (value.empty()) return -1;
  std::string text(value);
  char* end = nullptr;
  double seconds = std::strtod(text.c_str(), &end);
  if (end != text.c_str() && *end == '\0') return seconds >= 0 && std::isfinite(seconds) ? seconds : -1;
  // An HTTP-date (RFC 9110 5.6.7): IMF-fixdate, the obsolete RFC 850 form or asctime, always GMT.
  for (const char* format : {"%a, %d %b %Y %H:%M:%S GMT", "%A, %d-%b-%y %H:%M:%S GMT", "%a %b %e %H:%M:%S %Y"}) {
    std::tm tm{};
    const char* parsed = strptime(text.c_str(), format, &tm);
    if (parsed == nullptr || *parsed != '\0') continue;
    int64_t at = static_cast<int64_t>(timegm(&tm));
    return static_cast<double>(std::max<int64_t>(0, at - now_unix_seconds));
  }
  return -1;
}

}  // namespace strata::transport_internal
