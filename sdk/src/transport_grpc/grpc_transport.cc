// The gRPC transport: sglang.runtime.v1.SglangService over gRPC++ with the generated stubs.
//
// One channel per transport. Each ChatComplete attempt runs on its own CompletionQueue, polled in
// short slices, so that the first-message and idle timeouts and CallOptions::cancel are enforced
// to a few milliseconds while the call is in flight (ClientContext::TryCancel ends it; the server
// sees the cancellation). The call's deadline travels as grpc-timeout.
#include "strata/grpc_transport.h"

#include <grpcpp/grpcpp.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <climits>
#include <memory>
#include <string>
#include <utility>

#include "sglang/runtime/v1/sglang.grpc.pb.h"
#include "core/utf8.h"
#include "transport/chat_parser.h"
#include "transport/redact.h"
#include "transport/retry.h"
#include "transport/timeouts.h"

namespace strata {
namespace {

namespace pb = ::sglang::runtime::v1;
using transport_internal::Backoff;
using transport_internal::ChatAssembler;
using transport_internal::SteadyMillis;

// gRPC metadata keys are [0-9a-z-_.] and not reserved ("grpc-" prefix); values printable ASCII.
bool ValidMetadata(const std::string& key, const std::string& value) {
  if (key.empty() || key.rfind("grpc-", 0) == 0 || key == "te" || key == "content-type")
    return false;
  for (char c : key) {
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || c == '-' || c == '_' || c == '.'))
      return false;
  }
  for (char c : value) {
    if (c < 0x20 || c > 0x7e) return false;
  }
  return true;
}

std::string Lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

bool Contains(const std::string& haystack, const char* needle) {
  return haystack.find(needle) != std::string::npos;
}

// The gRPC status as a strata Status: the same code (gRPC and strata number their codes alike),
// the server's message, and a hint where the cause is a known limit.
Status FromGrpc(const grpc::Status& status, const std::string& where) {
  int code = static_cast<int>(status.error_code());
  if (code < 0 || code > static_cast<int>(StatusCode::kUnauthenticated))
    code = static_cast<int>(StatusCode::kUnknown);
  // The server's message is outside text: invalid UTF-8 would make every proto string it reaches
  // unreadable to clients that check (Python's protobuf).
  std::string message = where + ": " + internal::ToValidUtf8(status.error_message());
  if (code == static_cast<int>(StatusCode::kOutOfRange) &&
      Contains(status.error_message(), "message length too large")) {
    message +=
        " (the request is over the server's message size limit; SGLang's gRPC server accepts 4 MiB "
        "by "
        "default: send a smaller context or use HTTP)";
  }
  if (code == static_cast<int>(StatusCode::kResourceExhausted) &&
      Contains(status.error_message(), "larger than max")) {
    message +=
        " (a message over a gRPC size limit: the server's for the request, or "
        "GrpcTransportOptions::max_receive_message_bytes for the answer)";
  }
  return Status(static_cast<StatusCode>(code), message);
}

// Tags of the asynchronous operations of one call.
enum Op : intptr_t { kStart = 1, kRead = 2, kFinish = 3 };
void* Tag(Op op) { return reinterpret_cast<void*>(static_cast<intptr_t>(op)); }

struct AttemptResult {
  Status status;
  bool retryable = false;
};

// The limits of one attempt.
struct AttemptLimits {
  std::string where;         // "gRPC <target> ChatComplete": the start of every error message
  int64_t total_ms = 0;      // the call's deadline, also sent to the server
  double first_byte_ms = 0;  // until the first message (grows with the prompt)
  double idle_ms = 0;        // between messages once the answer started
  int64_t prompt_tokens = 0;
};

// What one attempt has received so far (times from SteadyMillis()).
struct StreamProgress {
  double start_ms = 0;
  double last_message_ms = 0;
  double first_token_ms = -1;  // the first message with a token; -1 before it
  double last_token_ms = -1;
  int64_t messages = 0;
  bool finished_flag = false;  // a chunk with finished = true arrived
};

