// HTTP transport over libcurl's multi interface: one (multi, easy) pair per concurrent call, pooled
// so that keep-alive connections are reused; the transfer loop polls in short slices so that
// first-byte and idle timeouts and cancellation are exact to a few milliseconds.
//
// The same engine carries SGLang's gRPC service: gRPC is HTTP/2 (h2c here) with length-prefixed
// protobuf messages and a grpc-status trailer (see grpc_wire.h for why no gRPC++ is linked).
#include <curl/curl.h>

#include <algorithm>
#include <cctype>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "strata/transport.h"
#include "transport/chat_parser.h"
#include "transport/grpc_wire.h"
#include "transport/retry.h"

namespace strata {
namespace {

using transport_internal::Backoff;
using transport_internal::ChatAssembler;
using transport_internal::GrpcFrameReader;
using transport_internal::SseParser;
using transport_internal::SteadyMillis;

constexpr size_t kMaxErrorBody = 1 << 20;
constexpr size_t kMaxJsonBody = 256u << 20;

void GlobalInit() {
  static std::once_flag once;
  std::call_once(once, [] { curl_global_init(CURL_GLOBAL_DEFAULT); });
}

std::string Lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

std::string Trim(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  return std::string(s);
}

// One pooled connection: the multi handle owns the connection cache, the easy handle the transfer.
struct Connection {
  CURLM* multi = nullptr;
  CURL* easy = nullptr;
  ~Connection() {
    if (easy != nullptr) curl_easy_cleanup(easy);
    if (multi != nullptr) curl_multi_cleanup(multi);
  }
};

// State of one attempt, shared with the curl callbacks.
struct Transfer {
  const CancellationToken* cancel = nullptr;
  int http_status = 0;
  std::string content_type;
  double retry_after = -1;
  bool got_any_byte = false;
  bool body_started = false;  // a 2xx body byte arrived: never retry from here on
  bool sse = false;
  bool done = false;          // [DONE] seen
  std::string body;           // non-SSE body
  SseParser sse_parser;
  ChatAssembler assembler;
  Status parse_error;
  double start_ms = 0;
  double last_byte_ms = 0;
  double first_token_ms = -1;
  double last_token_ms = -1;
  size_t body_bytes = 0;
  // gRPC mode.
  bool grpc = false;
  GrpcFrameReader frames;
  int grpc_status = -1;  // from the headers (trailers-only) or the trailers
  std::string grpc_message;
  bool grpc_finished = false;  // an OpenAIStreamChunk with finished = true arrived
};

size_t HeaderCallback(char* data, size_t size, size_t count, void* user) {
  auto* t = static_cast<Transfer*>(user);
  size_t n = size * count;
  std::string_view line(data, n);
  t->got_any_byte = true;
  t->last_byte_ms = SteadyMillis();
  if (line.substr(0, 5) == "HTTP/") {
    // A new response (also after 100 Continue): reset what belongs to the previous one.
    size_t sp = line.find(' ');
    t->http_status = sp == std::string_view::npos ? 0 : std::atoi(std::string(line.substr(sp + 1, 3)).c_str());
    t->content_type.clear();
    t->retry_after = -1;
    return n;
  }
  size_t colon = line.find(':');
  if (colon == std::string_view::npos) return n;
  std::string name = Lower(Trim(line.substr(0, colon)));
  std::string value = Trim(line.substr(colon + 1));
  if (name == "content-type") t->content_type = Lower(value);
  if (name == "retry-after") t->retry_after = transport_internal::ParseRetryAfterSeconds(value);
  if (name == "grpc-status") t->grpc_status = std::atoi(value.c_str());
  if (name == "grpc-message") t->grpc_message = transport_internal::DecodeGrpcMessage(value);
  return n;
}

size_t WriteCallback(char* data, size_t size, size_t count, void* user) {
  auto* t = static_cast<Transfer*>(user);
  size_t n = size * count;
  double now = SteadyMillis();
  t->got_any_byte = true;
  t->last_byte_ms = now;
  t->body_bytes += n;
  bool success = t->http_status >= 200 && t->http_status < 300;
  if (!success) {
    if (t->body.size() < kMaxErrorBody) t->body.append(data, std::min(n, kMaxErrorBody - t->body.size()));
    return n;
  }
  if (t->grpc) {
    t->frames.Append(std::string_view(data, n));
    std::string message, json_chunk;
    bool compressed = false, finished = false;
    while (t->frames.Next(&message, &compressed)) {
      t->body_started = true;  // a message arrived: the answer has started
      if (compressed || !transport_internal::DecodeOpenAIStreamChunk(message, &json_chunk, &finished)) {
        t->parse_error = DataLossError(compressed ? "gRPC message is compressed; strata does not negotiate compression"
                                                  : "malformed OpenAIStreamChunk from the gRPC server");
        return 0;
      }
      if (finished) t->grpc_finished = true;
      if (json_chunk.empty()) continue;
      Status st = t->assembler.AddJson(json_chunk);
      if (!st.ok()) {
        t->parse_error = st;
        return 0;
      }
      if (t->assembler.last_had_token()) {
        if (t->first_token_ms < 0) t->first_token_ms = now;
        t->last_token_ms = now;
      }
    }
    return n;
  }
  if (!t->body_started) {
    t->body_started = true;
    t->sse = t->content_type.find("text/event-stream") != std::string::npos;
  }
  if (!t->sse) {
    if (t->body.size() + n > kMaxJsonBody) {
      t->parse_error = ResourceExhaustedError("response body over 256 MiB");
      return 0;
    }
    t->body.append(data, n);
    if (t->first_token_ms < 0) t->first_token_ms = now;
    t->last_token_ms = now;
    return n;
  }
  Status s = t->sse_parser.Feed(std::string_view(data, n), [&](std::string_view payload) -> Status {
    if (t->done) return Status();
    if (payload == "[DONE]") {
      t->done = true;
      return Status();
    }
    Status st = t->assembler.AddJson(payload);
    if (!st.ok()) return st;
    if (t->assembler.last_had_token()) {
      if (t->first_token_ms < 0) t->first_token_ms = now;
      t->last_token_ms = now;
    }
    return Status();
  });
  if (!s.ok()) {
    t->parse_error = s;
    return 0;  // aborts the transfer (CURLE_WRITE_ERROR)
  }
  return n;
}

struct AttemptResult {
  Status status;
  bool retryable = false;
  double retry_after = -1;
};

bool IsConnectError(CURLcode code) {
  switch (code) {
    case CURLE_COULDNT_CONNECT:
    case CURLE_COULDNT_RESOLVE_HOST:
    case CURLE_COULDNT_RESOLVE_PROXY:
    case CURLE_SEND_ERROR:
    case CURLE_RECV_ERROR:
    case CURLE_GOT_NOTHING:
    case CURLE_SSL_CONNECT_ERROR:
    case CURLE_OPERATION_TIMEDOUT:
      return true;
    default:
      return false;
  }
}

constexpr char kGrpcService[] = "/sglang.runtime.v1.SglangService/";

// gRPC status codes equal StatusCode values.
Status FromGrpcStatus(int code, const std::string& message, const std::string& target) {
  if (code < 0) return UnavailableError("gRPC " + target + ": the answer carried no grpc-status");
  if (code > 16) code = static_cast<int>(StatusCode::kUnknown);
  return Status(static_cast<StatusCode>(code), "gRPC " + target + ": " + message);
}

// gRPC metadata keys are [0-9a-z-_.] (not "grpc-"), values printable ASCII; other headers only go
// in OpenAIRequest.trace_headers.
bool ValidMetadata(const std::string& key, const std::string& value) {
  if (key.empty() || key.rfind("grpc-", 0) == 0) return false;
  for (char c : key) {
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || c == '-' || c == '_' || c == '.')) return false;
  }
  for (char c : value) {
    if (c < 0x20 || c > 0x7e) return false;
  }
  return true;
}

