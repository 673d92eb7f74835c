#include "sidecar_config.h"

#include <openssl/bio.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>

#include <fstream>
#include <memory>
#include <set>
#include <sstream>
#include <tuple>

#include "core/json_text.h"
#include "strata/agent.h"

namespace strata::sidecar {
namespace {

using json = nlohmann::json;

std::string Shown(const json& value) {
  std::string text = value.dump();
  if (text.size() > 60) text = text.substr(0, 57) + "...";
  return text;
}

Status TypeError(const std::string& path, const char* expected, const json& value) {
  return InvalidArgumentError(path + ": expected " + expected + ", got " + Shown(value));
}

// Reads the keys of `object` at `path` with typed getters; refuses unknown keys at the end.
class ObjectReader {
 public:
  ObjectReader(const json& object, std::string path) : object_(object), path_(std::move(path)) {}

  std::string Path(const std::string& key) const { return path_.empty() ? key : path_ + "." + key; }
  const json* Get(const std::string& key) {
    seen_.insert(key);
    auto it = object_.find(key);
    return it == object_.end() ? nullptr : &*it;
  }
  Status String(const std::string& key, std::string* out) {
    const json* v = Get(key);
    if (v == nullptr) return Status::Ok();
    if (!v->is_string()) return TypeError(Path(key), "a string", *v);
    *out = v->get<std::string>();
    return Status::Ok();
  }
  Status Bool(const std::string& key, bool* out) {
    const json* v = Get(key);
    if (v == nullptr) return Status::Ok();
    if (!v->is_boolean()) return TypeError(Path(key), "true or false", *v);
    *out = v->get<bool>();
    return Status::Ok();
  }
  // An integer from `min` to `max` (docs/sidecar.md "Configuration" lists each key's range).
  Status Int(const std::string& key, int64_t* out, int64_t min, int64_t max) {
    const json* v = Get(key);
    if (v == nullptr) return Status::Ok();
    // An unsigned value above INT64_MAX reads as negative: is_number_unsigned catches it.
    const bool fits = v->is_number_integer() &&
                      !(v->is_number_unsigned() && v->get<uint64_t>() > uint64_t{INT64_MAX});
    if (!fits || v->get<int64_t>() < min || v->get<int64_t>() > max) {
      std::string expected =
          "an integer from " + std::to_string(min) + " to " + std::to_string(max);
      return TypeError(Path(key), expected.c_str(), *v);
    }
    *out = v->get<int64_t>();
    return Status::Ok();
  }
  Status Finish() const {
    for (auto it = object_.begin(); it != object_.end(); ++it) {
      if (seen_.count(it.key()) == 0) {
        std::string known;
        for (const std::string& k : seen_) known += (known.empty() ? "" : ", ") + k;
        return InvalidArgumentError(Path(it.key()) + ": unknown key (known keys here: " + known +
                                    ")");
      }
    }
    return Status::Ok();
  }

 private:
  const json& object_;
  std::string path_;
  std::set<std::string> seen_;
};

Status ParseLimits(const json& value, const std::string& path, TenantLimits* limits) {
  if (!value.is_object()) return TypeError(path, "an object", value);
  ObjectReader r(value, path);
  STRATA_RETURN_IF_ERROR(r.Int("max_agents", &limits->max_agents, 0, kMaxAgentsLimit));
  STRATA_RETURN_IF_ERROR(r.Int("max_concurrent_completions", &limits->max_concurrent_completions, 0,
                               kMaxCompletionsLimit));
  STRATA_RETURN_IF_ERROR(
      r.Int("max_concurrent_calls", &limits->max_concurrent_calls, 0, kMaxCallsLimit));
  STRATA_RETURN_IF_ERROR(
      r.Int("max_request_bytes", &limits->max_request_bytes, 1, kMaxRequestBytesLimit));
  return r.Finish();
}

Status ParseTls(const json& value, const std::string& path, TlsConfig* tls) {
  if (!value.is_object()) return TypeError(path, "an object", value);
  ObjectReader r(value, path);
  STRATA_RETURN_IF_ERROR(r.String("cert_file", &tls->cert_file));
  STRATA_RETURN_IF_ERROR(r.String("key_file", &tls->key_file));
  STRATA_RETURN_IF_ERROR(r.String("client_ca_file", &tls->client_ca_file));
  return r.Finish();
}

Status ParseProxy(const json& value, const std::string& path, ProxySettings* proxy) {
  if (!value.is_object()) return TypeError(path, "an object", value);
  ObjectReader r(value, path);
  std::string oversized = proxy->reject_oversized ? "reject" : "summarize";
  STRATA_RETURN_IF_ERROR(r.String("oversized", &oversized));
  STRATA_ASSIGN_OR_RETURN(proxy->reject_oversized,
                          ParseOversized(oversized, path + ".oversized"));
  STRATA_RETURN_IF_ERROR(r.Bool("recall_tool", &proxy->recall_tool));
  return r.Finish();
}

bool IsHex64(const std::string& s) {
  if (s.size() != 64) return false;
  for (char c : s) {
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  }
  return true;
}

bool IsValidName(std::string_view name, size_t max) {
  if (name.empty() || name.size() > max) return false;
  for (char c : name) {
    if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
          c == '_' || c == '-')) {
      return false;
    }
  }
  return true;
}