// Why the client must end the call at `now`: cancelled, no first message within the first-byte
// timeout, or no message within the idle timeout. Otherwise OK, and *wait is lowered to the time
// left (ms) before the timeout that applies.
Status CheckStream(const CallOptions& call, const AttemptLimits& limits,
                   const StreamProgress& progress, double now, double* wait) {
  if (call.cancel != nullptr && call.cancel->cancelled()) {
    return CancelledError("call cancelled after " +
                          std::to_string(static_cast<int64_t>(now - progress.start_ms)) + " ms");
  }
  if (progress.messages == 0) {
    if (now - progress.start_ms >= limits.first_byte_ms) {
      return DeadlineExceededError(
          limits.where + ": no message within the first-byte timeout of " +
          std::to_string(static_cast<int64_t>(limits.first_byte_ms)) +
          " ms (for a prompt of about " + std::to_string(limits.prompt_tokens) +
          " tokens; see Timeouts::first_byte and prefill_per_100k_tokens)");
    }
    *wait = std::min(*wait, limits.first_byte_ms - (now - progress.start_ms));
    return Status();
  }
  if (now - progress.last_message_ms >= limits.idle_ms) {
    return DeadlineExceededError(
        limits.where + ": stream stalled: no message for " +
        std::to_string(static_cast<int64_t>(limits.idle_ms)) + " ms (idle timeout) after " +
        std::to_string(progress.messages) + " messages");
  }
  *wait = std::min(*wait, limits.idle_ms - (now - progress.last_message_ms));
  return Status();
}

// Counts a message of the stream and gives its JSON chunk (if any) to the assembler; the
// assembler's error for a chunk it cannot parse.
Status AddMessage(const pb::OpenAIStreamChunk& chunk, ChatAssembler* assembler,
                  StreamProgress* progress) {
  const double now = SteadyMillis();
  ++progress->messages;
  progress->last_message_ms = now;
  if (chunk.finished()) progress->finished_flag = true;
  if (chunk.json_chunk().empty()) return Status();
  STRATA_RETURN_IF_ERROR(assembler->AddJson(chunk.json_chunk()));
  if (assembler->last_had_token()) {
    if (progress->first_token_ms < 0) progress->first_token_ms = now;
    progress->last_token_ms = now;
  }
  return Status();
}

class GrpcTransport : public Transport {
 public:
  GrpcTransport(GrpcTransportOptions options, std::shared_ptr<grpc::Channel> channel)
      : options_(std::move(options)),
        channel_(std::move(channel)),
        stub_(pb::SglangService::NewStub(channel_)),
        clock_(options_.clock != nullptr ? options_.clock : SystemClock()),
        backoff_(options_.retry, clock_) {}

  std::string Name() const override { return "grpc"; }
  std::string Endpoint() const override { return options_.target; }

  // Errors leave without the bearer token (a server may quote it) and as valid UTF-8.
  Status Send(std::string_view body, const CallOptions& call, Response* response) override {
    // As the HTTP transport: a token cancelled already sends nothing.
    if (call.cancel != nullptr && call.cancel->cancelled()) {
      return CancelledError("call cancelled before it was sent");
    }
    return transport_internal::UpstreamStatus(SendAttempts(body, call, response),
                                              {options_.bearer_token});
  }

  Status HealthCheck(std::chrono::milliseconds timeout) override {
    return transport_internal::UpstreamStatus(CheckHealth(timeout), {options_.bearer_token});
  }

  Status SendAttempts(std::string_view body, const CallOptions& call, Response* response) {
    *response = Response();
    const int64_t start_us = clock_->NowMicros();
    const double start_ms = SteadyMillis();
    pb::OpenAIRequest request;
    request.set_json_body(body.data(), body.size());
    for (const auto& [name, value] : call.headers) (*request.mutable_trace_headers())[name] = value;
    const size_t request_bytes = request.ByteSizeLong();
    if (static_cast<int64_t>(request_bytes) > options_.max_send_message_bytes) {
      return ResourceExhaustedError(
          "gRPC " + options_.target + ": the request message of " + std::to_string(request_bytes) +
          " bytes is over max_send_message_bytes (" +
          std::to_string(options_.max_send_message_bytes) +
          "); nothing was sent. Send a smaller context or raise the limit");
    }
    const int64_t prompt_tokens =
        call.prompt_tokens > 0 ? call.prompt_tokens : static_cast<int64_t>(body.size() / 4);
    const auto budget = call.deadline.count() > 0 ? call.deadline : options_.timeouts.total;
    const int64_t end_us =
        start_us + std::chrono::duration_cast<std::chrono::microseconds>(budget).count();
    const int max_attempts = options_.retry.retry_enabled
                                 ? std::clamp(options_.retry.max_attempts, 1, kMaxRetryAttempts)
                                 : 1;
    const int64_t max_total_wait_us =
        std::chrono::duration_cast<std::chrono::microseconds>(options_.retry.max_total_retry_wait)
            .count();
    int64_t waited_us = 0;  // backoff of this call so far
    for (int attempt = 1;; ++attempt) {
      response->attempts = attempt;
      const int64_t remaining_ms = (end_us - clock_->NowMicros()) / 1000;
      AttemptResult r =
          Attempt(request, call, std::max<int64_t>(1, remaining_ms), prompt_tokens, response);
      response->timings.total_ms = SteadyMillis() - start_ms;
      if (r.status.ok()) return Status();
      const Status& last = r.status;
      if (!r.retryable || attempt >= max_attempts) {
        if (r.retryable && attempt > 1) {
          return Status(last.code(),
                        last.message() + " (after " + std::to_string(attempt) + " attempts)");
        }
        return last;
      }
      const int64_t delay = backoff_.DelayMicros(attempt, -1);
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
      // Slices, so that a cancellation during the backoff is honoured promptly.
      for (int64_t left = delay; left > 0; left -= 50000) {
        if (call.cancel != nullptr && call.cancel->cancelled())
          return CancelledError("call cancelled during retry backoff");
        clock_->SleepForMicros(std::min<int64_t>(left, 50000));
      }
      response->timings.retry_wait_ms += static_cast<double>(delay) / 1000.0;
    }
  }

