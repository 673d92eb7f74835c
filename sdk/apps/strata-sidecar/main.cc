// strata-sidecar: the context manager as a local service (docs/sidecar.md).
//
//   strata-sidecar --grpc-listen 127.0.0.1:0 --store agents.db --upstream http://127.0.0.1:8000/v1
// prints "grpc listening on HOST:PORT" (and "http listening on HOST:PORT" with --http-listen) once
// serving, then runs until SIGTERM or SIGINT, on which it drains (drain.h): it refuses new
// completions and reports not ready, lets the calls in flight finish for up to drain_timeout_ms
// (then cancels them), closes its listeners and exits 0.
//
//   strata-sidecar hash-token < token.txt
// prints the SHA-256 of a bearer token (the first line of stdin) for the configuration's
// tenants[].token_sha256.
#include <CLI/CLI.hpp>
#include <grpcpp/ext/proto_server_reflection_plugin.h>
#include <grpcpp/grpcpp.h>
#include <grpcpp/health_check_service_interface.h>
#include <grpcpp/resource_quota.h>

#include <pthread.h>

#include <chrono>
#include <csignal>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "console_routes.h"
#include "core/json_text.h"
#include "drain.h"
#include "grpc_errors.h"
#include "http_server.h"
#include "registry.h"
#include "service.h"
#include "sidecar_config.h"
#include "sidecar_metrics.h"
#include "store_health.h"
#include "startup.h"
#include "strata/pools.h"
#include "tenants.h"
#include "tls_check.h"

