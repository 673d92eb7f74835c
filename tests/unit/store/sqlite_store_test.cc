// Tests of the SQLite store on its own (no Context): round trips, deduplication, request records,
// events, growth, retention, schema versions, and the clear errors of bad files and environments.
#include <sqlite3.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <fstream>
#include <functional>
#include <iterator>
#include <random>
#include <thread>

#include "store/schema.h"
#include "strata/store.h"
#include "testing/child_process.h"
#include "testing/fake_clock.h"
#include "testing/postgres_testing.h"
#include "unit/store/store_test_util.h"

namespace strata {
namespace {

using testing::Describe;
using testing::TempDir;

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

std::string RandomText(std::mt19937& rng, size_t bytes) {
  static const char* kWords[] = {"error",  "file",   "line", "test",   "def ", "return", "\n", "  ",
                                 "assert", "import", "0x1f", "passed", "{",    "}",      "é",  "→"};
  std::string out;
  while (out.size() < bytes) out += kWords[rng() % (sizeof kWords / sizeof kWords[0])];
  return out;
}

ContextOptions Options(const std::string& id) {
  ContextOptions options;
  options.agent.id = id;
  options.agent.tenant = "tenant-a";
  options.agent.scope = "repo:rw";
  options.render.model = "glm-test";
  options.render.system_layout = SystemLayout::kMessagePerSegment;
  options.hygiene.max_segment_tokens = 1234;
  options.hygiene.head_share = 0.25;
  options.keep_originals = false;
  return options;
}

Segment MakeSegment(uint64_t seq, Layer layer, SegmentKind kind, std::string content) {
  Segment s;
  s.id = "s" + std::to_string(seq);
  s.seq = seq;
  s.position = static_cast<int64_t>(seq) * 10;
  s.layer = layer;
  s.kind = kind;
  s.content = std::move(content);
  s.tokens = s.content.size() / 4;
  s.turn = static_cast<int64_t>(seq / 3);
  return s;
}

// A change with one segment of every interesting shape.
ContextChange RichChange(std::mt19937& rng) {
  ContextChange change;
  Segment system = MakeSegment(1, Layer::kSystem, SegmentKind::kSystem, "You are a coding agent.");
  system.pinned = true;
  Segment doc = MakeSegment(2, Layer::kDocs, SegmentKind::kDoc, RandomText(rng, 5000));
  doc.name = "README.md";
  doc.version = "v3";
  doc.order = -7;
  Segment call = MakeSegment(3, Layer::kHistory, SegmentKind::kToolCall, "");
  call.reasoning = "think";
  // Arguments kept byte for byte, including what JSON would re-escape.
  call.tool_calls = {{"call_1", "bash", "{\"cmd\": \"ls\\u00e9\",  \"x\":1.50}"},
                     {"call_2", "read", std::string("\x00\xff raw", 6)}};
  Segment result = MakeSegment(4, Layer::kHistory, SegmentKind::kToolResult, RandomText(rng, 700));
  result.tool_call_id = "call_1";
  result.name = "bash";
  result.hygiene = HygieneAction::kTruncated;
  result.recall_id = "r4";
  Segment masked = MakeSegment(5, Layer::kHistory, SegmentKind::kErrorLog, "[masked]");
  masked.tool_call_id = "call_2";
  masked.state = SegmentState::kMasked;
  masked.duplicate_of = "call_0";
  change.upserted = {system, doc, call, result, masked};
  change.originals = {{"r4", RandomText(rng, 20000)}, {"r5", "short original"}};
  change.turn = 2;
  return change;
}

std::vector<std::string> DescribeAll(const std::vector<Segment>& segments) {
  std::vector<std::string> out;
  for (const Segment& s : segments) out.push_back(Describe(s));
  std::sort(out.begin(), out.end());
  return out;
}

TEST_CASE("a change round-trips every segment field and original exactly", "[store]") {
  STRATA_FOR_EACH_STORE_BACKEND(dir);
  std::mt19937 rng(1);
  ContextChange change = RichChange(rng);
  {
    auto store = dir.Open();
    REQUIRE(store.ok());
    REQUIRE((*store)->CreateAgent(Options("agent-1")).ok());
    REQUIRE((*store)->ApplyChange("agent-1", change).ok());
  }
  auto store = dir.Open();
  REQUIRE(store.ok());
  auto snapshot = (*store)->LoadSnapshot("agent-1");
  REQUIRE(snapshot.ok());
  CHECK(snapshot->turn == 2);
  CHECK(DescribeAll(snapshot->segments) == DescribeAll(change.upserted));
  auto originals = snapshot->originals;
  std::sort(originals.begin(), originals.end());
  CHECK(originals == change.originals);
  auto recalled = (*store)->LoadOriginal("agent-1", "r4");
  REQUIRE(recalled.ok());
  CHECK(*recalled == change.originals[0].second);
  CHECK((*store)->LoadOriginal("agent-1", "nope").status().code() == StatusCode::kNotFound);

  auto agent = (*store)->GetAgent("agent-1");
  REQUIRE(agent.ok());
  CHECK(agent->options.agent.tenant == "tenant-a");
  CHECK(agent->options.agent.scope == "repo:rw");
  CHECK(agent->options.render.model == "glm-test");
  CHECK(agent->options.render.system_layout == SystemLayout::kMessagePerSegment);
  CHECK(agent->options.hygiene.max_segment_tokens == 1234);
  CHECK(agent->options.hygiene.head_share == 0.25);
  CHECK_FALSE(agent->options.keep_originals);
  CHECK(agent->tokenizer_name == "estimate:4");
  CHECK(agent->turn == 2);
  CHECK(agent->segments == 5);
}

TEST_CASE("removals and replacements apply and unused blobs are collected", "[store]") {
  STRATA_FOR_EACH_STORE_BACKEND(dir);
  std::mt19937 rng(2);
  auto store = dir.Open();
  REQUIRE(store.ok());
  REQUIRE((*store)->CreateAgent(Options("a")).ok());
  ContextChange change = RichChange(rng);
  REQUIRE((*store)->ApplyChange("a", change).ok());
  auto before = (*store)->Stats();
  REQUIRE(before.ok());
  CHECK(before->blobs == 3);  // doc, tool result, big original (the short one stays inline)

  ContextChange edit;
  Segment masked = change.upserted[3];
  masked.content = "[output masked: recall r4]";
  masked.state = SegmentState::kMasked;
  edit.upserted = {masked};
  edit.removed_ids = {"s2"};
  edit.turn = 3;
  REQUIRE((*store)->ApplyChange("a", edit).ok());
  auto after = (*store)->Stats();
  REQUIRE(after.ok());
  CHECK(after->blobs == 1);  // only the original r4 is still referenced
  auto snapshot = (*store)->LoadSnapshot("a");
  REQUIRE(snapshot.ok());
  REQUIRE(snapshot->segments.size() == 4);
  bool found = false;
  for (const Segment& s : snapshot->segments) {
    CHECK(s.id != "s2");
    if (s.id == "s4") {
      found = true;
      CHECK(s.content == "[output masked: recall r4]");
      CHECK(s.state == SegmentState::kMasked);
    }
  }
  CHECK(found);
  CHECK(snapshot->turn == 3);
}

TEST_CASE("identical contents are stored once and compressed", "[store]") {
  STRATA_FOR_EACH_STORE_BACKEND(dir);
  std::mt19937 rng(3);
  std::string big = RandomText(rng, 64 * 1024);
  auto store = dir.Open();
  REQUIRE(store.ok());
  for (const char* id : {"a", "b", "c"}) {
    REQUIRE((*store)->CreateAgent(Options(id)).ok());
    ContextChange change;
    change.upserted = {MakeSegment(1, Layer::kHistory, SegmentKind::kUser, big)};
    change.originals = {{"r1", big}};
    REQUIRE((*store)->ApplyChange(id, change).ok());
  }
  auto stats = (*store)->Stats();
  REQUIRE(stats.ok());
  CHECK(stats->blobs == 1);
  CHECK(stats->blob_raw_bytes == static_cast<int64_t>(big.size()));
  CHECK(stats->blob_stored_bytes < stats->blob_raw_bytes / 2);
  auto snapshot = (*store)->LoadSnapshot("c");
  REQUIRE(snapshot.ok());
  CHECK(snapshot->segments.at(0).content == big);

  // Deleting two agents keeps the blob for the third; deleting the last collects it.
  REQUIRE((*store)->DeleteAgent("a").ok());
  REQUIRE((*store)->DeleteAgent("b").ok());
  CHECK((*store)->Stats()->blobs == 1);
  REQUIRE((*store)->DeleteAgent("c").ok());
  CHECK((*store)->Stats()->blobs == 0);
  CHECK((*store)->ListAgents()->empty());
}

TEST_CASE("without deduplication every content is stored inline", "[store]") {
  STRATA_FOR_EACH_STORE_BACKEND(dir);
  std::mt19937 rng(4);
  StoreOptions options;
  options.deduplicate = false;
  auto store = dir.Open(options);
  REQUIRE(store.ok());
  REQUIRE((*store)->CreateAgent(Options("a")).ok());
  ContextChange change = RichChange(rng);
  REQUIRE((*store)->ApplyChange("a", change).ok());
  CHECK((*store)->Stats()->blobs == 0);
  CHECK(DescribeAll((*store)->LoadSnapshot("a")->segments) == DescribeAll(change.upserted));
}

TEST_CASE("agents are unique and unknown agents are named in errors", "[store]") {
  STRATA_FOR_EACH_STORE_BACKEND(dir);
  auto store = dir.Open();
  REQUIRE(store.ok());
  REQUIRE((*store)->CreateAgent(Options("alpha")).ok());
  REQUIRE((*store)->CreateAgent(Options("beta")).ok());
  CHECK((*store)->CreateAgent(Options("alpha")).code() == StatusCode::kAlreadyExists);
  CHECK((*store)->CreateAgent(Options("")).code() == StatusCode::kInvalidArgument);
  Status missing = (*store)->ApplyChange("gamma", ContextChange{});
  CHECK(missing.code() == StatusCode::kNotFound);
  CHECK_THAT(missing.message(), Catch::Contains("gamma") && Catch::Contains("alpha, beta"));
  auto agents = (*store)->ListAgents();
  REQUIRE(agents.ok());
  REQUIRE(agents->size() == 2);
  CHECK(agents->at(0).options.agent.id == "alpha");
  CHECK(agents->at(1).options.agent.id == "beta");
}

TEST_CASE("created, updated and event times come from StoreOptions::clock", "[store]") {
  STRATA_FOR_EACH_STORE_BACKEND(dir);
  testing::FakeClock clock;
  StoreOptions options;
  options.clock = &clock;
  auto store = dir.Open(options);
  REQUIRE(store.ok());
  const int64_t start = testing::FakeClock::kStartUnixMillis;
  REQUIRE((*store)->CreateAgent(Options("a")).ok());
  clock.Advance(60 * 1000000);  // one minute later
  ContextChange change;
  change.turn = 1;
  REQUIRE((*store)->ApplyChange("a", change).ok());
  StoredEvent event;
  event.agent_id = "a";
  event.type = "note";
  REQUIRE((*store)->AppendEvent(event).ok());  // unix_ms 0: the store's now
  auto agent = (*store)->GetAgent("a");
  REQUIRE(agent.ok());
  CHECK(agent->created_unix_ms == start);
  CHECK(agent->updated_unix_ms == start + 60000);
  auto events = (*store)->Events("a");
  REQUIRE(events.ok());
  REQUIRE(events->size() == 1);
  CHECK(events->at(0).unix_ms == start + 60000);
}

RequestRecord Request(const std::string& agent, int n, int64_t started) {
  RequestRecord r;
  r.agent_id = agent;
  r.request_id = "req-" + std::to_string(n);
  r.pool = "long";
  r.endpoint = "http://127.0.0.1:1/v1";
  r.model = "glm";
  r.started_unix_ms = started;
  r.input_tokens = 1000 + n;
  if (n % 2 == 0) r.cached_tokens_reported = 900;
  r.cached_tokens_predicted = 880;
  r.output_tokens = 20;
  r.reasoning_tokens = 5;
  r.queue_wait_ms = 1.5;
  r.ttft_ms = 100.25;
  r.decode_ms = 30;
  r.total_ms = 131.75;
  r.kv_cache_bytes = 7600000;
  r.finish_reason = "stop";
  r.attempts = 1;
  r.http_status = 200;
  return r;
}

TEST_CASE("request records are kept, listed newest first and pruned without touching contexts",
          "[store]") {
  STRATA_FOR_EACH_STORE_BACKEND(dir);
  std::mt19937 rng(5);
  auto store = dir.Open();
  REQUIRE(store.ok());
  for (const char* id : {"a", "b"}) {
    REQUIRE((*store)->CreateAgent(Options(id)).ok());
    REQUIRE((*store)->ApplyChange(id, RichChange(rng)).ok());
    for (int i = 0; i < 10; ++i) REQUIRE((*store)->AppendRequest(Request(id, i, 1000 * i)).ok());
  }
  CHECK((*store)->AppendRequest(Request("zzz", 1, 1)).code() == StatusCode::kNotFound);
  auto recent = (*store)->RecentRequests("a", 3);
  REQUIRE(recent.ok());
  REQUIRE(recent->size() == 3);
  CHECK(recent->at(0).request_id == "req-9");
  CHECK(recent->at(2).request_id == "req-7");
  CHECK_FALSE(recent->at(0).cached_tokens_reported.has_value());
  CHECK(recent->at(1).cached_tokens_reported == 900);
  CHECK(recent->at(0).ttft_ms == 100.25);
  CHECK(recent->at(0).kv_cache_bytes == 7600000);

  // By age: now = 10000, max age 5000 -> records started before 5000 go (5 per agent).
  auto pruned = (*store)->PruneRequests({/*max_age_ms=*/5000, 0}, 10000);
  REQUIRE(pruned.ok());
  CHECK(*pruned == 10);
  // By count: keep the newest 2 per agent.
  pruned = (*store)->PruneRequests({0, /*max_records_per_agent=*/2}, 10000);
  REQUIRE(pruned.ok());
  CHECK(*pruned == 6);
  recent = (*store)->RecentRequests("b", 100);
  REQUIRE(recent.ok());
  REQUIRE(recent->size() == 2);
  CHECK(recent->at(0).request_id == "req-9");
  CHECK(recent->at(1).request_id == "req-8");
  CHECK((*store)->LoadSnapshot("a")->segments.size() == 5);
  CHECK((*store)->LoadSnapshot("b")->originals.size() == 2);
}

TEST_CASE("events are validated, typed and ordered", "[store]") {
  STRATA_FOR_EACH_STORE_BACKEND(dir);
  auto store = dir.Open();
  REQUIRE(store.ok());
  REQUIRE((*store)->CreateAgent(Options("a")).ok());
  StoredEvent bad;
  bad.agent_id = "a";
  bad.type = "compaction";
  bad.payload_json = "[1,2]";
  CHECK((*store)->AppendEvent(bad).status().code() == StatusCode::kInvalidArgument);
  bad.payload_json = "{";
  CHECK((*store)->AppendEvent(bad).status().code() == StatusCode::kInvalidArgument);
  StoredEvent compaction{
      0,   "a",          7,
      123, "compaction", R"({"boundary":"s12","tokens_before":9000,"tokens_after":4000})"};
  StoredEvent prefix_break{0, "a", 8, 0, "prefix_break", R"({"segment_id":"s3","reason":"doc"})"};
  REQUIRE((*store)->AppendEvent(compaction).ok());
  REQUIRE((*store)->AppendEvent(prefix_break).ok());
  auto all = (*store)->Events("a");
  REQUIRE(all.ok());
  REQUIRE(all->size() == 2);
  CHECK(all->at(0).type == "compaction");
  CHECK(all->at(0).unix_ms == 123);
  CHECK(all->at(0).payload_json == compaction.payload_json);
  CHECK(all->at(1).unix_ms > 0);
  auto only = (*store)->Events("a", "prefix_break");
  REQUIRE(only.ok());
  REQUIRE(only->size() == 1);
  CHECK(only->at(0).turn == 8);
  CHECK((*store)->GetAgent("a")->compactions == 1);
}

TEST_CASE("growth points are recorded per turn and replaced on re-record", "[store]") {
  STRATA_FOR_EACH_STORE_BACKEND(dir);
  auto store = dir.Open();
  REQUIRE(store.ok());
  REQUIRE((*store)->CreateAgent(Options("a")).ok());
  for (int turn = 1; turn <= 5; ++turn) {
    GrowthPoint p;
    p.agent_id = "a";
    p.turn = turn;
    p.layer_tokens[static_cast<int>(Layer::kSystem)] = 100;
    p.layer_tokens[static_cast<int>(Layer::kHistory)] = 1000 * turn;
    p.compactions = turn == 4 ? 1 : 0;
    p.invalidated_tokens = turn == 4 ? 2500 : 0;
    REQUIRE((*store)->RecordGrowth(p).ok());
  }
  GrowthPoint again;
  again.agent_id = "a";
  again.turn = 5;
  again.layer_tokens[static_cast<int>(Layer::kHistory)] = 42;
  REQUIRE((*store)->RecordGrowth(again).ok());
  auto curve = (*store)->Growth("a");
  REQUIRE(curve.ok());
  REQUIRE(curve->size() == 5);
  CHECK(curve->at(0).TotalTokens() == 1100);
  CHECK(curve->at(3).compactions == 1);
  CHECK(curve->at(3).invalidated_tokens == 2500);
  CHECK(curve->at(4).TotalTokens() == 42);
  CHECK((*store)->Growth("b").status().code() == StatusCode::kNotFound);
}

TEST_CASE("a growth point's summary request tokens round-trip", "[store]") {
  STRATA_FOR_EACH_STORE_BACKEND(dir);
  auto store = dir.Open();
  REQUIRE(store.ok());
  REQUIRE((*store)->CreateAgent(Options("a")).ok());
  GrowthPoint p;
  p.agent_id = "a";
  p.turn = 2;
  p.compactions = 1;
  p.summary_input_tokens = 41000;
  p.summary_cached_tokens = 39500;
  p.summary_output_tokens = 812;
  REQUIRE((*store)->RecordGrowth(p).ok());
  GrowthPoint plain;  // a turn without a summary request
  plain.agent_id = "a";
  plain.turn = 3;
  REQUIRE((*store)->RecordGrowth(plain).ok());
  auto curve = (*store)->Growth("a");
  REQUIRE(curve.ok());
  REQUIRE(curve->size() == 2);
  CHECK(curve->at(0).summary_input_tokens == 41000);
  CHECK(curve->at(0).summary_cached_tokens == 39500);
  CHECK(curve->at(0).summary_output_tokens == 812);
  CHECK(curve->at(1).summary_input_tokens == 0);
  CHECK(curve->at(1).summary_cached_tokens == 0);
  CHECK(curve->at(1).summary_output_tokens == 0);
  p.summary_output_tokens = 900;  // re-recorded: replaced
  REQUIRE((*store)->RecordGrowth(p).ok());
  curve = (*store)->Growth("a");
  REQUIRE(curve.ok());
  CHECK(curve->at(0).summary_output_tokens == 900);
  CHECK(curve->at(0).summary_cached_tokens == 39500);
}

TEST_CASE("a file that is not a database is refused with DATA_LOSS and left untouched", "[store]") {
  TempDir dir;
  std::string path = dir.File("garbage.db");
  std::string garbage(8192, '\0');
  std::mt19937 rng(6);
  for (char& c : garbage) c = static_cast<char>(rng());
  std::ofstream(path, std::ios::binary) << garbage;
  auto store = OpenSqliteStore(path);
  REQUIRE_FALSE(store.ok());
  CHECK(store.status().code() == StatusCode::kDataLoss);
  CHECK_THAT(store.status().message(), Catch::Contains(path) && Catch::Contains("not a SQLite"));
  CHECK(ReadFile(path) == garbage);
}

TEST_CASE("a SQLite file of another application is refused and left untouched", "[store]") {
  TempDir dir;
  std::string path = dir.File("other.db");
  sqlite3* db = nullptr;
  REQUIRE(sqlite3_open(path.c_str(), &db) == SQLITE_OK);
  REQUIRE(sqlite3_exec(db, "CREATE TABLE invoices(id INTEGER); INSERT INTO invoices VALUES(1);",
                       nullptr, nullptr, nullptr) == SQLITE_OK);
  sqlite3_close(db);
  std::string before = ReadFile(path);
  auto store = OpenSqliteStore(path);
  REQUIRE_FALSE(store.ok());
  CHECK(store.status().code() == StatusCode::kFailedPrecondition);
  CHECK_THAT(store.status().message(),
             Catch::Contains("another application") && Catch::Contains("invoices"));
  CHECK(ReadFile(path) == before);
}

TEST_CASE("a store written by a newer schema is refused and left untouched", "[store]") {
  TempDir dir;
  std::string path = dir.File("a.db");
  {
    auto store = OpenSqliteStore(path);
    REQUIRE(store.ok());
    REQUIRE((*store)->CreateAgent(Options("a")).ok());
  }
  sqlite3* db = nullptr;
  REQUIRE(sqlite3_open(path.c_str(), &db) == SQLITE_OK);
  REQUIRE(sqlite3_exec(db, "PRAGMA user_version = 99", nullptr, nullptr, nullptr) == SQLITE_OK);
  sqlite3_close(db);
  std::string before = ReadFile(path);
  for (bool read_only : {false, true}) {
    StoreOptions options;
    options.read_only = read_only;
    auto store = OpenSqliteStore(path, options);
    REQUIRE_FALSE(store.ok());
    CHECK(store.status().code() == StatusCode::kFailedPrecondition);
    CHECK_THAT(store.status().message(),
               Catch::Contains("newer strata") && Catch::Contains("99") &&
                   Catch::Contains("up to " + std::to_string(StoreSchemaVersion())));
  }
  CHECK(ReadFile(path) == before);
}

TEST_CASE("a version 1 store is migrated forward keeping its data", "[store]") {
  TempDir dir;
  std::string path = dir.File("v1.db");
  sqlite3* db = nullptr;
  REQUIRE(sqlite3_open(path.c_str(), &db) == SQLITE_OK);
  REQUIRE(store_internal::CreateSchemaAtVersionForTesting(db, 1).ok());
  REQUIRE(sqlite3_exec(db,
                       "INSERT INTO agents(id, options, tokenizer, created_ms, updated_ms, turn) "
                       "VALUES('old', '{\"agent\":{\"id\":\"old\"}}', 'estimate:4', 1, 1, 3)",
                       nullptr, nullptr, nullptr) == SQLITE_OK);
  sqlite3_close(db);
  auto store = OpenSqliteStore(path);
  REQUIRE(store.ok());
  auto agent = (*store)->GetAgent("old");
  REQUIRE(agent.ok());
  CHECK(agent->turn == 3);
  CHECK(agent->options.render.model == RenderOptions{}.model);  // missing fields: defaults
  GrowthPoint p;
  p.agent_id = "old";
  p.turn = 3;
  CHECK((*store)->RecordGrowth(p).ok());  // the table added by version 2 exists
  REQUIRE(sqlite3_open(path.c_str(), &db) == SQLITE_OK);
  auto version = store_internal::PragmaInt(db, "user_version", path);
  sqlite3_close(db);
  REQUIRE(version.ok());
  CHECK(*version == StoreSchemaVersion());
}

TEST_CASE("a request's pool decision round-trips: pool, queue wait, degradation and notes",
          "[store]") {
  STRATA_FOR_EACH_STORE_BACKEND(dir);
  auto store = dir.Open();
  REQUIRE(store.ok());
  REQUIRE((*store)->CreateAgent(Options("a")).ok());
  RequestRecord r = Request("a", 1, 1000);
  r.pool = "short";
  r.queue_wait_ms = 12.5;
  r.degradation = "compact";
  r.degradation_notes = "fork skipped: no smaller pool has a free slot";
  REQUIRE((*store)->AppendRequest(r).ok());
  REQUIRE((*store)->AppendRequest(Request("a", 2, 2000)).ok());  // no decision
  auto recent = (*store)->RecentRequests("a", 10);
  REQUIRE(recent.ok());
  REQUIRE(recent->size() == 2);
  CHECK(recent->at(0).degradation.empty());
  CHECK(recent->at(0).degradation_notes.empty());
  CHECK(recent->at(1).pool == "short");
  CHECK(recent->at(1).queue_wait_ms == 12.5);
  CHECK(recent->at(1).degradation == "compact");
  CHECK(recent->at(1).degradation_notes == "fork skipped: no smaller pool has a free slot");
}

TEST_CASE("a version 4 store gains the degradation columns and keeps its request records",
          "[store]") {
  TempDir dir;
  std::string path = dir.File("v4.db");
  sqlite3* db = nullptr;
  REQUIRE(sqlite3_open(path.c_str(), &db) == SQLITE_OK);
  REQUIRE(store_internal::CreateSchemaAtVersionForTesting(db, 4).ok());
  REQUIRE(sqlite3_exec(db,
                       "INSERT INTO agents(id, options, tokenizer, created_ms, updated_ms, turn) "
                       "VALUES('old', '{\"agent\":{\"id\":\"old\"}}', 'estimate:4', 1, 1, 1);"
                       "INSERT INTO requests(agent, request_id, pool, endpoint, model, started_ms, "
                       "input_tokens, cached_reported, cached_predicted, output_tokens, "
                       "reasoning_tokens, queue_wait_ms, ttft_ms, decode_ms, total_ms, "
                       "kv_cache_bytes, finish_reason, attempts, http_status, code, error) "
                       "VALUES(1, 'req-old', 'long', 'http://a/v1', 'm', 5, 100, NULL, 0, 7, 0, "
                       "250.0, 1.0, 2.0, 3.0, 0, 'stop', 1, 200, 0, '')",
                       nullptr, nullptr, nullptr) == SQLITE_OK);
  sqlite3_close(db);
  auto store = OpenSqliteStore(path);
  REQUIRE(store.ok());
  auto recent = (*store)->RecentRequests("old", 10);
  REQUIRE(recent.ok());
  REQUIRE(recent->size() == 1);
  CHECK(recent->at(0).request_id == "req-old");
  CHECK(recent->at(0).pool == "long");
  CHECK(recent->at(0).queue_wait_ms == 250.0);
  CHECK(recent->at(0).degradation.empty());  // the new columns' default
  RequestRecord r = Request("old", 2, 10);
  r.degradation = "wait";
  REQUIRE((*store)->AppendRequest(r).ok());
  recent = (*store)->RecentRequests("old", 1);
  REQUIRE(recent.ok());
  CHECK(recent->at(0).degradation == "wait");
  REQUIRE(sqlite3_open(path.c_str(), &db) == SQLITE_OK);
  auto version = store_internal::PragmaInt(db, "user_version", path);
  sqlite3_close(db);
  REQUIRE(version.ok());
  CHECK(*version == StoreSchemaVersion());
  CHECK(StoreSchemaVersion() >= 5);
}

TEST_CASE("a version 7 store's growth points gain the summary token columns, read back 0",
          "[store]") {
  TempDir dir;
  std::string path = dir.File("v7.db");
  sqlite3* db = nullptr;
  REQUIRE(sqlite3_open(path.c_str(), &db) == SQLITE_OK);
  REQUIRE(store_internal::CreateSchemaAtVersionForTesting(db, 7).ok());
  REQUIRE(sqlite3_exec(db,
                       "INSERT INTO agents(id, options, tokenizer, created_ms, updated_ms, turn) "
                       "VALUES('old', '{\"agent\":{\"id\":\"old\"}}', 'estimate:4', 1, 1, 1);"
                       "INSERT INTO growth(agent, turn, unix_ms, system_tokens, tools_tokens, "
                       "index_tokens, docs_tokens, history_tokens, volatile_tokens, compactions, "
                       "invalidated_tokens) VALUES(1, 1, 5, 100, 0, 0, 0, 900, 0, 1, 300)",
                       nullptr, nullptr, nullptr) == SQLITE_OK);
  sqlite3_close(db);
  auto store = OpenSqliteStore(path);
  REQUIRE(store.ok());
  testing::CheckMigratedGrowth(**store);
  REQUIRE(sqlite3_open(path.c_str(), &db) == SQLITE_OK);
  auto version = store_internal::PragmaInt(db, "user_version", path);
  sqlite3_close(db);
  REQUIRE(version.ok());
  CHECK(*version == StoreSchemaVersion());
  CHECK(StoreSchemaVersion() >= 8);
}

TEST_CASE("a missing file is NOT_FOUND when creation is not allowed", "[store]") {
  TempDir dir;
  StoreOptions options;
  options.create_if_missing = false;
  CHECK(OpenSqliteStore(dir.File("none.db"), options).status().code() == StatusCode::kNotFound);
  options = {};
  options.read_only = true;
  CHECK(OpenSqliteStore(dir.File("none.db"), options).status().code() == StatusCode::kNotFound);
  CHECK(OpenSqliteStore(dir.path()).status().code() == StatusCode::kInvalidArgument);
}

TEST_CASE("a store in a read-only directory is refused with PERMISSION_DENIED", "[store]") {
  TempDir dir;
  std::string ro = dir.File("ro");
  REQUIRE(::mkdir(ro.c_str(), 0755) == 0);
  REQUIRE(::chmod(dir.path().c_str(), 0755) == 0);
  REQUIRE(::chmod(ro.c_str(), 0555) == 0);
  // root ignores directory permissions: run the attempt as an unprivileged user.
  testing::ChildOutcome child = testing::RunInChild([&](int report_fd) {
    if (::geteuid() == 0 && (::setgid(65534) != 0 || ::setuid(65534) != 0)) return 3;
    auto store = OpenSqliteStore(ro + "/a.db");
    std::string report = store.ok() ? std::string("OK") : store.status().ToString();
    return testing::WriteReport(report_fd, report) ? 0 : 4;
  });
  REQUIRE(child.exited);
  REQUIRE(child.exit_code == 0);
  CHECK_THAT(child.report,
             Catch::StartsWith("PERMISSION_DENIED") && Catch::Contains(ro + "/a.db"));
  struct stat st;
  CHECK(::stat((ro + "/a.db").c_str(), &st) != 0);
}

TEST_CASE("a full database refuses the change whole and keeps everything acknowledged", "[store]") {
  TempDir dir;
  std::string path = dir.File("a.db");
  StoreOptions options;
  options.max_pages = 40;  // 160 KB
  options.compression_level = 0;
  std::mt19937 rng(7);
  auto store = OpenSqliteStore(path, options);
  REQUIRE(store.ok());
  REQUIRE((*store)->CreateAgent(Options("a")).ok());
  std::vector<Segment> acknowledged;
  Status status;
  for (uint64_t seq = 1; seq < 1000; ++seq) {
    ContextChange change;
    change.upserted = {
        MakeSegment(seq, Layer::kHistory, SegmentKind::kUser, RandomText(rng, 6000))};
    change.turn = static_cast<int64_t>(seq);
    status = (*store)->ApplyChange("a", change);
    if (!status.ok()) break;
    acknowledged.push_back(change.upserted[0]);
  }
  REQUIRE_FALSE(status.ok());
  CHECK(status.code() == StatusCode::kResourceExhausted);
  CHECK_THAT(status.message(), Catch::Contains("full") && Catch::Contains("max_pages"));
  REQUIRE(acknowledged.size() > 5);
  // The refused change left nothing; a small change still fits; a reopen sees the same.
  auto snapshot = (*store)->LoadSnapshot("a");
  REQUIRE(snapshot.ok());
  CHECK(DescribeAll(snapshot->segments) == DescribeAll(acknowledged));
  CHECK(snapshot->turn == static_cast<int64_t>(acknowledged.size()));
  store->reset();
  auto reopened = OpenSqliteStore(path);
  REQUIRE(reopened.ok());
  CHECK(DescribeAll((*reopened)->LoadSnapshot("a")->segments) == DescribeAll(acknowledged));
}

TEST_CASE("a second writer waits for the busy timeout and then gets UNAVAILABLE", "[store]") {
  TempDir dir;
  std::string path = dir.File("a.db");
  StoreOptions options;
  options.busy_timeout_ms = 200;
  auto store = OpenSqliteStore(path, options);
  REQUIRE(store.ok());
  REQUIRE((*store)->CreateAgent(Options("a")).ok());
  // Another connection (as another process would) holds the write lock.
  sqlite3* other = nullptr;
  REQUIRE(sqlite3_open(path.c_str(), &other) == SQLITE_OK);
  REQUIRE(sqlite3_exec(other, "BEGIN IMMEDIATE", nullptr, nullptr, nullptr) == SQLITE_OK);
  ContextChange change;
  change.upserted = {MakeSegment(1, Layer::kHistory, SegmentKind::kUser, "hello")};
  change.turn = 1;
  auto start = std::chrono::steady_clock::now();
  Status status = (*store)->ApplyChange("a", change);
  auto waited = std::chrono::steady_clock::now() - start;
  CHECK(status.code() == StatusCode::kUnavailable);
  CHECK_THAT(status.message(), Catch::Contains("busy timeout") && Catch::Contains("200 ms"));
  CHECK(waited >= std::chrono::milliseconds(150));
  // Readers are not blocked by the writer (WAL).
  CHECK((*store)->LoadSnapshot("a").ok());
  REQUIRE(sqlite3_exec(other, "ROLLBACK", nullptr, nullptr, nullptr) == SQLITE_OK);
  sqlite3_close(other);
  REQUIRE((*store)->ApplyChange("a", change).ok());
  CHECK((*store)->LoadSnapshot("a")->segments.size() == 1);
}

TEST_CASE("a read-only store reads and refuses mutations", "[store]") {
  STRATA_FOR_EACH_STORE_BACKEND(dir);
  std::string path = dir.location();
  {
    auto store = OpenStore(path);
    REQUIRE(store.ok());
    REQUIRE((*store)->CreateAgent(Options("a")).ok());
  }
  StoreOptions options;
  options.read_only = true;
  auto store = OpenStore(path, options);
  REQUIRE(store.ok());
  CHECK((*store)->ListAgents()->size() == 1);
  CHECK((*store)->CreateAgent(Options("b")).code() == StatusCode::kFailedPrecondition);
}

TEST_CASE("several threads write their own agents through one store", "[store][concurrency]") {
  STRATA_FOR_EACH_STORE_BACKEND(dir);
  StoreOptions options;
  options.synchronous = StoreSync::kNormal;
  auto store = dir.Open(options);
  REQUIRE(store.ok());
  constexpr int kThreads = 4;
  constexpr int kChanges = 50;
  std::vector<std::thread> threads;
  std::vector<Status> failures(kThreads);
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      std::string id = "agent-" + std::to_string(t);
      Status status = (*store)->CreateAgent(Options(id));
      for (int i = 1; status.ok() && i <= kChanges; ++i) {
        ContextChange change;
        change.upserted = {MakeSegment(i, Layer::kHistory, SegmentKind::kUser,
                                       id + " message " + std::to_string(i))};
        change.turn = i;
        status = (*store)->ApplyChange(id, change);
        if (status.ok()) status = (*store)->AppendRequest(Request(id, i, i));
      }
      failures[t] = status;
    });
  }
  for (auto& thread : threads) thread.join();
  for (const Status& status : failures) CHECK(status.ok());
  for (int t = 0; t < kThreads; ++t) {
    auto snapshot = (*store)->LoadSnapshot("agent-" + std::to_string(t));
    REQUIRE(snapshot.ok());
    CHECK(snapshot->segments.size() == kChanges);
    CHECK(snapshot->turn == kChanges);
  }
  CHECK((*store)->Stats()->requests == kThreads * kChanges);
}