class HttpTransport : public Transport {
 public:
  // `grpc_target` non-empty: speak sglang.runtime.v1.SglangService over h2c to it.
  HttpTransport(HttpTransportOptions options, std::string grpc_target)
      : options_(std::move(options)), grpc_target_(std::move(grpc_target)), backoff_(options_.retry) {
    while (!options_.base_url.empty() && options_.base_url.back() == '/') options_.base_url.pop_back();
    url_ = grpc_target_.empty() ? options_.base_url + "/chat/completions"
                                : "http://" + grpc_target_ + kGrpcService + "ChatComplete";
    clock_ = options_.clock != nullptr ? options_.clock : SystemClock();
  }

  std::string Name() const override { return grpc_target_.empty() ? "http" : "grpc"; }
  std::string Endpoint() const override { return grpc_target_.empty() ? options_.base_url : grpc_target_; }

  Status Send(std::string_view body, const CallOptions& call, Response* response) override {
    *response = Response();
    const int64_t start_us = clock_->NowMicros();
    const double start_ms = SteadyMillis();
    auto budget = call.deadline.count() > 0 ? call.deadline : options_.timeouts.total;
    const int64_t end_us = start_us + std::chrono::duration_cast<std::chrono::microseconds>(budget).count();
    const int max_attempts = options_.retry.retry_enabled ? std::max(1, options_.retry.max_attempts) : 1;
    Status last;
    for (int attempt = 1;; ++attempt) {
      response->attempts = attempt;
      int64_t remaining_ms = (end_us - clock_->NowMicros()) / 1000;
      AttemptResult r = Attempt(body, call, std::max<int64_t>(1, remaining_ms), response);
      response->timings.total_ms = SteadyMillis() - start_ms;
      if (r.status.ok()) return Status();
      last = r.status;
      if (!r.retryable || attempt >= max_attempts) {
        if (r.retryable && attempt > 1) {
          return Status(last.code(), last.message() + " (after " + std::to_string(attempt) + " attempts)");
        }
        return last;
      }
      int64_t delay = backoff_.DelayMicros(attempt, r.retry_after);
      if (clock_->NowMicros() + delay > end_us) {
        return Status(last.code(), last.message() + " (no time left for retry " +
                                       std::to_string(attempt) + " within the deadline)");
      }
      if (call.cancel != nullptr && call.cancel->cancelled()) return CancelledError("call cancelled");
      if (call.cancel == nullptr) {
        clock_->SleepForMicros(delay);
      } else {
        // Slices, so that a cancellation during a long Retry-After is honoured promptly.
        for (int64_t left = delay; left > 0; left -= 50000) {
          if (call.cancel->cancelled()) return CancelledError("call cancelled during retry backoff");
          clock_->SleepForMicros(std::min<int64_t>(left, 50000));
        }
      }
      response->timings.retry_wait_ms += static_cast<double>(delay) / 1000.0;
    }
  }

