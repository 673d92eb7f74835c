#include "strata/status.h"

#include <catch2/catch.hpp>
#include <cstring>
#include <memory>
#include <new>
#include <optional>
#include <string>

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

// Counts the copies made of it (moves do not count), to tell a copy from a move.
struct CopyCounter {
  CopyCounter() = default;
  CopyCounter(const CopyCounter& other) : copies(other.copies + 1) {}
  CopyCounter(CopyCounter&&) = default;
  CopyCounter& operator=(const CopyCounter&) = default;
  CopyCounter& operator=(CopyCounter&&) = default;
  int copies = 0;
};

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

TEST_CASE("value_or gives the value, or the default for an error, and never aborts",
          "[core][status]") {
  const StatusOr<std::string> held = std::string("kept");
  const StatusOr<std::string> failed = NotFoundError("no value");
  CHECK(held.value_or("fallback") == "kept");
  CHECK(failed.value_or("fallback") == "fallback");  // a const char* converted to std::string
  // The const& overload copies: the StatusOr still holds its value or its error afterwards.
  CHECK(*held == "kept");
  CHECK(failed.status().message() == "no value");
  CHECK(Half(8).value_or(-1) == 4);
  CHECK(Half(7).value_or(-1) == -1);
}

TEST_CASE("value_or on an rvalue moves the value out, so move-only values work", "[core][status]") {
  StatusOr<std::unique_ptr<int>> held = std::make_unique<int>(7);
  std::unique_ptr<int> owned = std::move(held).value_or(nullptr);
  REQUIRE(owned != nullptr);
  CHECK(*owned == 7);
  CHECK(held.ok());  // the status stays; the value was moved from

  StatusOr<std::unique_ptr<int>> failed = UnavailableError("down");
  std::unique_ptr<int> fallback = std::move(failed).value_or(std::make_unique<int>(9));
  REQUIRE(fallback != nullptr);
  CHECK(*fallback == 9);

  // A copyable value is moved too, not copied.
  StatusOr<CopyCounter> counted = CopyCounter{};
  CopyCounter out = std::move(counted).value_or(CopyCounter{});
  CHECK(out.copies == 0);
  const StatusOr<CopyCounter> kept = CopyCounter{};
  CHECK(kept.value_or(CopyCounter{}).copies == 1);
}

}  // namespace
}  // namespace strata

namespace strata {
namespace {

StatusOr<std::optional<int>> NoValue() { return std::nullopt; }
StatusOr<std::optional<int>> Seven() { return 7; }
StatusOr<std::optional<int>> EmptyOptional() { return std::optional<int>(); }

TEST_CASE("StatusOr of an optional holds an empty optional returned as std::nullopt",
          "[core][status]") {
  // Before: the nullopt emptied StatusOr's own storage, so ok() was true with nothing to read and
  // value() returned whatever bytes lay there. Built over bytes that read as "engaged", the held
  // optional must still be the empty one returned (the read was undefined behaviour: an optimized
  // build may fold it, the Debug builds of the sanitizer tiers read the bytes).
  using Held = StatusOr<std::optional<int>>;
  alignas(Held) unsigned char storage[sizeof(Held)];
  std::memset(storage, 0xff, sizeof storage);
  Held* none = new (storage) Held(NoValue());
  REQUIRE(none->ok());
  CHECK_FALSE(none->value().has_value());
  none->~Held();
  StatusOr<std::optional<int>> empty = EmptyOptional();
  REQUIRE(empty.ok());
  CHECK_FALSE(empty->has_value());
  StatusOr<std::optional<int>> seven = Seven();
  REQUIRE(seven.ok());
  CHECK(seven->value_or(0) == 7);
}

}  // namespace
}  // namespace strata
