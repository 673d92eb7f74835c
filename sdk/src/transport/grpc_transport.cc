// gRPC transport to sglang.runtime.v1.SglangService: ChatComplete streams JSON chunks that go
// through the same ChatAssembler as HTTP SSE payloads.
#include <grpcpp/grpcpp.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <thread>

#include "sglang/runtime/v1/sglang.grpc.pb.h"
#include "strata/transport.h"
#include "transport/chat_parser.h"
#include "transport/retry.h"

namespace strata {
namespace {

namespace pb = ::sglang::runtime::v1;
using transport_internal::Backoff;
using transport_internal::ChatAssembler;
using transport_internal::SteadyMillis;

Status FromGrpc(const grpc::Status& status, const std::string& target) {
  return Status(static_cast<StatusCode>(status.error_code()),
                "gRPC " + target + ": " + status.error_message());
}

// gRPC's rules for ASCII metadata: keys [0-9a-z-_.], not starting with "grpc-"; values printable.
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

// Cancels `context` when the token is cancelled or the stream is idle too long. Runs until Stop().
class Watchdog {
 public:
  Watchdog(grpc::ClientContext* context, const CancellationToken* cancel, double first_byte_ms,
           double idle_ms)
      : context_(context), cancel_(cancel), first_byte_ms_(first_byte_ms), idle_ms_(idle_ms) {
    last_ms_ = start_ms_ = SteadyMillis();
    thread_ = std::thread([this] { Run(); });
  }
  ~Watchdog() { Stop(); }
  void Touch() {
    std::lock_guard<std::mutex> lock(mu_);
    last_ms_ = SteadyMillis();
    got_any_ = true;
  }
  void Stop() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    if (thread_.joinable()) thread_.join();
  }
  // Why the watchdog cancelled the call, or OK.
  Status reason() {
    std::lock_guard<std::mutex> lock(mu_);
    return reason_;
  }

 private:
  void Run() {
    std::unique_lock<std::mutex> lock(mu_);
    while (!stop_) {
      cv_.wait_for(lock, std::chrono::milliseconds(20));
      if (stop_) break;
      double now = SteadyMillis();
      if (cancel_ != nullptr && cancel_->cancelled()) {
        reason_ = CancelledError("call cancelled");
      } else if (!got_any_ && now - start_ms_ >= first_byte_ms_) {
        reason_ = DeadlineExceededError("no chunk within the first-byte timeout of " +
                                        std::to_string(static_cast<int64_t>(first_byte_ms_)) + " ms");
      } else if (got_any_ && now - last_ms_ >= idle_ms_) {
        reason_ = DeadlineExceededError("stream stalled: nothing received for " +
                                        std::to_string(static_cast<int64_t>(idle_ms_)) + " ms (idle timeout)");
      }
      if (!reason_.ok()) {
        context_->TryCancel();
        break;
      }
    }
  }

  grpc::ClientContext* context_;
  const CancellationToken* cancel_;
  double first_byte_ms_, idle_ms_;
  double start_ms_;
  std::mutex mu_;
  std::condition_variable cv_;
  double last_ms_;       // guarded by mu_
  bool got_any_ = false;  // guarded by mu_
  bool stop_ = false;     // guarded by mu_
  Status reason_;         // guarded by mu_
  std::thread thread_;
};

class GrpcTransport : public Transport {
 public:
  explicit GrpcTransport(GrpcTransportOptions options)
      : options_(std::move(options)), backoff_(options_.retry) {
    clock_ = options_.clock != nullptr ? options_.clock : SystemClock();
    grpc::ChannelArguments args;
    args.SetMaxReceiveMessageSize(256 << 20);
    args.SetMaxSendMessageSize(256 << 20);
    channel_ = grpc::CreateCustomChannel(options_.target, grpc::InsecureChannelCredentials(), args);
    stub_ = pb::SglangService::NewStub(channel_);
  }

  std::string Name() const override { return "grpc"; }
  std::string Endpoint() const override { return options_.target; }

  Status Send(std::string_view body, const CallOptions& call, Response* response) override {
    *response = Response();
    const int64_t start_us = clock_->NowMicros();
    const double start_ms = SteadyMillis();
    auto budget = call.deadline.count() > 0 ? call.deadline : options_.timeouts.total;
    const int64_t end_us = start_us + std::chrono::duration_cast<std::chrono::microseconds>(budget).count();
    const int max_attempts = options_.retry.retry_enabled ? std::max(1, options_.retry.max_attempts) : 1;
    pb::OpenAIRequest request;
    request.set_json_body(body.data(), body.size());
    for (const auto& [name, value] : call.headers) (*request.mutable_trace_headers())[name] = value;
    for (int attempt = 1;; ++attempt) {
      response->attempts = attempt;
      int64_t remaining_ms = std::max<int64_t>(1, (end_us - clock_->NowMicros()) / 1000);
      bool retryable = false;
      Status s = Attempt(request, call, remaining_ms, response, &retryable);
      response->timings.total_ms = SteadyMillis() - start_ms;
      if (s.ok() || !retryable || attempt >= max_attempts) return s;
      int64_t delay = backoff_.DelayMicros(attempt, -1);
      if (clock_->NowMicros() + delay > end_us) return s;
      if (call.cancel != nullptr && call.cancel->cancelled()) return CancelledError("call cancelled");
      clock_->SleepForMicros(delay);
      response->timings.retry_wait_ms += static_cast<double>(delay) / 1000.0;
    }
  }