TEST_CASE("StoreOptions::synchronous reaches SQLite and reads back in Stats", "[store]") {
  STRATA_FOR_EACH_STORE_BACKEND(dir);
  for (StoreSync sync : {StoreSync::kFull, StoreSync::kNormal, StoreSync::kFull}) {
    StoreOptions options;
    options.synchronous = sync;
    // One file, reopened with each mode: the mode belongs to the connection, not the file.
    auto store = dir.Open(options);
    REQUIRE(store.ok());
    auto stats = (*store)->Stats();
    REQUIRE(stats.ok());
    CHECK(stats->synchronous == sync);
  }
  StoreOptions read_only;
  read_only.read_only = true;
  auto store = dir.Open(read_only);
  REQUIRE(store.ok());
  CHECK((*store)->Stats()->synchronous == StoreSync::kFull);  // SQLite's default; nothing written
}

TEST_CASE("a backup is a consistent copy that opens as a store", "[store]") {
  TempDir dir;
  std::mt19937 rng(8);
  auto store = OpenSqliteStore(dir.File("a.db"));
  REQUIRE(store.ok());
  REQUIRE((*store)->CreateAgent(Options("a")).ok());
  ContextChange change = RichChange(rng);
  REQUIRE((*store)->ApplyChange("a", change).ok());
  REQUIRE((*store)->Backup(dir.File("backup.db")).ok());
  CHECK((*store)->Backup(dir.File("backup.db")).code() == StatusCode::kAlreadyExists);
  auto backup = OpenSqliteStore(dir.File("backup.db"));
  REQUIRE(backup.ok());
  CHECK(DescribeAll((*backup)->LoadSnapshot("a")->segments) == DescribeAll(change.upserted));
}

}  // namespace
}  // namespace strata