namespace {

using strata::Status;
using strata::StatusOr;
namespace sc = strata::sidecar;

void Log(const std::string& message) { std::cerr << "strata-sidecar: " << message << std::endl; }

StatusOr<std::string> ReadFile(const std::string& path, const std::string& what) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return strata::NotFoundError(what + ": cannot read " + path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

StatusOr<std::shared_ptr<grpc::ServerCredentials>> ServerCredentials(const sc::TlsConfig& tls) {
  if (!tls.enabled()) return grpc::InsecureServerCredentials();
  grpc::SslServerCredentialsOptions options;
  grpc::SslServerCredentialsOptions::PemKeyCertPair pair;
  STRATA_ASSIGN_OR_RETURN(pair.cert_chain, ReadFile(tls.cert_file, "tls.cert_file"));
  STRATA_ASSIGN_OR_RETURN(pair.private_key, ReadFile(tls.key_file, "tls.key_file"));
  options.pem_key_cert_pairs.push_back(std::move(pair));
  if (!tls.client_ca_file.empty()) {
    STRATA_ASSIGN_OR_RETURN(options.pem_root_certs,
                            ReadFile(tls.client_ca_file, "tls.client_ca_file"));
    options.client_certificate_request =
        GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY;
  }
  return grpc::SslServerCredentials(options);
}

int HashToken() {
  std::string token;
  std::getline(std::cin, token);
  while (!token.empty() && (token.back() == '\r' || token.back() == ' ')) token.pop_back();
  if (token.empty()) {
    Log("hash-token: no token on stdin (give the token as the first line)");
    return 2;
  }
  std::cout << sc::Sha256Hex(token) << std::endl;
  return 0;
}

int Fail(const Status& status) {
  Log(status.message());
  return 1;
}

// The command line's values; a flag given overrides the configuration file's field.
struct Flags {
  std::string config_file;  // --config
  sc::SidecarConfig values;
  std::string store_sync;
  std::string tls_cert, tls_key, tls_client_ca;
  std::string pools_file;  // --pools
  std::string oversized;   // --oversized
};

// A store shared by several sidecars (a postgresql:// --store): its lease flags, set by
// DefineFlags, read by OpenRegistry.
struct SharedStoreFlags {
  int64_t lease_ttl_ms = 5000;
  int64_t owner_wait_ms = 10000;
  int64_t idle_release_ms = 60000;
} shared_store_flags;

void DefineFlags(CLI::App& app, Flags& flags) {
  sc::SidecarConfig& values = flags.values;
  app.add_option("--config", flags.config_file, "JSON configuration file (flags override it)");
  app.add_option("--grpc-listen", values.grpc_listen,
                 "gRPC listener HOST:PORT (port 0: any free port)");
  app.add_option("--http-listen", values.http_listen,
                 "HTTP listener HOST:PORT of the OpenAI-compatible proxy");
  app.add_option("--store", values.store,
                 "store of the agents: a SQLite file, or a postgresql:// URL several sidecars "
                 "share (docs/postgres.md)");
  app.add_option("--lease-ttl-ms", shared_store_flags.lease_ttl_ms,
                 "shared store: how long an agent's lease outlives a crashed sidecar (default "
                 "5000)")
      ->check(CLI::Range(int64_t{100}, int64_t{3600000}));
  app.add_option("--owner-wait-ms", shared_store_flags.owner_wait_ms,
                 "shared store: how long a call waits for an agent another sidecar serves, then "
                 "UNAVAILABLE (default 10000)")
      ->check(CLI::Range(int64_t{0}, int64_t{3600000}));
  app.add_option("--idle-release-ms", shared_store_flags.idle_release_ms,
                 "shared store: an agent unused this long is closed and its lease released, so "
                 "another sidecar may serve it at once (0: never; default 60000)")
      ->check(CLI::Range(int64_t{0}, int64_t{86400000}));
  app.add_option("--store-sync", flags.store_sync,
                 "store durability: full (fsync per commit; default) or normal (survives "
                 "sidecar crashes; a power loss may lose the last calls)");
  app.add_option("--upstream", values.upstream,
                 "base URL of the model server, e.g. http://127.0.0.1:8000/v1");
  app.add_option("--backend", values.backend, "openai | vllm | sglang | zai");
  app.add_option("--upstream-api-key-env", values.upstream_api_key_env,
                 "NAME of the environment variable holding the upstream key");
  app.add_option("--tokenizer", values.tokenizer,
                 "default tokenizer spec of new agents (e.g. estimate, hf:FILE)");
  app.add_option("--template", values.chat_template,
                 "default chat template of new agents (glm5, generic, ...)");
  app.add_option("--budget", values.budget, "default context window of new agents, in tokens")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--tls-cert", flags.tls_cert, "server certificate chain (PEM)");
  app.add_option("--tls-key", flags.tls_key, "server private key (PEM)");
  app.add_option("--tls-client-ca", flags.tls_client_ca,
                 "CA of client certificates (PEM): requires mutual TLS");
  app.add_option("--drain-timeout-ms", values.drain_timeout_ms,
                 "how long in-flight calls may run after SIGTERM")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--drain-grace-ms", values.drain_grace_ms,
                 "how long the listeners stay open after SIGTERM even when idle (load balancers)")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--pools", flags.pools_file,
                 "length pools: a PoolSetConfig JSON file (overrides the configuration's "
                 "\"pools\"); their endpoints are the upstreams");
  app.add_option("--oversized", flags.oversized,
                 "proxy: a new message above the agent's input budget is compacted to fit "
                 "(summarize, the default) or refused with 413 (reject)");
  app.add_flag("--recall-tool", values.proxy.recall_tool,
               "proxy: offer the context_recall tool upstream and answer its calls in the sidecar");
  app.add_flag("--allow-unauthenticated", values.allow_unauthenticated,
               "serve without tenants on a non-loopback address");
  app.add_flag("--allow-core-dumps", values.allow_core_dumps,
               "keep core dumps (by default the sidecar disables them: a core holds the upstream "
               "key and the bearer tokens presented)");
}

