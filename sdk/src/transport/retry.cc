#include "transport/retry.h"

#include <algorithm>
#include <cmath>
#include <thread>

#include <nlohmann/json.hpp>

namespace strata {
namespace transport_internal {

Backoff::Backoff(const RetryPolicy& policy, Clock* clock) : policy_(policy) {
  uint64_t seed = policy.seed;
  if (seed == 0) seed = clock->Random64();
  rng_.seed(seed);
}

std::string RetryRequestId(const std::string& id, int attempt) {
  if (attempt <= 1 || id.empty()) return id;
  return id + "-retry" + std::to_string(attempt - 1);
}

std::optional<std::string> BodyForAttempt(std::string_view body, int attempt) {
  if (attempt <= 1) return std::nullopt;
  // Cheap test first: most bodies of a retry are large and carry no id field.
  if (body.find("\"rid\"") == std::string_view::npos && body.find("\"request_id\"") == std::string_view::npos) {
    return std::nullopt;
  }
  // ordered_json keeps the field order; the values (and so the prompt the server renders) are
  // unchanged, only their JSON spelling may be normalized.
  nlohmann::ordered_json j = nlohmann::ordered_json::parse(body.begin(), body.end(), nullptr, false);
  if (j.is_discarded() || !j.is_object()) return std::nullopt;
  bool changed = false;
  for (const char* key : {"rid", "request_id"}) {
    auto it = j.find(key);
    if (it != j.end() && it->is_string()) {
      *it = RetryRequestId(it->get<std::string>(), attempt);
      changed = true;
    }
  }
  if (!changed) return std::nullopt;
  return j.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace);
}

int64_t Backoff::DelayMicros(int retry, double retry_after_seconds) {
  if (retry_after_seconds >= 0) {
    double cap = static_cast<double>(policy_.max_retry_after.count()) * 1000.0;
    return static_cast<int64_t>(std::min(retry_after_seconds * 1e6, cap));
  }
  double base = static_cast<double>(policy_.initial_backoff.count()) * 1000.0;
  double cap = static_cast<double>(policy_.max_backoff.count()) * 1000.0;
  double d = std::min(cap, base * std::pow(2.0, std::max(0, retry - 1)));
  double u;
  if (policy_.uniform01) {
    u = policy_.uniform01();
  } else {
    internal::MutexLock lock(mu_);
    u = std::uniform_real_distribution<double>(0.0, 1.0)(rng_);
  }
  u = std::clamp(u, 0.0, 1.0);
  return static_cast<int64_t>(d / 2 + u * d / 2);
}

}  // namespace transport_internal
}  // namespace strata
