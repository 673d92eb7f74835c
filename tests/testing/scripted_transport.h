// A Transport that answers from a script instead of a network: tests of code that sends requests
// (the LLM summarizer, Client users) queue Responses or errors and read back the bodies sent.
// Thread-safe.
//
//   strata::testing::ScriptedTransport transport;
//   transport.Reply("The summary.");            // content-only answer, finish_reason "stop"
//   transport.Fail(strata::UnavailableError("down"));
//   ... code under test calls transport.Send(...) ...
//   CHECK(transport.bodies().size() == 2);
#ifndef STRATA_TESTS_TESTING_SCRIPTED_TRANSPORT_H_
#define STRATA_TESTS_TESTING_SCRIPTED_TRANSPORT_H_

#include <deque>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "strata/transport.h"

namespace strata::testing {

class ScriptedTransport : public Transport {
 public:
  // Queues a full Response (attempts defaults to 1).
  void Respond(Response response) {
    std::lock_guard<std::mutex> lock(mu_);
    if (response.attempts == 0) response.attempts = 1;
    script_.push_back({Status(), std::move(response)});
  }
  // Queues a content-only answer with usage (prompt_tokens, completion_tokens).
  void Reply(std::string content, int64_t prompt_tokens = 100, int64_t completion_tokens = 10) {
    Response r;
    r.content = std::move(content);
    r.finish_reason = "stop";
    r.usage.reported = true;
    r.usage.prompt_tokens = prompt_tokens;
    r.usage.completion_tokens = completion_tokens;
    r.usage.total_tokens = prompt_tokens + completion_tokens;
    r.http_status = 200;
    Respond(std::move(r));
  }
  // Queues a failure.
  void Fail(Status status, int http_status = 0) {
    std::lock_guard<std::mutex> lock(mu_);
    Response r;
    r.attempts = 1;
    r.http_status = http_status;
    script_.push_back({std::move(status), std::move(r)});
  }

  std::string Name() const override { return "scripted"; }
  std::string Endpoint() const override { return "scripted://"; }

  // Answers with the next scripted entry; FAILED_PRECONDITION when the script is exhausted.
  Status Send(std::string_view body, const CallOptions& options, Response* response) override {
    std::lock_guard<std::mutex> lock(mu_);
    bodies_.emplace_back(body);
    calls_.push_back(options.request_id);
    if (script_.empty()) {
      *response = Response();
      return FailedPreconditionError("ScriptedTransport: no scripted answer left for request " +
                                     std::to_string(bodies_.size()));
    }
    auto [status, scripted] = std::move(script_.front());
    script_.pop_front();
    *response = std::move(scripted);
    return status;
  }
  Status HealthCheck(std::chrono::milliseconds) override { return Status(); }
  Status Abort(const std::string&) override { return Status(); }

  std::vector<std::string> bodies() const {
    std::lock_guard<std::mutex> lock(mu_);
    return bodies_;
  }
  std::vector<std::string> request_ids() const {
    std::lock_guard<std::mutex> lock(mu_);
    return calls_;
  }

 private:
  mutable std::mutex mu_;
  std::deque<std::pair<Status, Response>> script_;  // guarded by mu_
  std::vector<std::string> bodies_;                 // guarded by mu_
  std::vector<std::string> calls_;                  // guarded by mu_
};

}  // namespace strata::testing

#endif  // STRATA_TESTS_TESTING_SCRIPTED_TRANSPORT_H_
