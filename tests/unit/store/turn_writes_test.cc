// Store::CommitTurn: a turn's writes in one transaction, all or nothing; its input checked first;
// the default implementation for stores without transactions.
#include <catch2/catch.hpp>
#include <random>
#include <string>
#include <vector>

#include "strata/store.h"
#include "testing/forwarding_store.h"
#include "testing/postgres_testing.h"
#include "testing/temp_dir.h"

namespace strata {
namespace {

using testing::TempDir;

ContextOptions AgentOptions(const std::string& id) {
  ContextOptions options;
  options.agent.id = id;
  return options;
}

Segment UserSegment(uint64_t seq, std::string content) {
  Segment s;
  s.id = "s" + std::to_string(seq);
  s.seq = seq;
  s.position = static_cast<int64_t>(seq) * 10;
  s.layer = Layer::kHistory;
  s.kind = SegmentKind::kUser;
  s.content = std::move(content);
  s.tokens = s.content.size() / 4;
  return s;
}

// One turn's writes: a change adding segment `seq`, a state value, an event, a record, growth.
TurnWrites Writes(const std::string& agent, uint64_t seq, std::string content) {
  TurnWrites w;
  w.agent_id = agent;
  ContextChange change;
  change.upserted = {UserSegment(seq, std::move(content))};
  change.turn = static_cast<int64_t>(seq);
  w.changes.push_back(std::move(change));
  w.state.emplace_back("prefix_cache", "state " + std::to_string(seq));
  StoredEvent e;
  e.agent_id = agent;
  e.turn = static_cast<int64_t>(seq);
  e.type = "prefix_break";
  e.payload_json = R"({"reason":"test"})";
  w.events.push_back(e);
  RequestRecord r;
  r.agent_id = agent;
  r.request_id = agent + "-r" + std::to_string(seq);
  w.records.push_back(r);
  GrowthPoint g;
  g.agent_id = agent;
  g.turn = static_cast<int64_t>(seq);
  w.growth = g;
  return w;
}

// How much of each kind `agent` holds: segments, state value, events, records, growth points.
std::string Held(Store& store, const std::string& agent) {
  auto snapshot = store.LoadSnapshot(agent);
  auto state = store.GetAgentState(agent, "prefix_cache");
  auto events = store.Events(agent);
  auto records = store.RecentRequests(agent, 1000);
  auto growth = store.Growth(agent);
  REQUIRE((snapshot.ok() && state.ok() && events.ok() && records.ok() && growth.ok()));
  return std::to_string(snapshot->segments.size()) + " segments, state \"" +
         (state->has_value() ? **state : "") + "\", " + std::to_string(events->size()) + " events, " +
         std::to_string(records->size()) + " records, " + std::to_string(growth->size()) + " growth";
}

TEST_CASE("CommitTurn writes a turn's changes, state, events, record and growth in one transaction",
          "[store]") {
  TempDir dir;
  auto store = OpenSqliteStore(dir.File("a.db")).value();
  REQUIRE(store->CreateAgent(AgentOptions("a")).ok());
  const int64_t before = store->Stats()->write_transactions;
  REQUIRE(store->CommitTurn(Writes("a", 1, "first")).ok());
  CHECK(store->Stats()->write_transactions == before + 1);
  CHECK(Held(*store, "a") == "1 segments, state \"state 1\", 1 events, 1 records, 1 growth");
  CHECK(store->GetAgent("a")->turn == 1);
  // The same writes one call each take five transactions.
  TurnWrites w = Writes("a", 2, "second");
  const int64_t single = store->Stats()->write_transactions;
  REQUIRE(store->ApplyChange("a", w.changes[0]).ok());
  REQUIRE(store->PutAgentState("a", w.state[0].first, w.state[0].second).ok());
  REQUIRE(store->AppendEvent(w.events[0]).ok());
  REQUIRE(store->AppendRequest(w.records[0]).ok());
  REQUIRE(store->RecordGrowth(*w.growth).ok());
  CHECK(store->Stats()->write_transactions == single + 5);
  // Nothing to write: no transaction.
  TurnWrites empty;
  CHECK(store->CommitTurn(empty).ok());
  CHECK(store->Stats()->write_transactions == single + 5);
}

TEST_CASE("CommitTurn is one transaction on every backend: all of a turn or none of it", "[store]") {
  STRATA_FOR_EACH_STORE_BACKEND(where);
  auto store = where.Open().value();
  REQUIRE(store->CreateAgent(AgentOptions("a")).ok());
  REQUIRE(store->CommitTurn(Writes("a", 1, "first")).ok());
  CHECK(Held(*store, "a") == "1 segments, state \"state 1\", 1 events, 1 records, 1 growth");
  CHECK(store->GetAgent("a")->turn == 1);
  // A write late in the turn that the database refuses (PostgreSQL's text columns take only
  // UTF-8; SQLite stores the bytes): the change, state and event before it must not stay either.
  TurnWrites w = Writes("a", 2, "second");
  w.records[0].error = "not UTF-8: \xff\xfe";
  const std::string before = Held(*store, "a");
  Status status = store->CommitTurn(w);
  INFO(status.ToString());
  if (status.ok()) {
    CHECK(Held(*store, "a") == "2 segments, state \"state 2\", 2 events, 2 records, 2 growth");
  } else {
    CHECK(Held(*store, "a") == before);
    CHECK(store->GetAgent("a")->turn == 1);
  }
  // The stores agree on what a reopen sees.
  store.reset();
  auto reopened = where.Open().value();
  CHECK(Held(*reopened, "a") == (status.ok() ? "2 segments, state \"state 2\", 2 events, 2 records, 2 growth"
                                             : before));
}

TEST_CASE("CommitTurn refuses bad input whole before writing", "[store]") {
  TempDir dir;
  auto store = OpenSqliteStore(dir.File("a.db")).value();
  REQUIRE(store->CreateAgent(AgentOptions("a")).ok());
  REQUIRE(store->CreateAgent(AgentOptions("b")).ok());
  const std::string held = Held(*store, "a");
  TurnWrites bad_payload = Writes("a", 1, "x");
  bad_payload.events[0].payload_json = "[1]";
  TurnWrites other_agent = Writes("a", 1, "x");
  other_agent.records[0].agent_id = "b";
  TurnWrites empty_key = Writes("a", 1, "x");
  empty_key.state[0].first.clear();
  TurnWrites unknown = Writes("nobody", 1, "x");
  for (const TurnWrites* w : {&bad_payload, &other_agent, &empty_key}) {
    Status status = store->CommitTurn(*w);
    CHECK(status.code() == StatusCode::kInvalidArgument);
    CHECK(Held(*store, "a") == held);
  }
  CHECK(store->CommitTurn(unknown).code() == StatusCode::kNotFound);
  CHECK_THAT(store->CommitTurn(other_agent).message(), Catch::Contains("agent \"b\""));
}

TEST_CASE("a turn that does not fit is refused whole: no write of it stays", "[store]") {
  TempDir dir;
  StoreOptions options;
  options.max_pages = 40;  // 160 KB
  options.compression_level = 0;
  auto store = OpenSqliteStore(dir.File("a.db"), options).value();
  REQUIRE(store->CreateAgent(AgentOptions("a")).ok());
  std::mt19937 rng(11);
  Status status;
  uint64_t seq = 1;
  std::string held;
  for (; seq < 1000; ++seq) {
    std::string text;
    while (text.size() < 6000) text += std::to_string(rng()) + " ";
    held = Held(*store, "a");
    // The large row is the record, written after the change, the state and the event: when it
    // does not fit, those are rolled back with it.
    TurnWrites w = Writes("a", seq, "turn " + std::to_string(seq));
    w.records[0].error = text;
    status = store->CommitTurn(w);
    if (!status.ok()) break;
  }
  REQUIRE(status.code() == StatusCode::kResourceExhausted);
  REQUIRE(seq > 5);
  CHECK(Held(*store, "a") == held);
  CHECK(store->GetAgent("a")->turn == static_cast<int64_t>(seq - 1));
}

TEST_CASE("the default CommitTurn checks the writes, then makes them one call each", "[store]") {
  TempDir dir;
  auto inner = OpenSqliteStore(dir.File("a.db")).value();
  REQUIRE(inner->CreateAgent(AgentOptions("a")).ok());
  testing::ForwardingStore store(*inner);
  store.default_commit = true;
  TurnWrites bad = Writes("a", 1, "x");
  bad.events[0].type.clear();
  CHECK(store.CommitTurn(bad).code() == StatusCode::kInvalidArgument);
  CHECK(store.mutations == 0);
  REQUIRE(store.CommitTurn(Writes("a", 1, "first")).ok());
  CHECK(store.mutations == 5);
  CHECK(Held(store, "a") == "1 segments, state \"state 1\", 1 events, 1 records, 1 growth");
}

}  // namespace
}  // namespace strata