  Status CheckHealth(std::chrono::milliseconds timeout) {
    grpc::ClientContext context;
    PrepareContext(&context, nullptr);
    context.set_deadline(std::chrono::system_clock::now() + timeout);
    pb::HealthCheckResponse reply;
    grpc::Status status = stub_->HealthCheck(&context, pb::HealthCheckRequest(), &reply);
    if (!status.ok()) return FromGrpc(status, "gRPC " + options_.target + " HealthCheck");
    if (!reply.healthy()) return UnavailableError("gRPC " + options_.target + " reports unhealthy");
    return Status();
  }

  Status Abort(const std::string& request_id) override {
    if (request_id.empty())
      return InvalidArgumentError("Abort needs a request id (the body's rid)");
    grpc::ClientContext context;
    PrepareContext(&context, nullptr);
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
    pb::AbortRequest request;
    request.set_rid(request_id);
    pb::AbortResponse reply;
    grpc::Status status = stub_->Abort(&context, request, &reply);
    if (!status.ok()) return FromGrpc(status, "gRPC " + options_.target + " Abort");
    if (!reply.success())
      return NotFoundError("no request \"" + request_id + "\" to abort on " + options_.target);
    return Status();
  }

 private:
  // Metadata of every call: the bearer token, the options' metadata, and for ChatComplete the
  // request id and the call's headers (those that are valid metadata; all of them also travel in
  // OpenAIRequest.trace_headers).
  void PrepareContext(grpc::ClientContext* context, const CallOptions* call) const {
    if (!options_.bearer_token.empty())
      context->AddMetadata("authorization", "Bearer " + options_.bearer_token);
    for (const auto& [key, value] : options_.metadata) context->AddMetadata(key, value);
    if (call == nullptr) return;
    if (!call->request_id.empty() && ValidMetadata("x-request-id", call->request_id)) {
      context->AddMetadata("x-request-id", call->request_id);
    }
    for (const auto& [name, value] : call->headers) {
      std::string key = Lower(name);
      if (ValidMetadata(key, value) && key != "authorization") context->AddMetadata(key, value);
    }
  }

  // One ChatComplete call: runs it (RunCall), then turns how it ended into the attempt's result.
  AttemptResult Attempt(const pb::OpenAIRequest& request, const CallOptions& call,
                        int64_t budget_ms, int64_t prompt_tokens, Response* response) {
    AttemptLimits limits;
    limits.where = "gRPC " + options_.target + " ChatComplete";
    limits.total_ms = std::min<int64_t>(budget_ms, options_.timeouts.total.count());
    limits.first_byte_ms = static_cast<double>(
        transport_internal::FirstByteTimeout(options_.timeouts, prompt_tokens).count());
    limits.idle_ms = static_cast<double>(options_.timeouts.idle.count());
    limits.prompt_tokens = prompt_tokens;

    grpc::ClientContext context;
    PrepareContext(&context, &call);
    context.set_deadline(std::chrono::system_clock::now() +
                         std::chrono::milliseconds(limits.total_ms));
    ChatAssembler assembler;
    assembler.set_on_delta(&call.on_delta);  // streaming deltas, as over HTTP
    StreamProgress progress;
    grpc::Status status;
    const Status stopped =
        RunCall(request, call, limits, &context, &assembler, &progress, &status);
    response->http_status = 0;

    if (!stopped.ok()) return {stopped, false};
    if (!status.ok()) return FailedCall(status, context.deadline(), limits, progress.messages);
    if (!progress.finished_flag && !assembler.finished()) {
      return {DataLossError(limits.where +
                            ": the stream ended without finished or a finish_reason after " +
                            std::to_string(progress.messages) + " messages"),
              false};
    }
    assembler.Finish(response);
    if (progress.first_token_ms >= 0) {
      response->timings.ttft_ms = progress.first_token_ms - progress.start_ms;
      response->timings.decode_ms = progress.last_token_ms - progress.first_token_ms;
    }
    return {};
  }