  Status HealthCheck(std::chrono::milliseconds timeout) override {
    if (!grpc_target_.empty()) {
      std::string reply;
      STRATA_RETURN_IF_ERROR(Unary("HealthCheck", "", timeout, &reply));
      bool healthy = false;
      if (!transport_internal::DecodeBoolField1(reply, &healthy)) {
        return DataLossError("gRPC " + grpc_target_ + ": malformed HealthCheckResponse");
      }
      if (!healthy) return UnavailableError("gRPC " + grpc_target_ + " reports unhealthy");
      return Status();
    }
    GlobalInit();
    CURL* easy = curl_easy_init();
    if (easy == nullptr) return InternalError("curl_easy_init failed");
    std::string url = options_.base_url + "/models";
    std::string sink;
    struct curl_slist* headers = AuthHeaders(nullptr);
    curl_easy_setopt(easy, CURLOPT_URL, url.c_str());
    curl_easy_setopt(easy, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(easy, CURLOPT_TIMEOUT_MS, static_cast<long>(timeout.count()));
    curl_easy_setopt(easy, CURLOPT_HTTPHEADER, headers);
    curl_easy_setopt(easy, CURLOPT_WRITEFUNCTION, +[](char* d, size_t s, size_t n, void* u) {
      static_cast<std::string*>(u)->append(d, s * n);
      return s * n;
    });
    curl_easy_setopt(easy, CURLOPT_WRITEDATA, &sink);
    CURLcode code = curl_easy_perform(easy);
    long http = 0;
    curl_easy_getinfo(easy, CURLINFO_RESPONSE_CODE, &http);
    curl_slist_free_all(headers);
    curl_easy_cleanup(easy);
    if (code != CURLE_OK) {
      return UnavailableError("health check of " + url + " failed: " + curl_easy_strerror(code));
    }
    if (http < 200 || http >= 300) return transport_internal::StatusFromHttp(static_cast<int>(http), sink);
    return Status();
  }

  Status Abort(const std::string& request_id) override {
    if (!grpc_target_.empty()) {
      std::string reply;
      STRATA_RETURN_IF_ERROR(Unary("Abort", transport_internal::EncodeAbortRequest(request_id, false),
                                   std::chrono::seconds(10), &reply));
      bool success = false;
      transport_internal::DecodeBoolField1(reply, &success);
      if (!success) return NotFoundError("no request \"" + request_id + "\" to abort on " + grpc_target_);
      return Status();
    }
    return UnimplementedError("HTTP endpoints have no abort call; cancel request \"" + request_id +
                              "\" with its CancellationToken");
  }

 private:
  // One unary gRPC call (blocking): request message bytes in, response message bytes out.
  Status Unary(const std::string& method, const std::string& request, std::chrono::milliseconds timeout,
               std::string* reply) {
    GlobalInit();
    CURL* easy = curl_easy_init();
    if (easy == nullptr) return InternalError("curl_easy_init failed");
    std::string url = "http://" + grpc_target_ + kGrpcService + method;
    std::string body = transport_internal::FrameGrpcMessage(request);
    Transfer t;
    t.grpc = true;
    std::string raw;
    struct curl_slist* headers = nullptr;
    headers = curl_slist_append(headers, "Content-Type: application/grpc");
    headers = curl_slist_append(headers, "TE: trailers");
    curl_easy_setopt(easy, CURLOPT_URL, url.c_str());
    curl_easy_setopt(easy, CURLOPT_HTTP_VERSION, CURL_HTTP_VERSION_2_PRIOR_KNOWLEDGE);
    curl_easy_setopt(easy, CURLOPT_POSTFIELDS, body.data());
    curl_easy_setopt(easy, CURLOPT_POSTFIELDSIZE_LARGE, static_cast<curl_off_t>(body.size()));
    curl_easy_setopt(easy, CURLOPT_HTTPHEADER, headers);
    curl_easy_setopt(easy, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(easy, CURLOPT_TIMEOUT_MS, static_cast<long>(timeout.count()));
    curl_easy_setopt(easy, CURLOPT_HEADERFUNCTION, HeaderCallback);
    curl_easy_setopt(easy, CURLOPT_HEADERDATA, &t);
    curl_easy_setopt(easy, CURLOPT_WRITEFUNCTION, +[](char* d, size_t s, size_t n, void* u) {
      static_cast<std::string*>(u)->append(d, s * n);
      return s * n;
    });
    curl_easy_setopt(easy, CURLOPT_WRITEDATA, &raw);
    CURLcode code = curl_easy_perform(easy);
    curl_slist_free_all(headers);
    curl_easy_cleanup(easy);
    if (code != CURLE_OK) {
      return UnavailableError("gRPC " + grpc_target_ + " " + method + ": " + curl_easy_strerror(code));
    }
    if (t.grpc_status != 0) return FromGrpcStatus(t.grpc_status, t.grpc_message, grpc_target_);
    GrpcFrameReader frames;
    frames.Append(raw);
    bool compressed = false;
    if (!frames.Next(reply, &compressed) || compressed) {
      return DataLossError("gRPC " + grpc_target_ + " " + method + ": no response message");
    }
    return Status();
  }

  struct curl_slist* AuthHeaders(struct curl_slist* list) {
    if (!options_.api_key.empty()) {
      list = curl_slist_append(list, ("Authorization: Bearer " + options_.api_key).c_str());
    }
    return list;
  }

  std::unique_ptr<Connection> Acquire() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (!idle_.empty()) {
        auto c = std::move(idle_.back());
        idle_.pop_back();
        return c;
      }
    }
    GlobalInit();
    auto c = std::make_unique<Connection>();
    c->multi = curl_multi_init();
    c->easy = curl_easy_init();
    if (c->multi == nullptr || c->easy == nullptr) return nullptr;
    return c;
  }

