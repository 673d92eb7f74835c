// Length pools in front of an endpoint: requests are admitted by their input tokens into a short or
// a long pool, the long pool runs one request at a time, and an over-long request is compacted by a
// DegradationHandler before it is sent. Prints each request's pool decision and the pool metrics.
//
//   strata-sim --port 8000 &
//   ./example_length_pools http://127.0.0.1:8000/v1
#include <iostream>
#include <nlohmann/json.hpp>
#include <string>

#include "strata/pools.h"

namespace {

// Compacts by keeping the system message and the last message only (a real agent would summarize
// its history; see strata/compaction.h). Token counts are estimated as bytes / 4.
class KeepLastMessage : public strata::DegradationHandler {
 public:
  strata::StatusOr<strata::DegradedRequest> Compact(std::string_view body, int64_t,
                                                    int64_t target_tokens,
                                                    const std::string&) override {
    nlohmann::json request = nlohmann::json::parse(body, nullptr, false);
    if (request.is_discarded() || !request["messages"].is_array() || request["messages"].empty()) {
      return strata::InvalidArgumentError("not a chat completions body");
    }
    nlohmann::json kept = nlohmann::json::array();
    if (request["messages"][0].value("role", "") == "system")
      kept.push_back(request["messages"][0]);
    kept.push_back(request["messages"].back());
    std::string& last = kept.back()["content"].get_ref<std::string&>();
    const size_t max_bytes = static_cast<size_t>(target_tokens) * 4 / 2;
    if (last.size() > max_bytes) last = last.substr(last.size() - max_bytes);  // keep the end
    request["messages"] = kept;
    strata::DegradedRequest out;
    out.body = request.dump();
    out.input_tokens = static_cast<int64_t>(out.body.size() / 4);
    return out;
  }
  strata::StatusOr<strata::DegradedRequest> Fork(std::string_view, int64_t, int64_t,
                                                 const std::string&) override {
    return strata::UnimplementedError("this example does not fork");
  }
};

std::string Body(size_t document_bytes) {
  nlohmann::json body = {
      {"model", "glm-5.3-flash"},
      {"messages",
       {{{"role", "system"}, {"content", "You are terse."}},
        {{"role", "user"}, {"content", std::string(document_bytes, 'x') + " Summarize."}}}},
      {"max_tokens", 16}};
  return body.dump();
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::cerr << "usage: example_length_pools BASE_URL   (e.g. http://127.0.0.1:8000/v1)\n";
    return 2;
  }
  strata::PoolSetConfig config;
  strata::PoolConfig short_pool;
  short_pool.name = "short";
  short_pool.max_input_tokens = 32768;
  short_pool.endpoints = {argv[1]};
  short_pool.max_concurrency = 8;
  strata::PoolConfig long_pool;
  long_pool.name = "long";
  long_pool.max_input_tokens = 131072;
  long_pool.endpoints = {argv[1]};
  long_pool.max_concurrency = 1;
  config.pools = {short_pool, long_pool};
  strata::StatusOr<std::unique_ptr<strata::PoolSet>> pools = strata::PoolSet::Create(config);
  if (!pools.ok()) {
    std::cerr << pools.status() << "\n";
    return 1;
  }
  KeepLastMessage handler;
  (*pools)->SetDegradationHandler(&handler);
  // 1K, 100K and 300K estimated tokens: short, long, and over every pool (compacted into "long").
  for (size_t bytes : {4000u, 400000u, 1200000u}) {
    const std::string body = Body(bytes);
    strata::CallOptions call;
    call.prompt_tokens = static_cast<int64_t>(body.size() / 4);
    strata::Response response;
    strata::RequestRecord record;
    strata::Status status = (*pools)->Send(body, call, &response, &record);
    std::cout << call.prompt_tokens << " tokens -> pool " << record.pool
              << (record.degradation.empty() ? "" : " after " + record.degradation) << ": "
              << (status.ok() ? response.content.substr(0, 40) : status.ToString()) << "\n";
  }
  std::cout << (*pools)->PrometheusText();
  return 0;
}
