// The lease rows of a SQLite store (private to strata::store): read, take, renew and release.
// The caller holds the store's connection; take, renew and release run in their own IMMEDIATE
// transaction, so they serialize with every other writer of the file.
#ifndef STRATA_SRC_STORE_SQLITE_LEASE_H_
#define STRATA_SRC_STORE_SQLITE_LEASE_H_

#include <sqlite3.h>

#include <optional>
#include <string>
#include <string_view>

#include "store/lease_keeper.h"
#include "strata/status.h"
#include "strata/store.h"

namespace strata::store_internal {

// The lease row of `agent_id`; std::nullopt when it was never leased.
StatusOr<std::optional<AgentLease>> SqliteReadLease(sqlite3* db, std::string_view agent_id,
                                                    const std::string& path);

// The query SqliteReadLease runs, for a caller that keeps it prepared (the store's fence reads the
// lease in every write of an agent), and the same read through `read`, a statement of
// kReadLeaseSql on `db` that the caller resets.
extern const char kReadLeaseSql[];
StatusOr<std::optional<AgentLease>> ReadLeaseWith(sqlite3_stmt* read, sqlite3* db,
                                                  std::string_view agent_id,
                                                  const std::string& path);

// Takes the lease for `owner` until now + ttl when it is free, released, expired or named after
// `owner` (the epoch grows by one); with `held_epoch`, renews it instead, ABORTED-free: the
// returned lease is std::nullopt when the row no longer names (owner, held_epoch) or another
// owner holds it live (LeaseKeeper::LiveElsewhere). `holder` receives the row then.
StatusOr<std::optional<AgentLease>> SqliteTakeLease(sqlite3* db, std::string_view agent_id,
                                                    const std::string& owner, int64_t ttl_ms,
                                                    int64_t now_ms,
                                                    std::optional<int64_t> held_epoch,
                                                    std::optional<AgentLease>& holder,
                                                    const std::string& path, int busy_timeout_ms,
                                                    const LeaseKeeper& leases);

// Clears the owner of the lease row if it still names (owner, epoch).
Status SqliteReleaseLease(sqlite3* db, std::string_view agent_id, const std::string& owner,
                          int64_t epoch, const std::string& path, int busy_timeout_ms);

}  // namespace strata::store_internal

#endif  // STRATA_SRC_STORE_SQLITE_LEASE_H_
