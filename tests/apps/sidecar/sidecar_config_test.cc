#include "sidecar_config.h"

#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstdio>
#include <fstream>
#include <string>

namespace strata::sidecar {
namespace {

const std::string kHashA(64, 'a');
const std::string kHashB(64, 'b');

TEST_CASE("sidecar config: an empty document gives the defaults", "[sidecar][config]") {
  StatusOr<SidecarConfig> c = ParseSidecarConfig("{}");
  REQUIRE(c.ok());
  CHECK(c->grpc_listen == "127.0.0.1:50051");
  CHECK(c->http_listen.empty());
  CHECK(c->backend == "vllm");
  CHECK(c->tenants.empty());
  CHECK(c->default_limits.max_agents == 1000);
  CHECK(c->default_limits.max_concurrent_completions == 16);
  CHECK(c->default_limits.max_request_bytes == 4 << 20);
  CHECK(c->drain_timeout_ms == 10000);
  CHECK(c->metrics.is_object());
  CHECK(c->metrics.empty());
  CHECK(c->pools.is_object());
  CHECK(c->pools.empty());  // no length pools
  CHECK(c->store_sync == StoreSync::kFull);  // the safe durability unless asked otherwise
}

TEST_CASE("sidecar config: the pools object is checked and kept as given", "[sidecar][config]") {
  StatusOr<SidecarConfig> c = ParseSidecarConfig(R"({"pools": {
    "pools": [{"name": "short", "max_input_tokens": 2000, "endpoints": ["http://a:8000/v1"]},
              {"name": "long", "max_input_tokens": 100000, "endpoints": ["http://b:8000/v1"]}],
    "ladder": ["wait", "refuse"]}})");
  REQUIRE(c.ok());
  CHECK(c->pools["pools"].size() == 2);
  StatusOr<strata::PoolSetConfig> pools = ParseSidecarPools(c->pools);
  REQUIRE(pools.ok());
  REQUIRE(pools->pools.size() == 2);
  CHECK(pools->pools[0].name == "short");
  CHECK(pools->pools[1].max_input_tokens == 100000);
  CHECK(pools->pools[1].endpoints == std::vector<std::string>{"http://b:8000/v1"});
  CHECK(pools->ladder.size() == 2);
}

TEST_CASE("sidecar config: every section is read", "[sidecar][config]") {
  const std::string doc = R"({
    "grpc_listen": "0.0.0.0:0", "http_listen": "127.0.0.1:8080", "store": "a.db",
    "upstream": "http://127.0.0.1:8000/v1", "backend": "sglang",
    "upstream_api_key_env": "UPSTREAM_KEY", "tokenizer": "estimate:3.5", "template": "generic",
    "budget": 32768, "allow_unauthenticated": false, "drain_timeout_ms": 2500, "max_threads": 8,
    "max_open_agents": 50, "store_sync": "normal",
    "tls": {"cert_file": "c.pem", "key_file": "k.pem", "client_ca_file": "ca.pem"},
    "default_limits": {"max_agents": 5},
    "tenants": [
      {"name": "team-a", "token_sha256": [")" +
                          kHashA + R"("],
       "limits": {"max_concurrent_completions": 2}},
      {"name": "team-b", "token_sha256": [")" +
                          kHashB + R"("]}
    ],
    "metrics": {"kv_capacity_bytes": 1000, "anything": [1, 2]},
    "metrics_token_sha256": [")" +
                          kHashB + R"("]
  })";
  StatusOr<SidecarConfig> c = ParseSidecarConfig(doc);
  REQUIRE(c.ok());
  CHECK(c->grpc_listen == "0.0.0.0:0");
  CHECK(c->http_listen == "127.0.0.1:8080");
  CHECK(c->store == "a.db");
  CHECK(c->backend == "sglang");
  CHECK(c->upstream_api_key_env == "UPSTREAM_KEY");
  CHECK(c->tokenizer == "estimate:3.5");
  CHECK(c->chat_template == "generic");
  CHECK(c->budget == 32768);
  CHECK(c->drain_timeout_ms == 2500);
  CHECK(c->max_threads == 8);
  CHECK(c->max_open_agents == 50);
  CHECK(c->store_sync == StoreSync::kNormal);
  CHECK(c->tls.client_ca_file == "ca.pem");
  REQUIRE(c->tenants.size() == 2);
  // Tenant limits start from default_limits; the tenant's own keys override them.
  CHECK(c->tenants[0].limits.max_agents == 5);
  CHECK(c->tenants[0].limits.max_concurrent_completions == 2);
  CHECK(c->tenants[1].limits.max_concurrent_completions == 16);
  CHECK(c->tenants[1].token_sha256 == std::vector<std::string>{kHashB});
  // The metrics section is kept as given for the metrics component's parser.
  CHECK(c->metrics["kv_capacity_bytes"] == 1000);
  CHECK(c->metrics["anything"].size() == 2);
  CHECK(c->metrics_token_sha256 == std::vector<std::string>{kHashB});
}

