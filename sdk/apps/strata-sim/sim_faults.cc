// strata-sim's faults (sim_impl.h): the specs (sim_server.h's file comment), which fault a request
// meets, and the answers of the status faults.
#include <cstdlib>
#include <set>
#include <sstream>

#include "sim_impl.h"

namespace strata::sim {
namespace sim_internal {

StatusOr<Fault> ParseFault(const std::string& spec) {
  Fault f;
  f.spec = spec;
  std::stringstream in(spec);
  std::string item;
  bool first = true;
  while (std::getline(in, item, ',')) {
    while (!item.empty() && item.front() == ' ') item.erase(0, 1);
    while (!item.empty() && item.back() == ' ') item.pop_back();
    if (first) {
      f.kind = Lower(item);
      first = false;
      continue;
    }
    size_t eq = item.find('=');
    if (eq == std::string::npos) return InvalidArgumentError("fault option \"" + item + "\" is not key=value");
    std::string key = Lower(item.substr(0, eq)), value = item.substr(eq + 1);
    if (key == "shape") f.shape = Lower(value);
    else if (key == "retry_after") f.retry_after = std::atof(value.c_str());
    else if (key == "delay_ms") f.delay_ms = std::atoi(value.c_str());
    else if (key == "after") f.after = std::atoi(value.c_str());
    else if (key == "times") f.times = std::atoi(value.c_str());
    else return InvalidArgumentError("unknown fault option \"" + key + "\" (known: shape, retry_after, delay_ms, after, times)");
  }
  static const std::set<std::string> kKinds = {"429", "500", "503", "400", "slow-first-byte", "stall",
                                               "reset", "malformed-sse", "oversize"};
  if (kKinds.count(f.kind) == 0) {
    return InvalidArgumentError("unknown fault \"" + f.kind +
                                "\" (known: 429, 500, 503, 400, slow-first-byte, stall, reset, malformed-sse, oversize)");
  }
  return f;
}

// Which request an attempt belongs to, for a fault's `times`: its X-Request-Id without strata's
// "-retry<n>" suffix (a retry is another attempt of the same request), else a hash of the body.
std::string AttemptKey(const std::map<std::string, std::string>& headers, const std::string& body) {
  auto rid = headers.find("x-request-id");
  if (rid == headers.end()) return std::to_string(std::hash<std::string>{}(body));
  std::string key = rid->second;
  size_t suffix = key.rfind("-retry");
  if (suffix != std::string::npos && suffix + 6 < key.size() &&
      key.find_first_not_of("0123456789", suffix + 6) == std::string::npos) {
    key.resize(suffix);
  }
  return key;
}

// Faults answered with an HTTP error status instead of a completion.
bool IsStatusFault(const Fault& fault) {
  return fault.kind == "429" || fault.kind == "500" || fault.kind == "503" || fault.kind == "400";
}

}  // namespace sim_internal

using sim_internal::AttemptKey;
using sim_internal::ParseFault;
using sim_internal::Plan;

Status SimServer::Impl::ChooseFault(const std::map<std::string, std::string>& headers, const std::string& body,
                   std::optional<Fault>* fault) {
  auto header = headers.find("x-strata-sim-fault");
  if (header != headers.end() && !header->second.empty()) {
    StatusOr<Fault> f = ParseFault(header->second);
    if (!f.ok()) return f.status();
    if (f->times < 0) {
      *fault = *f;
      return Status();
    }
    const std::string key = AttemptKey(headers, body) + "|" + f->spec;
    std::lock_guard<std::mutex> lock(mu_);
    if (fault_attempts_[key]++ < f->times) {
      *fault = *f;
      return Status();
    }
  } else {
    std::lock_guard<std::mutex> lock(mu_);
    if (!injected_.empty()) {
      *fault = injected_.front();
      injected_.pop_front();
      return Status();
    }
  }
  if (!options_.default_fault.empty()) *fault = *ParseFault(options_.default_fault);
  return Status();
}

// The error a status fault ("429", "500", "503" or "400") answers with.
Plan SimServer::Impl::StatusFaultPlan(Plan plan, const Fault& fault, const std::string& shape) {
  int status = std::atoi(fault.kind.c_str());
  std::string message = status == 429 ? "The server is overloaded (simulated); retry later."
                        : status == 400 ? "Simulated bad request."
                                        : "Simulated server error " + fault.kind + ".";
  plan = ErrorPlan(std::move(plan), status, message, shape,
                   status == 429 ? "TooManyRequests" : status == 400 ? "BadRequestError" : "InternalServerError");
  if (status == 429) plan.retry_after = fault.retry_after;
  return plan;
}

}  // namespace strata::sim
