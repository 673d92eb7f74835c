// Tests of the id a fork gets (ForkChildId): the parent's id plus ".fork-<n>", cut on a character
// boundary to fit ForkOptions::max_id_length; ids over the limit refused.
#include "agent/fork_id.h"

#include <catch2/catch.hpp>
#include <string>

namespace strata::agent_internal {
namespace {

ForkOptions Limited(size_t max_id_length, std::string id = "") {
  ForkOptions options;
  options.id = std::move(id);
  options.max_id_length = max_id_length;
  return options;
}

TEST_CASE("a fork id is the parent's id and a number when it fits", "[agent][fork]") {
  CHECK(ForkChildId("parent", ForkOptions{}, 1).value() == "parent.fork-1");
  CHECK(ForkChildId(std::string(500, 'a'), ForkOptions{}, 3).value() ==
        std::string(500, 'a') + ".fork-3");                                 // no limit
  CHECK(ForkChildId("parent", Limited(13), 1).value() == "parent.fork-1");  // exactly the limit
  CHECK(ForkChildId("parent", Limited(0, "kid"), 1).value() == "kid");
}

TEST_CASE("a fork id is cut to the limit on a character boundary", "[agent][fork]") {
  const std::string parent = "t/" + std::string(128, 'p');
  std::string id = ForkChildId(parent, Limited(130), 1).value();
  CHECK(id.size() == 130);
  CHECK(id == "t/" + std::string(121, 'p') + ".fork-1");
  id = ForkChildId(parent, Limited(130), 12).value();  // a longer number: a shorter prefix
  CHECK(id == "t/" + std::string(120, 'p') + ".fork-12");
  // "é" is two bytes: a cut between them moves before the character.
  const std::string accented =
      "ab\xC3\xA9"
      "cd";
  CHECK(ForkChildId(accented, Limited(11), 1).value() == "ab\xC3\xA9.fork-1");
  CHECK(ForkChildId(accented, Limited(10), 1).value() == "ab.fork-1");
}

TEST_CASE("a fork id over the limit, or a limit without room, is refused", "[agent][fork]") {
  StatusOr<std::string> id = ForkChildId("parent", Limited(4, "child-id"), 1);
  CHECK(id.status().code() == StatusCode::kInvalidArgument);
  CHECK_THAT(id.status().message(),
             Catch::Contains("\"child-id\" has 8 bytes") && Catch::Contains("(4)"));
  id = ForkChildId("parent", Limited(7), 1);
  CHECK(id.status().code() == StatusCode::kInvalidArgument);
  CHECK_THAT(id.status().message(),
             Catch::Contains("max_id_length 7") && Catch::Contains("ForkOptions::id"));
  id = ForkChildId("\xC3\xA9x", Limited(8), 1);  // only half a character would fit
  CHECK(id.status().code() == StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace strata::agent_internal
