// Parsing of Chat Completions answers, shared by the HTTP and gRPC transports: SSE framing,
// chat.completion.chunk deltas (tool calls assembled by index), whole chat.completion objects and
// both error shapes.
#ifndef STRATA_SRC_TRANSPORT_CHAT_PARSER_H_
#define STRATA_SRC_TRANSPORT_CHAT_PARSER_H_

#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>

#include "strata/status.h"
#include "strata/transport.h"

namespace strata::transport_internal {

// Accumulates one answer from chunks (streaming) or a whole object. Not thread-safe.
class ChatAssembler {
 public:
  // One JSON payload: a chunk ("choices":[{"delta":...}]), a whole completion
  // ("choices":[{"message":...}]), a usage-only chunk, or an error object. Returns the error
  // carried by the payload (mapped with ErrorFromBody), DATA_LOSS for malformed JSON.
  Status AddJson(std::string_view payload);
  // True once a token (content, reasoning or a tool-call fragment) has been seen.
  bool has_token() const { return has_token_; }
  // True when the last AddJson() payload carried a token.
  bool last_had_token() const { return last_had_token_; }
  bool finished() const { return !response_.finish_reason.empty(); }
  // Moves the assembled fields into *out (content, reasoning, tool calls, finish, usage, ids).
  void Finish(Response* out);
  // Receives each content, reasoning and tool-call-argument fragment (CallOptions::on_delta).
  void set_on_delta(const std::function<void(const StreamDelta&)>* on_delta) { on_delta_ = on_delta; }
  // The fragments of the payloads added between BeginRead() and EndRead() (one pass over what the
  // connection read) are handed on one behind, so that each says whether another follows it at
  // once (StreamDelta::more_follows); EndRead() hands on the last. Outside a pass each goes at
  // once.
  void BeginRead() { in_read_ = true; }
  void EndRead();

 private:
  // Hands a fragment on, or holds it while a pass may bring another.
  void Emit(StreamDelta delta);

  struct PartialCall {
    std::string id, name, arguments;
  };
  Response response_;
  std::map<int, PartialCall> calls_;  // by index
  bool has_token_ = false;
  bool last_had_token_ = false;
  const std::function<void(const StreamDelta&)>* on_delta_ = nullptr;  // not owned; may be null
  bool in_read_ = false;
  std::optional<StreamDelta> held_;  // inside a pass: the fragment not yet handed on
};

// Tool-call arguments sent as a JSON value (not text) may nest at most this deep.
constexpr size_t kMaxArgumentsDepth = 256;

// Incremental SSE framing: feed bytes, get complete "data:" payloads. Not thread-safe.
class SseParser {
 public:
  // Appends bytes; calls `on_data(payload)` for each complete event's data (multi-line data
  // joined with '\n'). Stops and returns the first non-OK status on_data returns.
  template <typename F>
  Status Feed(std::string_view bytes, F&& on_data) {
    buffer_.append(bytes.data(), bytes.size());
    for (;;) {
      size_t end = buffer_.find("\n\n", scan_);
      size_t crlf = buffer_.find("\r\n\r\n", scan_);
      size_t sep = 2;
      if (crlf != std::string::npos && (end == std::string::npos || crlf < end)) {
        end = crlf;
        sep = 4;
      }
      if (end == std::string::npos) {
        scan_ = buffer_.size() > 3 ? buffer_.size() - 3 : 0;
        return Status();
      }
      std::string event = buffer_.substr(0, end);
      buffer_.erase(0, end + sep);
      scan_ = 0;
      std::string data;
      bool has_data = false;
      size_t pos = 0;
      while (pos <= event.size()) {
        size_t nl = event.find('\n', pos);
        if (nl == std::string::npos) nl = event.size();
        std::string_view line(event.data() + pos, nl - pos);
        if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
        if (line.substr(0, 5) == "data:") {
          std::string_view value = line.substr(5);
          if (!value.empty() && value.front() == ' ') value.remove_prefix(1);
          if (has_data) data += '\n';
          data.append(value.data(), value.size());
          has_data = true;
        }
        pos = nl + 1;
      }
      if (has_data) {
        Status s = on_data(std::string_view(data));
        if (!s.ok()) return s;
      }
    }
  }
  // Bytes received but not yet forming a complete event.
  const std::string& pending() const { return buffer_; }

 private:
  std::string buffer_;
  size_t scan_ = 0;
};

// The message of an error body: nested {"error":{"message":...}} or flat {"message":...}
// ("object":"error"), else the body itself (truncated).
std::string ErrorMessageFromBody(std::string_view body);

// Maps an HTTP status and error body to a Status with a clear message.
Status StatusFromHttp(int http_status, std::string_view body);

// Parses a Retry-After header value: delay-seconds, or an HTTP-date turned into the seconds from
// `now_unix_seconds` to it (0 when it has passed). -1 when empty or neither.
double ParseRetryAfterSeconds(std::string_view value, int64_t now_unix_seconds);

}  // namespace strata::transport_internal

#endif  // STRATA_SRC_TRANSPORT_CHAT_PARSER_H_