TEST_CASE("sidecar config: errors name the key path", "[sidecar][config]") {
  struct Case {
    std::string doc;
    std::string message;
  };
  const Case cases[] = {
      {"[1]", "(root): expected an object"},
      {"{\"grpc_listn\": \"x\"}", "grpc_listn: unknown key"},
      {"{\"budget\": \"big\"}", "budget: expected an integer from 0 to 1073741824, got \"big\""},
      {"{\"budget\": -1}", "budget: expected an integer from 0 to 1073741824, got -1"},
      {"{\"tls\": {\"cert\": \"x\"}}", "tls.cert: unknown key"},
      {"{\"tenants\": {}}", "tenants: expected an array"},
      {"{\"tenants\": [{\"name\": \"a\", \"token_sha256\": [\"" + kHashA +
           "\"], \"limits\": {\"max_agnts\": 1}}]}",
       "tenants[0].limits.max_agnts: unknown key"},
      {"{\"tenants\": [{\"name\": \"a\", \"token_sha256\": [\"" + kHashA +
           "\"]}, {\"name\": \"b\", \"token_sha256\": [\"" + kHashB +
           "\"], \"limits\": {\"max_agents\": \"ten\"}}]}",
       "tenants[1].limits.max_agents: expected an integer from 0 to 10000000, got \"ten\""},
      {"{\"tenants\": [{\"name\": \"a/b\", \"token_sha256\": [\"" + kHashA + "\"]}]}",
       "tenants[0].name: \"a/b\" is not a tenant name"},
      {"{\"tenants\": [{\"name\": \"a\"}]}", "tenants[0].token_sha256: a tenant needs"},
      {"{\"metrics\": 3}", "metrics: expected an object"},
      {"{\"pools\": [1]}", "pools: expected an object"},
      {"{\"pools\": {\"pools\": [{\"name\": \"s\", \"max_input_tokens\": \"many\"}]}}",
       "pools: \"pools[0].max_input_tokens\" must be a number"},
      {"{\"pools\": {\"ladders\": []}}", "pools: unknown key \"ladders\""},
      {"{\"max_threads\": 1}", "max_threads: expected an integer from 2 to 4096, got 1"},
      {"{\"metrics_token_sha256\": \"x\"}", "metrics_token_sha256: expected an array"},
      {"{\"metrics_token_sha256\": [\"short\"]}",
       "metrics_token_sha256[0]: expected the token's SHA-256"},
      {"{\"store_sync\": \"off\"}", "store_sync: \"off\" is not a durability mode"},
      {"{\"store_sync\": 1}", "store_sync: expected \"full\" or \"normal\", got 1"},
      {"{not json", "not valid JSON"},
  };
  for (const Case& c : cases) {
    INFO(c.doc);
    StatusOr<SidecarConfig> parsed = ParseSidecarConfig(c.doc);
    REQUIRE_FALSE(parsed.ok());
    CHECK(parsed.status().code() == StatusCode::kInvalidArgument);
    CHECK_THAT(parsed.status().message(), Catch::Contains(c.message));
  }
}

TEST_CASE("sidecar config: a token pasted instead of its hash is refused without echoing it",
          "[sidecar][config]") {
  const std::string secret = "sk-live-0123456789-very-secret";
  StatusOr<SidecarConfig> c =
      ParseSidecarConfig(R"({"tenants": [{"name": "a", "token_sha256": [")" + secret + R"("]}]})");
  REQUIRE_FALSE(c.ok());
  CHECK_THAT(c.status().message(), Catch::Contains("tenants[0].token_sha256[0]"));
  CHECK_THAT(c.status().message(), Catch::Contains("hash-token"));
  CHECK(c.status().message().find(secret) == std::string::npos);
}

