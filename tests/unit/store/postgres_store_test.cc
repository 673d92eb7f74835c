// Tests of the PostgreSQL store that the conformance suite (the cases run for every backend in
// sqlite_store_test.cc and context_store_test.cc) does not cover: its schema versions, its
// connection handling and the errors of a bad URL.
#include <sys/stat.h>

#include <catch2/catch.hpp>

#include "store/postgres_connection.h"
#include "store/postgres_schema.h"
#include "strata/store.h"
#include "store_test_util.h"
#include "testing/commit_cut_proxy.h"
#include "testing/fake_clock.h"
#include "testing/postgres_testing.h"

namespace strata {
namespace {

ContextOptions Options(const std::string& id) {
  ContextOptions options;
  options.agent.id = id;
  return options;
}

// A request record of agent "a".
RequestRecord Record(const std::string& request_id) {
  RequestRecord r;
  r.agent_id = "a";
  r.request_id = request_id;
  return r;
}

TEST_CASE("a PostgreSQL URL opens the PostgreSQL store and a path the SQLite one", "[store]") {
  CHECK(IsPostgresUrl("postgresql://u@h/db"));
  CHECK(IsPostgresUrl("postgres://h/db"));
  CHECK_FALSE(IsPostgresUrl("agents.db"));
  CHECK_FALSE(IsPostgresUrl("/var/lib/postgresql/agents.db"));
  testing::PostgresServer& server = testing::SharedPostgres();
  const std::string url = server.NewDatabase();
  auto store = OpenStore(url);
  REQUIRE(store.ok());
  CHECK((*store)->path() == url);
  REQUIRE((*store)->CreateAgent(Options("a")).ok());
  CHECK(testing::RunSql(url, "SELECT 1 FROM strata_agents WHERE id = 'a'").empty());
  auto stats = (*store)->Stats();
  REQUIRE(stats.ok());
  CHECK(stats->schema_version == store_internal::kPostgresSchemaVersion);
  CHECK(stats->agents == 1);
  CHECK(stats->file_bytes > 0);
}

TEST_CASE("a PostgreSQL password never appears in the store's name", "[store]") {
  CHECK(store_internal::RedactConninfo("postgresql://bob:s3cret@db:5432/x") ==
        "postgresql://bob:***@db:5432/x");
  CHECK(store_internal::RedactConninfo("host=db password=s3cret dbname=x") ==
        "host=db password=*** dbname=x");
}

TEST_CASE("an unreachable PostgreSQL server is UNAVAILABLE naming it", "[store]") {
  StoreOptions options;
  options.retries = 1;
  options.connect_timeout_ms = 2000;
  const int port = testing::FreeLocalPort();
  auto store =
      OpenStore("postgresql://postgres@127.0.0.1:" + std::to_string(port) + "/x", options);
  REQUIRE_FALSE(store.ok());
  CHECK(store.status().code() == StatusCode::kUnavailable);
  CHECK_THAT(store.status().message(), Catch::Contains("127.0.0.1:" + std::to_string(port)));
}

TEST_CASE("a missing PostgreSQL database is NOT_FOUND and an empty one without creation too",
          "[store]") {
  testing::PostgresServer& server = testing::SharedPostgres();
  auto missing = OpenStore(server.Url("no_such_database"));
  REQUIRE_FALSE(missing.ok());
  CHECK(missing.status().code() == StatusCode::kNotFound);
  StoreOptions options;
  options.create_if_missing = false;
  const std::string url = server.NewDatabase();
  auto empty = OpenStore(url, options);
  REQUIRE_FALSE(empty.ok());
  CHECK(empty.status().code() == StatusCode::kNotFound);
  CHECK_FALSE(testing::RunSql(url, "SELECT 1 FROM strata_schema").empty());  // nothing created
}

TEST_CASE("a PostgreSQL store written by a newer schema is refused naming both versions",
          "[store]") {
  const std::string url = testing::SharedPostgres().NewDatabase();
  REQUIRE(OpenStore(url).ok());
  REQUIRE(testing::RunSql(url, "UPDATE strata_schema SET version = 99").empty());
  for (bool read_only : {false, true}) {
    StoreOptions options;
    options.read_only = read_only;
    auto store = OpenStore(url, options);
    REQUIRE_FALSE(store.ok());
    CHECK(store.status().code() == StatusCode::kFailedPrecondition);
    CHECK_THAT(store.status().message(),
               Catch::Contains("99") &&
                   Catch::Contains(std::to_string(store_internal::kPostgresSchemaVersion)));
  }
  CHECK(testing::RunSql(url, "SELECT 1 FROM strata_schema WHERE version = 99").empty());
}

TEST_CASE("a version 1 PostgreSQL store is migrated forward keeping its data", "[store]") {
  const std::string url = testing::SharedPostgres().NewDatabase();
  {
    auto conn = store_internal::PgConnection::Connect(url, url, 5000);
    REQUIRE(conn.ok());
    REQUIRE(store_internal::CreatePostgresSchemaAtVersionForTesting(**conn, 1).ok());
  }
  REQUIRE(testing::RunSql(url, "INSERT INTO strata_agents(id, options, tokenizer, created_ms, "
                               "updated_ms, turn) VALUES('old', '{}', 'estimate:4', 1, 1, 7)")
              .empty());
  CHECK_FALSE(testing::RunSql(url, "SELECT 1 FROM strata_leases").empty());  // not there yet
  auto store = OpenStore(url);
  REQUIRE(store.ok());
  auto agent = (*store)->GetAgent("old");
  REQUIRE(agent.ok());
  CHECK(agent->turn == 7);
  CHECK((*store)->Stats()->schema_version == store_internal::kPostgresSchemaVersion);
  CHECK(testing::RunSql(url, "SELECT 1 FROM strata_leases").empty());
}

TEST_CASE("a version 3 PostgreSQL store's growth points gain the summary token columns",
          "[store]") {
  const std::string url = testing::SharedPostgres().NewDatabase();
  {
    auto conn = store_internal::PgConnection::Connect(url, url, 5000);
    REQUIRE(conn.ok());
    REQUIRE(store_internal::CreatePostgresSchemaAtVersionForTesting(**conn, 3).ok());
  }
  REQUIRE(testing::RunSql(url,
                          "INSERT INTO strata_agents(id, options, tokenizer, created_ms, "
                          "updated_ms, turn) VALUES('old', '{}', 'estimate:4', 1, 1, 1); "
                          "INSERT INTO strata_growth(agent, turn, unix_ms, system_tokens, "
                          "tools_tokens, index_tokens, docs_tokens, history_tokens, "
                          "volatile_tokens, compactions, invalidated_tokens) SELECT agent, "
                          "1, 5, 100, 0, 0, 0, 900, 0, 1, 300 FROM strata_agents")
              .empty());
  CHECK_FALSE(testing::RunSql(url, "SELECT summary_input_tokens FROM strata_growth").empty());
  auto store = OpenStore(url);
  REQUIRE(store.ok());
  CHECK((*store)->Stats()->schema_version == store_internal::kPostgresSchemaVersion);
  CHECK(store_internal::kPostgresSchemaVersion >= 4);
  testing::CheckMigratedGrowth(**store);
}

TEST_CASE("exclusive and max_pages are refused for a PostgreSQL store", "[store]") {
  const std::string url = testing::SharedPostgres().NewDatabase();
  StoreOptions options;
  options.max_pages = 10;
  auto store = OpenPostgresStore(url, options);
  REQUIRE_FALSE(store.ok());
  CHECK(store.status().code() == StatusCode::kInvalidArgument);
  options = StoreOptions();
  options.exclusive = true;
  CHECK(OpenPostgresStore(url, options).status().code() == StatusCode::kInvalidArgument);
  CHECK(OpenStore(url, options).ok());  // the factory shares a database by design
}

TEST_CASE("Backup of a PostgreSQL store says how to back it up and writes nothing", "[store]") {
  const std::string url = testing::SharedPostgres().NewDatabase();
  auto store = OpenStore(url);
  REQUIRE(store.ok());
  testing::TempDir dir;
  const std::string destination = dir.File("agents.sql");
  Status status = (*store)->Backup(destination);
  CHECK(status.code() == StatusCode::kUnimplemented);
  CHECK_THAT(status.message(), Catch::Contains("pg_dump --dbname='" + url +
                                               "' --table='strata_*' --file='" + destination + "'"));
  CHECK_THAT(status.message(), Catch::Contains("wrote nothing"));
  struct stat st;
  CHECK(::stat(destination.c_str(), &st) != 0);
}

TEST_CASE("a PostgreSQL store dumped with the pg_dump command Backup names restores whole",
          "[store]") {
  testing::PostgresServer& server = testing::SharedPostgres();
  const std::string url = server.NewDatabase();
  {
    auto store = OpenStore(url);
    REQUIRE(store.ok());
    auto context = CreateContext(**store, Options("a"));
    REQUIRE(context.ok());
    REQUIRE((*context)->SetSystemPrompt(std::string(5000, 's')).ok());  // a blob
    REQUIRE((*context)->AppendUser("kept").ok());
    REQUIRE((*store)->AppendRequest(Record("r1")).ok());
  }
  testing::TempDir dir;
  const std::string dump = dir.File("agents.sql");
  const std::string bin = testing::PostgresBinDir();
  testing::CommandResult dumped =
      testing::RunCommand(bin + "/pg_dump --dbname='" + url + "' --table='strata_*' --file='" +
                          dump + "' 2>&1");
  REQUIRE(dumped.exit_code == 0);
  const std::string restored = server.NewDatabase();
  testing::CommandResult loaded = testing::RunCommand(
      bin + "/psql -v ON_ERROR_STOP=1 --quiet --dbname='" + restored + "' --file='" + dump +
      "' 2>&1");
  INFO(loaded.output);
  REQUIRE(loaded.exit_code == 0);
  auto original = OpenStore(url);
  auto copy = OpenStore(restored);
  REQUIRE(original.ok());
  REQUIRE(copy.ok());
  auto a = (*original)->LoadSnapshot("a");
  auto b = (*copy)->LoadSnapshot("a");
  REQUIRE(a.ok());
  REQUIRE(b.ok());
  REQUIRE(a->segments.size() == b->segments.size());
  for (size_t i = 0; i < a->segments.size(); ++i) {
    CHECK(a->segments[i].id == b->segments[i].id);
    CHECK(a->segments[i].content == b->segments[i].content);
  }
  CHECK((*copy)->RecentRequests("a", 10)->size() == 1);
  // The restored store keeps working: its sequences came with the dump.
  CHECK((*copy)->AppendRequest(Record("r2")).ok());
  CHECK((*copy)->RecentRequests("a", 10)->front().request_id == "r2");
}

// Cuts every connection of the store's database but the caller's (as a server restart or a
// PgBouncer reconnect does).
void CutConnections(const std::string& url) {
  REQUIRE(testing::RunSql(url, "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE "
                               "datname = current_database() AND pid <> pg_backend_pid()")
              .empty());
}

TEST_CASE("a PostgreSQL connection the server cut is replaced and the call tried again",
          "[store]") {
  const std::string url = testing::SharedPostgres().NewDatabase();
  StoreOptions options;
  options.pool_size = 1;
  auto store = OpenStore(url, options);
  REQUIRE(store.ok());
  REQUIRE((*store)->CreateAgent(Options("a")).ok());
  CutConnections(url);
  auto agent = (*store)->GetAgent("a");  // a read: tried again on a new connection
  REQUIRE(agent.ok());
  CutConnections(url);
  ContextChange change;
  Segment s;
  s.id = "s1";
  s.seq = 1;
  s.layer = Layer::kHistory;
  s.kind = SegmentKind::kUser;
  s.content = "kept";
  change.upserted = {s};
  change.turn = 1;
  // A write whose connection was gone before COMMIT did not commit: tried again, once.
  REQUIRE((*store)->ApplyChange("a", change).ok());
  auto snapshot = (*store)->LoadSnapshot("a");
  REQUIRE(snapshot.ok());
  REQUIRE(snapshot->segments.size() == 1);
  CHECK(snapshot->segments[0].content == "kept");
  CHECK(snapshot->turn == 1);
}

// A store on a new database of the shared server, through `proxy`, holding agent "a"; Backoff
// sleeps on `clock`.
std::unique_ptr<Store> StoreThroughProxy(testing::CommitCutProxy& proxy, testing::FakeClock& clock,
                                         std::string& direct_url) {
  direct_url = testing::SharedPostgres().NewDatabase();
  StoreOptions options;
  options.clock = &clock;
  options.pool_size = 1;
  auto store = OpenStore(proxy.Url(direct_url.substr(direct_url.rfind('/') + 1)), options);
  REQUIRE(store.ok());
  REQUIRE((*store)->CreateAgent(Options("a")).ok());
  return std::move(store).value();
}

// The request ids stored for agent "a", read without the proxy.
std::vector<std::string> StoredRequests(const std::string& direct_url) {
  auto store = OpenStore(direct_url);
  REQUIRE(store.ok());
  auto records = (*store)->RecentRequests("a", 100);
  REQUIRE(records.ok());
  std::vector<std::string> ids;
  for (const RequestRecord& r : *records) ids.push_back(r.request_id);
  return ids;
}

TEST_CASE("a write whose COMMIT answer is lost but which committed is reported as done, once",
          "[store]") {
  testing::CommitCutProxy proxy(testing::SharedPostgres().port());
  testing::FakeClock clock;
  std::string direct_url;
  std::unique_ptr<Store> store = StoreThroughProxy(proxy, clock, direct_url);
  const int connections = proxy.accepted();
  proxy.Arm(testing::CommitCutProxy::Cut::kAfterCommit);
  Status status = store->AppendRequest(Record("r1"));
  CHECK(proxy.cuts() == 1);
  // Asked on a new connection whether it committed: it did, so it is not written again.
  CHECK(proxy.accepted() > connections);
  REQUIRE(status.ok());
  CHECK(StoredRequests(direct_url) == std::vector<std::string>{"r1"});
}

TEST_CASE("a write whose connection is lost before its COMMIT arrives is tried again, once",
          "[store]") {
  testing::CommitCutProxy proxy(testing::SharedPostgres().port());
  testing::FakeClock clock;
  std::string direct_url;
  std::unique_ptr<Store> store = StoreThroughProxy(proxy, clock, direct_url);
  proxy.Arm(testing::CommitCutProxy::Cut::kBeforeCommit);
  Status status = store->AppendRequest(Record("r1"));
  CHECK(proxy.cuts() == 1);
  REQUIRE(status.ok());  // rolled back, as a new connection told: written again
  CHECK(StoredRequests(direct_url) == std::vector<std::string>{"r1"});
}

TEST_CASE("a write lost during COMMIT is UNAVAILABLE only when no new connection can tell",
          "[store]") {
  testing::CommitCutProxy proxy(testing::SharedPostgres().port());
  testing::FakeClock clock;
  std::string direct_url;
  std::unique_ptr<Store> store = StoreThroughProxy(proxy, clock, direct_url);
  proxy.RefuseNew(true);  // the store's one connection stays; no new one gets through
  proxy.Arm(testing::CommitCutProxy::Cut::kAfterCommit);
  Status status = store->AppendRequest(Record("r1"));
  CHECK(proxy.cuts() == 1);
  CHECK(proxy.refused() >= 2);  // it tried, with backoff, to ask whether the write committed
  CHECK(status.code() == StatusCode::kUnavailable);
  CHECK_THAT(status.message(), Catch::Contains("whether the change committed could not be learned"));
  CHECK_THAT(status.message(), Catch::Contains("reopen the context from the store"));
  // It had committed: an unknown outcome, never a write reported lost that is there.
  CHECK(StoredRequests(direct_url) == std::vector<std::string>{"r1"});
  proxy.RefuseNew(false);
  auto records = store->RecentRequests("a", 10);
  REQUIRE(records.ok());
  CHECK(records->size() == 1);
}

TEST_CASE("a stopped PostgreSQL server makes calls UNAVAILABLE and they succeed once it is back",
          "[store]") {
  testing::PostgresServer server;  // its own: this case stops it
  const std::string url = server.NewDatabase();
  StoreOptions options;
  options.retries = 1;
  auto store = OpenStore(url, options);
  REQUIRE(store.ok());
  auto context = CreateContext(**store, Options("a"));
  REQUIRE(context.ok());
  REQUIRE((*context)->AppendUser("acknowledged before").ok());
  const std::string acknowledged = (*context)->Build()->body;
  server.Stop();
  auto refused = (*context)->AppendUser("while down");
  REQUIRE_FALSE(refused.ok());
  CHECK(refused.status().code() == StatusCode::kUnavailable);
  CHECK_THAT(refused.status().message(), Catch::Contains("127.0.0.1"));
  CHECK((*context)->Build()->body == acknowledged);  // rolled back
  CHECK((*store)->GetAgent("a").status().code() == StatusCode::kUnavailable);
  CHECK((*store)->CheckFiles().code() == StatusCode::kUnavailable);
  server.Start();
  CHECK((*store)->CheckFiles().ok());
  REQUIRE((*context)->AppendUser("after").ok());
  auto reopened = OpenContext(**store, "a");
  REQUIRE(reopened.ok());
  CHECK((*reopened)->Build()->body == (*context)->Build()->body);
}

}  // namespace
}  // namespace strata
