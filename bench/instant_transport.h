// An upstream that answers every call at once with a short reply (benchmarks that measure what
// strata does around the model call, not the call).
#ifndef STRATA_BENCH_INSTANT_TRANSPORT_H_
#define STRATA_BENCH_INSTANT_TRANSPORT_H_

#include <chrono>
#include <string>
#include <string_view>

#include "strata/transport.h"

namespace strata::bench {

class InstantTransport final : public Transport {
 public:
  std::string Name() const override { return "instant"; }
  std::string Endpoint() const override { return "instant://"; }
  Status Send(std::string_view body, const CallOptions&, Response* response) override {
    *response = Response();
    response->content = "ok";
    response->finish_reason = "stop";
    response->attempts = 1;
    response->http_status = 200;
    response->usage.reported = true;
    response->usage.prompt_tokens = static_cast<int64_t>(body.size() / 4);
    response->usage.completion_tokens = 1;
    return Status::Ok();
  }
  Status HealthCheck(std::chrono::milliseconds) override { return Status::Ok(); }
  Status Abort(const std::string&) override { return Status::Ok(); }
};

}  // namespace strata::bench

#endif  // STRATA_BENCH_INSTANT_TRANSPORT_H_
