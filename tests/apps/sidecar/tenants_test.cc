#include "tenants.h"

#include <catch2/catch.hpp>
#include <string>

namespace strata::sidecar {
namespace {

TEST_CASE("tenants: SHA-256 in hex", "[sidecar][tenants]") {
  CHECK(Sha256Hex("abc") == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  CHECK(Sha256Hex("") == "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
}

TEST_CASE("tenants: bearer tokens select their tenant", "[sidecar][tenants]") {
  const std::string token_a = "token-of-team-a-7f3e";
  const std::string token_b = "token-of-team-b-91c2";
  TenantLimits limits;
  limits.max_request_bytes = 1000;
  TenantConfig a{"team-a", {Sha256Hex(token_a)}, limits};
  limits.max_request_bytes = 5000;
  TenantConfig b{"team-b", {Sha256Hex("old-token"), Sha256Hex(token_b)}, limits};
  Authenticator auth({a, b}, TenantLimits{});
  CHECK(auth.enabled());
  CHECK(auth.MaxRequestBytes() == 5000);

  StatusOr<const TenantConfig*> got = auth.Authenticate("Bearer " + token_a);
  REQUIRE(got.ok());
  CHECK((*got)->name == "team-a");
  got = auth.Authenticate("bearer " + token_b);  // the scheme is case-insensitive
  REQUIRE(got.ok());
  CHECK((*got)->name == "team-b");
  got = auth.Authenticate("Bearer old-token");
  REQUIRE(got.ok());
  CHECK((*got)->name == "team-b");
  CHECK(auth.Find("team-b") == *got);
  CHECK(auth.Find("team-c") == nullptr);

  struct Bad {
    std::string authorization;
    std::string message;
  };
  const Bad bad[] = {
      {"", "no credentials"},
      {token_a, "malformed credentials"},
      {"Basic " + token_a, "malformed credentials"},
      {"Bearer ", "malformed credentials"},
      {"Bearer    ", "the bearer token is empty"},
      {"Bearer " + token_a + "x", "unknown bearer token"},
      {"Bearer " + Sha256Hex(token_a), "unknown bearer token"},  // the hash is not the token
  };
  for (const Bad& c : bad) {
    INFO(c.authorization);
    StatusOr<const TenantConfig*> r = auth.Authenticate(c.authorization);
    REQUIRE_FALSE(r.ok());
    CHECK(r.status().code() == StatusCode::kUnauthenticated);
    CHECK_THAT(r.status().message(), Catch::Contains(c.message));
    // Never the presented token, nor a configured hash.
    CHECK(r.status().message().find(token_a) == std::string::npos);
    CHECK(r.status().message().find(Sha256Hex(token_a)) == std::string::npos);
  }
}

TEST_CASE("tenants: without tenants every call is the default tenant", "[sidecar][tenants]") {
  TenantLimits limits;
  limits.max_agents = 3;
  Authenticator auth({}, limits);
  CHECK_FALSE(auth.enabled());
  for (const char* authorization : {"", "Bearer anything", "garbage"}) {
    StatusOr<const TenantConfig*> t = auth.Authenticate(authorization);
    REQUIRE(t.ok());
    CHECK((*t)->name == "default");
    CHECK((*t)->limits.max_agents == 3);
  }
}

TEST_CASE("tenants: only metrics tokens read /metrics once tenants are configured",
          "[sidecar][tenants]") {
  TenantConfig a{"team-a", {Sha256Hex("token-a")}, TenantLimits{}};
  TenantConfig b{"team-b", {Sha256Hex("token-b")}, TenantLimits{}};
  struct Case {
    std::string authorization;
    StatusCode code;
  };
  {
    // Tenants and no metrics token: closed to every token.
    Authenticator auth({a, b}, TenantLimits{});
    for (const Case& c : {Case{"", StatusCode::kUnauthenticated},
                          Case{"Bearer token-a", StatusCode::kPermissionDenied},
                          Case{"Bearer nobody", StatusCode::kUnauthenticated}}) {
      INFO(c.authorization);
      CHECK(auth.AuthorizeMetrics(c.authorization).code() == c.code);
    }
    Status denied = auth.AuthorizeMetrics("Bearer token-a");
    CHECK_THAT(denied.message(), Catch::Contains("tenant \"team-a\" may not read /metrics"));
    CHECK_THAT(denied.message(), Catch::Contains("metrics_token_sha256"));
    CHECK(denied.message().find("token-a") == std::string::npos);
    CHECK(denied.message().find(Sha256Hex("token-a")) == std::string::npos);
  }
  {
    // A scrape token, and team-b's token allowed by listing its hash.
    Authenticator auth({a, b}, TenantLimits{}, {Sha256Hex("scrape"), Sha256Hex("token-b")});
    for (const Case& c :
         {Case{"Bearer scrape", StatusCode::kOk}, Case{"Bearer token-b", StatusCode::kOk},
          Case{"Bearer token-a", StatusCode::kPermissionDenied},
          Case{"Bearer scrape2", StatusCode::kUnauthenticated},
          Case{"Basic scrape", StatusCode::kUnauthenticated}}) {
      INFO(c.authorization);
      CHECK(auth.AuthorizeMetrics(c.authorization).code() == c.code);
    }
    // The scrape token is not a tenant: it reaches no agent.
    CHECK(auth.Authenticate("Bearer scrape").status().code() == StatusCode::kUnauthenticated);
  }
  {
    // No tenants: open, unless a metrics token is configured.
    CHECK(Authenticator({}, TenantLimits{}).AuthorizeMetrics("").ok());
    Authenticator auth({}, TenantLimits{}, {Sha256Hex("scrape")});
    CHECK(auth.AuthorizeMetrics("").code() == StatusCode::kUnauthenticated);
    CHECK(auth.AuthorizeMetrics("Bearer scrape").ok());
    CHECK(auth.Authenticate("").ok());  // the other routes stay open
  }
}

}  // namespace
}  // namespace strata::sidecar
