#include "store/postgres_connection.h"

#include <libpq-fe.h>

#include <cstdlib>
#include <cstring>
#include <regex>
#include <utility>

namespace strata::store_internal {

PgParams& PgParams::Int(int64_t v) {
  values_.push_back(std::to_string(v));
  null_.push_back(false);
  formats_.push_back(0);
  return *this;
}

PgParams& PgParams::Real(double v) {
  char buffer[64];
  std::snprintf(buffer, sizeof(buffer), "%.17g", v);
  values_.emplace_back(buffer);
  null_.push_back(false);
  formats_.push_back(0);
  return *this;
}

PgParams& PgParams::Text(std::string_view v) {
  values_.emplace_back(v);
  null_.push_back(false);
  formats_.push_back(0);
  return *this;
}

PgParams& PgParams::Bytes(std::string_view v) {
  values_.emplace_back(v);
  null_.push_back(false);
  formats_.push_back(1);
  return *this;
}

PgParams& PgParams::Null() {
  values_.emplace_back();
  null_.push_back(true);
  formats_.push_back(0);
  return *this;
}

std::vector<const char*> PgParams::Values() const {
  std::vector<const char*> out;
  out.reserve(values_.size());
  for (size_t i = 0; i < values_.size(); ++i) {
    out.push_back(null_[i] ? nullptr : values_[i].data());
  }
  return out;
}

std::vector<int> PgParams::Lengths() const {
  std::vector<int> out;
  out.reserve(values_.size());
  for (const std::string& v : values_) out.push_back(static_cast<int>(v.size()));
  return out;
}

PgResult::PgResult(PGresult* result) : result_(result) {}
PgResult::PgResult(PgResult&& other) noexcept : result_(std::exchange(other.result_, nullptr)) {}
PgResult::~PgResult() {
  if (result_ != nullptr) PQclear(result_);
}
int PgResult::rows() const { return PQntuples(result_); }
bool PgResult::IsNull(int row, int col) const { return PQgetisnull(result_, row, col) != 0; }
std::string PgResult::Text(int row, int col) const {
  return std::string(PQgetvalue(result_, row, col),
                     static_cast<size_t>(PQgetlength(result_, row, col)));
}
int64_t PgResult::Int(int row, int col) const {
  return std::strtoll(PQgetvalue(result_, row, col), nullptr, 10);
}
double PgResult::Real(int row, int col) const {
  return std::strtod(PQgetvalue(result_, row, col), nullptr);
}

std::string PgResult::Bytes(int row, int col) const {
  const char* text = PQgetvalue(result_, row, col);
  size_t length = static_cast<size_t>(PQgetlength(result_, row, col));
  if (length < 2 || text[0] != '\\' || text[1] != 'x') return std::string(text, length);
  auto nibble = [](char c) -> int {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    return c - 'A' + 10;
  };
  std::string out;
  out.resize((length - 2) / 2);
  for (size_t i = 0; i < out.size(); ++i) {
    out[i] = static_cast<char>((nibble(text[2 + 2 * i]) << 4) | nibble(text[3 + 2 * i]));
  }
  return out;
}

int64_t PgResult::Affected() const {
  const char* n = PQcmdTuples(result_);
  return n == nullptr || *n == '\0' ? 0 : std::strtoll(n, nullptr, 10);
}

namespace {

std::string Trimmed(const char* message) {
  std::string text = message != nullptr ? message : "";
  while (!text.empty() && (text.back() == '\n' || text.back() == ' ')) text.pop_back();
  return text;
}

// The Status of SQLSTATE `state` (the PostgreSQL error codes appendix), with `message`.
Status StatusOfSqlState(const std::string& state, std::string message) {
  const std::string sql_class = state.substr(0, 2);
  if (state == "23505") return AlreadyExistsError(std::move(message));
  if (sql_class == "08" || state == "57P01" || state == "57P02" || state == "57P03" ||
      state == "55P03" || state == "53300") {
    return UnavailableError(std::move(message));
  }
  if (state == "40001" || state == "40P01") return AbortedError(std::move(message));
  if (sql_class == "53" || sql_class == "54") return ResourceExhaustedError(std::move(message));
  if (state == "42501") return PermissionDeniedError(std::move(message));
  if (sql_class == "28") return UnauthenticatedError(std::move(message));
  if (state == "3D000") return NotFoundError(std::move(message));
  if (state == "57014") return DeadlineExceededError(std::move(message));
  if (sql_class == "22") return InvalidArgumentError(std::move(message));
  if (state == "25006") return FailedPreconditionError(std::move(message));
  return InternalError(std::move(message));
}

}  // namespace

StatusOr<std::unique_ptr<PgConnection>> PgConnection::Connect(const std::string& conninfo,
                                                              const std::string& target,
                                                              int connect_timeout_ms) {
  // connect_timeout is in whole seconds (at least 2: libpq's minimum that is not "forever").
  const std::string timeout = std::to_string(std::max(2, (connect_timeout_ms + 999) / 1000));
  const char* keys[] = {"dbname", "connect_timeout", "application_name", nullptr};
  const char* values[] = {conninfo.c_str(), timeout.c_str(), "strata", nullptr};
  PGconn* conn = PQconnectdbParams(keys, values, /*expand_dbname=*/1);
  if (conn == nullptr) return ResourceExhaustedError("out of memory connecting to " + target);
  if (PQstatus(conn) != CONNECTION_OK) {
    std::string message = Trimmed(PQerrorMessage(conn));
    PQfinish(conn);
    Status status = UnavailableError("cannot connect to the PostgreSQL store " + target + ": " +
                                     message + " (is the server running and reachable?)");
    if (message.find("password authentication failed") != std::string::npos ||
        message.find("no password supplied") != std::string::npos) {
      return UnauthenticatedError("the PostgreSQL store " + target + " refused the login: " +
                                  message + " (check the user and password in the URL)");
    }
    if (message.find("does not exist") != std::string::npos) {
      return NotFoundError("the PostgreSQL store " + target + ": " + message +
                           " (create the database first: createdb NAME)");
    }
    return status;
  }
  return std::unique_ptr<PgConnection>(new PgConnection(conn, target));
}

PgConnection::~PgConnection() { PQfinish(conn_); }

bool PgConnection::healthy() const { return PQstatus(conn_) == CONNECTION_OK; }

Status PgConnection::Failure(const PGresult* result, std::string_view what) {
  const char* state = result != nullptr ? PQresultErrorField(result, PG_DIAG_SQLSTATE) : nullptr;
  std::string message = Trimmed(result != nullptr ? PQresultErrorMessage(result) : nullptr);
  if (message.empty()) message = Trimmed(PQerrorMessage(conn_));
  std::string text = std::string(what) + " in the PostgreSQL store " + target_ + ": " + message;
  if (state == nullptr || PQstatus(conn_) != CONNECTION_OK) {
    last_failure_ = PgFailure::kConnection;
    return UnavailableError(text + " (the connection to the server was lost; retry when the "
                                   "database is reachable)");
  }
  std::string code(state);
  if (code == "40001" || code == "40P01") {
    last_failure_ = PgFailure::kRetryable;
  } else if (code.rfind("08", 0) == 0 || code == "57P01" || code == "57P02") {
    last_failure_ = PgFailure::kConnection;
  } else {
    last_failure_ = PgFailure::kStatement;
  }
  return StatusOfSqlState(code, text + " [SQLSTATE " + code + "]");
}

StatusOr<PgResult> PgConnection::Exec(const char* sql, const PgParams& params,
                                      std::string_view what) {
  last_failure_ = PgFailure::kNone;
  std::vector<const char*> values = params.Values();
  std::vector<int> lengths = params.Lengths();
  PGresult* result =
      params.size() == 0
          ? PQexec(conn_, sql)
          : PQexecParams(conn_, sql, params.size(), nullptr, values.data(), lengths.data(),
                         params.Formats().data(), /*resultFormat=*/0);
  ExecStatusType status = result != nullptr ? PQresultStatus(result) : PGRES_FATAL_ERROR;
  if (status == PGRES_COMMAND_OK || status == PGRES_TUPLES_OK) return PgResult(result);
  Status error = Failure(result, what);
  if (result != nullptr) PQclear(result);
  return error;
}

std::string RedactConninfo(const std::string& conninfo) {
  static const std::regex kUrlPassword(R"(^(postgres(ql)?://[^:/@]*):[^@]*@)");
  static const std::regex kKeyPassword(R"((password\s*=\s*)('[^']*'|\S+))");
  std::string out = std::regex_replace(conninfo, kUrlPassword, "$1:***@");
  return std::regex_replace(out, kKeyPassword, "$1***");
}

PgPool::PgPool(std::string conninfo, std::string target, int size, int connect_timeout_ms)
    : conninfo_(std::move(conninfo)),
      target_(std::move(target)),
      size_(std::max(1, size)),
      connect_timeout_ms_(connect_timeout_ms) {}

PgPool::~PgPool() = default;

PgPool::Handle::~Handle() {
  if (pool_ != nullptr && conn_ != nullptr) pool_->Release(std::move(conn_));
}

StatusOr<PgPool::Handle> PgPool::Acquire() {
  {
    internal::MutexLock lock(mu_);
    available_.wait(mu_, [&]() STRATA_REQUIRES(mu_) { return !idle_.empty() || open_ < size_; });
    if (!idle_.empty()) {
      std::unique_ptr<PgConnection> conn = std::move(idle_.back());
      idle_.pop_back();
      return Handle(this, std::move(conn));
    }
    ++open_;  // reserve the slot while connecting outside the lock
  }
  StatusOr<std::unique_ptr<PgConnection>> conn = ConnectFresh();
  if (!conn.ok()) {
    internal::MutexLock lock(mu_);
    --open_;
    available_.notify_one();
    return conn.status();
  }
  return Handle(this, std::move(*conn));
}

StatusOr<std::unique_ptr<PgConnection>> PgPool::ConnectFresh() {
  return PgConnection::Connect(conninfo_, target_, connect_timeout_ms_);
}

void PgPool::Release(std::unique_ptr<PgConnection> conn) {
  internal::MutexLock lock(mu_);
  if (conn->healthy()) {
    idle_.push_back(std::move(conn));
  } else {
    --open_;
  }
  available_.notify_one();
}

void PgPool::DropIdle() {
  internal::MutexLock lock(mu_);
  open_ -= static_cast<int>(idle_.size());
  idle_.clear();
  available_.notify_all();
}

}  // namespace strata::store_internal