  Status HealthCheck(std::chrono::milliseconds timeout) override {
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + timeout);
    pb::HealthCheckRequest request;
    pb::HealthCheckResponse reply;
    grpc::Status status = stub_->HealthCheck(&context, request, &reply);
    if (!status.ok()) return FromGrpc(status, options_.target);
    if (!reply.healthy()) return UnavailableError("gRPC " + options_.target + " reports unhealthy");
    return Status();
  }

  Status Abort(const std::string& request_id) override {
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
    pb::AbortRequest request;
    request.set_rid(request_id);
    pb::AbortResponse reply;
    grpc::Status status = stub_->Abort(&context, request, &reply);
    if (!status.ok()) return FromGrpc(status, options_.target);
    if (!reply.success()) return NotFoundError("no request \"" + request_id + "\" to abort on " + options_.target);
    return Status();
  }

 private:
  Status Attempt(const pb::OpenAIRequest& request, const CallOptions& call, int64_t budget_ms,
                 Response* response, bool* retryable) {
    grpc::ClientContext context;
    const int64_t total_ms = std::min<int64_t>(budget_ms, options_.timeouts.total.count());
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::milliseconds(total_ms));
    if (!call.request_id.empty()) context.AddMetadata("x-request-id", call.request_id);
    for (const auto& [name, value] : call.headers) {
      std::string lower = name;
      for (char& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
      // gRPC aborts the process on an invalid metadata key or value; such headers still travel
      // in OpenAIRequest.trace_headers.
      if (ValidMetadata(lower, value)) context.AddMetadata(lower, value);
    }
    ChatAssembler assembler;
    const double start = SteadyMillis();
    double first_token = -1, last_token = -1;
    bool got_chunk = false, finished_flag = false;
    Status parse_error;
    Watchdog watchdog(&context, call.cancel, static_cast<double>(options_.timeouts.first_byte.count()),
                      static_cast<double>(options_.timeouts.idle.count()));
    std::unique_ptr<grpc::ClientReader<pb::OpenAIStreamChunk>> reader = stub_->ChatComplete(&context, request);
    pb::OpenAIStreamChunk chunk;
    while (reader->Read(&chunk)) {
      watchdog.Touch();
      got_chunk = true;
      double now = SteadyMillis();
      if (!chunk.json_chunk().empty()) {
        Status s = assembler.AddJson(chunk.json_chunk());
        if (!s.ok()) {
          parse_error = s;
          context.TryCancel();
          break;
        }
        if (assembler.last_had_token()) {
          if (first_token < 0) first_token = now;
          last_token = now;
        }
      }
      if (chunk.finished()) finished_flag = true;
    }
    grpc::Status status = reader->Finish();
    watchdog.Stop();
    if (!parse_error.ok()) return parse_error;
    Status why = watchdog.reason();
    if (!why.ok()) return Status(why.code(), "gRPC " + options_.target + ": " + why.message());
    if (!status.ok()) {
      *retryable = !got_chunk && (status.error_code() == grpc::StatusCode::UNAVAILABLE ||
                                  status.error_code() == grpc::StatusCode::RESOURCE_EXHAUSTED);
      if (got_chunk && status.error_code() == grpc::StatusCode::UNAVAILABLE) {
        return UnavailableError("gRPC " + options_.target + ": stream lost after the answer had started (" +
                                status.error_message() + "); not retried");
      }
      return FromGrpc(status, options_.target);
    }
    if (!finished_flag && !assembler.finished()) {
      return DataLossError("gRPC " + options_.target + ": stream ended without finished or a finish_reason");
    }
    assembler.Finish(response);
    if (first_token >= 0) {
      response->timings.ttft_ms = first_token - start;
      response->timings.decode_ms = last_token - first_token;
    }
    return Status();
  }

  GrpcTransportOptions options_;
  Clock* clock_;
  Backoff backoff_;
  std::shared_ptr<grpc::Channel> channel_;  // shared: gRPC's API hands channels out as shared_ptr
  std::unique_ptr<pb::SglangService::Stub> stub_;
};

}  // namespace

StatusOr<std::unique_ptr<Transport>> MakeGrpcTransport(GrpcTransportOptions options) {
  if (options.target.empty()) return InvalidArgumentError("gRPC target is empty; expected host:port");
  return std::unique_ptr<Transport>(new GrpcTransport(std::move(options)));
}

}  // namespace strata
