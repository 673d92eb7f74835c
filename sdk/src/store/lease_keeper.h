// What a store knows about the write leases it holds (private to strata::store): the epochs it
// took, the fence check every write makes, and the background renewal.
#ifndef STRATA_SRC_STORE_LEASE_KEEPER_H_
#define STRATA_SRC_STORE_LEASE_KEEPER_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "core/thread_annotations.h"
#include "strata/clock.h"
#include "strata/status.h"
#include "strata/store.h"

namespace strata::store_internal {

// The lease owner name used when StoreOptions::lease_owner is empty: host:pid:random.
std::string DefaultLeaseOwner(Clock* clock);

// True when `owner` names a process of this host (DefaultLeaseOwner's form) that no longer runs:
// its leases are dead before they expire (a file store on one host can tell).
bool LeaseOwnerProcessGone(const std::string& owner);

// UNAVAILABLE: `agent_id` is served by `held`'s owner (its lease expires in N ms).
Status LeaseHeldElsewhere(const AgentLease& held, int64_t now_unix_ms);

// The held leases of one store. Thread-safe.
class LeaseKeeper {
 public:
  // Renews one held lease in the database: the renewed lease, ABORTED when it was lost.
  using Renew = std::function<StatusOr<AgentLease>(const AgentLease&)>;

  LeaseKeeper(std::string owner, int64_t ttl_ms, bool background, Clock* clock);
  ~LeaseKeeper();  // Stop()s

  // Where the renewal thread renews; set once by the store before any AcquireLease.
  void SetRenew(Renew renew) { renew_ = std::move(renew); }
  // Tells whether another owner's lease is dead although not expired (its process is gone); set
  // once by the store before use. Unset: only expiry ends a lease.
  void SetHolderGone(std::function<bool(const AgentLease&)> gone) { gone_ = std::move(gone); }
  // True when `lease`, held by another owner, still keeps this store from writing its agent.
  bool LiveElsewhere(const AgentLease& lease, int64_t now_unix_ms) const {
    return !lease.owner.empty() && lease.owner != owner_ && lease.expires_unix_ms > now_unix_ms &&
           !(gone_ && gone_(lease));
  }
  // Stops the renewal thread (the store calls it before its connection goes away).
  void Stop();

  const std::string& owner() const { return owner_; }
  int64_t ttl_ms() const { return ttl_ms_; }
  // The lease this store holds on `agent_id`, if any.
  std::optional<AgentLease> Held(std::string_view agent_id);
  // Records a lease taken or renewed (and starts the renewal thread when asked for).
  void Hold(const AgentLease& lease);
  void Forget(std::string_view agent_id);
  std::vector<AgentLease> AllHeld();

  // The fence of a write about `agent_id`, given its lease row as read in the write transaction
  // (std::nullopt: no row) and the database's time: OK, or ABORTED naming who serves the agent
  // now (and the lease is forgotten).
  Status Check(std::string_view agent_id, const std::optional<AgentLease>& row,
               int64_t now_unix_ms);

 private:
  void RenewLoop();

  const std::string owner_;
  const int64_t ttl_ms_;
  const bool background_;
  Clock* const clock_;
  Renew renew_;
  std::function<bool(const AgentLease&)> gone_;
  internal::Mutex mu_;
  std::map<std::string, AgentLease, std::less<>> held_ STRATA_GUARDED_BY(mu_);
  std::thread renewer_ STRATA_GUARDED_BY(mu_);  // started once
  std::atomic<bool> stop_{false};
};

}  // namespace strata::store_internal

#endif  // STRATA_SRC_STORE_LEASE_KEEPER_H_
