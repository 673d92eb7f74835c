// A cached SQLite prepared statement in use, and its current row as the row decoders of
// row_codec.h read one (private to strata::store).
#ifndef STRATA_SRC_STORE_SQLITE_STATEMENT_H_
#define STRATA_SRC_STORE_SQLITE_STATEMENT_H_

#include <sqlite3.h>

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>

namespace strata::store_internal {

// Binds parameters (counting from 1), steps, and reads columns (counting from 0) of a prepared
// statement it does not own; resets it and clears its bindings when it goes out of scope, so the
// statement can be used again.
class Stmt {
 public:
  explicit Stmt(sqlite3_stmt* stmt) : stmt_(stmt) {}
  Stmt(Stmt&& other) noexcept : stmt_(std::exchange(other.stmt_, nullptr)) {}
  Stmt(const Stmt&) = delete;
  Stmt& operator=(const Stmt&) = delete;
  ~Stmt() {
    if (stmt_ != nullptr) {
      sqlite3_reset(stmt_);
      sqlite3_clear_bindings(stmt_);
    }
  }
  Stmt& Int(int i, int64_t v) {
    sqlite3_bind_int64(stmt_, i, v);
    return *this;
  }
  Stmt& Real(int i, double v) {
    sqlite3_bind_double(stmt_, i, v);
    return *this;
  }
  Stmt& Text(int i, std::string_view v) {
    sqlite3_bind_text(stmt_, i, v.data(), static_cast<int>(v.size()), SQLITE_TRANSIENT);
    return *this;
  }
  Stmt& Blob(int i, std::string_view v) {
    sqlite3_bind_blob(stmt_, i, v.data(), static_cast<int>(v.size()), SQLITE_TRANSIENT);
    return *this;
  }
  Stmt& Null(int i) {
    sqlite3_bind_null(stmt_, i);
    return *this;
  }
  // SQLITE_ROW (a row to read), SQLITE_DONE, or an error code.
  int Step() { return sqlite3_step(stmt_); }
  // The statement, for code that steps it itself.
  sqlite3_stmt* get() const { return stmt_; }
  int64_t ColInt(int i) const { return sqlite3_column_int64(stmt_, i); }
  double ColReal(int i) const { return sqlite3_column_double(stmt_, i); }
  bool ColNull(int i) const { return sqlite3_column_type(stmt_, i) == SQLITE_NULL; }
  std::string ColText(int i) const {
    const void* p = sqlite3_column_blob(stmt_, i);
    int n = sqlite3_column_bytes(stmt_, i);
    return p == nullptr ? std::string() : std::string(static_cast<const char*>(p), n);
  }

 private:
  sqlite3_stmt* stmt_;
};

// The current row of a statement, as DecodeSegmentRow and DecodeRequestRow read one.
class StmtRow {
 public:
  explicit StmtRow(const Stmt& stmt) : stmt_(stmt) {}
  bool IsNull(int col) const { return stmt_.ColNull(col); }
  std::string Text(int col) const { return stmt_.ColText(col); }
  std::string Bytes(int col) const { return stmt_.ColText(col); }
  int64_t Int(int col) const { return stmt_.ColInt(col); }
  double Real(int col) const { return stmt_.ColReal(col); }

 private:
  const Stmt& stmt_;
};

}  // namespace strata::store_internal

#endif  // STRATA_SRC_STORE_SQLITE_STATEMENT_H_
