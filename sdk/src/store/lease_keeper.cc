#include "store/lease_keeper.h"

#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>

#include <algorithm>
#include <cstdio>

namespace strata::store_internal {

std::string DefaultLeaseOwner(Clock* clock) {
  char host[256] = {0};
  if (::gethostname(host, sizeof(host) - 1) != 0) host[0] = '\0';
  char suffix[17];
  std::snprintf(suffix, sizeof(suffix), "%08x", static_cast<unsigned>(clock->Random64()));
  return std::string(*host != '\0' ? host : "host") + ":" + std::to_string(::getpid()) + ":" +
         suffix;
}

bool LeaseOwnerProcessGone(const std::string& owner) {
  // host:pid:suffix
  const size_t first = owner.find(':');
  const size_t second = first == std::string::npos ? first : owner.find(':', first + 1);
  if (second == std::string::npos) return false;
  char host[256] = {0};
  if (::gethostname(host, sizeof(host) - 1) != 0 || owner.compare(0, first, host) != 0) {
    return false;
  }
  const std::string pid_text = owner.substr(first + 1, second - first - 1);
  if (pid_text.empty() || pid_text.find_first_not_of("0123456789") != std::string::npos) {
    return false;
  }
  const long pid = std::strtol(pid_text.c_str(), nullptr, 10);
  return pid > 0 && ::kill(static_cast<pid_t>(pid), 0) != 0 && errno == ESRCH;
}

Status LeaseHeldElsewhere(const AgentLease& held, int64_t now_unix_ms) {
  return UnavailableError("agent \"" + held.agent_id + "\" is served by " + held.owner +
                          " since epoch " + std::to_string(held.epoch) + " (its lease expires in " +
                          std::to_string(std::max<int64_t>(0, held.expires_unix_ms - now_unix_ms)) +
                          " ms unless renewed); retry later or send the call to that owner");
}

LeaseKeeper::LeaseKeeper(std::string owner, int64_t ttl_ms, bool background, Clock* clock)
    : owner_(std::move(owner)),
      ttl_ms_(std::max<int64_t>(1, ttl_ms)),
      background_(background),
      clock_(clock) {}

LeaseKeeper::~LeaseKeeper() { Stop(); }

void LeaseKeeper::Stop() {
  stop_ = true;
  std::thread renewer;
  {
    internal::MutexLock lock(mu_);
    renewer = std::move(renewer_);
  }
  if (renewer.joinable()) renewer.join();
}

std::optional<AgentLease> LeaseKeeper::Held(std::string_view agent_id) {
  internal::MutexLock lock(mu_);
  auto it = held_.find(agent_id);
  if (it == held_.end()) return std::nullopt;
  return it->second;
}

void LeaseKeeper::Hold(const AgentLease& lease) {
  internal::MutexLock lock(mu_);
  held_[lease.agent_id] = lease;
  if (background_ && renew_ && !renewer_.joinable() && !stop_) {
    renewer_ = std::thread([this] { RenewLoop(); });
  }
}

void LeaseKeeper::Forget(std::string_view agent_id) {
  internal::MutexLock lock(mu_);
  auto it = held_.find(agent_id);
  if (it != held_.end()) held_.erase(it);
}

std::vector<AgentLease> LeaseKeeper::AllHeld() {
  internal::MutexLock lock(mu_);
  std::vector<AgentLease> out;
  for (const auto& [id, lease] : held_) out.push_back(lease);
  return out;
}

Status LeaseKeeper::Check(std::string_view agent_id, const std::optional<AgentLease>& row,
                          int64_t now_unix_ms) {
  std::optional<AgentLease> held = Held(agent_id);
  if (held) {
    if (row && row->owner == owner_ && row->epoch == held->epoch) return Status::Ok();
    Forget(agent_id);
    if (!row || row->owner.empty()) {
      return AbortedError("agent \"" + std::string(agent_id) +
                          "\" is no longer leased to this store (" + owner_ +
                          ", epoch " + std::to_string(held->epoch) +
                          "): its lease was released; reopen the agent to write it again");
    }
    return AbortedError("agent \"" + std::string(agent_id) + "\" is now served by " + row->owner +
                        " since epoch " + std::to_string(row->epoch) + "; this store (" + owner_ +
                        ", epoch " + std::to_string(held->epoch) +
                        ") lost its lease and wrote nothing: reopen the agent there");
  }
  if (row && LiveElsewhere(*row, now_unix_ms)) {
    return AbortedError("agent \"" + std::string(agent_id) + "\" is served by " + row->owner +
                        " since epoch " + std::to_string(row->epoch) +
                        "; this store holds no lease on it and wrote nothing (AcquireLease "
                        "once that lease is released or expired)");
  }
  return Status::Ok();
}

void LeaseKeeper::RenewLoop() {
  // Renew at a third of the TTL, so that two renewals can fail before the lease lapses.
  const int64_t period_us = std::max<int64_t>(1000, ttl_ms_ * 1000 / 3);
  const int64_t slice_us = std::min<int64_t>(period_us, 20000);
  int64_t next = clock_->NowMicros() + period_us;
  while (!stop_) {
    clock_->SleepForMicros(slice_us);
    if (stop_ || clock_->NowMicros() < next) continue;
    next = clock_->NowMicros() + period_us;
    for (const AgentLease& lease : AllHeld()) {
      if (stop_) break;
      StatusOr<AgentLease> renewed = renew_(lease);
      if (renewed.ok()) {
        internal::MutexLock lock(mu_);
        auto it = held_.find(lease.agent_id);
        if (it != held_.end() && it->second.epoch == renewed->epoch) it->second = *renewed;
      } else if (renewed.status().code() == StatusCode::kAborted) {
        Forget(lease.agent_id);  // lost: the next write of the agent is refused by the fence
      }
      // Any other failure (the database unreachable): keep it and try at the next period.
    }
  }
}

}  // namespace strata::store_internal

namespace strata {

// The defaults of Store implementations that keep no leases.
StatusOr<AgentLease> Store::AcquireLease(std::string_view agent_id) {
  return UnimplementedError("this store (" + path() + ") keeps no leases; cannot lease agent \"" +
                            std::string(agent_id) + "\"");
}
Status Store::ReleaseLease(std::string_view) { return Status::Ok(); }
Status Store::ReleaseAllLeases() { return Status::Ok(); }
StatusOr<std::optional<AgentLease>> Store::GetLease(std::string_view) {
  return std::optional<AgentLease>();
}
const std::string& Store::lease_owner() const {
  static const std::string kNone;
  return kNone;
}

}  // namespace strata
