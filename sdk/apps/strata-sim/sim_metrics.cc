// strata-sim's request log and metrics (sim_impl.h): what it received and answered, kept in memory
// (SimServer::requests()) and appended to the --request-log file, the simulator's own processing
// time per request, and the series of GET /metrics.
#include <cerrno>
#include <cstring>

#include "sim_impl.h"

namespace strata::sim {

using sim_internal::json;

Status SimServer::Impl::OpenRequestLog() {
  if (options_.request_log_path.empty()) return Status();
  std::FILE* file = std::fopen(options_.request_log_path.c_str(), "a");
  if (file == nullptr) {
    return InvalidArgumentError("cannot open the request log \"" + options_.request_log_path +
                                "\" for appending: " + std::strerror(errno));
  }
  request_log_.reset(file);
  return Status();
}

void SimServer::Impl::Log(SimRequestLog log, const std::string& body) {
  if (request_log_ != nullptr) {
    json line = {{"unix_ms", clock_->UnixMillis()},
                 {"protocol", log.protocol},
                 {"path", log.path},
                 {"headers", log.headers},
                 {"body", body},
                 {"body_bytes", log.body_bytes},
                 {"status", log.status},
                 {"fault", log.fault},
                 {"cache_salt", log.cache_salt},
                 {"prompt_tokens", log.prompt_tokens},
                 {"cached_tokens", log.cached_tokens},
                 {"processing_us", log.processing_us}};
    if (!log.peer.empty()) line["peer"] = log.peer;
    // Bodies and headers are what clients sent: bytes that are not UTF-8 cannot be JSON strings.
    const std::string text = line.dump(-1, ' ', false, json::error_handler_t::replace) + "\n";
    std::lock_guard<std::mutex> lock(request_log_mu_);
    std::fwrite(text.data(), 1, text.size(), request_log_.get());
    std::fflush(request_log_.get());
  }
  std::lock_guard<std::mutex> lock(mu_);
  log_bytes_ += log.body.size();
  log_.push_back(std::move(log));
  while (!log_.empty() && (log_.size() > options_.max_logged_requests || log_bytes_ > options_.max_log_bytes)) {
    log_bytes_ -= log_.front().body.size();
    log_.pop_front();
  }
}

void SimServer::Impl::CountProcessing(int64_t us) {
  processed_requests_.fetch_add(1);
  processing_us_total_.fetch_add(us);
}

std::string SimServer::Impl::MetricsResponse() {
  std::string body = kv_.MetricsText(static_cast<int64_t>(cache_.size_blocks()));
  body += "# HELP strata_sim_requests_processed_total Chat completion requests the simulator planned.\n"
          "# TYPE strata_sim_requests_processed_total counter\n"
          "strata_sim_requests_processed_total " +
          std::to_string(processed_requests_.load()) +
          "\n# HELP strata_sim_processing_seconds_total The simulator's own work on those requests "
          "(simulated queue, prefill and decode time excluded).\n"
          "# TYPE strata_sim_processing_seconds_total counter\n"
          "strata_sim_processing_seconds_total " +
          std::to_string(static_cast<double>(processing_us_total_.load()) / 1e6) + "\n";
  return "HTTP/1.1 200 OK\r\nContent-Type: text/plain; version=0.0.4\r\nContent-Length: " +
         std::to_string(body.size()) + "\r\n\r\n" + body;
}

}  // namespace strata::sim