// An array of token SHA-256 hashes (64 lowercase hex digits each).
Status ParseHashes(const json& hashes, const std::string& path, std::vector<std::string>* out) {
  if (!hashes.is_array()) return TypeError(path, "an array", hashes);
  for (size_t i = 0; i < hashes.size(); ++i) {
    const json& h = hashes[i];
    std::string at = path + "[" + std::to_string(i) + "]";
    if (!h.is_string()) return TypeError(at, "a string", h);
    std::string hex = h.get<std::string>();
    if (!IsHex64(hex)) {
      // Never echo the value: it may be a token pasted by mistake.
      return InvalidArgumentError(at + ": expected the token's SHA-256 as 64 lowercase hex " +
                                  "digits (a " + std::to_string(hex.size()) +
                                  "-character value was given; print a hash with "
                                  "`strata-sidecar hash-token`)");
    }
    out->push_back(hex);
  }
  return Status::Ok();
}

Status ParseTenant(const json& value, const std::string& path, const TenantLimits& defaults,
                   TenantConfig* tenant) {
  if (!value.is_object()) return TypeError(path, "an object", value);
  ObjectReader r(value, path);
  STRATA_RETURN_IF_ERROR(r.String("name", &tenant->name));
  if (!IsValidName(tenant->name, 64)) {
    return InvalidArgumentError(r.Path("name") + ": \"" + tenant->name +
                                "\" is not a tenant name (1-64 characters of A-Z a-z 0-9 . _ -)");
  }
  if (const json* hashes = r.Get("token_sha256")) {
    STRATA_RETURN_IF_ERROR(ParseHashes(*hashes, r.Path("token_sha256"), &tenant->token_sha256));
  }
  if (tenant->token_sha256.empty()) {
    return InvalidArgumentError(r.Path("token_sha256") +
                                ": a tenant needs at least one token hash");
  }
  tenant->limits = defaults;
  if (const json* limits = r.Get("limits")) {
    STRATA_RETURN_IF_ERROR(ParseLimits(*limits, r.Path("limits"), &tenant->limits));
  }
  return r.Finish();
}

// The certificate and key parse as PEM and belong together; the client CA parses.
Status CheckTlsFiles(const TlsConfig& tls) {
  auto open = [](const std::string& path) {
    return std::unique_ptr<BIO, decltype(&BIO_free)>(BIO_new_file(path.c_str(), "r"), &BIO_free);
  };
  auto cert_bio = open(tls.cert_file);
  std::unique_ptr<X509, decltype(&X509_free)> cert(
      cert_bio ? PEM_read_bio_X509(cert_bio.get(), nullptr, nullptr, nullptr) : nullptr,
      &X509_free);
  if (!cert) {
    return InvalidArgumentError("tls.cert_file: " + tls.cert_file + " holds no PEM certificate");
  }
  auto key_bio = open(tls.key_file);
  std::unique_ptr<EVP_PKEY, decltype(&EVP_PKEY_free)> key(
      key_bio ? PEM_read_bio_PrivateKey(key_bio.get(), nullptr, nullptr, nullptr) : nullptr,
      &EVP_PKEY_free);
  if (!key) {
    return InvalidArgumentError("tls.key_file: " + tls.key_file +
                                " holds no PEM private key (an encrypted key is not supported)");
  }
  if (X509_check_private_key(cert.get(), key.get()) != 1) {
    return InvalidArgumentError("tls.key_file: the key in " + tls.key_file +
                                " does not match the certificate in " + tls.cert_file);
  }
  if (!tls.client_ca_file.empty()) {
    auto ca_bio = open(tls.client_ca_file);
    std::unique_ptr<X509, decltype(&X509_free)> ca(
        ca_bio ? PEM_read_bio_X509(ca_bio.get(), nullptr, nullptr, nullptr) : nullptr, &X509_free);
    if (!ca) {
      return InvalidArgumentError("tls.client_ca_file: " + tls.client_ca_file +
                                  " holds no PEM certificate");
    }
  }
  return Status::Ok();
}

