// Length pools (strata/pools.h): making a PoolSet and sending through it; pools_impl.h says which
// file implements the rest (admission and degradation, routing, configuration, metrics).
#include "strata/http_transport.h"
#include "strata/pools.h"

#include <algorithm>
#include <climits>
#include <cmath>
#include <set>
#include <string>
#include <vector>

#include "pools/pools_impl.h"
#include "strata/grpc_transport.h"

namespace strata {

using pools_internal::Decision;
using pools_internal::Hash;
using pools_internal::JoinNotes;
using pools_internal::Pool;
using pools_internal::Replica;

namespace pools_internal {

std::string JoinNotes(const std::vector<std::string>& notes) {
  std::string out;
  for (const std::string& n : notes) out += (out.empty() ? "" : "; ") + n;
  return out;
}

}  // namespace pools_internal

void PoolSet::Impl::RememberLocked(const std::string& request_id, Decision decision) {
  if (request_id.empty()) return;
  if (decisions_.count(request_id) == 0) decision_order_.push_back(request_id);
  decisions_[request_id] = std::move(decision);
  while (decision_order_.size() > 1024) {
    decisions_.erase(decision_order_.front());
    decision_order_.pop_front();
  }
}

Status PoolSet::Impl::Send(std::string_view body, const CallOptions& options, Response* response,
                           RequestRecord* record) {
  *response = Response();
  // Tells the call's own handler what was decided, on every return path.
  struct Notify {
    const Impl* impl;
    DegradationHandler* handler;
    const Decision* decision;
    const Status* status;
    ~Notify() {
      if (handler == nullptr) return;
      RequestRecord record;
      impl->Fill(&record, *decision, *status);
      handler->OnDecision(record);
    }
  };
  const int64_t tokens =
      options.prompt_tokens > 0 ? options.prompt_tokens : static_cast<int64_t>(body.size() / 4);
  uint64_t key = 0;
  CallOptions forward = ForwardOptions(body, options, &key);

  Decision decision;
  decision.input_tokens = tokens;
  Status outcome;
  Notify notify{this, options.degradation, &decision, &outcome};
  Admission admission;

  internal::UniqueMutexLock lock(mu_);
  DegradationHandler* const handler =
      options.degradation != nullptr ? options.degradation : handler_;
  const int64_t kv_bytes_per_token = kv_bytes_per_token_;
  outcome = AdmitLocked(body, tokens, options, handler, &decision, &admission);
  if (outcome.code() == StatusCode::kCancelled) return outcome;  // not remembered nor recorded
  StatusOr<Reservation> reserved =
      outcome.ok() ? ReserveLocked(admission, key, options.request_id, &decision)
                   : StatusOr<Reservation>(outcome);
  if (!reserved.ok()) {
    RememberLocked(options.request_id, decision);
    lock.Unlock();
    outcome = reserved.status();
    Fill(record, decision, outcome);
    return outcome;
  }
  lock.Unlock();

  forward.prompt_tokens = admission.send_tokens;
  Status status = reserved->transport->Send(
      admission.replaced ? std::string_view(admission.replaced_body) : body, forward, response);

  lock.Lock();
  ReleaseLocked(*reserved, status, options.request_id);
  RememberLocked(options.request_id, decision);
  slot_freed_.notify_all();
  lock.Unlock();
  Fill(record, decision, status);
  if (record != nullptr) {
    record->kv_cache_bytes =
        (admission.send_tokens + response->usage.completion_tokens) * kv_bytes_per_token;
  }
  outcome = status;
  return status;
}

void PoolSet::Impl::Fill(RequestRecord* record, const Decision& d, const Status& status) const {
  if (record == nullptr) return;
  record->pool = d.pool;
  if (!d.endpoint.empty()) record->endpoint = d.endpoint;
  record->queue_wait_ms = d.queue_wait_ms;
  record->degradation = d.degradation;
  record->degradation_notes = JoinNotes(d.notes);
  if (record->input_tokens == 0) record->input_tokens = d.input_tokens;
  record->code = status.code();
  record->error = status.ok() ? "" : status.message();
}

StatusOr<std::unique_ptr<PoolSet>> PoolSet::Create(PoolSetConfig config) {
  if (config.pools.empty()) return InvalidArgumentError("a pool set needs at least one pool");
  if (!(config.load_factor >= 1)) {
    return InvalidArgumentError("load_factor must be >= 1, got " +
                                std::to_string(config.load_factor));
  }
  if (config.virtual_nodes < 1) {
    return InvalidArgumentError("virtual_nodes must be >= 1, got " +
                                std::to_string(config.virtual_nodes));
  }
  if (config.alert_long_max_concurrency < 1) {
    return InvalidArgumentError("alert_long_max_concurrency must be >= 1, got " +
                                std::to_string(config.alert_long_max_concurrency));
  }
  if (config.ladder.empty()) return InvalidArgumentError("the degradation ladder is empty");
  if (config.turn_reserve_tokens < 0) {
    return InvalidArgumentError("turn_reserve_tokens must be >= 0, got " +
                                std::to_string(config.turn_reserve_tokens));
  }
  std::set<std::string> names;
  for (const PoolConfig& p : config.pools) {
    if (p.name.empty()) return InvalidArgumentError("a pool has no name");
    if (!names.insert(p.name).second)
      return InvalidArgumentError("pool name \"" + p.name + "\" is used twice");
    if (p.max_input_tokens < 1) {
      return InvalidArgumentError("pool \"" + p.name + "\": max_input_tokens must be >= 1, got " +
                                  std::to_string(p.max_input_tokens));
    }
    if (p.endpoints.empty() && p.transports.empty()) {
      return InvalidArgumentError("pool \"" + p.name + "\" has no endpoints");
    }
    if (p.max_concurrency < 0 || p.max_queue < 0 || p.queue_timeout.count() < 0 ||
        p.output_reserve_tokens < 0) {
      return InvalidArgumentError("pool \"" + p.name +
                                  "\": max_concurrency, max_queue, queue_timeout and "
                                  "output_reserve_tokens must be >= 0");
    }
  }
  std::stable_sort(config.pools.begin(), config.pools.end(),
                   [](const PoolConfig& a, const PoolConfig& b) {
                     return a.max_input_tokens < b.max_input_tokens;
                   });
  auto impl = std::make_unique<Impl>();
  impl->clock_ = config.clock != nullptr ? config.clock : SystemClock();
  for (const PoolConfig& pc : config.pools) {
    Pool pool;
    pool.config = pc;
    if (!pc.transports.empty()) {
      for (Transport* t : pc.transports) {
        if (t == nullptr)
          return InvalidArgumentError("pool \"" + pc.name + "\" has a null transport");
        Replica r;
        r.transport = t;
        r.endpoint = t->Endpoint();
        pool.replicas.push_back(std::move(r));
      }
    } else {
      for (const std::string& url : pc.endpoints) {
        StatusOr<std::unique_ptr<Transport>> made = Status(StatusCode::kUnknown, "");
        if (config.transport_factory) {
          made = config.transport_factory(url);
        } else if (url.rfind("grpc://", 0) == 0) {
          GrpcTransportOptions g;
          g.target = url.substr(7);
          made = MakeGrpcTransport(g);
        } else {
          HttpTransportOptions h;
          h.base_url = url;
          made = MakeHttpTransport(h);
        }
        if (!made.ok()) {
          return InvalidArgumentError("pool \"" + pc.name + "\" endpoint \"" + url +
                                      "\": " + made.status().message());
        }
        Replica r;
        r.owned = std::move(made).value();
        r.transport = r.owned.get();
        r.endpoint = url;
        pool.replicas.push_back(std::move(r));
      }
    }
    for (size_t i = 0; i < pool.replicas.size(); ++i) {
      for (int v = 0; v < config.virtual_nodes; ++v) {
        pool.ring.emplace_back(
            Hash(pool.replicas[i].endpoint + "#" + std::to_string(i) + "#" + std::to_string(v)),
            static_cast<int>(i));
      }
    }
    std::sort(pool.ring.begin(), pool.ring.end());
    internal::MutexLock lock(impl->mu_);  // nobody else has impl yet; the analysis asks for it
    impl->pools_.push_back(std::move(pool));
  }
  impl->config_ = std::move(config);
  return std::unique_ptr<PoolSet>(new PoolSet(std::move(impl)));
}

PoolSet::PoolSet(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
PoolSet::~PoolSet() = default;

void PoolSet::SetDegradationHandler(DegradationHandler* handler) {
  internal::MutexLock lock(impl_->mu_);
  impl_->handler_ = handler;
}

void PoolSet::SetKvBytesPerToken(int64_t bytes) {
  internal::MutexLock lock(impl_->mu_);
  impl_->kv_bytes_per_token_ = bytes;
}

std::string PoolSet::Name() const { return "pools"; }

std::string PoolSet::Endpoint() const {
  internal::MutexLock lock(impl_->mu_);
  std::string out = "pools:";
  for (size_t i = 0; i < impl_->pools_.size(); ++i) {
    out += (i == 0 ? "" : ",") + impl_->pools_[i].config.name;
  }
  return out;
}

Status PoolSet::Send(std::string_view body, const CallOptions& options, Response* response) {
  return impl_->Send(body, options, response, nullptr);
}

Status PoolSet::Send(std::string_view body, const CallOptions& options, Response* response,
                     RequestRecord* record) {
  return impl_->Send(body, options, response, record);
}

int PoolSet::RunHealthChecks(std::chrono::milliseconds timeout) {
  std::vector<std::pair<std::pair<size_t, size_t>, Transport*>> targets;
  {
    internal::MutexLock lock(impl_->mu_);
    for (size_t p = 0; p < impl_->pools_.size(); ++p) {
      for (size_t r = 0; r < impl_->pools_[p].replicas.size(); ++r) {
        targets.push_back({{p, r}, impl_->pools_[p].replicas[r].transport});
      }
    }
  }
  int healthy = 0;
  for (auto& [where, transport] : targets) {
    Status s = transport->HealthCheck(timeout);
    internal::MutexLock lock(impl_->mu_);
    Replica& r = impl_->pools_[where.first].replicas[where.second];
    if (s.ok()) {
      r.healthy = true;
      r.consecutive_failures = 0;
      ++healthy;
    } else if (r.healthy) {
      r.healthy = false;
      r.unhealthy_since_us = impl_->clock_->NowMicros();
    }
  }
  impl_->slot_freed_.notify_all();
  return healthy;
}

Status PoolSet::HealthCheck(std::chrono::milliseconds timeout) {
  RunHealthChecks(timeout);
  internal::MutexLock lock(impl_->mu_);
  for (const Pool& p : impl_->pools_) {
    bool any = std::any_of(p.replicas.begin(), p.replicas.end(),
                           [](const Replica& r) { return r.healthy; });
    if (!any) return UnavailableError("no healthy replica in pool \"" + p.config.name + "\"");
  }
  return Status();
}

Status PoolSet::Abort(const std::string& request_id) {
  Transport* transport = nullptr;
  {
    internal::MutexLock lock(impl_->mu_);
    auto it = impl_->running_.find(request_id);
    if (it == impl_->running_.end()) {
      return NotFoundError("request \"" + request_id + "\" is not in flight in any pool");
    }
    transport = impl_->pools_[it->second.first].replicas[it->second.second].transport;
  }
  return transport->Abort(request_id);
}

Status PoolSet::Annotate(RequestRecord* record) const {
  internal::MutexLock lock(impl_->mu_);
  auto it = impl_->decisions_.find(record->request_id);
  if (it == impl_->decisions_.end()) {
    return NotFoundError("no pool decision for request \"" + record->request_id + "\"");
  }
  const Decision& d = it->second;
  record->pool = d.pool;
  if (!d.endpoint.empty()) record->endpoint = d.endpoint;
  record->queue_wait_ms = d.queue_wait_ms;
  record->degradation = d.degradation;
  record->degradation_notes = JoinNotes(d.notes);
  return Status();
}

}  // namespace strata
