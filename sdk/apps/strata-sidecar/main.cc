// strata-sidecar: the context manager as a local service (docs/sidecar.md).
//
//   strata-sidecar --grpc-listen 127.0.0.1:0 --store agents.db --upstream http://127.0.0.1:8000/v1
// prints "grpc listening on HOST:PORT" (and "http listening on HOST:PORT" with --http-listen) once
// serving, then runs until SIGTERM or SIGINT, on which it drains: it stops accepting calls, lets
// the calls in flight finish for up to drain_timeout_ms (then cancels them) and exits 0.
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

#include "http_server.h"
#include "registry.h"
#include "service.h"
#include "sidecar_config.h"
#include "sidecar_metrics.h"
#include "strata/pools.h"
#include "tenants.h"

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

}  // namespace

int main(int argc, char** argv) {
  if (argc >= 2 && std::string(argv[1]) == "hash-token") return HashToken();

  CLI::App app{"strata-sidecar: strata's context manager as a gRPC service (docs/sidecar.md)"};
  std::string config_file;
  sc::SidecarConfig flags;
  std::string tls_cert, tls_key, tls_client_ca;
  app.add_option("--config", config_file, "JSON configuration file (flags override it)");
  auto* grpc_listen = app.add_option("--grpc-listen", flags.grpc_listen,
                                     "gRPC listener HOST:PORT (port 0: any free port)");
  auto* http_listen = app.add_option("--http-listen", flags.http_listen,
                                     "HTTP listener HOST:PORT of the OpenAI-compatible proxy");
  auto* store = app.add_option("--store", flags.store, "SQLite store of the agents");
  std::string store_sync;
  app.add_option("--store-sync", store_sync,
                 "store durability: full (fsync per commit; default) or normal (survives "
                 "sidecar crashes; a power loss may lose the last calls)");
  auto* upstream = app.add_option("--upstream", flags.upstream,
                                  "base URL of the model server, e.g. http://127.0.0.1:8000/v1");
  auto* backend = app.add_option("--backend", flags.backend, "openai | vllm | sglang | zai");
  auto* api_key_env = app.add_option("--upstream-api-key-env", flags.upstream_api_key_env,
                                     "NAME of the environment variable holding the upstream key");
  auto* tokenizer = app.add_option("--tokenizer", flags.tokenizer,
                                   "default tokenizer spec of new agents (e.g. estimate, hf:FILE)");
  auto* chat_template = app.add_option("--template", flags.chat_template,
                                       "default chat template of new agents (glm5, generic, ...)");
  auto* budget = app.add_option("--budget", flags.budget,
                                "default context window of new agents, in tokens")
                     ->check(CLI::NonNegativeNumber);
  auto* cert = app.add_option("--tls-cert", tls_cert, "server certificate chain (PEM)");
  auto* key = app.add_option("--tls-key", tls_key, "server private key (PEM)");
  auto* client_ca = app.add_option("--tls-client-ca", tls_client_ca,
                                   "CA of client certificates (PEM): requires mutual TLS");
  auto* drain = app.add_option("--drain-timeout-ms", flags.drain_timeout_ms,
                               "how long in-flight calls may run after SIGTERM")
                    ->check(CLI::NonNegativeNumber);
  std::string pools_file;
  app.add_option("--pools", pools_file,
                 "length pools: a PoolSetConfig JSON file (overrides the configuration's "
                 "\"pools\"); their endpoints are the upstreams");
  auto* allow = app.add_flag("--allow-unauthenticated", flags.allow_unauthenticated,
                             "serve without tenants on a non-loopback address");
  CLI11_PARSE(app, argc, argv);

  sc::SidecarConfig config;
  if (!config_file.empty()) {
    StatusOr<sc::SidecarConfig> loaded = sc::LoadSidecarConfig(config_file);
    if (!loaded.ok()) return Fail(loaded.status());
    config = std::move(loaded).value();
  }
  if (grpc_listen->count()) config.grpc_listen = flags.grpc_listen;
  if (http_listen->count()) config.http_listen = flags.http_listen;
  if (store->count()) config.store = flags.store;
  if (!store_sync.empty()) {
    StatusOr<strata::StoreSync> sync = sc::ParseStoreSync(store_sync, "--store-sync");
    if (!sync.ok()) return Fail(sync.status());
    config.store_sync = *sync;
  }
  if (upstream->count()) config.upstream = flags.upstream;
  if (backend->count()) config.backend = flags.backend;
  if (api_key_env->count()) config.upstream_api_key_env = flags.upstream_api_key_env;
  if (tokenizer->count()) config.tokenizer = flags.tokenizer;
  if (chat_template->count()) config.chat_template = flags.chat_template;
  if (budget->count()) config.budget = flags.budget;
  if (cert->count()) config.tls.cert_file = tls_cert;
  if (key->count()) config.tls.key_file = tls_key;
  if (client_ca->count()) config.tls.client_ca_file = tls_client_ca;
  if (drain->count()) config.drain_timeout_ms = flags.drain_timeout_ms;
  if (allow->count()) config.allow_unauthenticated = true;
  if (Status valid = sc::ValidateSidecarConfig(config); !valid.ok()) return Fail(valid);

  // Length pools (strata/pools.h): the agents send through them instead of to --upstream.
  std::unique_ptr<strata::PoolSet> pools;
  std::vector<std::string> model_upstreams;  // the pools' endpoints: GET /v1/models asks them
  {
    StatusOr<strata::PoolSetConfig> pool_config = strata::InvalidArgumentError("no pools");
    if (!pools_file.empty()) {
      StatusOr<std::string> text = ReadFile(pools_file, "--pools");
      if (!text.ok()) return Fail(text.status());
      pool_config = strata::ParsePoolSetConfig(*text);
      if (!pool_config.ok()) {
        return Fail(Status(pool_config.status().code(),
                           "--pools " + pools_file + ": " + pool_config.status().message()));
      }
    } else if (!config.pools.empty()) {
      pool_config = sc::ParseSidecarPools(config.pools);
      if (!pool_config.ok()) return Fail(pool_config.status());
    }
    if (pool_config.ok()) {
      for (const strata::PoolConfig& pool : pool_config->pools) {
        model_upstreams.insert(model_upstreams.end(), pool.endpoints.begin(), pool.endpoints.end());
      }
      const std::string where = pools_file.empty() ? "pools" : "--pools " + pools_file;
      StatusOr<std::unique_ptr<strata::PoolSet>> created =
          strata::PoolSet::Create(std::move(pool_config).value());
      if (!created.ok()) {
        return Fail(Status(created.status().code(), where + ": " + created.status().message()));
      }
      pools = std::move(created).value();
    }
  }

  StatusOr<sc::HostPort> grpc_address = sc::ParseHostPort(config.grpc_listen, "--grpc-listen");
  if (!grpc_address.ok()) return Fail(grpc_address.status());
  if (config.tenants.empty() && !config.allow_unauthenticated &&
      !sc::IsLoopbackHost(grpc_address->host)) {
    return Fail(strata::FailedPreconditionError(
        "refusing to serve without tenants on " + config.grpc_listen +
        " (not a loopback address): configure tenants with token hashes, or pass "
        "--allow-unauthenticated"));
  }
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
  if (!config.http_listen.empty() && config.tenants.empty() && !config.allow_unauthenticated) {
    StatusOr<sc::HostPort> http_address = sc::ParseHostPort(config.http_listen, "--http-listen");
    if (!http_address.ok()) return Fail(http_address.status());
    if (!sc::IsLoopbackHost(http_address->host)) {
      return Fail(strata::FailedPreconditionError(
          "refusing to serve without tenants on " + config.http_listen +
          " (not a loopback address): configure tenants with token hashes, or pass "
          "--allow-unauthenticated"));
    }
  }

  // Signals go to the thread that waits for them below, never to gRPC's or the agents' threads.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  std::signal(SIGPIPE, SIG_IGN);

  sc::Authenticator authenticator(config.tenants, config.default_limits,
                                  config.metrics_token_sha256);
  if (!config.http_listen.empty() && !config.tenants.empty() &&
      config.metrics_token_sha256.empty()) {
    Log("warning: no metrics_token_sha256: /metrics holds every tenant's series and answers 403 "
        "to tenants' tokens; configure a scrape token's hash to read it");
  }
  sc::RegistryOptions registry_options;
  registry_options.store_path = config.store;
  registry_options.store_sync = config.store_sync;
  registry_options.upstream = config.upstream;
  registry_options.backend = config.backend;
  registry_options.api_key_env = config.upstream_api_key_env;
  registry_options.tokenizer = config.tokenizer;
  registry_options.chat_template = config.chat_template;
  registry_options.window = config.budget;
  registry_options.max_open_agents = static_cast<size_t>(config.max_open_agents);
  registry_options.transport = pools.get();  // nullptr: an HTTP transport to --upstream
  StatusOr<std::unique_ptr<sc::AgentRegistry>> registry =
      sc::AgentRegistry::Open(registry_options);
  if (!registry.ok()) return Fail(registry.status());

  StatusOr<sc::MetricsConfig> metrics_config = sc::ParseMetricsConfig(config.metrics);
  if (!metrics_config.ok()) return Fail(metrics_config.status());
  sc::SidecarMetrics metrics(*metrics_config, nullptr,
                             [](const std::string& message) { Log("warning: " + message); });
  metrics.SetPoolSet(pools.get());  // strata_pool_* families and the pool label of turns
  for (const sc::TenantConfig& t : authenticator.tenants()) {
    metrics.SetAgents(t.name, (*registry)->AgentCount(t));
  }
  sc::ServiceHooks hooks;
  hooks.on_turn = [&](std::string_view tenant, const strata::Turn& turn) {
    metrics.ObserveTurn(tenant, turn);
  };
  hooks.on_error = [&](std::string_view tenant, strata::StatusCode code) {
    metrics.ObserveError(tenant, "", code);
  };
  hooks.on_agents = [&](std::string_view tenant, int64_t n) { metrics.SetAgents(tenant, n); };
  hooks.on_complete_begin = [&](std::string_view tenant, int64_t input_tokens,
                                int64_t max_output_tokens) -> std::shared_ptr<void> {
    return std::make_shared<sc::SidecarMetrics::InFlight>(
        metrics.Begin(tenant, input_tokens, max_output_tokens));
  };
  sc::ContextServiceImpl service(registry->get(), &authenticator, hooks);
  StatusOr<std::shared_ptr<grpc::ServerCredentials>> credentials = ServerCredentials(config.tls);
  if (!credentials.ok()) return Fail(credentials.status());

  grpc::EnableDefaultHealthCheckService(true);
  grpc::reflection::InitProtoReflectionServerBuilderPlugin();
  grpc::ServerBuilder builder;
  int grpc_port = 0;
  builder.AddListeningPort(config.grpc_listen, *credentials, &grpc_port);
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
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  if (server == nullptr || grpc_port == 0) {
    return Fail(strata::UnavailableError("cannot listen on " + config.grpc_listen +
                                         " (address in use, or not an address of this host)"));
  }
  std::cout << "grpc listening on " << grpc_address->host << ":" << grpc_port << std::endl;
  // The OpenAI-compatible proxy (http_server.h), when --http-listen is given.
  std::unique_ptr<sc::Proxy> proxy;
  std::unique_ptr<sc::HttpServer> http;
  if (!config.http_listen.empty()) {
    sc::ProxyOptions proxy_options;
    proxy_options.registry = registry->get();
    proxy_options.upstream = config.upstream;
    proxy_options.model_upstreams = model_upstreams;
    if (const char* key = config.upstream_api_key_env.empty()
                              ? nullptr
                              : std::getenv(config.upstream_api_key_env.c_str())) {
      proxy_options.upstream_api_key = key;
    }
    proxy_options.on_turn = hooks.on_turn;
    proxy_options.on_error = hooks.on_error;
    proxy_options.on_complete_begin = hooks.on_complete_begin;
    proxy = std::make_unique<sc::Proxy>(std::move(proxy_options));
    sc::HttpServerOptions http_options;
    http_options.listen = config.http_listen;
    http_options.tls = config.tls;
    http_options.authenticator = &authenticator;
    http_options.proxy = proxy.get();
    // Agent counts are read at scrape time too: the proxy creates agents on first use.
    http_options.metrics = [&metrics, &authenticator, &registry] {
      for (const sc::TenantConfig& t : authenticator.tenants()) {
        metrics.SetAgents(t.name, (*registry)->AgentCount(t));
      }
      return metrics.RenderPrometheus();
    };
    StatusOr<std::unique_ptr<sc::HttpServer>> started = sc::HttpServer::Start(http_options);
    if (!started.ok()) return Fail(started.status());
    http = std::move(*started);
    std::cout << "http listening on " << http->host() << ":" << http->port() << std::endl;
  }
  // The durability mode as SQLite reports it on the store's connection, not as configured.
  StatusOr<strata::StoreStats> store_stats = (*registry)->store().Stats();
  if (!store_stats.ok()) return Fail(store_stats.status());
  Log("serving " + std::to_string(authenticator.tenants().size()) + " tenant(s), store " +
      config.store + " (synchronous=" + sc::StoreSyncName(store_stats->synchronous) + ")" +
      (config.tls.enabled() ? ", TLS" : ", plaintext"));

  int signal = 0;
  sigwait(&signals, &signal);
  Log(std::string("received ") + (signal == SIGTERM ? "SIGTERM" : "SIGINT") +
      ": draining (in-flight calls get up to " + std::to_string(config.drain_timeout_ms) +
      " ms)");
  if (auto* health = server->GetHealthCheckService()) health->SetServingStatus(false);
  if (http) http->BeginDrain();
  const auto start = std::chrono::steady_clock::now();
  server->Shutdown(std::chrono::system_clock::now() +
                   std::chrono::milliseconds(config.drain_timeout_ms));
  server->Wait();
  if (http) http->Stop(std::chrono::milliseconds(config.drain_timeout_ms));
  const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                      std::chrono::steady_clock::now() - start)
                      .count();
  server.reset();
  registry->reset();
  Log("drained in " + std::to_string(ms) + " ms; exiting");
  return 0;
}