TEST_CASE("sidecar config: store durability modes", "[sidecar][config]") {
  CHECK(ParseStoreSync("full", "--store-sync").value() == StoreSync::kFull);
  CHECK(ParseStoreSync("normal", "--store-sync").value() == StoreSync::kNormal);
  Status bad = ParseStoreSync("NORMAL", "--store-sync").status();
  CHECK(bad.code() == StatusCode::kInvalidArgument);
  CHECK_THAT(bad.message(), Catch::StartsWith("--store-sync: \"NORMAL\" is not a durability mode"));
  CHECK(std::string(StoreSyncName(StoreSync::kNormal)) == "normal");
  CHECK(std::string(StoreSyncName(StoreSync::kFull)) == "full");
}

TEST_CASE("sidecar config: HOST:PORT addresses", "[sidecar][config]") {
  StatusOr<HostPort> a = ParseHostPort("127.0.0.1:0", "--grpc-listen");
  REQUIRE(a.ok());
  CHECK(a->host == "127.0.0.1");
  CHECK(a->port == 0);
  StatusOr<HostPort> b = ParseHostPort("[::1]:50051", "--grpc-listen");
  REQUIRE(b.ok());
  CHECK(b->host == "[::1]");
  CHECK(b->port == 50051);
  for (const char* bad : {"127.0.0.1", ":80", "host:", "host:70000", "host:8x", "::1:80"}) {
    INFO(bad);
    StatusOr<HostPort> r = ParseHostPort(bad, "--grpc-listen");
    REQUIRE_FALSE(r.ok());
    CHECK_THAT(r.status().message(), Catch::Contains("--grpc-listen"));
    CHECK_THAT(r.status().message(), Catch::Contains(bad));
  }
  CHECK(IsLoopbackHost("127.0.0.1"));
  CHECK(IsLoopbackHost("localhost"));
  CHECK(IsLoopbackHost("[::1]"));
  CHECK_FALSE(IsLoopbackHost("0.0.0.0"));
  CHECK_FALSE(IsLoopbackHost("10.0.0.1"));
}

TEST_CASE("sidecar config: validation after flags", "[sidecar][config]") {
  SidecarConfig c;
  CHECK(ValidateSidecarConfig(c).ok());
  SECTION("a tenant configured twice") {
    c.tenants = {{"a", {kHashA}, {}}, {"a", {kHashB}, {}}};
    Status s = ValidateSidecarConfig(c);
    CHECK_THAT(s.message(), Catch::Contains("tenants[1].name: tenant \"a\" is configured twice"));
  }
  SECTION("one token for two tenants") {
    c.tenants = {{"a", {kHashA}, {}}, {"b", {kHashA}, {}}};
    Status s = ValidateSidecarConfig(c);
    CHECK_THAT(s.message(), Catch::Contains("tenants[1].token_sha256"));
  }
  SECTION("a certificate without its key") {
    c.tls.cert_file = "c.pem";
    CHECK_THAT(ValidateSidecarConfig(c).message(), Catch::Contains("cert_file and key_file"));
  }
  SECTION("an unreadable PEM file") {
    c.tls.cert_file = "/nonexistent/c.pem";
    c.tls.key_file = "/nonexistent/k.pem";
    Status s = ValidateSidecarConfig(c);
    CHECK(s.code() == StatusCode::kNotFound);
    CHECK_THAT(s.message(), Catch::Contains("tls.cert_file: cannot read /nonexistent/c.pem"));
  }
  SECTION("a bad listener") {
    c.http_listen = "nowhere";
    CHECK_THAT(ValidateSidecarConfig(c).message(), Catch::Contains("http_listen"));
  }
}

TEST_CASE("sidecar config: a file's errors name the file", "[sidecar][config]") {
  const std::string path = "/tmp/strata-sidecar-config-" + std::to_string(::getpid()) + ".json";
  {
    std::ofstream out(path);
    out << R"({"store": 3})";
  }
  StatusOr<SidecarConfig> c = LoadSidecarConfig(path);
  REQUIRE_FALSE(c.ok());
  CHECK_THAT(c.status().message(), Catch::Contains(path + ": store: expected a string"));
  std::remove(path.c_str());
  StatusOr<SidecarConfig> missing = LoadSidecarConfig(path);
  CHECK(missing.status().code() == StatusCode::kNotFound);
  CHECK_THAT(missing.status().message(), Catch::Contains(path));
}

std::string Nested(size_t levels) { return std::string(levels, '[') + std::string(levels, ']'); }

