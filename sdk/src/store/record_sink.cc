// MakeStoreRecordSink: strata::Client's RecordSink over a Store (strata/store.h).
//
// Only the inline parts of strata/client.h are used (the RecordSink interface and the
// PrefixBreakEvent value type), so strata::store does not link strata::transport.
#include <nlohmann/json.hpp>

#include "strata/client.h"
#include "strata/store.h"

namespace strata {
namespace {

class StoreRecordSink final : public RecordSink {
 public:
  explicit StoreRecordSink(Store& store) : store_(store) {}

  Status Write(const RequestRecord& record) override { return store_.AppendRequest(record); }

  Status WriteEvent(const PrefixBreakEvent& event) override {
    nlohmann::ordered_json payload;
    payload["kind"] = event.kind == PrefixBreakEvent::Kind::kPrefixChanged ? "prefix_changed"
                                                                           : "server_shortfall";
    payload["request_id"] = event.request_id;
    payload["predicted_cached_tokens"] = event.predicted_cached_tokens;
    if (event.reported_cached_tokens) {
      payload["reported_cached_tokens"] = *event.reported_cached_tokens;
    } else {
      payload["reported_cached_tokens"] = nullptr;
    }
    payload["previous_prompt_tokens"] = event.previous_prompt_tokens;
    payload["segment_id"] = event.segment_id;
    payload["layer"] = event.layer;
    payload["reason"] = event.reason;
    StoredEvent stored;
    stored.agent_id = event.agent_id;
    STRATA_ASSIGN_OR_RETURN(StoredAgent agent, store_.GetAgent(event.agent_id));
    stored.turn = agent.turn;
    stored.type = "prefix_break";
    stored.payload_json =
        payload.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace);
    return store_.AppendEvent(stored).status();
  }

 private:
  Store& store_;
};

}  // namespace

std::unique_ptr<RecordSink> MakeStoreRecordSink(Store& store) {
  return std::make_unique<StoreRecordSink>(store);
}

}  // namespace strata
