// Opening the SQLite file of a store (private to strata::store).
#ifndef STRATA_SRC_STORE_OPEN_DATABASE_H_
#define STRATA_SRC_STORE_OPEN_DATABASE_H_

#include <sqlite3.h>

#include <string>

#include "strata/status.h"
#include "strata/store.h"

namespace strata::store_internal {

// The connection to the store file at `path`, checked and prepared as `options` ask: for writing,
// WAL mode, the synchronous mode, the page limit and the schema migrated to this build's version
// (with StoreOptions::exclusive, the file's lock taken first: store_lock.h); for reading, the
// schema version checked (a file without a schema reads as an empty in-memory store). The errors
// of OpenSqliteStore (strata/store.h); a lock timeout names the processes holding locks on the
// file when the system says.
StatusOr<sqlite3*> OpenDatabase(const std::string& path, const StoreOptions& options);

}  // namespace strata::store_internal

#endif  // STRATA_SRC_STORE_OPEN_DATABASE_H_