// The configuration file (when --config is given) with the flags given on the command line over
// it, validated.
StatusOr<sc::SidecarConfig> ConfigFromFlags(const CLI::App& app, const Flags& flags) {
  const sc::SidecarConfig& values = flags.values;
  sc::SidecarConfig config;
  if (!flags.config_file.empty()) {
    STRATA_ASSIGN_OR_RETURN(config, sc::LoadSidecarConfig(flags.config_file));
  }
  if (app.count("--grpc-listen")) config.grpc_listen = values.grpc_listen;
  if (app.count("--http-listen")) config.http_listen = values.http_listen;
  if (app.count("--store")) config.store = values.store;
  if (!flags.store_sync.empty()) {
    STRATA_ASSIGN_OR_RETURN(config.store_sync,
                            sc::ParseStoreSync(flags.store_sync, "--store-sync"));
  }
  if (app.count("--upstream")) config.upstream = values.upstream;
  if (app.count("--backend")) config.backend = values.backend;
  if (app.count("--upstream-api-key-env")) {
    config.upstream_api_key_env = values.upstream_api_key_env;
  }
  if (app.count("--tokenizer")) config.tokenizer = values.tokenizer;
  if (app.count("--template")) config.chat_template = values.chat_template;
  if (app.count("--budget")) config.budget = values.budget;
  if (app.count("--tls-cert")) config.tls.cert_file = flags.tls_cert;
  if (app.count("--tls-key")) config.tls.key_file = flags.tls_key;
  if (app.count("--tls-client-ca")) config.tls.client_ca_file = flags.tls_client_ca;
  if (app.count("--drain-timeout-ms")) config.drain_timeout_ms = values.drain_timeout_ms;
  if (app.count("--drain-grace-ms")) config.drain_grace_ms = values.drain_grace_ms;
  if (app.count("--allow-unauthenticated")) config.allow_unauthenticated = true;
  if (app.count("--allow-core-dumps")) config.allow_core_dumps = true;
  if (!flags.oversized.empty()) {
    STRATA_ASSIGN_OR_RETURN(config.proxy.reject_oversized,
                            sc::ParseOversized(flags.oversized, "--oversized"));
  }
  if (app.count("--recall-tool")) config.proxy.recall_tool = true;
  STRATA_RETURN_IF_ERROR(sc::ValidateSidecarConfig(config));
  STRATA_RETURN_IF_ERROR(sc::CheckServingSettings(config));
  return config;
}

// Length pools (strata/pools.h): the agents send through them instead of to --upstream.
struct Pools {
  std::unique_ptr<strata::PoolSet> set;  // nullptr: none configured
  std::vector<std::string> endpoints;    // the pools' endpoints: GET /v1/models asks them
};

// The pools of `pools_file` (--pools), else of the configuration's "pools", else none.
StatusOr<Pools> OpenPools(const sc::SidecarConfig& config, const std::string& pools_file) {
  Pools pools;
  StatusOr<strata::PoolSetConfig> pool_config = strata::InvalidArgumentError("no pools");
  if (!pools_file.empty()) {
    STRATA_ASSIGN_OR_RETURN(std::string text, ReadFile(pools_file, "--pools"));
    STRATA_RETURN_IF_ERROR(strata::internal::CheckJsonDepth(text, "--pools " + pools_file));
    pool_config = strata::ParsePoolSetConfig(text);
    if (!pool_config.ok()) {
      return Status(pool_config.status().code(),
                    "--pools " + pools_file + ": " + pool_config.status().message());
    }
  } else if (!config.pools.empty()) {
    STRATA_ASSIGN_OR_RETURN(pool_config, sc::ParseSidecarPools(config.pools));
  }
  if (!pool_config.ok()) return pools;
  for (const strata::PoolConfig& pool : pool_config->pools) {
    pools.endpoints.insert(pools.endpoints.end(), pool.endpoints.begin(), pool.endpoints.end());
  }
  const std::string where = pools_file.empty() ? "pools" : "--pools " + pools_file;
  StatusOr<std::unique_ptr<strata::PoolSet>> created =
      strata::PoolSet::Create(std::move(pool_config).value());
  if (!created.ok()) {
    return Status(created.status().code(), where + ": " + created.status().message());
  }
  pools.set = std::move(created).value();
  return pools;
}

