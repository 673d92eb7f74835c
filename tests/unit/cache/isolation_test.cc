#include <catch2/catch.hpp>

#include <set>

#include "strata/isolation.h"

namespace strata {
namespace {

TEST_CASE("cache_salt is HMAC-SHA256 of the length-prefixed isolation key", "[cache]") {
  IsolationKey key;
  key.tenant = "acme";
  key.model_version = "glm-5.3-flash";
  key.template_version = "v3";
  key.scope = "repo:rw";
  // Computed independently with Python's hmac module.
  CHECK(DeriveCacheSalt("secret", key) == "97663467c08b8a2fea9ab6f482f0b96f56dde8a1aa720c02714a370e4118ca1d");
}

TEST_CASE("every field of the isolation key and the secret change the salt", "[cache]") {
  IsolationKey base{"t", "m", "v", "s", ""};
  std::set<std::string> salts;
  salts.insert(DeriveCacheSalt("k", base));
  IsolationKey k = base;
  k.tenant = "t2";
  salts.insert(DeriveCacheSalt("k", k));
  k = base;
  k.model_version = "m2";
  salts.insert(DeriveCacheSalt("k", k));
  k = base;
  k.template_version = "v2";
  salts.insert(DeriveCacheSalt("k", k));
  k = base;
  k.scope = "s2";
  salts.insert(DeriveCacheSalt("k", k));
  k = base;
  k.agent_id = "agent-7";
  salts.insert(DeriveCacheSalt("k", k));
  salts.insert(DeriveCacheSalt("other-secret", base));
  CHECK(salts.size() == 7);
  CHECK(DeriveCacheSalt("k", base) == DeriveCacheSalt("k", base));
  CHECK(DeriveCacheSalt("k", base).size() == 64);
  // Length prefixes: moving a character from one field to the next changes the salt.
  CHECK(DeriveCacheSalt("k", {"ab", "c", "", "", ""}) != DeriveCacheSalt("k", {"a", "bc", "", "", ""}));
}

TEST_CASE("a per-agent salt adds the agent id only when asked", "[cache]") {
  AgentIdentity a{"agent-1", "acme", "scope", "m", "v"};
  AgentIdentity b{"agent-2", "acme", "scope", "m", "v"};
  CHECK(DeriveCacheSalt("k", IsolationKeyOf(a)) == DeriveCacheSalt("k", IsolationKeyOf(b)));
  CHECK(DeriveCacheSalt("k", IsolationKeyOf(a, true)) != DeriveCacheSalt("k", IsolationKeyOf(b, true)));
}

}  // namespace
}  // namespace strata