  void Release(std::unique_ptr<Connection> c) {
    std::lock_guard<std::mutex> lock(mu_);
    if (idle_.size() < options_.max_idle_connections) idle_.push_back(std::move(c));
  }

  AttemptResult Attempt(std::string_view body, const CallOptions& call, int64_t budget_ms,
                        Response* response) {
    AttemptResult result;
    std::unique_ptr<Connection> conn = Acquire();
    if (conn == nullptr) {
      result.status = InternalError("could not create a curl handle");
      return result;
    }
    CURL* easy = conn->easy;
    curl_easy_reset(easy);
    if (!grpc_target_.empty()) {
      // curl 7.88 fails the next stream on a reused h2c connection to a gRPC server ("Error in the
      // HTTP2 framing layer"), so gRPC calls use one connection each (a loopback or LAN connect).
      curl_easy_setopt(easy, CURLOPT_FRESH_CONNECT, 1L);
      curl_easy_setopt(easy, CURLOPT_FORBID_REUSE, 1L);
    }
    Transfer t;
    t.cancel = call.cancel;
    t.assembler.set_on_delta(&call.on_delta);
    t.grpc = !grpc_target_.empty();
    struct curl_slist* headers = nullptr;
    std::string grpc_body;
    if (t.grpc) {
      headers = curl_slist_append(headers, "Content-Type: application/grpc");
      headers = curl_slist_append(headers, "TE: trailers");
      if (!call.request_id.empty()) headers = curl_slist_append(headers, ("x-request-id: " + call.request_id).c_str());
      for (const auto& [name, value] : call.headers) {
        std::string key = Lower(name);
        if (ValidMetadata(key, value)) headers = curl_slist_append(headers, (key + ": " + value).c_str());
      }
      grpc_body = transport_internal::FrameGrpcMessage(transport_internal::EncodeOpenAIRequest(body, call.headers));
      body = grpc_body;
    } else {
      headers = curl_slist_append(headers, "Content-Type: application/json");
      headers = curl_slist_append(headers, "Accept: text/event-stream, application/json");
      headers = curl_slist_append(headers, "Expect:");
      headers = AuthHeaders(headers);
      if (!call.request_id.empty()) {
        headers = curl_slist_append(headers, ("X-Request-Id: " + call.request_id).c_str());
      }
      for (const auto& [name, value] : options_.headers) {
        headers = curl_slist_append(headers, (name + ": " + value).c_str());
      }
      for (const auto& [name, value] : call.headers) {
        headers = curl_slist_append(headers, (name + ": " + value).c_str());
      }
    }
    const int64_t total_ms = std::min<int64_t>(budget_ms, options_.timeouts.total.count());
    curl_easy_setopt(easy, CURLOPT_URL, url_.c_str());
    curl_easy_setopt(easy, CURLOPT_POST, 1L);
    curl_easy_setopt(easy, CURLOPT_POSTFIELDS, body.data());
    curl_easy_setopt(easy, CURLOPT_POSTFIELDSIZE_LARGE, static_cast<curl_off_t>(body.size()));
    curl_easy_setopt(easy, CURLOPT_HTTPHEADER, headers);
    curl_easy_setopt(easy, CURLOPT_HTTP_VERSION,
                     t.grpc ? CURL_HTTP_VERSION_2_PRIOR_KNOWLEDGE : CURL_HTTP_VERSION_1_1);
    curl_easy_setopt(easy, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(easy, CURLOPT_TCP_NODELAY, 1L);
    curl_easy_setopt(easy, CURLOPT_USERAGENT, "strata/0.1");
    if (std::getenv("STRATA_CURL_VERBOSE") != nullptr) curl_easy_setopt(easy, CURLOPT_VERBOSE, 1L);
    curl_easy_setopt(easy, CURLOPT_CONNECTTIMEOUT_MS,
                     static_cast<long>(std::min<int64_t>(options_.timeouts.connect.count(), total_ms)));
    // Backstop only: the loop below enforces the attempt's total time itself.
    curl_easy_setopt(easy, CURLOPT_TIMEOUT_MS, static_cast<long>(total_ms + 1000));
    curl_easy_setopt(easy, CURLOPT_HEADERFUNCTION, HeaderCallback);
    curl_easy_setopt(easy, CURLOPT_HEADERDATA, &t);
    curl_easy_setopt(easy, CURLOPT_WRITEFUNCTION, WriteCallback);
    curl_easy_setopt(easy, CURLOPT_WRITEDATA, &t);

    t.start_ms = SteadyMillis();
    const double end_ms = t.start_ms + static_cast<double>(total_ms);
    const double first_byte_ms = static_cast<double>(options_.timeouts.first_byte.count());
    const double idle_ms = static_cast<double>(options_.timeouts.idle.count());
    curl_multi_add_handle(conn->multi, easy);
    Status aborted;
    for (;;) {
      int running = 0;
      CURLMcode mc = curl_multi_perform(conn->multi, &running);
      if (mc != CURLM_OK) {
        aborted = InternalError(std::string("curl_multi_perform: ") + curl_multi_strerror(mc));
        break;
      }
      if (running == 0) break;
      double now = SteadyMillis();
      if (call.cancel != nullptr && call.cancel->cancelled()) {
        aborted = CancelledError("call cancelled after " + std::to_string(static_cast<int64_t>(now - t.start_ms)) + " ms");
        break;
      }
      double wait = 50;
      if (!t.got_any_byte) {
        if (now - t.start_ms >= first_byte_ms) {
          aborted = DeadlineExceededError("no response from " + url_ + " within the first-byte timeout of " +
                                          std::to_string(options_.timeouts.first_byte.count()) + " ms");
          break;
        }
        wait = std::min(wait, first_byte_ms - (now - t.start_ms));
      } else {
        if (now - t.last_byte_ms >= idle_ms) {
          aborted = DeadlineExceededError("stream from " + url_ + " stalled: nothing received for " +
                                          std::to_string(options_.timeouts.idle.count()) +
                                          " ms (idle timeout) after " + std::to_string(t.body_bytes) + " bytes");
          break;
        }
        wait = std::min(wait, idle_ms - (now - t.last_byte_ms));
      }
      if (now >= end_ms) {
        aborted = DeadlineExceededError("request to " + url_ + " exceeded its total time of " +
                                        std::to_string(total_ms) + " ms");
        break;
      }
      wait = std::min(wait, end_ms - now);
      curl_multi_poll(conn->multi, nullptr, 0, std::max(1, static_cast<int>(wait)), nullptr);
    }
    CURLcode code = CURLE_OK;
    if (aborted.ok()) {
      int queued = 0;
      while (CURLMsg* msg = curl_multi_info_read(conn->multi, &queued)) {
        if (msg->msg == CURLMSG_DONE && msg->easy_handle == easy) code = msg->data.result;
      }
    }
    curl_multi_remove_handle(conn->multi, easy);
    curl_slist_free_all(headers);
    response->http_status = t.grpc ? 0 : t.http_status;
    if (!aborted.ok()) {
      // The connection is mid-transfer; drop it rather than reuse it.
      result.status = aborted;
      return result;
    }
    Release(std::move(conn));

    if (code != CURLE_OK) {
      if (!t.parse_error.ok()) {
        result.status = t.parse_error;
      } else if (t.body_started) {
        result.status = UnavailableError("connection to " + url_ + " lost after " + std::to_string(t.body_bytes) +
                                         " bytes of the answer (" + curl_easy_strerror(code) +
                                         "); not retried: the answer had started");
      } else if (IsConnectError(code)) {
        StatusCode sc = code == CURLE_OPERATION_TIMEDOUT ? StatusCode::kDeadlineExceeded : StatusCode::kUnavailable;
        result.status = Status(sc, "cannot reach " + url_ + ": " + curl_easy_strerror(code));
        result.retryable = true;
      } else {
        result.status = UnavailableError("request to " + url_ + " failed: " + curl_easy_strerror(code));
      }
      return result;
    }
    if (t.grpc) {
      if (t.http_status != 200) {
        result.status = UnavailableError("gRPC " + grpc_target_ + ": HTTP status " + std::to_string(t.http_status));
        result.retryable = !t.body_started && t.http_status >= 500;
        return result;
      }
      response->http_status = 0;
      if (t.grpc_status != 0) {
        result.status = FromGrpcStatus(t.grpc_status, t.grpc_message, grpc_target_);
        bool transient = t.grpc_status == static_cast<int>(StatusCode::kUnavailable) ||
                         t.grpc_status == static_cast<int>(StatusCode::kResourceExhausted);
        if (transient && t.body_started) {
          result.status = UnavailableError(result.status.message() + "; not retried: the answer had started");
        }
        result.retryable = transient && !t.body_started;
        return result;
      }
      if (!t.grpc_finished && !t.assembler.finished()) {
        result.status = DataLossError("gRPC " + grpc_target_ + ": stream ended without finished or a finish_reason");
        return result;
      }
      t.assembler.Finish(response);
      if (t.first_token_ms >= 0) {
        response->timings.ttft_ms = t.first_token_ms - t.start_ms;
        response->timings.decode_ms = t.last_token_ms - t.first_token_ms;
      }
      return result;
    }
    if (t.http_status < 200 || t.http_status >= 300) {
      result.status = transport_internal::StatusFromHttp(t.http_status, t.body);
      result.retryable = t.http_status == 429 || t.http_status == 500 || t.http_status == 502 ||
                         t.http_status == 503 || t.http_status == 504;
      result.retry_after = t.retry_after;
      return result;
    }
    if (t.sse) {
      if (!t.done && !t.assembler.finished()) {
        result.status = DataLossError("stream from " + url_ + " ended without a finish_reason or [DONE] after " +
                                      std::to_string(t.body_bytes) + " bytes");
        return result;
      }
    } else {
      Status s = t.assembler.AddJson(t.body);
      if (!s.ok()) {
        result.status = s;
        return result;
      }
    }
    t.assembler.Finish(response);
    response->streamed = t.sse;
    if (t.first_token_ms >= 0) {
      response->timings.ttft_ms = t.first_token_ms - t.start_ms;
      response->timings.decode_ms = t.last_token_ms - t.first_token_ms;
    }
    return result;
  }

  HttpTransportOptions options_;
  std::string grpc_target_;
  std::string url_;
  Clock* clock_;
  Backoff backoff_;
  std::mutex mu_;
  std::vector<std::unique_ptr<Connection>> idle_;  // guarded by mu_
};

}  // namespace

StatusOr<std::unique_ptr<Transport>> MakeHttpTransport(HttpTransportOptions options) {
  if (options.base_url.rfind("http://", 0) != 0 && options.base_url.rfind("https://", 0) != 0) {
    return InvalidArgumentError("base_url must start with http:// or https://, got \"" + options.base_url + "\"");
  }
  return std::unique_ptr<Transport>(new HttpTransport(std::move(options), ""));
}

StatusOr<std::unique_ptr<Transport>> MakeGrpcTransport(GrpcTransportOptions options) {
  if (options.target.empty()) return InvalidArgumentError("gRPC target is empty; expected host:port");
  if (options.target.find("://") != std::string::npos) {
    return InvalidArgumentError("gRPC target \"" + options.target + "\" must be host:port, without a scheme");
  }
  HttpTransportOptions http;
  http.base_url = "http://" + options.target;
  http.timeouts = options.timeouts;
  http.retry = options.retry;
  http.clock = options.clock;
  return std::unique_ptr<Transport>(new HttpTransport(std::move(http), options.target));
}

}  // namespace strata
