// Tests of the sidecar's store health: NOT_SERVING (false) once the store's files are removed while
// it is open, logged once, with the store's message.
#include "store_health.h"

#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "registry.h"
#include "testing/temp_dir.h"

namespace strata::sidecar {
namespace {

TEST_CASE("store health turns false and logs once when the store file is removed",
          "[sidecar][health]") {
  testing::TempDir temp("strata-health-");
  REQUIRE(!temp.path().empty());
  const std::string& dir = temp.path();
  RegistryOptions options;
  options.store_path = dir + "/sidecar.db";
  auto registry = AgentRegistry::Open(options);
  REQUIRE(registry.ok());
  std::vector<std::string> logged;
  StoreHealth health(&(*registry)->store(), [&](const std::string& m) { logged.push_back(m); });
  CHECK(health.Check());
  CHECK(logged.empty());

  REQUIRE(::unlink(options.store_path.c_str()) == 0);
  CHECK_FALSE(health.Check());
  CHECK_FALSE(health.Check());
  REQUIRE(logged.size() == 1);
  CHECK_THAT(logged[0], Catch::Contains("NOT_SERVING") &&
                            Catch::Contains(options.store_path + " was removed"));
  registry->reset();
}

}  // namespace
}  // namespace strata::sidecar