// Without tenants every call is unauthenticated: allowed on a loopback `host` only, unless
// --allow-unauthenticated. `listen`: the configured address, for the message.
Status CheckExposure(const sc::SidecarConfig& config, const std::string& listen,
                     const std::string& host) {
  if (!config.tenants.empty() || config.allow_unauthenticated || sc::IsLoopbackHost(host)) {
    return Status::Ok();
  }
  return strata::FailedPreconditionError(
      "refusing to serve without tenants on " + listen +
      " (not a loopback address): configure tenants with token hashes, or pass "
      "--allow-unauthenticated");
}

// Checks both listeners' exposure and says (log) how calls will be authenticated and sent; the
// gRPC listener's address.
StatusOr<sc::HostPort> CheckListeners(const sc::SidecarConfig& config,
                                      const strata::PoolSet* pools) {
  STRATA_ASSIGN_OR_RETURN(sc::HostPort grpc_address,
                          sc::ParseHostPort(config.grpc_listen, "--grpc-listen"));
  STRATA_RETURN_IF_ERROR(CheckExposure(config, config.grpc_listen, grpc_address.host));
  if (config.tenants.empty()) {
    Log("warning: no tenants configured: every call is tenant \"default\", unauthenticated");
  }
  if (pools) {
    std::string names;
    for (const strata::PoolMetrics& p : pools->Metrics().pools) {
      names += (names.empty() ? "" : ", ") + p.name + " (" + std::to_string(p.max_input_tokens) +
               " tokens)";
    }
    Log("length pools " + names + ": agents send through them; their endpoints are the "
        "upstreams (--upstream is not needed" +
        (config.upstream.empty() ? std::string(")") : ", and is not used by the agents)"));
  } else if (config.upstream.empty()) {
    Log("warning: no --upstream: Complete fails until one is configured");
  }
  if (config.tls.enabled()) {
    for (const std::string& warning : sc::TlsCertificateWarnings(config.tls.cert_file)) {
      Log("warning: " + warning);
    }
  }
  if (!config.http_listen.empty() && config.tenants.empty() && !config.allow_unauthenticated) {
    STRATA_ASSIGN_OR_RETURN(sc::HostPort http_address,
                            sc::ParseHostPort(config.http_listen, "--http-listen"));
    STRATA_RETURN_IF_ERROR(CheckExposure(config, config.http_listen, http_address.host));
  }
  return grpc_address;
}

// Signals go to the thread that waits for them (WaitAndDrain), never to gRPC's or the agents'
// threads: blocks SIGTERM and SIGINT in this thread and those it starts; the set of both.
sigset_t BlockTerminationSignals() {
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  std::signal(SIGPIPE, SIG_IGN);
  return signals;
}

StatusOr<std::unique_ptr<sc::AgentRegistry>> OpenRegistry(const sc::SidecarConfig& config,
                                                          strata::PoolSet* pools) {
  sc::RegistryOptions options;
  options.store_path = config.store;
  options.store_sync = config.store_sync;
  options.upstream = config.upstream;
  options.backend = config.backend;
  options.api_key_env = config.upstream_api_key_env;
  options.tokenizer = config.tokenizer;
  options.tokenizers = config.tokenizers;
  options.chat_template = config.chat_template;
  options.window = config.budget;
  options.max_open_agents = static_cast<size_t>(config.max_open_agents);
  options.lease_wait = std::chrono::milliseconds(config.lease_wait_ms);
  options.lease_ttl_ms = shared_store_flags.lease_ttl_ms;
  options.owner_wait = std::chrono::milliseconds(shared_store_flags.owner_wait_ms);
  options.idle_release = std::chrono::milliseconds(shared_store_flags.idle_release_ms);
  options.transport = pools;  // nullptr: an HTTP transport to --upstream
  return sc::AgentRegistry::Open(options);
}