namespace strata {
namespace {

TEST_CASE("an agent re-created by another connection receives the next change", "[store]") {
  STRATA_FOR_EACH_STORE_BACKEND(dir);
  std::string path = dir.location();
  auto first = OpenStore(path);
  auto second = OpenStore(path);
  REQUIRE(first.ok());
  REQUIRE(second.ok());
  REQUIRE((*first)->CreateAgent(Options("x")).ok());
  REQUIRE((*first)->CreateAgent(Options("y")).ok());
  ContextChange change;
  change.upserted = {MakeSegment(1, Layer::kHistory, SegmentKind::kUser, "before")};
  REQUIRE((*first)->ApplyChange("x", change).ok());
  // Another process starts agent x over.
  REQUIRE((*second)->DeleteAgent("x").ok());
  REQUIRE((*second)->CreateAgent(Options("x")).ok());
  change.upserted = {MakeSegment(1, Layer::kHistory, SegmentKind::kUser, "after")};
  REQUIRE((*first)->ApplyChange("x", change).ok());
  auto snapshot = (*second)->LoadSnapshot("x");
  REQUIRE(snapshot.ok());
  REQUIRE(snapshot->segments.size() == 1);
  CHECK(snapshot->segments[0].content == "after");
}

}  // namespace
}  // namespace strata

