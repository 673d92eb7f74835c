// cache_salt derivation: HMAC-SHA256 over the length-prefixed isolation key.
#include "strata/isolation.h"

#include <openssl/evp.h>
#include <openssl/hmac.h>

#include <cstdio>
#include <string>

namespace strata {
namespace {

void AppendField(std::string& out, std::string_view field) {
  out += std::to_string(field.size());
  out += ':';
  out.append(field.data(), field.size());
  out += ';';
}

}  // namespace

IsolationKey IsolationKeyOf(const AgentIdentity& agent, bool per_agent) {
  IsolationKey key;
  key.tenant = agent.tenant;
  key.model_version = agent.model_version;
  key.template_version = agent.template_version;
  key.scope = agent.scope;
  if (per_agent) key.agent_id = agent.id;
  return key;
}

std::string DeriveCacheSalt(std::string_view secret, const IsolationKey& key) {
  std::string message = "strata-cache-salt-v1;";
  AppendField(message, key.tenant);
  AppendField(message, key.model_version);
  AppendField(message, key.template_version);
  AppendField(message, key.scope);
  AppendField(message, key.agent_id);
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int digest_len = 0;
  // An empty secret is a valid (zero-length) HMAC key; OpenSSL wants a non-null pointer.
  static const unsigned char kEmpty[1] = {0};
  const void* key_ptr = secret.empty() ? static_cast<const void*>(kEmpty) : secret.data();
  HMAC(EVP_sha256(), key_ptr, static_cast<int>(secret.size()),
       reinterpret_cast<const unsigned char*>(message.data()), message.size(), digest, &digest_len);
  static const char kHex[] = "0123456789abcdef";
  std::string hex;
  hex.reserve(digest_len * 2);
  for (unsigned int i = 0; i < digest_len; ++i) {
    hex += kHex[digest[i] >> 4];
    hex += kHex[digest[i] & 15];
  }
  return hex;
}

}  // namespace strata
