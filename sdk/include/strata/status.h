// strata/status.h — error handling for the whole strata API.
//
// Every fallible strata call returns a `strata::Status` or a `strata::StatusOr<T>`; no exception
// crosses the public API. The codes are the canonical set shared by gRPC and abseil, so they map one
// to one onto gRPC status codes.
//
//   strata::StatusOr<std::string> id = context.AppendUser("hello");
//   if (!id.ok()) { std::cerr << id.status() << "\n"; return; }
//   use(*id);
//
// Where an error has a sensible fallback, value_or() gives the value or the fallback (like
// std::optional's):
//   size_t window = ParseWindow(text).value_or(131072);
//
// Inside functions that themselves return Status or StatusOr:
//   STRATA_RETURN_IF_ERROR(context.SetSystemPrompt(prompt));
//   STRATA_ASSIGN_OR_RETURN(auto request, context.Build());
//
// Thread safety: Status and StatusOr are value types; distinct objects may be used from distinct
// threads, and const methods of one object may be called concurrently.
#ifndef STRATA_STATUS_H_
#define STRATA_STATUS_H_

#include <cstdlib>
#include <iosfwd>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>

namespace strata {

// Canonical codes; the numeric values equal grpc::StatusCode and absl::StatusCode.
enum class StatusCode : int {
  kOk = 0,
  kCancelled = 1,
  kUnknown = 2,
  kInvalidArgument = 3,
  kDeadlineExceeded = 4,
  kNotFound = 5,
  kAlreadyExists = 6,
  kPermissionDenied = 7,
  kResourceExhausted = 8,
  kFailedPrecondition = 9,
  kAborted = 10,
  kOutOfRange = 11,
  kUnimplemented = 12,
  kInternal = 13,
  kUnavailable = 14,
  kDataLoss = 15,
  kUnauthenticated = 16,
};

// "INVALID_ARGUMENT", "NOT_FOUND", ...; "UNKNOWN_CODE_<n>" for values outside the enum.
std::string StatusCodeName(StatusCode code);

// The outcome of a fallible call: OK, or a StatusCode with a message that says what was wrong.
class [[nodiscard]] Status {
 public:
  // An OK status.
  Status() = default;
  // A status with `code` and `message`; a kOk code ignores the message.
  Status(StatusCode code, std::string message);

  // An OK status (the same as Status()).
  static Status Ok() { return Status(); }

  // True when the code is kOk.
  bool ok() const { return code_ == StatusCode::kOk; }
  // The canonical code.
  StatusCode code() const { return code_; }
  // The message (empty for OK).
  const std::string& message() const { return message_; }
  // "OK" or "<CODE_NAME>: <message>".
  std::string ToString() const;

  // Explicitly ignores this status (documents that a failure is acceptable at the call site).
  void IgnoreError() const {}

  friend bool operator==(const Status& a, const Status& b) {
    return a.code_ == b.code_ && a.message_ == b.message_;
  }
  friend bool operator!=(const Status& a, const Status& b) { return !(a == b); }

 private:
  StatusCode code_ = StatusCode::kOk;
  std::string message_;
};

// Writes ToString().
std::ostream& operator<<(std::ostream& os, const Status& status);

// Constructors for each non-OK code.
Status CancelledError(std::string message);
Status UnknownError(std::string message);             // StatusCode::kUnknown
Status InvalidArgumentError(std::string message);     // StatusCode::kInvalidArgument
Status DeadlineExceededError(std::string message);    // StatusCode::kDeadlineExceeded
Status NotFoundError(std::string message);            // StatusCode::kNotFound
Status AlreadyExistsError(std::string message);       // StatusCode::kAlreadyExists
Status PermissionDeniedError(std::string message);    // StatusCode::kPermissionDenied
Status ResourceExhaustedError(std::string message);   // StatusCode::kResourceExhausted
Status FailedPreconditionError(std::string message);  // StatusCode::kFailedPrecondition
Status AbortedError(std::string message);             // StatusCode::kAborted
Status OutOfRangeError(std::string message);          // StatusCode::kOutOfRange
Status UnimplementedError(std::string message);       // StatusCode::kUnimplemented
Status InternalError(std::string message);            // StatusCode::kInternal
Status UnavailableError(std::string message);         // StatusCode::kUnavailable
Status DataLossError(std::string message);            // StatusCode::kDataLoss
Status UnauthenticatedError(std::string message);     // StatusCode::kUnauthenticated

namespace internal {
[[noreturn]] void DieOnBadStatusAccess(const Status& status);
}  // namespace internal

// Holds either a T or a non-OK Status. Accessing the value of a non-OK StatusOr aborts the process
// with the status message (a programming error, like dereferencing an empty std::optional).
template <typename T>
class [[nodiscard]] StatusOr {
 public:
  static_assert(!std::is_same_v<std::decay_t<T>, Status>, "StatusOr<Status> is not allowed");

