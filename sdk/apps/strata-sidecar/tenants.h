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
#include <string>
#include <string_view>
#include <vector>

#include "sidecar_config.h"
#include "strata/status.h"

namespace strata::sidecar {

// SHA-256 of `data` as 64 lowercase hex digits (OpenSSL).
std::string Sha256Hex(std::string_view data);

class Authenticator {
 public:
  // `tenants` empty: the single tenant "default" with `default_limits`, no authentication.
  Authenticator(std::vector<TenantConfig> tenants, TenantLimits default_limits);

  // Whether calls must authenticate (tenants are configured).
  bool enabled() const { return enabled_; }

  // `authorization`: the raw header or metadata value, "Bearer <token>" ("" when absent).
  // UNAUTHENTICATED when absent, malformed or unknown (the message never contains the token).
  StatusOr<const TenantConfig*> Authenticate(std::string_view authorization) const;

  // The tenant named `name`, nullptr when none.
  const TenantConfig* Find(std::string_view name) const;
  const std::vector<TenantConfig>& tenants() const { return tenants_; }
  // The largest max_request_bytes of any tenant (the transport-level message limit).
  int64_t MaxRequestBytes() const;

 private:
  bool enabled_ = false;
  std::vector<TenantConfig> tenants_;
  std::map<std::string, size_t, std::less<>> by_hash_;  // token SHA-256 -> index in tenants_
};

}  // namespace strata::sidecar

#endif  // STRATA_APPS_STRATA_SIDECAR_TENANTS_H_