// The service's hooks, which feed `metrics`.
sc::ServiceHooks MetricsHooks(sc::SidecarMetrics& metrics) {
  sc::ServiceHooks hooks;
  hooks.on_turn = [&](std::string_view tenant, const strata::Turn& turn) {
    metrics.ObserveTurn(tenant, turn);
  };
  hooks.on_error = [&](std::string_view tenant, strata::StatusCode code) {
    metrics.ObserveError(tenant, "", code);
  };
  hooks.on_agents = [&](std::string_view tenant, int64_t n) { metrics.SetAgents(tenant, n); };
  hooks.on_record_write_failures = [&](std::string_view tenant, int64_t count) {
    metrics.ObserveRecordWriteFailures(tenant, count);
  };
  hooks.on_complete_begin = [&](std::string_view tenant, int64_t input_tokens,
                                int64_t max_output_tokens) -> std::shared_ptr<void> {
    return std::make_shared<sc::SidecarMetrics::InFlight>(
        metrics.Begin(tenant, input_tokens, max_output_tokens));
  };
  return hooks;
}

// Serves `service` on config.grpc_listen and prints "grpc listening on HOST:PORT".
StatusOr<std::unique_ptr<grpc::Server>> StartGrpc(const sc::SidecarConfig& config,
                                                  const sc::HostPort& address,
                                                  const sc::Authenticator& authenticator,
                                                  sc::ContextServiceImpl& service) {
  STRATA_ASSIGN_OR_RETURN(std::shared_ptr<grpc::ServerCredentials> credentials,
                          ServerCredentials(config.tls));
  grpc::EnableDefaultHealthCheckService(true);
  grpc::reflection::InitProtoReflectionServerBuilderPlugin();
  grpc::ServerBuilder builder;
  int grpc_port = 0;
  builder.AddListeningPort(config.grpc_listen, credentials, &grpc_port);
  // A port another process listens on is an error, not a port shared with it (SO_REUSEPORT).
  builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
  builder.RegisterService(&service);
  // The transport's limit is the largest tenant's (plus framing); each call then checks its own
  // tenant's max_request_bytes and names it when refusing.
  const int64_t max_bytes = authenticator.MaxRequestBytes() + 64 * 1024;
  builder.SetMaxReceiveMessageSize(static_cast<int>(std::min<int64_t>(max_bytes, INT32_MAX)));
  grpc::ResourceQuota quota("strata-sidecar");
  quota.SetMaxThreads(static_cast<int>(config.max_threads));
  builder.SetResourceQuota(quota);
  builder.SetSyncServerOption(grpc::ServerBuilder::SyncServerOption::MAX_POLLERS,
                              static_cast<int>(config.max_threads));
  std::vector<std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface>> interceptors;
  interceptors.push_back(sc::ExplainUnparsedRequests());  // messages for unparsable requests
  builder.experimental().SetInterceptorCreators(std::move(interceptors));
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  if (server == nullptr || grpc_port == 0) {
    return strata::UnavailableError("cannot listen on " + config.grpc_listen +
                                    " (address in use, or not an address of this host)");
  }
  std::cout << "grpc listening on " << address.host << ":" << grpc_port << std::endl;
  return server;
}

// The OpenAI-compatible proxy (proxy.h), sending through `registry`'s agents.
std::unique_ptr<sc::Proxy> MakeProxy(const sc::SidecarConfig& config, sc::AgentRegistry* registry,
                                     const std::vector<std::string>& model_upstreams,
                                     const sc::ServiceHooks& hooks) {
  sc::ProxyOptions options;
  options.registry = registry;
  options.upstream = config.upstream;
  options.model_upstreams = model_upstreams;
  if (const char* key = config.upstream_api_key_env.empty()
                            ? nullptr
                            : std::getenv(config.upstream_api_key_env.c_str())) {
    options.upstream_api_key = key;
  }
  options.reject_oversized = config.proxy.reject_oversized;
  options.recall_tool = config.proxy.recall_tool;
  options.on_turn = hooks.on_turn;
  options.on_error = hooks.on_error;
  options.on_record_write_failures = hooks.on_record_write_failures;
  options.on_complete_begin = hooks.on_complete_begin;
  return std::make_unique<sc::Proxy>(std::move(options));
}

