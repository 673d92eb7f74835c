// strata-sidecar's configuration: one JSON document (--config FILE) for everything, tenants and
// limits included, with command-line flags overriding it (docs/sidecar.md "Configuration").
//
// Parsing is strict: unknown keys and wrong types are refused with INVALID_ARGUMENT naming the key
// path ("tenants[1].limits.max_agents: expected an integer >= 0, got \"ten\""), so a typo never
// silently falls back to a default.
#ifndef STRATA_APPS_STRATA_SIDECAR_SIDECAR_CONFIG_H_
#define STRATA_APPS_STRATA_SIDECAR_SIDECAR_CONFIG_H_

#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "strata/pools.h"
#include "strata/status.h"
#include "strata/store.h"

namespace strata::sidecar {

// The ranges of the configuration's integers (an integer outside is refused naming the key, the
// value and the range): max_agents and max_open_agents 0 to 10,000,000; max_concurrent_completions
// 0 to 100,000; max_request_bytes 1 to 1 GiB; max_threads 2 to 4096; drain_timeout_ms 0 to one hour;
// budget 0 to strata::kMaxAgentWindowTokens.
inline constexpr int64_t kMaxAgentsLimit = 10000000;
inline constexpr int64_t kMaxCompletionsLimit = 100000;
inline constexpr int64_t kMaxRequestBytesLimit = int64_t{1} << 30;
inline constexpr int64_t kMaxThreadsLimit = 4096;
inline constexpr int64_t kMaxDrainTimeoutMs = 3600000;
// max_concurrent_calls 0 to 100,000; lease_wait_ms 0 to one hour; http_head_timeout_ms 1 ms to ten
// minutes; http_max_connections_per_client 0 to 1,000,000.
inline constexpr int64_t kMaxCallsLimit = 100000;
inline constexpr int64_t kMaxWaitMs = 3600000;
inline constexpr int64_t kMaxConnectionsLimit = 1000000;

// Limits of one tenant. 0 means "no limit" for max_agents, max_concurrent_completions and
// max_concurrent_calls.
struct TenantLimits {
  int64_t max_agents = 1000;                // agents stored for the tenant
  int64_t max_concurrent_completions = 16;  // Complete calls (and proxied completions) at once
  // gRPC calls of any kind in progress at once (Complete included): each holds one of the
  // server's max_threads threads, so one tenant cannot take them all.
  int64_t max_concurrent_calls = 32;
  int64_t max_request_bytes = 4 << 20;      // one request message (gRPC) or body (HTTP)
};

struct TenantConfig {
  std::string name;  // 1-64 characters of [A-Za-z0-9._-]; agents are namespaced by it
  // SHA-256 (64 lowercase hex digits) of each bearer token that authenticates as this tenant
  // (`strata-sidecar hash-token` prints it). Tokens themselves are never configured or stored.
  std::vector<std::string> token_sha256;
  TenantLimits limits;
};

// PEM files of a listener's TLS. Empty cert_file: plaintext.
struct TlsConfig {
  std::string cert_file;       // the server's certificate chain (PEM)
  std::string key_file;        // its private key (PEM)
  std::string client_ca_file;  // "" : no client certificates; else required and verified (mTLS)
  bool enabled() const { return !cert_file.empty(); }
};

// The "proxy" object of the configuration.
struct ProxySettings {
  // "oversized": "summarize" (false, the default) compacts a new message above the agent's usable
  // input tokens to fit and says so (X-Strata-Oversized); "reject" (true) answers 413.
  bool reject_oversized = false;
  // "recall_tool": offer the agent's context_recall tool upstream and answer its calls in the
  // sidecar, as the Agent does (the client never sees them). Default false.
  bool recall_tool = false;
};

struct SidecarConfig {
  std::string grpc_listen = "127.0.0.1:50051";  // HOST:PORT; port 0 binds a free port
  std::string http_listen;                      // "" : no HTTP listener (the proxy's)
  std::string store = "strata-sidecar.db";      // the SQLite store of every agent
  // The store's durability ("store_sync": "full" | "normal", --store-sync). full (default): each
  // acknowledged call survives power loss (an fsync per commit). normal: it survives a crash or
  // SIGKILL of the sidecar, but the last calls before a power loss or OS crash may be lost (never
  // a corrupt store); several times faster on disk (docs/sidecar.md "Durability").
  StoreSync store_sync = StoreSync::kFull;
  std::string upstream;                         // the model server's base URL, e.g. .../v1
  std::string backend = "vllm";                 // "openai", "vllm", "sglang", "zai"
  // The NAME of the environment variable holding the upstream API key ("" : none). The key is
  // read from the environment when an agent is created or opened and never logged or stored.
  std::string upstream_api_key_env;
  // Default tokenizer of new agents: a name of `tokenizers`, or a spec (--tokenizer).
  std::string tokenizer = "estimate";
  // The tokenizers tenants may name ("tokenizers": {"glm-5.3": "hf:/srv/glm/tokenizer.json"}):
  // name -> spec. Tenants never give paths (tokenizer_allowlist.h).
  std::map<std::string, std::string> tokenizers;
  std::string chat_template = "glm5";  // default chat template of new agents
  int64_t budget = 0;                  // default window of new agents in tokens; 0: 1,048,576
  TlsConfig tls;                       // applies to the gRPC listener and the HTTP listener
  std::vector<TenantConfig> tenants;   // empty: one tenant "default", no authentication
  TenantLimits default_limits;         // limits of the "default" tenant when no tenants are set
  // Serve without tenants on a non-loopback address (refused otherwise).
  bool allow_unauthenticated = false;
  // Keep core dumps ("allow_core_dumps", --allow-core-dumps). Default false: the sidecar sets
  // RLIMIT_CORE 0 and PR_SET_DUMPABLE 0 at startup, since a core holds the upstream key and the
  // bearer tokens presented.
  bool allow_core_dumps = false;
  int64_t drain_timeout_ms = 10000;  // SIGTERM: in-flight calls get this long to finish
  // SIGTERM: the listeners stay open (answering NOT_SERVING, /readyz 503) at least this long,
  // even with nothing in flight, so that a load balancer's health checks see the drain before
  // connections are refused. Default 0: an idle sidecar exits at once. At most drain_timeout_ms
  // is spent on calls in flight either way; the grace counts from the signal too.
  int64_t drain_grace_ms = 0;
  int64_t max_threads = 64;          // gRPC handler threads at most
  // How long a call waits for an agent another call holds (a Complete holds its agent until its
  // answer ends): then UNAVAILABLE. 0: no limit.
  int64_t lease_wait_ms = 30000;
  // HTTP listener: the whole request head must arrive within this (else 408).
  int64_t http_head_timeout_ms = 10000;
  // HTTP listener: connections one client address may hold at once (more get 429); 0: no limit.
  int64_t http_max_connections_per_client = 32;
  // Agents kept open in memory at most; idle ones beyond it are closed and reopen from the store
  // on their next call. 0: no limit.
  int64_t max_open_agents = 1024;
  // SHA-256 of each bearer token that may read GET /metrics, which holds every tenant's series
  // (a scrape token; a tenant's token only when its hash is listed here too). Empty: /metrics is
  // open when no tenants are configured, and closed (403 for every token) when tenants are.
  std::vector<std::string> metrics_token_sha256;
  // The OpenAI-compatible proxy's choices ("proxy": {...}; docs/sidecar.md).
  ProxySettings proxy;
  // The "metrics" object, kept as given for the metrics component's own parser.
  nlohmann::json metrics = nlohmann::json::object();
  // The "pools" object (a strata::PoolSetConfig document, strata/pools.h), kept as given; empty:
  // no length pools, agents send to `upstream`. With pools, the pools' endpoints are the
  // upstreams. Checked by ParseSidecarConfig with ParseSidecarPools.
  nlohmann::json pools = nlohmann::json::object();
};

// "summarize" (false) or "reject" (true): the proxy's oversized setting. INVALID_ARGUMENT naming
// `what` otherwise.
StatusOr<bool> ParseOversized(std::string_view text, std::string_view what);

// The length pools of a "pools" object: strata::ParsePoolSetConfig, its errors prefixed with the
// key "pools". Callers treat an empty object as "no pools".
StatusOr<PoolSetConfig> ParseSidecarPools(const nlohmann::json& pools);

// Parses a configuration document (every key optional; defaults as above).
StatusOr<SidecarConfig> ParseSidecarConfig(std::string_view json_text);
// Reads and parses a file; errors name the file.
StatusOr<SidecarConfig> LoadSidecarConfig(const std::string& path);
// Checks the values that parsing cannot: listener addresses, tenant names and hashes unique, TLS
// files readable. Called after flags are applied.
Status ValidateSidecarConfig(const SidecarConfig& config);

// "full" or "normal" as a StoreSync; INVALID_ARGUMENT naming `what` and the value otherwise.
StatusOr<StoreSync> ParseStoreSync(std::string_view text, std::string_view what);
// "full" or "normal".
const char* StoreSyncName(StoreSync sync);

// "HOST:PORT" split into its parts (IPv6 in brackets: "[::1]:0"). INVALID_ARGUMENT naming `what`.
struct HostPort {
  std::string host;
  int port = 0;
};
StatusOr<HostPort> ParseHostPort(std::string_view text, std::string_view what);
// True for 127.0.0.0/8, ::1 and "localhost".
bool IsLoopbackHost(std::string_view host);

}  // namespace strata::sidecar

#endif  // STRATA_APPS_STRATA_SIDECAR_SIDECAR_CONFIG_H_
