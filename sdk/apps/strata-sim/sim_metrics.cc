// strata-sim's request log and metrics (sim_impl.h): what it received and answered, kept in memory
// (SimServer::requests()), and the series of GET /metrics.
#include "sim_impl.h"

namespace strata::sim {

void SimServer::Impl::Log(const SimRequestLog& log) {
  std::lock_guard<std::mutex> lock(mu_);
  log_.push_back(log);
  log_bytes_ += log.body.size();
  while (!log_.empty() && (log_.size() > options_.max_logged_requests || log_bytes_ > options_.max_log_bytes)) {
    log_bytes_ -= log_.front().body.size();
    log_.pop_front();
  }
}

std::string SimServer::Impl::MetricsResponse() {
  std::string body = kv_.MetricsText(static_cast<int64_t>(cache_.size_blocks()));
  return "HTTP/1.1 200 OK\r\nContent-Type: text/plain; version=0.0.4\r\nContent-Length: " +
         std::to_string(body.size()) + "\r\n\r\n" + body;
}

}  // namespace strata::sim
