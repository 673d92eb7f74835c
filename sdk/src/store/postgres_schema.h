// The PostgreSQL schema of strata::store and its forward migrations (private).
//
// The tables are prefixed strata_ so that the store can share a database with an application.
// strata_schema holds one row: the schema version. Each migration step i -> i+1 runs in the same
// transaction that bumps the version, under a transaction-scoped advisory lock (several processes
// opening one database at once migrate it once; nothing outlives the transaction, so it works
// through PgBouncer in transaction mode), so a crash during an upgrade leaves the old version.
#ifndef STRATA_SRC_STORE_POSTGRES_SCHEMA_H_
#define STRATA_SRC_STORE_POSTGRES_SCHEMA_H_

#include <cstdint>

#include "store/postgres_connection.h"
#include "strata/status.h"

namespace strata::store_internal {

// The newest PostgreSQL schema version this build writes and reads.
inline constexpr int64_t kPostgresSchemaVersion = 4;

// Brings the database from its schema version (0: no strata tables) to kPostgresSchemaVersion
// in one transaction. FAILED_PRECONDITION naming both versions if the database is newer;
// NOT_FOUND when it has no strata schema and `create` is false.
Status MigratePostgres(PgConnection& conn, bool create);

// The schema version of the database (0 when it has none), for read-only opens.
StatusOr<int64_t> PostgresSchemaVersion(PgConnection& conn);

// Test hook: creates the schema exactly as version `version` (<= kPostgresSchemaVersion) wrote it.
Status CreatePostgresSchemaAtVersionForTesting(PgConnection& conn, int64_t version);

}  // namespace strata::store_internal

#endif  // STRATA_SRC_STORE_POSTGRES_SCHEMA_H_