// The waits and connection limits of the listeners stay in a range their clocks can hold.
Status CheckWaitLimits(const SidecarConfig& c) {
  for (const auto& [key, value, max] :
       {std::tuple<const char*, int64_t, int64_t>{"lease_wait_ms", c.lease_wait_ms, 3600000},
        {"http_head_timeout_ms", c.http_head_timeout_ms, 600000},
        {"http_max_connections_per_client", c.http_max_connections_per_client, 1000000}}) {
    if (value > max) {
      return InvalidArgumentError(std::string(key) + ": " + std::to_string(value) +
                                  " is above its maximum " + std::to_string(max));
    }
  }
  return Status::Ok();
}

}  // namespace

StatusOr<SidecarConfig> ParseSidecarConfig(std::string_view json_text) {
  // Printing or copying a value recurses once per level: a hostile nesting would overflow the
  // stack.
  STRATA_RETURN_IF_ERROR(internal::CheckJsonDepth(json_text, "the configuration"));
  json root = json::parse(json_text.begin(), json_text.end(), nullptr, /*allow_exceptions=*/false);
  if (root.is_discarded()) {
    return InvalidArgumentError("the configuration is not valid JSON");
  }
  if (!root.is_object()) return TypeError("(root)", "an object", root);
  SidecarConfig c;
  ObjectReader r(root, "");
  STRATA_RETURN_IF_ERROR(r.String("grpc_listen", &c.grpc_listen));
  STRATA_RETURN_IF_ERROR(r.String("http_listen", &c.http_listen));
  STRATA_RETURN_IF_ERROR(r.String("store", &c.store));
  if (const json* sync = r.Get("store_sync")) {
    if (!sync->is_string()) return TypeError("store_sync", "\"full\" or \"normal\"", *sync);
    STRATA_ASSIGN_OR_RETURN(c.store_sync, ParseStoreSync(sync->get<std::string>(), "store_sync"));
  }
  STRATA_RETURN_IF_ERROR(r.String("upstream", &c.upstream));
  STRATA_RETURN_IF_ERROR(r.String("backend", &c.backend));
  STRATA_RETURN_IF_ERROR(r.String("upstream_api_key_env", &c.upstream_api_key_env));
  STRATA_RETURN_IF_ERROR(r.String("tokenizer", &c.tokenizer));
  if (const json* tokenizers = r.Get("tokenizers")) {
    if (!tokenizers->is_object()) return TypeError("tokenizers", "an object", *tokenizers);
    for (auto it = tokenizers->begin(); it != tokenizers->end(); ++it) {
      if (!it->is_string()) return TypeError("tokenizers." + it.key(), "a spec string", *it);
      c.tokenizers[it.key()] = it->get<std::string>();
    }
  }
  STRATA_RETURN_IF_ERROR(r.String("template", &c.chat_template));
  STRATA_RETURN_IF_ERROR(r.Int("budget", &c.budget, 0, kMaxAgentWindowTokens));
  STRATA_RETURN_IF_ERROR(r.Bool("allow_unauthenticated", &c.allow_unauthenticated));
  STRATA_RETURN_IF_ERROR(r.Bool("allow_core_dumps", &c.allow_core_dumps));
  STRATA_RETURN_IF_ERROR(r.Int("drain_timeout_ms", &c.drain_timeout_ms, 0, kMaxDrainTimeoutMs));
  STRATA_RETURN_IF_ERROR(r.Int("drain_grace_ms", &c.drain_grace_ms, 0, kMaxDrainTimeoutMs));
  STRATA_RETURN_IF_ERROR(r.Int("max_threads", &c.max_threads, 2, kMaxThreadsLimit));
  STRATA_RETURN_IF_ERROR(r.Int("max_open_agents", &c.max_open_agents, 0, kMaxAgentsLimit));
  STRATA_RETURN_IF_ERROR(r.Int("lease_wait_ms", &c.lease_wait_ms, 0, kMaxWaitMs));
  STRATA_RETURN_IF_ERROR(r.Int("http_head_timeout_ms", &c.http_head_timeout_ms, 1, 600000));
  STRATA_RETURN_IF_ERROR(r.Int("http_max_connections_per_client",
                               &c.http_max_connections_per_client, 0, kMaxConnectionsLimit));
  if (const json* tls = r.Get("tls")) STRATA_RETURN_IF_ERROR(ParseTls(*tls, "tls", &c.tls));
  if (const json* proxy = r.Get("proxy")) {
    STRATA_RETURN_IF_ERROR(ParseProxy(*proxy, "proxy", &c.proxy));
  }
  if (const json* limits = r.Get("default_limits")) {
    STRATA_RETURN_IF_ERROR(ParseLimits(*limits, "default_limits", &c.default_limits));
  }
  if (const json* tenants = r.Get("tenants")) {
    if (!tenants->is_array()) return TypeError("tenants", "an array", *tenants);
    for (size_t i = 0; i < tenants->size(); ++i) {
      TenantConfig tenant;
      STRATA_RETURN_IF_ERROR(ParseTenant((*tenants)[i], "tenants[" + std::to_string(i) + "]",
                                         c.default_limits, &tenant));
      c.tenants.push_back(std::move(tenant));
    }
  }
  if (const json* hashes = r.Get("metrics_token_sha256")) {
    STRATA_RETURN_IF_ERROR(ParseHashes(*hashes, "metrics_token_sha256", &c.metrics_token_sha256));
  }
  if (const json* metrics = r.Get("metrics")) {
    if (!metrics->is_object()) return TypeError("metrics", "an object", *metrics);
    c.metrics = *metrics;
  }
  if (const json* pools = r.Get("pools")) {
    if (!pools->is_object()) return TypeError("pools", "an object", *pools);
    if (!pools->empty()) STRATA_RETURN_IF_ERROR(ParseSidecarPools(*pools).status());
    c.pools = *pools;
  }
  STRATA_RETURN_IF_ERROR(r.Finish());
  return c;
}

