#include "strata/status.h"

#include <catch2/catch.hpp>
#include <memory>

namespace strata {
namespace {

Status FailIfNegative(int x) {
  if (x < 0) return InvalidArgumentError("x is " + std::to_string(x) + "; pass x >= 0");
  return Status::Ok();
}

StatusOr<int> Half(int x) {
  STRATA_RETURN_IF_ERROR(FailIfNegative(x));
  if (x % 2) return InvalidArgumentError("odd");
  return x / 2;
}

StatusOr<int> Quarter(int x) {
  STRATA_ASSIGN_OR_RETURN(int half, Half(x));
  STRATA_ASSIGN_OR_RETURN(int quarter, Half(half));
  return quarter;
}

TEST_CASE("status codes have canonical names and gRPC numbering", "[core][status]") {
  CHECK(StatusCodeName(StatusCode::kResourceExhausted) == "RESOURCE_EXHAUSTED");
  CHECK(static_cast<int>(StatusCode::kUnauthenticated) == 16);
  CHECK(NotFoundError("doc \"a\"").ToString() == "NOT_FOUND: doc \"a\"");
  CHECK(Status().ok());
  CHECK(Status(StatusCode::kOk, "ignored").message().empty());
}

TEST_CASE("macros propagate the first error", "[core][status]") {
  CHECK(*Quarter(8) == 2);
  Status s = Quarter(-4).status();
  CHECK(s.code() == StatusCode::kInvalidArgument);
  CHECK(s.message() == "x is -4; pass x >= 0");
  CHECK(Quarter(6).status().message() == "odd");
}

TEST_CASE("StatusOr holds move-only values and refuses an OK status", "[core][status]") {
  StatusOr<std::unique_ptr<int>> p = std::make_unique<int>(7);
  REQUIRE(p.ok());
  std::unique_ptr<int> owned = std::move(p).value();
  CHECK(*owned == 7);
  StatusOr<int> bad = Status::Ok();
  CHECK(bad.status().code() == StatusCode::kInternal);
}

}  // namespace
}  // namespace strata