  // Runs the call on its own completion queue, polled in slices of at most 50 ms, until it
  // finishes; cancels it (ClientContext::TryCancel) when CheckStream or a bad chunk says to stop.
  // Returns why the client ended the call (OK if it did not); *status is the call's gRPC status.
  Status RunCall(const pb::OpenAIRequest& request, const CallOptions& call,
                 const AttemptLimits& limits, grpc::ClientContext* context,
                 ChatAssembler* assembler, StreamProgress* progress, grpc::Status* status) {
    grpc::CompletionQueue cq;
    std::unique_ptr<grpc::ClientAsyncReader<pb::OpenAIStreamChunk>> reader =
        stub_->PrepareAsyncChatComplete(context, request, &cq);
    pb::OpenAIStreamChunk chunk;
    reader->StartCall(Tag(kStart));
    progress->start_ms = SteadyMillis();
    progress->last_message_ms = progress->start_ms;
    bool done = false;  // Finish completed
    bool cancel_sent = false;
    Status stopped;  // why the client ended the call (cancel, timeout, bad chunk); OK if it did not
    while (!done) {
      double wait = 50;
      if (stopped.ok()) stopped = CheckStream(call, limits, *progress, SteadyMillis(), &wait);
      if (!stopped.ok() && !cancel_sent) {
        context->TryCancel();
        cancel_sent = true;
      }
      void* tag = nullptr;
      bool ok = false;
      auto next = cq.AsyncNext(
          &tag, &ok,
          std::chrono::system_clock::now() +
              std::chrono::microseconds(static_cast<int64_t>(std::max(1.0, wait) * 1000)));
      if (next == grpc::CompletionQueue::SHUTDOWN) break;
      if (next == grpc::CompletionQueue::TIMEOUT) continue;
      switch (static_cast<Op>(reinterpret_cast<intptr_t>(tag))) {
        case kStart:
          if (ok) {
            reader->Read(&chunk, Tag(kRead));
          } else {
            reader->Finish(status, Tag(kFinish));
          }
          break;
        case kRead:
          if (!ok) {
            reader->Finish(status, Tag(kFinish));
            break;
          }
          if (stopped.ok()) stopped = AddMessage(chunk, assembler, progress);
          reader->Read(&chunk, Tag(kRead));
          break;
        case kFinish:
          done = true;
          break;
      }
    }
    cq.Shutdown();
    void* tag = nullptr;
    bool ok = false;
    while (cq.Next(&tag, &ok)) {
    }
    return stopped;
  }

  // The result of a call that ended with a gRPC error: the total deadline reached, or the server's
  // status; UNAVAILABLE and RESOURCE_EXHAUSTED (but a size limit) are retryable while no message
  // has arrived. The server learns the deadline from the grpc-timeout header and may end the call
  // with DEADLINE_EXCEEDED a little before the client's own timer fires (it counts from when the
  // header arrived, on its clock): within kServerDeadlineSlack of the deadline that is the call's
  // deadline; earlier it is the server's own error, reported as such.
  static AttemptResult FailedCall(const grpc::Status& status,
                                  std::chrono::system_clock::time_point deadline,
                                  const AttemptLimits& limits, int64_t messages) {
    constexpr std::chrono::milliseconds kServerDeadlineSlack{100};
    AttemptResult result;
    if (status.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED &&
        std::chrono::system_clock::now() + kServerDeadlineSlack >= deadline) {
      result.status = DeadlineExceededError(
          limits.where + ": exceeded its total time of " + std::to_string(limits.total_ms) +
          " ms (the server was told the same deadline and stops)");
      return result;
    }
    result.status = FromGrpc(status, limits.where);
    const bool transient = (status.error_code() == grpc::StatusCode::UNAVAILABLE ||
                            status.error_code() == grpc::StatusCode::RESOURCE_EXHAUSTED) &&
                           !Contains(status.error_message(), "larger than max");
    if (transient && messages > 0) {
      result.status =
          UnavailableError(result.status.message() + "; not retried: the answer had started (" +
                           std::to_string(messages) + " messages)");
    }
    result.retryable = transient && messages == 0;
    return result;
  }

  const GrpcTransportOptions options_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<pb::SglangService::Stub> stub_;
  Clock* clock_;
  Backoff backoff_;
};

