// Tenants of strata-sidecar: bearer tokens (configured as SHA-256 hashes) mapped to tenants.
//
// With tenants configured, every call must carry `authorization: Bearer <token>` (gRPC metadata
// or HTTP header); the token's SHA-256 selects the tenant. With none configured, every call is the
// tenant "default" and nothing is authenticated (main.cc refuses that on a non-loopback listener
// unless --allow-unauthenticated).
//
// Error messages never contain the presented token or any configured hash.
//
// Thread safety: immutable after construction; Authenticate may be called from any thread.
#ifndef STRATA_APPS_STRATA_SIDECAR_TENANTS_H_
#define STRATA_APPS_STRATA_SIDECAR_TENANTS_H_

#include <map>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "sidecar_config.h"
#include "strata/status.h"

namespace strata::sidecar {

// SHA-256 of `data` as 64 lowercase hex digits: how tokens are configured.
std::string Sha256Hex(std::string_view data);

class Authenticator {
 public:
  // `tenants` empty: the single tenant "default" with `default_limits`, no authentication.
  // `metrics_token_sha256`: the tokens that may read /metrics (SidecarConfig's, AuthorizeMetrics).
  Authenticator(std::vector<TenantConfig> tenants, TenantLimits default_limits,
                std::vector<std::string> metrics_token_sha256 = {});

  // Whether calls must authenticate (tenants are configured).
  bool enabled() const { return enabled_; }

  // `authorization`: the raw header or metadata value, "Bearer <token>" ("" when absent).
  // UNAUTHENTICATED when absent, malformed or unknown (the message never contains the token).
  StatusOr<const TenantConfig*> Authenticate(std::string_view authorization) const;

  // Whether `authorization` may read GET /metrics, which holds every tenant's series. OK for a
  // token listed in metrics_token_sha256, and for anyone when neither metrics tokens nor tenants
  // are configured. PERMISSION_DENIED for a tenant's token that is not listed (naming the tenant
  // and the key that would allow it); UNAUTHENTICATED when absent, malformed or unknown.
  Status AuthorizeMetrics(std::string_view authorization) const;

  // The tenant named `name`, nullptr when none.
  const TenantConfig* Find(std::string_view name) const;
  const std::vector<TenantConfig>& tenants() const { return tenants_; }
  // The largest max_request_bytes of any tenant (the transport-level message limit).
  int64_t MaxRequestBytes() const;

 private:
  bool enabled_ = false;
  std::vector<TenantConfig> tenants_;
  std::map<std::string, size_t, std::less<>> by_hash_;  // token SHA-256 -> index in tenants_
  std::set<std::string, std::less<>> metrics_hashes_;   // tokens that may read /metrics
};

}  // namespace strata::sidecar

#endif  // STRATA_APPS_STRATA_SIDECAR_TENANTS_H_