  // A non-OK status; passing an OK status is a programming error and becomes kInternal.
  StatusOr(Status status) : status_(std::move(status)) {  // NOLINT: implicit by design
    if (status_.ok()) status_ = Status(StatusCode::kInternal, "StatusOr constructed from OK status");
  }
  // The value is constructed in place, so that a T that is itself an optional (std::nullopt
  // returned from a function whose result is StatusOr<std::optional<X>>) holds that empty optional.
  StatusOr(const T& value) : value_(std::in_place, value) {}        // NOLINT: implicit by design
  StatusOr(T&& value) : value_(std::in_place, std::move(value)) {}  // NOLINT: implicit by design
  template <typename U, typename = std::enable_if_t<std::is_constructible_v<T, U&&> &&
                                                    !std::is_same_v<std::decay_t<U>, T> &&
                                                    !std::is_same_v<std::decay_t<U>, Status>>>
  StatusOr(U&& value) : value_(std::in_place, std::forward<U>(value)) {}  // NOLINT: implicit

  // True when a value is held.
  bool ok() const { return status_.ok(); }
  // OK when a value is held, else the error.
  const Status& status() const& { return status_; }
  Status status() && { return std::move(status_); }

  // The value; aborts the process when an error is held (check ok() first).
  const T& value() const& {
    if (!ok()) internal::DieOnBadStatusAccess(status_);
    return *value_;
  }
  // The value, movable in place; aborts when an error is held.
  T& value() & {
    if (!ok()) internal::DieOnBadStatusAccess(status_);
    return *value_;
  }
  // The value, moved out; aborts when an error is held.
  T&& value() && {
    if (!ok()) internal::DieOnBadStatusAccess(status_);
    return std::move(*value_);
  }
  // The value, as value().
  const T& operator*() const& { return value(); }
  T& operator*() & { return value(); }
  T&& operator*() && { return std::move(*this).value(); }
  // A pointer to the value, as &value().
  const T* operator->() const { return &value(); }
  T* operator->() { return &value(); }

  // The value (copied) when one is held, else `default_value` converted to T; never aborts, and
  // leaves this StatusOr as it was. Like std::optional::value_or: T must be copy constructible and
  // U convertible to T.
  template <typename U>
  T value_or(U&& default_value) const& {
    static_assert(std::is_copy_constructible_v<T>,
                  "StatusOr<T>::value_or() const& copies the value: T must be copy constructible "
                  "(call std::move(status_or).value_or(...) to move it out)");
    static_assert(std::is_convertible_v<U&&, T>, "value_or(): the default must convert to T");
    if (ok()) return *value_;
    return static_cast<T>(std::forward<U>(default_value));
  }
  // The value moved out when one is held, else `default_value` converted to T; never aborts. The
  // StatusOr keeps its status, and a moved-from value. Works with move-only T.
  template <typename U>
  T value_or(U&& default_value) && {
    static_assert(std::is_move_constructible_v<T>,
                  "StatusOr<T>::value_or() && moves the value: T must be move constructible");
    static_assert(std::is_convertible_v<U&&, T>, "value_or(): the default must convert to T");
    if (ok()) return std::move(*value_);
    return static_cast<T>(std::forward<U>(default_value));
  }

 private:
  Status status_;
  std::optional<T> value_;
};

}  // namespace strata

#define STRATA_STATUS_CONCAT_INNER_(a, b) a##b
#define STRATA_STATUS_CONCAT_(a, b) STRATA_STATUS_CONCAT_INNER_(a, b)

// Returns the status from the enclosing function when `expr` (a Status) is not OK.
#define STRATA_RETURN_IF_ERROR(expr)                          \
  do {                                                        \
    ::strata::Status strata_status_tmp_ = (expr);             \
    if (!strata_status_tmp_.ok()) return strata_status_tmp_;  \
  } while (0)

// `lhs` = value of `rexpr` (a StatusOr), or returns its status from the enclosing function.
#define STRATA_ASSIGN_OR_RETURN(lhs, rexpr) \
  STRATA_ASSIGN_OR_RETURN_IMPL_(STRATA_STATUS_CONCAT_(strata_statusor_, __LINE__), lhs, rexpr)
#define STRATA_ASSIGN_OR_RETURN_IMPL_(tmp, lhs, rexpr) \
  auto tmp = (rexpr);                                  \
  if (!tmp.ok()) return std::move(tmp).status();       \
  lhs = std::move(tmp).value()

#endif  // STRATA_STATUS_H_