namespace strata {
namespace {

TEST_CASE("a damaged strata store reports DATA_LOSS instead of wrong data", "[store]") {
  TempDir dir;
  std::string path = dir.File("a.db");
  std::mt19937 rng(9);
  {
    auto store = OpenSqliteStore(path);
    REQUIRE(store.ok());
    REQUIRE((*store)->CreateAgent(Options("a")).ok());
    for (int i = 0; i < 5; ++i) REQUIRE((*store)->ApplyChange("a", RichChange(rng)).ok());
  }
  std::string bytes = ReadFile(path);
  REQUIRE(bytes.size() > 8 * 4096);
  for (size_t i = 2 * 4096; i < bytes.size(); ++i) bytes[i] = static_cast<char>(rng());
  std::ofstream(path, std::ios::binary | std::ios::trunc) << bytes;
  auto store = OpenSqliteStore(path);
  Status status = store.status();
  if (store.ok()) status = (*store)->LoadSnapshot("a").status();
  CHECK(status.code() == StatusCode::kDataLoss);
  CHECK_THAT(status.message(), Catch::Contains(path));
}

TEST_CASE("a file left before the schema was written opens read-only as an empty store", "[store]") {
  TempDir dir;
  std::string path = dir.File("killed.db");
  std::ofstream(path, std::ios::binary);  // what a process killed before its first commit leaves
  StoreOptions options;
  options.read_only = true;
  auto store = OpenSqliteStore(path, options);
  REQUIRE(store.ok());
  auto agents = (*store)->ListAgents();
  REQUIRE(agents.ok());
  CHECK(agents->empty());
  CHECK((*store)->CreateAgent(Options("a")).code() == StatusCode::kFailedPrecondition);
  CHECK(ReadFile(path).empty());  // not modified
}

TEST_CASE("per-agent state is stored, replaced, and deleted with the agent", "[store]") {
  STRATA_FOR_EACH_STORE_BACKEND(dir);
  auto store = dir.Open();
  REQUIRE(store.ok());
  REQUIRE((*store)->CreateAgent(Options("a")).ok());
  CHECK((*store)->PutAgentState("nobody", "k", "v").code() == StatusCode::kNotFound);
  CHECK((*store)->PutAgentState("a", "", "v").code() == StatusCode::kInvalidArgument);
  CHECK_FALSE((*store)->GetAgentState("a", "config")->has_value());
  const std::string binary("x\0y\n", 4);
  REQUIRE((*store)->PutAgentState("a", "config", "{\"v\":1}").ok());
  REQUIRE((*store)->PutAgentState("a", "blob", binary).ok());
  REQUIRE((*store)->PutAgentState("a", "config", "{\"v\":2}").ok());
  CHECK(**(*store)->GetAgentState("a", "config") == "{\"v\":2}");
  CHECK(**(*store)->GetAgentState("a", "blob") == binary);
  REQUIRE((*store)->DeleteAgent("a").ok());
  REQUIRE((*store)->CreateAgent(Options("a")).ok());
  CHECK_FALSE((*store)->GetAgentState("a", "config")->has_value());
}

}  // namespace
}  // namespace strata

