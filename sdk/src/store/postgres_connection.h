// libpq connections of the PostgreSQL store: parameters, results, error mapping and the pool
// (private to strata::store).
//
// Every statement goes through PQexecParams (the unnamed statement, parsed and run in one round
// trip) or PQexec, and no session state outlives a transaction (settings are SET LOCAL, locks are
// transaction-scoped), so the store works through PgBouncer in transaction pooling mode.
#ifndef STRATA_SRC_STORE_POSTGRES_CONNECTION_H_
#define STRATA_SRC_STORE_POSTGRES_CONNECTION_H_

#include <condition_variable>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "core/thread_annotations.h"
#include "strata/status.h"

typedef struct pg_conn PGconn;
typedef struct pg_result PGresult;

namespace strata::store_internal {

// The parameters of one statement, $1, $2, ... in the order added. Integers and text are sent as
// text; bytes as binary (bytea), so any byte, NUL included, round-trips.
class PgParams {
 public:
  PgParams& Int(int64_t v);
  PgParams& Real(double v);
  PgParams& Text(std::string_view v);
  PgParams& Bytes(std::string_view v);
  PgParams& Null();
  int size() const { return static_cast<int>(values_.size()); }
  std::vector<const char*> Values() const;
  std::vector<int> Lengths() const;
  const std::vector<int>& Formats() const { return formats_; }

 private:
  std::vector<std::string> values_;
  std::vector<bool> null_;
  std::vector<int> formats_;
};

// The rows of a statement's result (text format). Owns the PGresult.
class PgResult {
 public:
  explicit PgResult(PGresult* result);
  PgResult(PgResult&& other) noexcept;
  PgResult(const PgResult&) = delete;
  PgResult& operator=(const PgResult&) = delete;
  ~PgResult();
  int rows() const;
  bool IsNull(int row, int col) const;
  std::string Text(int row, int col) const;
  int64_t Int(int row, int col) const;
  double Real(int row, int col) const;
  // A bytea column (hex text output) decoded to its bytes.
  std::string Bytes(int row, int col) const;
  // Rows an INSERT, UPDATE or DELETE touched.
  int64_t Affected() const;

 private:
  PGresult* result_;
};

// Row `row` of a result, as the row decoders of row_codec.h read one.
class PgRow {
 public:
  PgRow(const PgResult& rows, int row) : rows_(rows), row_(row) {}
  bool IsNull(int col) const { return rows_.IsNull(row_, col); }
  std::string Text(int col) const { return rows_.Text(row_, col); }
  int64_t Int(int col) const { return rows_.Int(row_, col); }
  double Real(int col) const { return rows_.Real(row_, col); }
  std::string Bytes(int col) const { return rows_.Bytes(row_, col); }

 private:
  const PgResult& rows_;
  const int row_;
};

// What kind of failure a Status from a connection is (PgConnection::last_failure).
enum class PgFailure {
  kNone,
  kConnection,     // the connection broke: the statement's outcome is unknown
  kRetryable,      // serialization failure or deadlock: the transaction rolled back, retry it
  kStatement,      // the statement failed; the connection is fine
};

// One libpq connection. Not thread-safe (the pool hands it to one caller at a time).
class PgConnection {
 public:
  // Connects to `conninfo` (a postgresql:// URL or key=value string); `target` names it in
  // messages (the URL without its password).
  static StatusOr<std::unique_ptr<PgConnection>> Connect(const std::string& conninfo,
                                                         const std::string& target,
                                                         int connect_timeout_ms);
  ~PgConnection();

  // Runs one statement with parameters; `what` says what it was for in an error.
  StatusOr<PgResult> Exec(const char* sql, const PgParams& params, std::string_view what);
  StatusOr<PgResult> Exec(const char* sql, std::string_view what) {
    return Exec(sql, PgParams(), what);
  }
  // The kind of the last failure of Exec (kNone after a success).
  PgFailure last_failure() const { return last_failure_; }
  // False once the connection broke.
  bool healthy() const;

 private:
  PgConnection(PGconn* conn, std::string target) : conn_(conn), target_(std::move(target)) {}
  Status Failure(const PGresult* result, std::string_view what);

  PGconn* conn_;
  std::string target_;
  PgFailure last_failure_ = PgFailure::kNone;
};

// `conninfo` with the password of a URL or of a password= pair replaced by "***".
std::string RedactConninfo(const std::string& conninfo);

// A fixed number of connections shared by the store's threads; a broken connection is replaced
// by a new one when it is handed back.
class PgPool {
 public:
  PgPool(std::string conninfo, std::string target, int size, int connect_timeout_ms);
  ~PgPool();

  // A connection in use; goes back to the pool when destroyed.
  class Handle {
   public:
    Handle(PgPool* pool, std::unique_ptr<PgConnection> conn)
        : pool_(pool), conn_(std::move(conn)) {}
    Handle(Handle&& other) noexcept = default;
    ~Handle();
    PgConnection& operator*() const { return *conn_; }
    PgConnection* operator->() const { return conn_.get(); }

   private:
    PgPool* pool_;
    std::unique_ptr<PgConnection> conn_;
  };

  // A connection: an idle one, or a new one while fewer than `size` are open; otherwise waits
  // for one to be handed back. UNAVAILABLE when a new connection cannot be made.
  StatusOr<Handle> Acquire();
  // A connection made now, outside the pool's count (checking a write's outcome).
  StatusOr<std::unique_ptr<PgConnection>> ConnectFresh();
  // Closes every idle connection (after the server restarted, they are all broken).
  void DropIdle();
  const std::string& target() const { return target_; }

 private:
  void Release(std::unique_ptr<PgConnection> conn);

  const std::string conninfo_;
  const std::string target_;
  const int size_;
  const int connect_timeout_ms_;
  internal::Mutex mu_;
  std::condition_variable_any available_;  // a connection was handed back or a slot freed
  std::vector<std::unique_ptr<PgConnection>> idle_ STRATA_GUARDED_BY(mu_);
  int open_ STRATA_GUARDED_BY(mu_) = 0;  // idle and in use
};

}  // namespace strata::store_internal

#endif  // STRATA_SRC_STORE_POSTGRES_CONNECTION_H_
