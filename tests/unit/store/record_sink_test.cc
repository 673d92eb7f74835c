// The store as strata::Client's RecordSink: request records and prefix-break events land in it.
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "strata/client.h"
#include "strata/store.h"
#include "testing/postgres_testing.h"
#include "testing/temp_dir.h"

namespace strata {
namespace {

using testing::TempDir;

TEST_CASE("the store record sink keeps request records and prefix-break events", "[store]") {
  STRATA_FOR_EACH_STORE_BACKEND(dir);
  auto store = dir.Open();
  REQUIRE(store.ok());
  ContextOptions options;
  options.agent.id = "agent-7";
  REQUIRE((*store)->CreateAgent(options).ok());
  std::unique_ptr<RecordSink> sink = MakeStoreRecordSink(**store);

  RequestRecord record;
  record.agent_id = "agent-7";
  record.request_id = "req-1";
  record.input_tokens = 5000;
  record.cached_tokens_reported = 4096;
  record.finish_reason = "tool_calls";
  REQUIRE(sink->Write(record).ok());
  record.agent_id = "ghost";
  CHECK(sink->Write(record).code() == StatusCode::kNotFound);

  PrefixBreakEvent event;
  event.kind = PrefixBreakEvent::Kind::kServerShortfall;
  event.agent_id = "agent-7";
  event.request_id = "req-1";
  event.predicted_cached_tokens = 4800;
  event.reported_cached_tokens = 4096;
  event.segment_id = "s12";
  event.layer = "history";
  event.reason = "server evicted or mismatched";
  REQUIRE(sink->WriteEvent(event).ok());

  auto requests = (*store)->RecentRequests("agent-7", 10);
  REQUIRE(requests.ok());
  REQUIRE(requests->size() == 1);
  CHECK(requests->at(0).cached_tokens_reported == 4096);
  CHECK(requests->at(0).finish_reason == "tool_calls");
  auto events = (*store)->Events("agent-7", "prefix_break");
  REQUIRE(events.ok());
  REQUIRE(events->size() == 1);
  auto payload = nlohmann::json::parse(events->at(0).payload_json);
  CHECK(payload["kind"] == "server_shortfall");
  CHECK(payload["reported_cached_tokens"] == 4096);
  CHECK(payload["segment_id"] == "s12");
  CHECK(payload["reason"] == "server evicted or mismatched");
}

}  // namespace
}  // namespace strata