int ClampInt(int64_t v) { return static_cast<int>(std::min<int64_t>(v, INT_MAX)); }

}  // namespace

StatusOr<std::unique_ptr<Transport>> MakeGrpcTransport(GrpcTransportOptions options) {
  if (options.target.empty())
    return InvalidArgumentError("gRPC target is empty; expected host:port");
  if (options.target.find("://") != std::string::npos) {
    return InvalidArgumentError("gRPC target \"" + options.target +
                                "\" must be host:port, without a scheme");
  }
  if (options.tls_client_cert_pem.empty() != options.tls_client_key_pem.empty()) {
    return InvalidArgumentError(
        "gRPC mutual TLS needs both tls_client_cert_pem and tls_client_key_pem; got only the " +
        std::string(options.tls_client_cert_pem.empty() ? "key" : "certificate"));
  }
  if (!options.use_tls &&
      (!options.tls_root_certs_pem.empty() || !options.tls_client_cert_pem.empty() ||
       !options.tls_server_name.empty())) {
    return InvalidArgumentError(
        "gRPC TLS options are set but use_tls is false; set use_tls = true");
  }
  if (!options.bearer_token.empty() && !options.use_tls && !options.allow_token_without_tls) {
    return InvalidArgumentError("gRPC bearer_token without TLS would travel in plaintext to " +
                                options.target +
                                "; set use_tls, or allow_token_without_tls for a trusted network");
  }
  for (const auto& [key, value] : options.metadata) {
    if (!ValidMetadata(key, value) || key == "authorization") {
      return InvalidArgumentError(
          "gRPC metadata \"" + key +
          "\" is not allowed: keys are lower-case [0-9a-z-_.] (not grpc-*, not "
          "authorization: use bearer_token), values printable ASCII");
    }
  }
  if (options.max_send_message_bytes <= 0 || options.max_receive_message_bytes <= 0) {
    return InvalidArgumentError(
        "gRPC max_send_message_bytes and max_receive_message_bytes must be positive, got " +
        std::to_string(options.max_send_message_bytes) + " and " +
        std::to_string(options.max_receive_message_bytes));
  }
  if (options.timeouts.first_byte.count() <= 0 || options.timeouts.idle.count() <= 0 ||
      options.timeouts.total.count() <= 0 || options.timeouts.connect.count() <= 0) {
    return InvalidArgumentError(
        "gRPC timeouts (connect, first_byte, idle, total) must be positive");
  }

  grpc::ChannelArguments args;
  args.SetMaxSendMessageSize(ClampInt(options.max_send_message_bytes));
  args.SetMaxReceiveMessageSize(ClampInt(options.max_receive_message_bytes));
  args.SetUserAgentPrefix("strata/0.1");
  if (options.keepalive_time.count() > 0) {
    args.SetInt(GRPC_ARG_KEEPALIVE_TIME_MS, ClampInt(options.keepalive_time.count()));
    args.SetInt(GRPC_ARG_KEEPALIVE_TIMEOUT_MS,
                ClampInt(std::max<int64_t>(1, options.keepalive_timeout.count())));
    args.SetInt(GRPC_ARG_KEEPALIVE_PERMIT_WITHOUT_CALLS, 1);
    // Keep pinging through a long prefill, when no data flows for minutes.
    args.SetInt(GRPC_ARG_HTTP2_MAX_PINGS_WITHOUT_DATA, 0);
  }
  // The connect timeout: gRPC gives each connection attempt at least this long.
  args.SetInt(GRPC_ARG_MIN_RECONNECT_BACKOFF_MS, ClampInt(options.timeouts.connect.count()));
  // Reconnect soon after a server restart (the retry policy paces the calls).
  args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 100);
  args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 5000);
  if (!options.tls_server_name.empty()) args.SetSslTargetNameOverride(options.tls_server_name);

  std::shared_ptr<grpc::ChannelCredentials> credentials;
  if (options.use_tls) {
    grpc::SslCredentialsOptions ssl;
    ssl.pem_root_certs = options.tls_root_certs_pem;
    ssl.pem_cert_chain = options.tls_client_cert_pem;
    ssl.pem_private_key = options.tls_client_key_pem;
    credentials = grpc::SslCredentials(ssl);
  } else {
    credentials = grpc::InsecureChannelCredentials();
  }
  std::shared_ptr<grpc::Channel> channel =
      grpc::CreateCustomChannel(options.target, credentials, args);
  if (channel == nullptr)
    return InternalError("gRPC: could not create a channel to " + options.target);
  return std::unique_ptr<Transport>(new GrpcTransport(std::move(options), std::move(channel)));
}

}  // namespace strata
