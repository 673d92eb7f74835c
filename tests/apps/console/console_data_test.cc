// The console's JSON documents (sdk/apps/console/console_data.h) from a real SQLite store.
#include "console_data.h"

#include <catch2/catch.hpp>
#include <memory>
#include <string>

#include "console_page.h"
#include "strata/store.h"
#include "testing/temp_dir.h"

namespace strata::console {
namespace {

using nlohmann::json;

std::unique_ptr<Store> NewStore(const testing::TempDir& dir, const std::vector<std::string>& ids) {
  StoreOptions options;
  options.synchronous = StoreSync::kNormal;  // 10,000 appends: no fsync each
  StatusOr<std::unique_ptr<Store>> store = OpenSqliteStore(dir.File("console.db"), options);
  REQUIRE(store.ok());
  for (const std::string& id : ids) {
    ContextOptions agent;
    agent.agent.id = id;
    REQUIRE((*store)->CreateAgent(agent).ok());
  }
  return std::move(*store);
}

RequestRecord Record(const std::string& agent, int i) {
  RequestRecord r;
  r.agent_id = agent;
  r.request_id = "req-" + std::to_string(i);
  r.started_unix_ms = 1000 + 10 * i;
  r.input_tokens = 100 + i;
  if (i % 2 == 0) r.cached_tokens_reported = 40;
  r.cached_tokens_predicted = 50;
  r.output_tokens = 7;
  r.ttft_ms = 12.5;
  return r;
}

AgentView View(const std::string& id) { return AgentView{id, "", id}; }

TEST_CASE("a timeline bar per request holds the record's tokens", "[console]") {
  testing::TempDir dir;
  auto store = NewStore(dir, {"a"});
  for (int i = 0; i < 3; ++i) REQUIRE(store->AppendRequest(Record("a", i)).ok());
  json t = Timeline(*store, View("a")).value();
  REQUIRE(t["bars"].size() == 3);
  CHECK_FALSE(t["downsampled"].get<bool>());
  const json& odd = t["bars"][1];  // no reported count: the prediction is the cached part
  CHECK(odd["request_id"] == "req-1");
  CHECK(odd["cached"] == 50.0);
  CHECK(odd["uncached"] == 51.0);
  CHECK(odd["output"] == 7.0);
  CHECK(odd["reported"] == false);
  const json& even = t["bars"][2];
  CHECK(even["cached"] == 40.0);
  CHECK(even["uncached"] == 62.0);
  CHECK(even["predicted"] == 50.0);
}

TEST_CASE("10,000 requests are downsampled into at most 600 bars of their means", "[console]") {
  testing::TempDir dir;
  auto store = NewStore(dir, {"a"});
  for (int i = 0; i < 10000; ++i) REQUIRE(store->AppendRequest(Record("a", i)).ok());
  StoredEvent brk{0,
                  "a",
                  3,
                  1000 + 10 * 9999,
                  "prefix_break",
                  R"({"request_id":"req-9999","reason":"compaction","kind":"prefix_changed",)"
                  R"("previous_prompt_tokens":900,"predicted_cached_tokens":300})"};
  REQUIRE(store->AppendEvent(brk).ok());
  json t = Timeline(*store, View("a")).value();
  REQUIRE(t["bars"].size() <= kMaxSeriesPoints);
  CHECK(t["downsampled"].get<bool>());
  CHECK(t["total"] == 10000);
  const size_t bucket = t["bucket"].get<size_t>();
  CHECK(bucket == 17);  // ceil(10000 / 600)
  const json& first = t["bars"][0];
  CHECK(first["first"] == 0);
  CHECK(first["last"] == bucket - 1);
  CHECK(first["output"] == 7.0);
  CHECK(first["uncached"].get<double>() > 60);
  REQUIRE(t["breaks"].size() == 1);
  CHECK(t["breaks"][0]["at"] == 9999);
  CHECK(t["breaks"][0]["invalidated_tokens"] == 600);
  CHECK(t["breaks"][0]["causes"] == json::array({"compaction"}));
  // The page `strata inspect --html` writes for it: the newest 1,000 records in its table.
  json page = AgentPage(*store, View("a"), 1000).value();
  CHECK(page["records"]["records"].size() == 1000);
  CHECK(page["records"]["total"] == 10000);
  CHECK(page["timeline"]["bars"].size() <= kMaxSeriesPoints);
  CHECK(ConsolePage(FileBoot(page)).size() < 3u * 1024 * 1024);
}

TEST_CASE("records page newest first and find the page of a request id", "[console]") {
  testing::TempDir dir;
  auto store = NewStore(dir, {"a"});
  for (int i = 0; i < 25; ++i) REQUIRE(store->AppendRequest(Record("a", i)).ok());
  json page = Records(*store, View("a"), PageQuery{10, 10}).value();
  CHECK(page["total"] == 25);
  REQUIRE(page["records"].size() == 10);
  CHECK(page["records"][0]["request_id"] == "req-14");
  json found = Records(*store, View("a"), PageQuery{0, 10}, "req-3").value();
  CHECK(found["offset"] == 20);  // req-3 is the 22nd newest
  CHECK(found["records"].size() == 5);
  StatusOr<json> missing = Records(*store, View("a"), PageQuery{0, 10}, "req-99");
  CHECK(missing.status().code() == StatusCode::kNotFound);
}

TEST_CASE("the agents list sorts on any column and pages", "[console]") {
  testing::TempDir dir;
  auto store = NewStore(dir, {"t/a", "t/b", "t/c"});
  REQUIRE(store->AppendRequest(Record("t/b", 0)).ok());  // b: 40 of 100 cached
  RequestRecord c = Record("t/c", 1);                    // c: 50 of 101 predicted
  REQUIRE(store->AppendRequest(c).ok());
  REQUIRE(store->AppendEvent(StoredEvent{0, "t/c", 1, 0, "prefix_break", "{}"}).ok());
  std::vector<StoredAgent> stored = store->ListAgents().value();
  std::vector<AgentView> views = {{"t/a", "t", "a"}, {"t/b", "t", "b"}, {"t/c", "t", "c"}};
  AgentsQuery query = ParseAgentsQuery("", "2", "cached_share", "desc").value();
  json list = AgentsList(*store, stored, views, query).value();
  CHECK(list["total"] == 3);
  REQUIRE(list["agents"].size() == 2);
  CHECK(list["agents"][0]["id"] == "c");
  CHECK(list["agents"][1]["id"] == "b");
  CHECK(list["agents"][0]["prefix_breaks"] == 1);
  query = ParseAgentsQuery("2", "2", "cached_share", "desc").value();
  list = AgentsList(*store, stored, views, query).value();
  REQUIRE(list["agents"].size() == 1);
  CHECK(list["agents"][0]["id"] == "a");  // no requests: unknown share, last in either order
  CHECK(list["agents"][0]["cached_share"].is_null());
  query = ParseAgentsQuery("", "", "id", "asc").value();
  list = AgentsList(*store, stored, views, query).value();
  CHECK(list["agents"][0]["id"] == "a");
  CHECK(list["agents"][2]["id"] == "c");
}

TEST_CASE("bad paging and sort parameters are refused naming them", "[console]") {
  CHECK(ParsePageQuery("x", "").status().message().find("offset") != std::string::npos);
  CHECK(ParsePageQuery("", "0").status().message().find("limit") != std::string::npos);
  CHECK(ParsePageQuery("", "5000").status().code() == StatusCode::kInvalidArgument);
  StatusOr<AgentsQuery> sort = ParseAgentsQuery("", "", "nope", "");
  CHECK(sort.status().message().find("cached_share") != std::string::npos);
  CHECK(ParseAgentsQuery("", "", "", "sideways").status().message().find("order") !=
        std::string::npos);
}

TEST_CASE("the layout names the layers, the stable prefix hash and the salt scope", "[console]") {
  testing::TempDir dir;
  StatusOr<std::unique_ptr<Store>> store = OpenSqliteStore(dir.File("layout.db"));
  REQUIRE(store.ok());
  ContextOptions options;
  options.agent.id = "a";
  options.agent.tenant = "acme";
  options.agent.scope = "repo-1";
  auto context = CreateContext(**store, options);
  REQUIRE(context.ok());
  REQUIRE((*context)->SetSystemPrompt("You are terse.").ok());
  REQUIRE((*context)->AppendUser("hello").ok());
  json layout = Layout(**store, View("a")).value();
  CHECK(layout["layers"][0]["layer"] == "system");
  CHECK(layout["layers"][0]["segments"] == 1);
  CHECK(layout["layers"][4]["layer"] == "history");
  CHECK(layout["layers"][4]["tokens"].get<int64_t>() > 0);
  const std::string hash = layout["stable_prefix"]["hash"];
  CHECK(hash.size() == 64);
  CHECK(layout["stable_prefix"]["hash"] == (*context)->Preview().value().stable_prefix_hash);
  CHECK(layout["cache_salt"]["tenant"] == "acme");
  CHECK(layout["cache_salt"]["scope"] == "repo-1");
}

TEST_CASE("growth points carry their summary requests' tokens, summed per bucket", "[console]") {
  testing::TempDir dir;
  auto store = NewStore(dir, {"a"});
  const size_t turns = 2 * kMaxSeriesPoints;  // two turns a point
  for (size_t turn = 1; turn <= turns; ++turn) {
    GrowthPoint p;
    p.agent_id = "a";
    p.turn = static_cast<int64_t>(turn);
    p.layer_tokens[static_cast<int>(Layer::kHistory)] = 10 * p.turn;
    if (turn <= 2) {  // both in the first bucket
      p.compactions = 1;
      p.summary_input_tokens = 1000 * p.turn;
      p.summary_cached_tokens = 900 * p.turn;
      p.summary_output_tokens = 50 * p.turn;
    }
    REQUIRE(store->RecordGrowth(p).ok());
  }
  json g = Growth(*store, View("a")).value();
  CHECK(g["downsampled"].get<bool>());
  REQUIRE(g["points"].size() == kMaxSeriesPoints);
  const json& first = g["points"][0];
  CHECK(first["turn"] == 2);
  CHECK(first["compactions"] == 2);
  CHECK(first["summary_input_tokens"] == 3000);
  CHECK(first["summary_cached_tokens"] == 2700);
  CHECK(first["summary_output_tokens"] == 150);
  const json& second = g["points"][1];
  CHECK(second["summary_input_tokens"] == 0);
  CHECK(second["summary_cached_tokens"] == 0);
  CHECK(second["summary_output_tokens"] == 0);
}

TEST_CASE("an unknown agent is NOT_FOUND from every document", "[console]") {
  testing::TempDir dir;
  auto store = NewStore(dir, {"a"});
  const AgentView none = View("zz");
  CHECK(Timeline(*store, none).status().code() == StatusCode::kNotFound);
  CHECK(Records(*store, none, {}).status().code() == StatusCode::kNotFound);
  CHECK(Events(*store, none, {}).status().code() == StatusCode::kNotFound);
  CHECK(Growth(*store, none).status().code() == StatusCode::kNotFound);
  CHECK(Layout(*store, none).status().code() == StatusCode::kNotFound);
  CHECK(AgentPage(*store, none).status().code() == StatusCode::kNotFound);
}

}  // namespace
}  // namespace strata::console