namespace strata {
namespace {

// Runs `body` in a child process as an unprivileged user (root ignores directory permissions) and
// returns what it reported.
std::string RunAsNobody(const std::function<std::string()>& body) {
  int fds[2];
  if (::pipe(fds) != 0) return "pipe failed";
  pid_t pid = ::fork();
  if (pid < 0) return "fork failed";
  if (pid == 0) {
    ::close(fds[0]);
    if (::geteuid() == 0 && (::setgid(65534) != 0 || ::setuid(65534) != 0)) ::_exit(3);
    std::string report = body();
    if (::write(fds[1], report.data(), report.size()) < 0) ::_exit(4);
    ::_exit(0);
  }
  ::close(fds[1]);
  std::string report;
  char buf[512];
  ssize_t n;
  while ((n = ::read(fds[0], buf, sizeof buf)) > 0) report.append(buf, static_cast<size_t>(n));
  ::close(fds[0]);
  int wstatus = 0;
  ::waitpid(pid, &wstatus, 0);
  if (!WIFEXITED(wstatus) || WEXITSTATUS(wstatus) != 0) report += " (child failed)";
  return report;
}

TEST_CASE("out-of-range enum columns are DATA_LOSS naming the row, not a crash", "[store]") {
  struct Case {
    const char* column;
    const char* value;
    const char* expect;
  };
  for (const Case& c : {Case{"layer", "99", "column layer holds 99 (valid: 0..4)"},
                        Case{"layer", "-1", "column layer holds -1"},
                        Case{"layer", "5", "column layer holds 5"},
                        Case{"kind", "4000000000", "column kind holds 4000000000"},
                        Case{"state", "7", "column state holds 7 (valid: 0..3)"},
                        Case{"hygiene", "-3", "column hygiene holds -3"},
                        Case{"tokens", "-8", "column tokens holds -8 (must not be negative)"}}) {
    TempDir dir;
    std::string path = dir.File("a.db");
    std::mt19937 rng(3);
    {
      auto store = OpenSqliteStore(path);
      REQUIRE(store.ok());
      REQUIRE((*store)->CreateAgent(Options("a")).ok());
      REQUIRE((*store)->ApplyChange("a", RichChange(rng)).ok());
    }
    sqlite3* db = nullptr;
    REQUIRE(sqlite3_open(path.c_str(), &db) == SQLITE_OK);
    std::string sql = std::string("UPDATE segments SET ") + c.column + " = " + c.value + " WHERE id = 's3'";
    REQUIRE(sqlite3_exec(db, sql.c_str(), nullptr, nullptr, nullptr) == SQLITE_OK);
    sqlite3_close(db);
    auto store = OpenSqliteStore(path);
    REQUIRE(store.ok());
    Status status = (*store)->LoadSnapshot("a").status();
    INFO(status.ToString());
    CHECK(status.code() == StatusCode::kDataLoss);
    CHECK_THAT(status.message(), Catch::Contains("segment \"s3\" of agent \"a\"") && Catch::Contains(c.expect));
    CHECK(OpenContext(**store, "a").status().code() == StatusCode::kDataLoss);
  }
}

TEST_CASE("processes creating one store at the same moment all succeed", "[store]") {
  for (int round = 0; round < 5; ++round) {
    TempDir dir;
    const std::string path = dir.File("shared.db");
    constexpr int kProcesses = 6;
    int go[2];
    REQUIRE(::pipe(go) == 0);
    std::vector<std::pair<pid_t, int>> children;
    for (int i = 0; i < kProcesses; ++i) {
      int fds[2];
      REQUIRE(::pipe(fds) == 0);
      pid_t pid = ::fork();
      REQUIRE(pid >= 0);
      if (pid == 0) {
        ::close(fds[0]);
        ::close(go[1]);
        char c;
        if (::read(go[0], &c, 1) < 0) ::_exit(3);  // all start together when the pipe closes
        auto store = OpenSqliteStore(path);
        std::string report = store.ok() ? std::string("OK") : store.status().ToString();
        if (store.ok()) {
          Status created = (*store)->CreateAgent(Options("agent-" + std::to_string(i)));
          if (!created.ok()) report = created.ToString();
        }
        if (::write(fds[1], report.data(), report.size()) < 0) ::_exit(4);
        ::_exit(0);
      }
      ::close(fds[1]);
      children.emplace_back(pid, fds[0]);
    }
    ::close(go[0]);
    ::close(go[1]);
    for (auto& [pid, fd] : children) {
      std::string report;
      char buf[512];
      ssize_t n;
      while ((n = ::read(fd, buf, sizeof buf)) > 0) report.append(buf, static_cast<size_t>(n));
      ::close(fd);
      int wstatus = 0;
      ::waitpid(pid, &wstatus, 0);
      CHECK(report == "OK");
    }
    auto store = OpenSqliteStore(path);
    REQUIRE(store.ok());
    CHECK((*store)->ListAgents()->size() == kProcesses);
  }
}

TEST_CASE("a WAL store in a read-only directory opens read-only", "[store]") {
  TempDir dir;
  std::string ro = dir.File("ro");
  REQUIRE(::mkdir(ro.c_str(), 0755) == 0);
  REQUIRE(::chmod(dir.path().c_str(), 0755) == 0);
  const std::string path = ro + "/a # b?.db";  // URI-special characters in the name
  {
    auto store = OpenSqliteStore(path);
    REQUIRE(store.ok());
    REQUIRE((*store)->CreateAgent(Options("a")).ok());
  }
  REQUIRE(::chmod(path.c_str(), 0644) == 0);
  REQUIRE(::chmod(ro.c_str(), 0555) == 0);
  std::string report = RunAsNobody([&] {
    StoreOptions options;
    options.read_only = true;
    options.create_if_missing = false;
    auto store = OpenSqliteStore(path, options);
    if (!store.ok()) return store.status().ToString();
    auto agents = (*store)->ListAgents();
    if (!agents.ok()) return agents.status().ToString();
    return "agents: " + std::to_string(agents->size());
  });
  CHECK(report == "agents: 1");
}

TEST_CASE("opening read-only never turns an empty or foreign file into a store", "[store]") {
  TempDir dir;
  const std::string empty = dir.File("empty.db");
  std::ofstream(empty).close();
  StoreOptions options;
  options.read_only = true;
  options.create_if_missing = false;
  {
    // An empty file (a process killed before it wrote the schema) reads as an empty store, and
    // stays an empty file.
    auto store = OpenSqliteStore(empty, options);
    REQUIRE(store.ok());
    auto agents = (*store)->ListAgents();
    REQUIRE(agents.ok());
    CHECK(agents->empty());
  }
  CHECK(ReadFile(empty).empty());
  const std::string text = dir.File("notes.txt");
  std::ofstream(text) << "not a database\n";
  CHECK_FALSE(OpenSqliteStore(text, options).ok());
  CHECK(ReadFile(text) == "not a database\n");
}

}  // namespace
}  // namespace strata