// Serves `proxy` and /metrics on config.http_listen (http_server.h) and prints
// "http listening on HOST:PORT".
StatusOr<std::unique_ptr<sc::HttpServer>> StartHttp(const sc::SidecarConfig& config,
                                                    sc::Authenticator& authenticator,
                                                    sc::Proxy& proxy, sc::SidecarMetrics& metrics,
                                                    sc::AgentRegistry& registry,
                                                    sc::StoreHealth& health,
                                                    sc::HttpGetRoute console) {
  sc::HttpServerOptions options;
  options.get_routes.push_back(std::move(console));  // /ui (console_routes.h)
  options.ready = [&health] { return health.Check(); };  // 503 while the store refuses writes
  options.listen = config.http_listen;
  options.tls = config.tls;
  options.authenticator = &authenticator;
  options.proxy = &proxy;
  options.head_timeout = std::chrono::milliseconds(config.http_head_timeout_ms);
  options.max_connections_per_client = static_cast<int>(config.http_max_connections_per_client);
  // Agent counts are read at scrape time too: the proxy creates agents on first use.
  options.metrics = [&metrics, &authenticator, &registry] {
    for (const sc::TenantConfig& t : authenticator.tenants()) {
      metrics.SetAgents(t.name, registry.AgentCount(t));
    }
    return metrics.RenderPrometheus();
  };
  STRATA_ASSIGN_OR_RETURN(std::unique_ptr<sc::HttpServer> http, sc::HttpServer::Start(options));
  std::cout << "http listening on " << http->host() << ":" << http->port() << std::endl;
  return http;
}

// Waits for SIGTERM or SIGINT (in `signals`, blocked), meanwhile reporting NOT_SERVING on the
// gRPC health service while the store refuses writes (`health`); then drains (drain.h): refuses
// new completions and reports NOT_SERVING at once, lets the calls in flight finish for up to
// drain_timeout_ms with the listeners open, then closes them. Returns how long the drain took, in
// ms.
int64_t WaitAndDrain(const sigset_t& signals, int64_t drain_timeout_ms, int64_t drain_grace_ms,
                     grpc::Server& server,
                     sc::ContextServiceImpl& service, sc::HttpServer* http,
                     sc::StoreHealth& health) {
  // While waiting, the gRPC health service follows the store's files once a second.
  const timespec poll = {1, 0};
  bool serving = true;
  int signal = -1;
  while ((signal = sigtimedwait(&signals, nullptr, &poll)) < 0) {
    const bool healthy = health.Check();
    if (healthy == serving) continue;
    serving = healthy;
    if (auto* grpc_health = server.GetHealthCheckService()) {
      grpc_health->SetServingStatus(serving);
    }
  }
  Log(std::string("received ") + (signal == SIGTERM ? "SIGTERM" : "SIGINT") +
      ": draining (in-flight calls get up to " + std::to_string(drain_timeout_ms) + " ms)");
  sc::BeginDrain(server, service, http);  // the listeners stay open while the calls finish
  const auto start = std::chrono::steady_clock::now();
  sc::DrainListeners(server, service, http, std::chrono::milliseconds(drain_timeout_ms),
                     std::chrono::milliseconds(drain_grace_ms));
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() -
                                                               start)
      .count();
}