TEST_CASE("sidecar config: a value nested 100k or 1M deep under a typed key is refused cleanly",
          "[sidecar][config]") {
  const std::string tenant_prefix =
      "{\"tenants\": [{\"name\": \"a\", \"token_sha256\": [\"" + kHashA + "\"], \"limits\": ";
  const std::string docs[] = {
      "{\"budget\": " + Nested(100000) + "}",
      "{\"budget\": " + Nested(1000000) + "}",
      tenant_prefix + "{\"max_agents\": " + Nested(1000000) + "}}]}",
      "{\"tls\": {\"cert_file\": " + Nested(100000) + "}}",
      "{\"metrics\": {\"x\": " + Nested(100000) + "}}",
      "{\"no_such_key\": " + Nested(1000000) + "}",
  };
  for (const std::string& doc : docs) {
    INFO(doc.substr(0, 60));
    StatusOr<SidecarConfig> parsed = ParseSidecarConfig(doc);
    REQUIRE_FALSE(parsed.ok());
    CHECK(parsed.status().code() == StatusCode::kInvalidArgument);
    CHECK_THAT(parsed.status().message(),
               Catch::StartsWith("the configuration: JSON nested deeper than 512 levels"));
  }
  // As deep as the limit still parses (and is then refused for its type).
  StatusOr<SidecarConfig> deep = ParseSidecarConfig("{\"budget\": " + Nested(511) + "}");
  REQUIRE_FALSE(deep.ok());
  CHECK_THAT(deep.status().message(), Catch::StartsWith("budget: expected an integer"));
}

TEST_CASE("sidecar config: every integer has a range, named with the key and the value",
          "[sidecar][config]") {
  const std::string tenant =
      "{\"tenants\": [{\"name\": \"a\", \"token_sha256\": [\"" + kHashA + "\"], \"limits\": ";
  const std::pair<std::string, std::string> cases[] = {
      {"{\"budget\": 9223372036854775807}",
       "budget: expected an integer from 0 to 1073741824, got 9223372036854775807"},
      {"{\"budget\": 18446744073709551615}", "budget: expected an integer from 0 to 1073741824"},
      {"{\"drain_timeout_ms\": 3600001}", "drain_timeout_ms: expected an integer from 0 to 3600000"},
      {"{\"max_threads\": 100000}", "max_threads: expected an integer from 2 to 4096"},
      {"{\"max_open_agents\": -1}", "max_open_agents: expected an integer from 0 to 10000000"},
      {tenant + "{\"max_concurrent_completions\": 1000001}}]}",
       "tenants[0].limits.max_concurrent_completions: expected an integer from 0 to 100000"},
      {tenant + "{\"max_request_bytes\": 0}}]}",
       "tenants[0].limits.max_request_bytes: expected an integer from 1 to 1073741824, got 0"},
      {"{\"default_limits\": {\"max_agents\": 10000001}}",
       "default_limits.max_agents: expected an integer from 0 to 10000000"},
  };
  for (const auto& [doc, message] : cases) {
    INFO(doc);
    StatusOr<SidecarConfig> parsed = ParseSidecarConfig(doc);
    REQUIRE_FALSE(parsed.ok());
    CHECK_THAT(parsed.status().message(), Catch::StartsWith(message));
  }
  // Flags go around the file's reader: Validate checks their ranges too.
  SidecarConfig c;
  c.budget = int64_t{1} << 40;
  CHECK_THAT(ValidateSidecarConfig(c).message(),
             Catch::StartsWith("budget (--budget): 1099511627776 is out of range"));
  c.budget = 0;
  c.drain_timeout_ms = 3600001;
  CHECK_THAT(ValidateSidecarConfig(c).message(),
             Catch::StartsWith("drain_timeout_ms (--drain-timeout-ms): 3600001 is out of range"));
}

TEST_CASE("sidecar config: the tokenizer allow-list and core dumps", "[sidecar][config]") {
  StatusOr<SidecarConfig> c = ParseSidecarConfig(
      R"({"tokenizers": {"glm-5.3": "hf:/srv/glm/tokenizer.json"}, "tokenizer": "glm-5.3",
          "allow_core_dumps": true})");
  REQUIRE(c.ok());
  CHECK(c->tokenizers.at("glm-5.3") == "hf:/srv/glm/tokenizer.json");
  CHECK(c->tokenizer == "glm-5.3");
  CHECK(c->allow_core_dumps);
  CHECK_FALSE(ParseSidecarConfig("{}")->allow_core_dumps);
  CHECK_THAT(ParseSidecarConfig(R"({"tokenizers": {"a": 1}})").status().message(),
             Catch::StartsWith("tokenizers.a: expected a spec string"));
  CHECK_THAT(ParseSidecarConfig(R"({"tokenizers": []})").status().message(),
             Catch::StartsWith("tokenizers: expected an object"));
}

}  // namespace
}  // namespace strata::sidecar
