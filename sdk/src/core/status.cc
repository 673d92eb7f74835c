#include "strata/status.h"

#include <cstdio>
#include <ostream>

namespace strata {

std::string StatusCodeName(StatusCode code) {
  switch (code) {
    case StatusCode::kOk: return "OK";
    case StatusCode::kCancelled: return "CANCELLED";
    case StatusCode::kUnknown: return "UNKNOWN";
    case StatusCode::kInvalidArgument: return "INVALID_ARGUMENT";
    case StatusCode::kDeadlineExceeded: return "DEADLINE_EXCEEDED";
    case StatusCode::kNotFound: return "NOT_FOUND";
    case StatusCode::kAlreadyExists: return "ALREADY_EXISTS";
    case StatusCode::kPermissionDenied: return "PERMISSION_DENIED";
    case StatusCode::kResourceExhausted: return "RESOURCE_EXHAUSTED";
    case StatusCode::kFailedPrecondition: return "FAILED_PRECONDITION";
    case StatusCode::kAborted: return "ABORTED";
    case StatusCode::kOutOfRange: return "OUT_OF_RANGE";
    case StatusCode::kUnimplemented: return "UNIMPLEMENTED";
    case StatusCode::kInternal: return "INTERNAL";
    case StatusCode::kUnavailable: return "UNAVAILABLE";
    case StatusCode::kDataLoss: return "DATA_LOSS";
    case StatusCode::kUnauthenticated: return "UNAUTHENTICATED";
  }
  return "UNKNOWN_CODE_" + std::to_string(static_cast<int>(code));
}

Status::Status(StatusCode code, std::string message) : code_(code) {
  if (code_ != StatusCode::kOk) message_ = std::move(message);
}

std::string Status::ToString() const {
  if (ok()) return "OK";
  return StatusCodeName(code_) + ": " + message_;
}

std::ostream& operator<<(std::ostream& os, const Status& status) { return os << status.ToString(); }

#define STRATA_DEFINE_ERROR_(Name, Code) \
  Status Name(std::string message) { return Status(StatusCode::Code, std::move(message)); }
STRATA_DEFINE_ERROR_(CancelledError, kCancelled)
STRATA_DEFINE_ERROR_(UnknownError, kUnknown)
STRATA_DEFINE_ERROR_(InvalidArgumentError, kInvalidArgument)
STRATA_DEFINE_ERROR_(DeadlineExceededError, kDeadlineExceeded)
STRATA_DEFINE_ERROR_(NotFoundError, kNotFound)
STRATA_DEFINE_ERROR_(AlreadyExistsError, kAlreadyExists)
STRATA_DEFINE_ERROR_(PermissionDeniedError, kPermissionDenied)
STRATA_DEFINE_ERROR_(ResourceExhaustedError, kResourceExhausted)
STRATA_DEFINE_ERROR_(FailedPreconditionError, kFailedPrecondition)
STRATA_DEFINE_ERROR_(AbortedError, kAborted)
STRATA_DEFINE_ERROR_(OutOfRangeError, kOutOfRange)
STRATA_DEFINE_ERROR_(UnimplementedError, kUnimplemented)
STRATA_DEFINE_ERROR_(InternalError, kInternal)
STRATA_DEFINE_ERROR_(UnavailableError, kUnavailable)
STRATA_DEFINE_ERROR_(DataLossError, kDataLoss)
STRATA_DEFINE_ERROR_(UnauthenticatedError, kUnauthenticated)
#undef STRATA_DEFINE_ERROR_

namespace internal {
void DieOnBadStatusAccess(const Status& status) {
  std::fprintf(stderr, "strata: value() called on a StatusOr holding %s\n",
               status.ToString().c_str());
  std::abort();
}
}  // namespace internal

}  // namespace strata
