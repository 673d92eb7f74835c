#include "tenants.h"

#include <algorithm>

#include "core/text_util.h"

namespace strata::sidecar {

std::string Sha256Hex(std::string_view data) { return internal::Sha256Hex(data); }

Authenticator::Authenticator(std::vector<TenantConfig> tenants, TenantLimits default_limits,
                             std::vector<std::string> metrics_token_sha256)
    : enabled_(!tenants.empty()),
      tenants_(std::move(tenants)),
      metrics_hashes_(metrics_token_sha256.begin(), metrics_token_sha256.end()) {
  if (!enabled_) {
    TenantConfig tenant;
    tenant.name = "default";
    tenant.limits = default_limits;
    tenants_.push_back(std::move(tenant));
    return;
  }
  for (size_t i = 0; i < tenants_.size(); ++i) {
    for (const std::string& hash : tenants_[i].token_sha256) by_hash_.emplace(hash, i);
  }
}

namespace {

// The SHA-256 of the bearer token in an authorization value. The token is only ever compared
// through its hash: a lookup's timing depends on the hash alone.
StatusOr<std::string> BearerHash(std::string_view authorization) {
  if (authorization.empty()) {
    return UnauthenticatedError(
        "no credentials: send the metadata/header \"authorization: Bearer <token>\"");
  }
  constexpr std::string_view kScheme = "bearer ";
  if (authorization.size() <= kScheme.size() ||
      !std::equal(kScheme.begin(), kScheme.end(), authorization.begin(), [](char a, char b) {
        return a == std::tolower(static_cast<unsigned char>(b));
      })) {
    return UnauthenticatedError(
        "malformed credentials: the authorization value must be \"Bearer <token>\"");
  }
  std::string_view token = authorization.substr(kScheme.size());
  while (!token.empty() && token.front() == ' ') token.remove_prefix(1);
  while (!token.empty() && token.back() == ' ') token.remove_suffix(1);
  if (token.empty()) {
    return UnauthenticatedError("malformed credentials: the bearer token is empty");
  }
  return Sha256Hex(token);
}

}  // namespace

StatusOr<const TenantConfig*> Authenticator::Authenticate(std::string_view authorization) const {
  if (!enabled_) return &tenants_.front();
  STRATA_ASSIGN_OR_RETURN(std::string hash, BearerHash(authorization));
  auto it = by_hash_.find(hash);
  if (it == by_hash_.end()) {
    return UnauthenticatedError("unknown bearer token (it matches no configured tenant)");
  }
  return &tenants_[it->second];
}

Status Authenticator::AuthorizeMetrics(std::string_view authorization) const {
  if (!enabled_ && metrics_hashes_.empty()) return Status::Ok();
  STRATA_ASSIGN_OR_RETURN(std::string hash, BearerHash(authorization));
  if (metrics_hashes_.count(hash)) return Status::Ok();
  auto it = by_hash_.find(hash);
  if (it != by_hash_.end()) {
    return PermissionDeniedError(
        "the token of tenant \"" + tenants_[it->second].name +
        "\" may not read /metrics, which holds every tenant's series: use a metrics token, or "
        "list this token's SHA-256 in metrics_token_sha256 to allow it");
  }
  return UnauthenticatedError(
      "unknown bearer token (it matches no metrics_token_sha256 and no tenant)");
}

const TenantConfig* Authenticator::Find(std::string_view name) const {
  for (const TenantConfig& t : tenants_) {
    if (t.name == name) return &t;
  }
  return nullptr;
}

int64_t Authenticator::MaxRequestBytes() const {
  int64_t max = 0;
  for (const TenantConfig& t : tenants_) max = std::max(max, t.limits.max_request_bytes);
  return max;
}

}  // namespace strata::sidecar