namespace strata {
namespace {

TEST_CASE("ReplaceAgent swaps a complete agent in under the old id in one step", "[store]") {
  STRATA_FOR_EACH_STORE_BACKEND(dir);
  auto store = dir.Open();
  REQUIRE(store.ok());
  std::mt19937 rng(5);
  REQUIRE((*store)->CreateAgent(Options("x")).ok());
  REQUIRE((*store)->ApplyChange("x", RichChange(rng)).ok());
  REQUIRE((*store)->CreateAgent(Options("x.new")).ok());
  ContextChange change;
  change.upserted = {MakeSegment(1, Layer::kSystem, SegmentKind::kSystem, "the new one")};
  change.turn = 1;
  REQUIRE((*store)->ApplyChange("x.new", change).ok());
  REQUIRE((*store)->ReplaceAgent("x.new", "x").ok());
  auto agents = (*store)->ListAgents();
  REQUIRE(agents.ok());
  REQUIRE(agents->size() == 1);
  CHECK(agents->front().options.agent.id == "x");
  auto snapshot = (*store)->LoadSnapshot("x");
  REQUIRE(snapshot.ok());
  REQUIRE(snapshot->segments.size() == 1);
  CHECK(snapshot->segments[0].content == "the new one");
  CHECK((*store)->Stats()->blobs == 0);  // the replaced agent's blobs were collected
  // Into a free id it is a rename; unknown and equal ids are refused and change nothing.
  REQUIRE((*store)->ReplaceAgent("x", "y").ok());
  CHECK((*store)->GetAgent("y").ok());
  CHECK((*store)->ReplaceAgent("nobody", "y").code() == StatusCode::kNotFound);
  CHECK((*store)->ReplaceAgent("y", "y").code() == StatusCode::kInvalidArgument);
  CHECK((*store)->GetAgent("y").ok());
}

}  // namespace
}  // namespace strata
