// HTTP transport over libcurl's multi interface: one (multi, easy) pair per concurrent call, pooled
// so that keep-alive connections are reused; the transfer loop polls in short slices so that
// first-byte and idle timeouts and cancellation are exact to a few milliseconds. (SGLang's gRPC
// service has its own transport: sdk/src/transport_grpc.)
#include <curl/curl.h>

#include <algorithm>
#include <cstdio>
#include <limits>
#include <cctype>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "core/thread_annotations.h"
#include "strata/http_transport.h"
#include "strata/transport.h"
#include "transport/chat_parser.h"
#include "transport/redact.h"
#include "transport/retry.h"
#include "transport/timeouts.h"

namespace strata {
namespace {

using transport_internal::Backoff;
using transport_internal::ChatAssembler;
using transport_internal::SseParser;
using transport_internal::SteadyMillis;

constexpr size_t kMaxErrorBody = 1 << 20;

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
  Clock* clock = nullptr;  // the transport's: the "now" of a Retry-After date
  int http_status = 0;
  std::string content_type;
  double retry_after = -1;
  bool got_any_byte = false;  // a body byte arrived (headers do not count)
  bool body_started = false;  // a 2xx body byte arrived: never retry from here on
  bool sse = false;
  bool done = false;          // [DONE] seen
  std::string body;           // non-SSE body
  SseParser sse_parser;
  ChatAssembler assembler;
  Status parse_error;
  double start_ms = 0;
  double headers_ms = -1;    // when the status line arrived
  double last_byte_ms = 0;   // last BODY byte: the idle timeout runs from here
  double first_token_ms = -1;
  double last_token_ms = -1;
  size_t body_bytes = 0;
  size_t max_body_bytes = std::numeric_limits<size_t>::max();  // HttpTransportOptions::max_response_bytes
  std::string url;            // for messages
};

// STRATA_CURL_VERBOSE=1: libcurl's trace on stderr with the Authorization header and every
// secret (API key, URL password) redacted, and bodies shown by size only.
int RedactingCurlTrace(CURL*, curl_infotype type, char* data, size_t size, void* user) {
  const auto* secrets = static_cast<const std::vector<std::string>*>(user);
  std::string_view text(data, size);
  std::string out;
  switch (type) {
    case CURLINFO_TEXT: out = "* " + transport_internal::Scrub(text, *secrets); break;
    case CURLINFO_HEADER_OUT: out = "> " + transport_internal::Scrub(text, *secrets); break;
    case CURLINFO_HEADER_IN: out = "< " + transport_internal::Scrub(text, *secrets); break;
    case CURLINFO_DATA_OUT: out = "> [" + std::to_string(size) + " bytes of request body]\n"; break;
    case CURLINFO_DATA_IN: out = "< [" + std::to_string(size) + " bytes of response body]\n"; break;
    default: return 0;  // TLS records
  }
  std::fwrite(out.data(), 1, out.size(), stderr);
  return 0;
}

size_t HeaderCallback(char* data, size_t size, size_t count, void* user) {
  auto* t = static_cast<Transfer*>(user);
  size_t n = size * count;
  std::string_view line(data, n);
  // Headers are not the first byte: servers send them before the prefill (see Timeouts::first_byte).
  if (line.substr(0, 5) == "HTTP/") {
    t->headers_ms = SteadyMillis();
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
  if (name == "retry-after") {
    t->retry_after = transport_internal::ParseRetryAfterSeconds(value, t->clock->UnixMillis() / 1000);
  }
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
  if (!t->body_started) {
    t->body_started = true;
    t->sse = t->content_type.find("text/event-stream") != std::string::npos;
  }
  if (t->body_bytes > t->max_body_bytes) {
    t->parse_error = ResourceExhaustedError(
        "the answer from " + t->url + " is over max_response_bytes = " + std::to_string(t->max_body_bytes) +
        " bytes (" + (t->sse ? "stream" : "JSON body") + "); raise HttpTransportOptions::max_response_bytes if a " +
        "real answer is that big");
    return 0;
  }
  if (!t->sse) {
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

class HttpTransport : public Transport {
 public:
  explicit HttpTransport(HttpTransportOptions options)
      : options_(std::move(options)),
        clock_(options_.clock != nullptr ? options_.clock : SystemClock()),
        backoff_(options_.retry, clock_) {
    while (!options_.base_url.empty() && options_.base_url.back() == '/') options_.base_url.pop_back();
    url_ = options_.base_url + "/chat/completions";
    shown_url_ = RedactUrl(url_);
    if (!options_.api_key.empty()) secrets_.push_back(options_.api_key);
    std::string password = transport_internal::UrlPassword(options_.base_url);
    if (!password.empty()) secrets_.push_back(password);
  }

  std::string Name() const override { return "http"; }
  // Credentials in the URL (user:password@) are never shown: records and messages get RedactUrl().
  std::string Endpoint() const override { return RedactUrl(options_.base_url); }

  // Every error leaves scrubbed of the key and the URL's password, and as valid UTF-8: an upstream
  // may quote the Authorization header, or send any bytes, in its error body.
  Status Send(std::string_view body, const CallOptions& call, Response* response) override {
    // The token is polled while a transfer runs; one cancelled already sends nothing (a quick
    // answer could otherwise complete before the first poll).
    if (call.cancel != nullptr && call.cancel->cancelled()) {
      return CancelledError("call cancelled before it was sent");
    }
    return transport_internal::UpstreamStatus(SendAttempts(body, call, response), secrets_);
  }

  Status HealthCheck(std::chrono::milliseconds timeout) override {
    return transport_internal::UpstreamStatus(CheckHealth(timeout), secrets_);
  }

  Status Abort(const std::string& request_id) override {
    return UnimplementedError("HTTP endpoints have no abort call; cancel request \"" + request_id +
                              "\" with its CancellationToken");
  }

 private:
  Status SendAttempts(std::string_view body, const CallOptions& call, Response* response) {
    *response = Response();
    for (const auto& [name, value] : call.headers) {
      if (!transport_internal::ValidHeader(name, value)) {
        return InvalidArgumentError("request header \"" + transport_internal::Printable(name) +
                                    "\" has an empty name or a control character (CR/LF would inject headers); "
                                    "nothing was sent");
      }
    }
    if (!transport_internal::ValidHeader("X-Request-Id", call.request_id)) {
      return InvalidArgumentError("request_id \"" + transport_internal::Printable(call.request_id) +
                                  "\" has a control character; nothing was sent");
    }
    const int64_t start_us = clock_->NowMicros();
    const double start_ms = SteadyMillis();
    auto budget = call.deadline.count() > 0 ? call.deadline : options_.timeouts.total;
    const int64_t end_us = start_us + std::chrono::duration_cast<std::chrono::microseconds>(budget).count();
    const int max_attempts =
        options_.retry.retry_enabled ? std::clamp(options_.retry.max_attempts, 1, kMaxRetryAttempts) : 1;
    const int64_t max_total_wait_us =
        std::chrono::duration_cast<std::chrono::microseconds>(options_.retry.max_total_retry_wait).count();
    int64_t waited_us = 0;  // backoff of this call so far
    Status last;
    for (int attempt = 1;; ++attempt) {
      response->attempts = attempt;
      int64_t remaining_ms = (end_us - clock_->NowMicros()) / 1000;
      // A retry carries its own request id (body rid/request_id and X-Request-Id).
      std::optional<std::string> retry_body = transport_internal::BodyForAttempt(body, attempt);
      CallOptions attempt_call;
      const CallOptions* this_call = &call;
      if (attempt > 1 && !call.request_id.empty()) {
        attempt_call = call;
        attempt_call.request_id = transport_internal::RetryRequestId(call.request_id, attempt);
        this_call = &attempt_call;
      }
      AttemptResult r = Attempt(retry_body ? std::string_view(*retry_body) : body, *this_call,
                                std::max<int64_t>(1, remaining_ms), response);
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
      if (waited_us + delay > max_total_wait_us) {
        return Status(last.code(), last.message() + " (after " + std::to_string(attempt) +
                                       " attempts: retry " + std::to_string(attempt) +
                                       " would wait beyond max_total_retry_wait)");
      }
      waited_us += delay;
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

  Status CheckHealth(std::chrono::milliseconds timeout) {
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
      return UnavailableError("health check of " + RedactUrl(url) + " failed: " + curl_easy_strerror(code));
    }
    if (http < 200 || http >= 300) return transport_internal::StatusFromHttp(static_cast<int>(http), sink);
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
      internal::MutexLock lock(mu_);
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
    internal::MutexLock lock(mu_);
    if (idle_.size() < options_.max_idle_connections) idle_.push_back(std::move(c));
  }

  // The request's headers: content negotiation, authorization, request id, then the transport's
  // and the call's own headers.
  struct curl_slist* RequestHeaders(const CallOptions& call) {
    struct curl_slist* headers = nullptr;
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
      if (!transport_internal::ValidHeader(name, value)) continue;  // Send() refused these already
      headers = curl_slist_append(headers, (name + ": " + value).c_str());
    }
    return headers;
  }

  // Sets up `easy` to POST `body` with `headers`, its callbacks writing into `t`.
  void ConfigureRequest(CURL* easy, std::string_view body, struct curl_slist* headers, int64_t total_ms,
                        Transfer* t) {
    curl_easy_setopt(easy, CURLOPT_URL, url_.c_str());
    curl_easy_setopt(easy, CURLOPT_POST, 1L);
    curl_easy_setopt(easy, CURLOPT_POSTFIELDS, body.data());
    curl_easy_setopt(easy, CURLOPT_POSTFIELDSIZE_LARGE, static_cast<curl_off_t>(body.size()));
    curl_easy_setopt(easy, CURLOPT_HTTPHEADER, headers);
    curl_easy_setopt(easy, CURLOPT_HTTP_VERSION, CURL_HTTP_VERSION_1_1);
    curl_easy_setopt(easy, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(easy, CURLOPT_TCP_NODELAY, 1L);
    curl_easy_setopt(easy, CURLOPT_USERAGENT, "strata/0.1");
    if (const char* verbose = std::getenv("STRATA_CURL_VERBOSE"); verbose != nullptr && std::string(verbose) != "0") {
      // libcurl's own trace would print the Authorization header; this one redacts it.
      curl_easy_setopt(easy, CURLOPT_DEBUGFUNCTION, RedactingCurlTrace);
      curl_easy_setopt(easy, CURLOPT_DEBUGDATA, &secrets_);
      curl_easy_setopt(easy, CURLOPT_VERBOSE, 1L);
    }
    curl_easy_setopt(easy, CURLOPT_CONNECTTIMEOUT_MS,
                     static_cast<long>(std::min<int64_t>(options_.timeouts.connect.count(), total_ms)));
    // Backstop only: RunTransfer enforces the attempt's total time itself.
    curl_easy_setopt(easy, CURLOPT_TIMEOUT_MS, static_cast<long>(total_ms + 1000));
    curl_easy_setopt(easy, CURLOPT_HEADERFUNCTION, HeaderCallback);
    curl_easy_setopt(easy, CURLOPT_HEADERDATA, t);
    curl_easy_setopt(easy, CURLOPT_WRITEFUNCTION, WriteCallback);
    curl_easy_setopt(easy, CURLOPT_WRITEDATA, t);
  }

  // Drives the transfer on `conn` until it finishes, is cancelled, or runs out of time (first byte,
  // idle, total). OK when the transfer ran to its end (curl's own result is then in *code), else
  // why it was stopped.
  Status RunTransfer(Connection& conn, Transfer& t, const CallOptions& call, int64_t total_ms,
                     int64_t prompt_tokens, CURLcode* code) {
    CURL* easy = conn.easy;
    t.start_ms = SteadyMillis();
    const double end_ms = t.start_ms + static_cast<double>(total_ms);
    const int64_t first_byte_timeout = transport_internal::FirstByteTimeout(options_.timeouts, prompt_tokens).count();
    const double first_byte_ms = static_cast<double>(first_byte_timeout);
    const double idle_ms = static_cast<double>(options_.timeouts.idle.count());
    curl_multi_add_handle(conn.multi, easy);
    Status aborted;
    for (;;) {
      int running = 0;
      // What one pass reads goes on together (libcurl calls WriteCallback per HTTP chunk): each
      // fragment says whether another follows at once.
      t.assembler.BeginRead();
      CURLMcode mc = curl_multi_perform(conn.multi, &running);
      t.assembler.EndRead();
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
          aborted = DeadlineExceededError(
              "no answer from " + shown_url_ + " within the first-byte timeout of " + std::to_string(first_byte_timeout) +
              " ms for a prompt of ~" + std::to_string(prompt_tokens) + " tokens (" +
              (t.headers_ms >= 0 ? "headers arrived, no body" : "no response headers") +
              "); a long prefill needs a larger Timeouts::first_byte or prefill_per_100k_tokens");
          break;
        }
        wait = std::min(wait, first_byte_ms - (now - t.start_ms));
      } else {
        if (now - t.last_byte_ms >= idle_ms) {
          aborted = DeadlineExceededError("stream from " + shown_url_ + " stalled: nothing received for " +
                                          std::to_string(options_.timeouts.idle.count()) +
                                          " ms (idle timeout) after " + std::to_string(t.body_bytes) + " bytes");
          break;
        }
        wait = std::min(wait, idle_ms - (now - t.last_byte_ms));
      }
      if (now >= end_ms) {
        aborted = DeadlineExceededError("request to " + shown_url_ + " exceeded its total time of " +
                                        std::to_string(total_ms) + " ms");
        break;
      }
      wait = std::min(wait, end_ms - now);
      curl_multi_poll(conn.multi, nullptr, 0, std::max(1, static_cast<int>(wait)), nullptr);
    }
    *code = CURLE_OK;
    if (aborted.ok()) {
      int queued = 0;
      while (CURLMsg* msg = curl_multi_info_read(conn.multi, &queued)) {
        if (msg->msg == CURLMSG_DONE && msg->easy_handle == easy) *code = msg->data.result;
      }
    }
    curl_multi_remove_handle(conn.multi, easy);
    return aborted;
  }

  // The outcome of a transfer that ran to its end: a transport or HTTP error (and whether it may
  // be retried), or the assembled answer in *response.
  AttemptResult ClassifyOutcome(CURLcode code, Transfer& t, Response* response) {
    AttemptResult result;
    if (code != CURLE_OK) {
      if (!t.parse_error.ok()) {
        result.status = t.parse_error;
      } else if (t.body_started) {
        result.status = UnavailableError("connection to " + shown_url_ + " lost after " + std::to_string(t.body_bytes) +
                                         " bytes of the answer (" + curl_easy_strerror(code) +
                                         "); not retried: the answer had started");
      } else if (IsConnectError(code)) {
        StatusCode sc = code == CURLE_OPERATION_TIMEDOUT ? StatusCode::kDeadlineExceeded : StatusCode::kUnavailable;
        result.status = Status(sc, "cannot reach " + shown_url_ + ": " + curl_easy_strerror(code));
        result.retryable = true;
      } else {
        result.status = UnavailableError("request to " + shown_url_ + " failed: " + curl_easy_strerror(code));
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
        result.status = DataLossError("stream from " + shown_url_ + " ended without a finish_reason or [DONE] after " +
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

  // One HTTP attempt: set up, transfer, classify. A connection stopped mid-transfer is dropped; one
  // that finished goes back to the idle pool.
  AttemptResult Attempt(std::string_view body, const CallOptions& call, int64_t budget_ms,
                        Response* response) {
    AttemptResult result;
    std::unique_ptr<Connection> conn = Acquire();
    if (conn == nullptr) {
      result.status = InternalError("could not create a curl handle");
      return result;
    }
    curl_easy_reset(conn->easy);
    Transfer t;
    t.cancel = call.cancel;
    t.clock = clock_;
    t.max_body_bytes = options_.max_response_bytes;
    t.url = shown_url_;
    t.assembler.set_on_delta(&call.on_delta);
    struct curl_slist* headers = RequestHeaders(call);
    const int64_t total_ms = std::min<int64_t>(budget_ms, options_.timeouts.total.count());
    ConfigureRequest(conn->easy, body, headers, total_ms, &t);
    const int64_t prompt_tokens =
        call.prompt_tokens > 0 ? call.prompt_tokens : static_cast<int64_t>(body.size() / 4);
    CURLcode code = CURLE_OK;
    Status aborted = RunTransfer(*conn, t, call, total_ms, prompt_tokens, &code);
    curl_slist_free_all(headers);
    response->http_status = t.http_status;
    if (!aborted.ok()) {
      // The connection is mid-transfer; drop it rather than reuse it.
      result.status = aborted;
      return result;
    }
    Release(std::move(conn));
    return ClassifyOutcome(code, t, response);
  }

  HttpTransportOptions options_;
  std::string url_;
  std::string shown_url_;              // url_ through RedactUrl(): the only form put in messages
  std::vector<std::string> secrets_;   // scrubbed from STRATA_CURL_VERBOSE output and errors
  Clock* clock_;
  Backoff backoff_;
  internal::Mutex mu_;
  std::vector<std::unique_ptr<Connection>> idle_ STRATA_GUARDED_BY(mu_);
};

}  // namespace

StatusOr<std::unique_ptr<Transport>> MakeHttpTransport(HttpTransportOptions options) {
  if (options.base_url.rfind("http://", 0) != 0 && options.base_url.rfind("https://", 0) != 0) {
    return InvalidArgumentError("base_url must start with http:// or https://, got \"" + RedactUrl(options.base_url) +
                                "\"");
  }
  for (size_t i = 0; i < options.api_key.size(); ++i) {
    unsigned char c = static_cast<unsigned char>(options.api_key[i]);
    if (c < 0x20 || c == 0x7f) {
      // The key itself is never quoted in a message.
      char byte[8];
      std::snprintf(byte, sizeof(byte), "0x%02x", c);
      return InvalidArgumentError("the API key has a control character (byte " + std::string(byte) + " at offset " +
                                  std::to_string(i) + "); a CR or LF would inject request headers. Check how the key " +
                                  "was read (a trailing newline from a file?)");
    }
  }
  for (const auto& [name, value] : options.headers) {
    if (!transport_internal::ValidHeader(name, value)) {
      return InvalidArgumentError("header \"" + transport_internal::Printable(name) +
                                  "\" has an empty name or a control character in its name or value");
    }
  }
  if (!options.api_key.empty() && !options.allow_insecure && options.base_url.rfind("http://", 0) == 0 &&
      !transport_internal::IsLoopbackUrl(options.base_url)) {
    return InvalidArgumentError("refusing to send the API key in clear text over http:// to " +
                                   RedactUrl(options.base_url) + ": use https://, or set " +
                                   "HttpTransportOptions::allow_insecure if the network is trusted");
  }
  return std::unique_ptr<Transport>(new HttpTransport(std::move(options)));
}

}  // namespace strata