StatusOr<bool> ParseOversized(std::string_view text, std::string_view what) {
  if (text == "summarize") return false;
  if (text == "reject") return true;
  return InvalidArgumentError(std::string(what) + ": \"" + std::string(text) +
                              "\" is not \"summarize\" or \"reject\"");
}

StatusOr<PoolSetConfig> ParseSidecarPools(const json& pools) {
  StatusOr<PoolSetConfig> parsed = ParsePoolSetConfig(pools.dump());
  if (!parsed.ok()) {
    return Status(parsed.status().code(), "pools: " + parsed.status().message());
  }
  return parsed;
}

StatusOr<SidecarConfig> LoadSidecarConfig(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return NotFoundError("cannot read the configuration file " + path);
  std::stringstream text;
  text << in.rdbuf();
  StatusOr<SidecarConfig> config = ParseSidecarConfig(text.str());
  if (!config.ok()) {
    return Status(config.status().code(), path + ": " + config.status().message());
  }
  return config;
}

StatusOr<StoreSync> ParseStoreSync(std::string_view text, std::string_view what) {
  if (text == "full") return StoreSync::kFull;
  if (text == "normal") return StoreSync::kNormal;
  return InvalidArgumentError(std::string(what) + ": \"" + std::string(text) +
                              "\" is not a durability mode (expected \"full\": an fsync per "
                              "commit, or \"normal\": survives crashes of the sidecar, not of "
                              "the machine)");
}

const char* StoreSyncName(StoreSync sync) { return sync == StoreSync::kNormal ? "normal" : "full"; }

