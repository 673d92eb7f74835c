// The SQLite schema of strata::store, its forward migrations and SQLite error mapping (private).
//
// The schema version is PRAGMA user_version; PRAGMA application_id marks the file as strata's.
// Each migration step i -> i+1 is a list of statements run in the same transaction that bumps
// user_version, so a crash during an upgrade leaves the old version intact.
#ifndef STRATA_SRC_STORE_SCHEMA_H_
#define STRATA_SRC_STORE_SCHEMA_H_

#include <sqlite3.h>

#include <cstdint>
#include <string>
#include <string_view>

#include "strata/status.h"

namespace strata::store_internal {

// 'STRA': PRAGMA application_id of a strata store.
inline constexpr int32_t kApplicationId = 0x53545241;
// The newest schema version this build writes and reads.
inline constexpr int64_t kSchemaVersion = 8;

// A Status for SQLite result code `rc` (extended codes included) while doing `what` on `path`,
// with SQLite's message and the OS error where one applies. `busy_timeout_ms` goes into the
// message of lock timeouts.
Status SqliteStatus(sqlite3* db, int rc, std::string_view what, const std::string& path,
                    int busy_timeout_ms = 0);

// Runs `sql` (several statements allowed).
Status Exec(sqlite3* db, const char* sql, const std::string& path);

// Brings a strata database (application_id set or empty file) from schema `from` to
// kSchemaVersion inside one IMMEDIATE transaction. FAILED_PRECONDITION if `from` is newer.
Status Migrate(sqlite3* db, const std::string& path, int busy_timeout_ms);

// Test hook: creates the schema exactly as version `version` (<= kSchemaVersion) wrote it.
Status CreateSchemaAtVersionForTesting(sqlite3* db, int64_t version);

// Reads one integer PRAGMA (e.g. "user_version").
StatusOr<int64_t> PragmaInt(sqlite3* db, const char* pragma, const std::string& path,
                            int busy_timeout_ms = 0);

}  // namespace strata::store_internal

#endif  // STRATA_SRC_STORE_SCHEMA_H_
