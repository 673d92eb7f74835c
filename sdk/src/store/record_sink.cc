// MakeStoreRecordSink: strata::Client's RecordSink over a Store (strata/store.h).
//
// The RecordSink interface, PrefixBreakEvent and its JSON are strata::core's (strata/record.h).
#include "strata/record.h"
#include "strata/store.h"

namespace strata {
namespace {

class StoreRecordSink final : public RecordSink {
 public:
  explicit StoreRecordSink(Store& store) : store_(store) {}

  Status Write(const RequestRecord& record) override { return store_.AppendRequest(record); }

  Status WriteEvent(const PrefixBreakEvent& event) override {
    StoredEvent stored;
    stored.agent_id = event.agent_id;
    STRATA_ASSIGN_OR_RETURN(StoredAgent agent, store_.GetAgent(event.agent_id));
    stored.turn = agent.turn;
    stored.type = "prefix_break";
    stored.payload_json = PrefixBreakEventJson(event, /*with_type_and_agent=*/false);
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