StatusOr<HostPort> ParseHostPort(std::string_view text, std::string_view what) {
  auto bad = [&](const std::string& why) {
    return InvalidArgumentError(std::string(what) + ": \"" + std::string(text) + "\" " + why +
                                " (expected HOST:PORT, e.g. 127.0.0.1:50051, port 0 for any "
                                "free port)");
  };
  size_t colon = text.rfind(':');
  if (colon == std::string_view::npos || colon == 0) return bad("has no host and port");
  HostPort hp;
  hp.host = std::string(text.substr(0, colon));
  if (hp.host.front() == '[') {
    if (hp.host.back() != ']') return bad("has an unclosed '['");
  } else if (hp.host.find(':') != std::string::npos) {
    return bad("has an IPv6 host without brackets");
  }
  std::string_view port = text.substr(colon + 1);
  if (port.empty() || port.size() > 5) return bad("has no valid port");
  int value = 0;
  for (char c : port) {
    if (c < '0' || c > '9') return bad("has a port that is not a number");
    value = value * 10 + (c - '0');
  }
  if (value > 65535) return bad("has a port above 65535");
  hp.port = value;
  return hp;
}

bool IsLoopbackHost(std::string_view host) {
  return host == "localhost" || host == "[::1]" || host == "::1" || host.rfind("127.", 0) == 0;
}

Status ValidateSidecarConfig(const SidecarConfig& c) {
  STRATA_RETURN_IF_ERROR(ParseHostPort(c.grpc_listen, "grpc_listen").status());
  if (!c.http_listen.empty()) {
    STRATA_RETURN_IF_ERROR(ParseHostPort(c.http_listen, "http_listen").status());
  }
  if (c.store.empty()) return InvalidArgumentError("store: the store file must be named");
  std::set<std::string> names;
  std::set<std::string> hashes;
  for (size_t i = 0; i < c.tenants.size(); ++i) {
    const TenantConfig& t = c.tenants[i];
    std::string at = "tenants[" + std::to_string(i) + "]";
    if (!names.insert(t.name).second) {
      return InvalidArgumentError(at + ".name: tenant \"" + t.name + "\" is configured twice");
    }
    for (const std::string& h : t.token_sha256) {
      if (!hashes.insert(h).second) {
        return InvalidArgumentError(at +
                                    ".token_sha256: a token hash is configured for two "
                                    "tenants (or twice); each token names one tenant");
      }
    }
  }
  if (c.tls.enabled() != !c.tls.key_file.empty()) {
    return InvalidArgumentError("tls: cert_file and key_file go together (one is missing)");
  }
  if (!c.tls.enabled() && !c.tls.client_ca_file.empty()) {
    return InvalidArgumentError("tls.client_ca_file needs tls.cert_file and tls.key_file");
  }
  for (const auto& [key, file] :
       {std::pair<const char*, const std::string*>{"tls.cert_file", &c.tls.cert_file},
        {"tls.key_file", &c.tls.key_file},
        {"tls.client_ca_file", &c.tls.client_ca_file}}) {
    if (file->empty()) continue;
    std::ifstream in(*file);
    if (!in) return NotFoundError(std::string(key) + ": cannot read " + *file);
  }
  if (c.tls.enabled()) STRATA_RETURN_IF_ERROR(CheckTlsFiles(c.tls));
  // Flags bypass the file's ranges: the same ones, checked again.
  if (c.drain_timeout_ms < 0 || c.drain_timeout_ms > kMaxDrainTimeoutMs) {
    return InvalidArgumentError(
        "drain_timeout_ms (--drain-timeout-ms): " + std::to_string(c.drain_timeout_ms) +
        " is out of range: use 0 to " + std::to_string(kMaxDrainTimeoutMs) + " (one hour)");
  }
  if (c.drain_grace_ms < 0 || c.drain_grace_ms > kMaxDrainTimeoutMs) {
    return InvalidArgumentError(
        "drain_grace_ms (--drain-grace-ms): " + std::to_string(c.drain_grace_ms) +
        " is out of range: use 0 to " + std::to_string(kMaxDrainTimeoutMs) + " (one hour)");
  }
  if (c.budget < 0 || c.budget > kMaxAgentWindowTokens) {
    return InvalidArgumentError("budget (--budget): " + std::to_string(c.budget) +
                                " is out of range: use 0 to " +
                                std::to_string(kMaxAgentWindowTokens) + " tokens");
  }
  return CheckWaitLimits(c);
}

}  // namespace strata::sidecar
