// strata-sim: a prefix-caching Chat Completions endpoint simulator (HTTP/1.1 + SGLang gRPC). This
// file holds SimServer's public API and what ties the jobs together (sim_impl.h says which file
// does what).
#include "sim_server.h"

#include <sys/socket.h>
#include <unistd.h>

#include <cctype>
#include <chrono>
#include <fstream>

#include "sim_impl.h"

namespace strata::sim {
namespace sim_internal {

std::string Lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

}  // namespace sim_internal

using sim_internal::Fault;
using sim_internal::ParseFault;
using sim_internal::Plan;
using sim_internal::ReplyFromMessage;

SimServer::Impl::Impl(SimOptions options)
    : options_(std::move(options)), cache_(options_.cache), kv_(KvOptions(options_), [this](int64_t us) { return Sleep(us); }),
      clock_(options_.clock != nullptr ? options_.clock : SystemClock()) {}

KvSimOptions SimServer::Impl::KvOptions(const SimOptions& o) {
  KvSimOptions kv = o.kv;
  kv.prefill_us_per_token = o.prefill_us_per_token;
  return kv;
}

Status SimServer::Impl::Init() {
  for (auto [name, port] : {std::pair<const char*, int>{"HTTP", options_.http_port}, {"gRPC", options_.grpc_port}}) {
    if (port < -1 || port > 65535) {
      return InvalidArgumentError(std::string(name) + " port " + std::to_string(port) +
                                  " is out of range; use 0..65535 (0: any free port) or -1 (none)");
    }
  }
  if (options_.error_shape != "nested" && options_.error_shape != "flat") {
    return InvalidArgumentError("error shape \"" + options_.error_shape + "\" is not nested or flat");
  }
  if (!options_.default_fault.empty()) {
    StatusOr<Fault> f = ParseFault(options_.default_fault);
    if (!f.ok()) return f.status();
  }
  if (Status opened = OpenRequestLog(); !opened.ok()) return opened;
  if (!options_.trajectory_path.empty()) {
    std::ifstream in(options_.trajectory_path);
    if (!in) return InvalidArgumentError("cannot open trajectory \"" + options_.trajectory_path + "\"");
    std::string line;
    int number = 0;
    while (std::getline(in, line)) {
      ++number;
      if (line.empty()) continue;
      json m = json::parse(line, nullptr, false);
      if (m.is_discarded() || !m.is_object()) {
        return InvalidArgumentError("trajectory line " + std::to_string(number) + " is not a JSON object");
      }
      if (m.value("role", "") == "assistant") script_.push_back(ReplyFromMessage(m));
    }
  }
  return Status();
}

// ---- Timing and stopping ----------------------------------------------------------------

bool SimServer::Impl::Sleep(int64_t us) {
  if (us <= 0) return !stopping_.load();
  std::unique_lock<std::mutex> lock(stop_mu_);
  return !stop_cv_.wait_for(lock, std::chrono::microseconds(us), [this] { return stopping_.load(); });
}

void SimServer::Impl::AcquireSlot() {
  if (options_.max_concurrency <= 0) return;
  std::unique_lock<std::mutex> lock(slot_mu_);
  slot_cv_.wait(lock, [this] { return in_flight_ < options_.max_concurrency || stopping_.load(); });
  ++in_flight_;
}
void SimServer::Impl::ReleaseSlot() {
  if (options_.max_concurrency <= 0) return;
  {
    std::lock_guard<std::mutex> lock(slot_mu_);
    --in_flight_;
  }
  slot_cv_.notify_one();
}

bool SimServer::Impl::Aborted(const std::string& rid) {
  std::lock_guard<std::mutex> lock(mu_);
  return abort_all_ || (!rid.empty() && aborted_.count(rid) > 0);
}
bool SimServer::Impl::Abort(const std::string& rid, bool all) {
  std::lock_guard<std::mutex> lock(mu_);
  if (all) abort_all_ = true;
  else aborted_.insert(rid);
  return true;
}

// ---- gRPC (sim_grpc.cc) -----------------------------------------------------------------

GrpcPlan SimServer::Impl::PlanGrpc(const std::string& body, const std::map<std::string, std::string>& headers,
                  const std::string& peer) {
  Plan plan = MakePlan("grpc", "/sglang.runtime.v1.SglangService/ChatComplete", body, headers);
  plan.log.peer = peer;
  GrpcPlan out;
  out.status = plan.status;
  out.error_message = plan.error_message;
  out.error_type = plan.error_type;
  out.serving_error = plan.serving_error || plan.log.fault.rfind("400", 0) == 0;
  out.stream = plan.stream;
  out.payloads = std::move(plan.payloads);
  out.delay_us = std::move(plan.delay_us);
  out.prefill_us = plan.prefill_us;
  out.prompt_tokens = plan.prompt_tokens;
  out.kv_output_tokens = plan.kv_output_tokens;
  if (plan.fault) {
    out.fault_kind = plan.fault->kind;
    out.fault_after = plan.fault->after;
    out.fault_delay_ms = plan.fault->delay_ms;
  }
  out.rid = plan.rid;
  Log(std::move(plan.log), body);
  return out;
}

Status SimServer::Impl::StartGrpc() {
  StatusOr<std::unique_ptr<SimGrpcServer>> server = SimGrpcServer::Start(this, options_.host, options_.grpc_port);
  if (!server.ok()) return server.status();
  grpc_server_ = std::move(server).value();
  grpc_port_ = grpc_server_->port();
  return Status();
}

void SimServer::Impl::Stop() {
  if (stopping_.exchange(true)) return;
  kv_.Stop();
  stop_cv_.notify_all();
  slot_cv_.notify_all();
  if (listen_fd_ >= 0) {
    shutdown(listen_fd_, SHUT_RDWR);
    close(listen_fd_);
  }
  if (accept_thread_.joinable()) accept_thread_.join();
  {
    std::lock_guard<std::mutex> lock(conn_mu_);
    for (int fd : conn_fds_) shutdown(fd, SHUT_RDWR);
  }
  for (;;) {
    {
      std::lock_guard<std::mutex> lock(conn_mu_);
      ReapLocked();
      if (conn_threads_.empty()) break;
    }
    // Wait for it to finish (it reaps itself into finished_).
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  if (grpc_server_) grpc_server_->Stop();
}

StatusOr<std::unique_ptr<SimServer>> SimServer::Start(SimOptions options) {
  auto impl = std::make_unique<Impl>(std::move(options));
  Status s = impl->Init();
  if (!s.ok()) return s;
  if (impl->options_.http_port >= 0) {
    s = impl->StartHttp();
    if (!s.ok()) return s;
  }
  if (impl->options_.grpc_port >= 0) {
    s = impl->StartGrpc();
    if (!s.ok()) {
      impl->Stop();
      return s;
    }
  }
  return std::unique_ptr<SimServer>(new SimServer(std::move(impl)));
}

SimServer::SimServer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
SimServer::~SimServer() { Stop(); }
int SimServer::http_port() const { return impl_->http_port_; }
int SimServer::grpc_port() const { return impl_->grpc_port_; }
std::string SimServer::base_url() const {
  return "http://" + impl_->options_.host + ":" + std::to_string(impl_->http_port_) + "/v1";
}
std::string SimServer::grpc_target() const {
  return impl_->options_.host + ":" + std::to_string(impl_->grpc_port_);
}

Status SimServer::InjectFault(const std::string& spec, int count) {
  StatusOr<Fault> f = ParseFault(spec);
  if (!f.ok()) return f.status();
  std::lock_guard<std::mutex> lock(impl_->mu_);
  for (int i = 0; i < count; ++i) impl_->injected_.push_back(*f);
  return Status();
}

std::vector<SimRequestLog> SimServer::requests() const {
  std::lock_guard<std::mutex> lock(impl_->mu_);
  return std::vector<SimRequestLog>(impl_->log_.begin(), impl_->log_.end());
}

void SimServer::ClearRequests() {
  std::lock_guard<std::mutex> lock(impl_->mu_);
  impl_->log_.clear();
  impl_->log_bytes_ = 0;
}

PrefixCacheModel& SimServer::cache() { return impl_->cache_; }
uint64_t SimServer::connections_accepted() const { return impl_->connections_.load(); }
uint64_t SimServer::grpc_cancelled_calls() const {
  return impl_->grpc_server_ ? impl_->grpc_server_->cancelled_calls() : 0;
}

void SimServer::Stop() { impl_->Stop(); }

}  // namespace strata::sim