// Runs the sidecar on a checked configuration until a signal has drained it; the exit code.
int Serve(const sc::SidecarConfig& config, const Pools& pools, const sc::HostPort& grpc_address) {
  const sigset_t signals = BlockTerminationSignals();
  sc::Authenticator authenticator(config.tenants, config.default_limits,
                                  config.metrics_token_sha256);
  if (!config.http_listen.empty() && !config.tenants.empty() &&
      config.metrics_token_sha256.empty()) {
    Log("warning: no metrics_token_sha256: /metrics holds every tenant's series and answers 403 "
        "to tenants' tokens; configure a scrape token's hash to read it");
  }
  StatusOr<std::unique_ptr<sc::AgentRegistry>> registry = OpenRegistry(config, pools.set.get());
  if (!registry.ok()) return Fail(registry.status());

  StatusOr<sc::MetricsConfig> metrics_config = sc::ParseMetricsConfig(config.metrics);
  if (!metrics_config.ok()) return Fail(metrics_config.status());
  sc::SidecarMetrics metrics(*metrics_config, nullptr,
                             [](const std::string& message) { Log("warning: " + message); });
  metrics.SetPoolSet(pools.set.get());  // strata_pool_* families and the pool label of turns
  for (const sc::TenantConfig& t : authenticator.tenants()) {
    metrics.SetAgents(t.name, (*registry)->AgentCount(t));
  }
  const sc::ServiceHooks hooks = MetricsHooks(metrics);
  sc::StoreHealth health(&(*registry)->store(), [](const std::string& m) { Log("store: " + m); });
  sc::ContextServiceImpl service(registry->get(), &authenticator, hooks);
  StatusOr<std::unique_ptr<grpc::Server>> server =
      StartGrpc(config, grpc_address, authenticator, service);
  if (!server.ok()) return Fail(server.status());
  std::unique_ptr<sc::Proxy> proxy;
  sc::ConsoleRoutes console(registry->get(), &authenticator, pools.set.get());
  std::unique_ptr<sc::HttpServer> http;
  if (!config.http_listen.empty()) {
    proxy = MakeProxy(config, registry->get(), pools.endpoints, hooks);
    StatusOr<std::unique_ptr<sc::HttpServer>> started =
        StartHttp(config, authenticator, *proxy, metrics, **registry, health, console.Route());
    if (!started.ok()) return Fail(started.status());
    http = std::move(*started);
  }
  // The durability mode as SQLite reports it on the store's connection, not as configured.
  StatusOr<strata::StoreStats> store_stats = (*registry)->store().Stats();
  if (!store_stats.ok()) return Fail(store_stats.status());
  Log("serving " + std::to_string(authenticator.tenants().size()) + " tenant(s), store " +
      (*registry)->store().path() + " (synchronous=" + sc::StoreSyncName(store_stats->synchronous) + ")" +
      (config.tls.enabled() ? ", TLS" : ", plaintext"));

  const int64_t ms =
      WaitAndDrain(signals, config.drain_timeout_ms, config.drain_grace_ms, **server, service, http.get(), health);
  server->reset();
  registry->reset();
  Log("drained in " + std::to_string(ms) + " ms; exiting");
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc >= 2 && std::string(argv[1]) == "hash-token") return HashToken();

  CLI::App app{"strata-sidecar: strata's context manager as a gRPC service (docs/sidecar.md)"};
  app.footer(
      "Subcommand:\n  strata-sidecar hash-token < token.txt\n      prints the SHA-256 of the bearer "
      "token on the first line of stdin, for tenants[].token_sha256 and metrics_token_sha256");
  Flags flags;
  DefineFlags(app, flags);
  CLI11_PARSE(app, argc, argv);
  StatusOr<sc::SidecarConfig> config = ConfigFromFlags(app, flags);
  if (!config.ok()) return Fail(config.status());
  if (config->allow_core_dumps) {
    Log("warning: core dumps allowed (--allow-core-dumps): a core holds the upstream key and the "
        "bearer tokens presented");
  } else if (Status disabled = sc::DisableCoreDumps(); !disabled.ok()) {
    return Fail(disabled);
  }
  StatusOr<Pools> pools = OpenPools(*config, flags.pools_file);
  if (!pools.ok()) return Fail(pools.status());
  StatusOr<sc::HostPort> grpc_address = CheckListeners(*config, pools->set.get());
  if (!grpc_address.ok()) return Fail(grpc_address.status());
  return Serve(*config, *pools, *grpc_address);
}
