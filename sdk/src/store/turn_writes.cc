// TurnWrites, their check, and Store::CommitTurn's default for stores without transactions
// (strata/store.h).
#include <nlohmann/json.hpp>

#include "strata/store.h"

namespace strata {
namespace {

Status OtherAgent(const std::string& what, const std::string& id, const TurnWrites& writes) {
  return InvalidArgumentError("TurnWrites of agent \"" + writes.agent_id + "\" holds " + what +
                              " of agent \"" + id + "\"; commit each agent's writes on their own");
}

}  // namespace

bool TurnWrites::empty() const {
  return changes.empty() && state.empty() && events.empty() && records.empty() && !growth;
}

Status CheckTurnWrites(const TurnWrites& writes) {
  if (writes.empty()) return Status::Ok();
  if (writes.agent_id.empty()) return InvalidArgumentError("TurnWrites::agent_id is empty");
  for (const auto& [key, value] : writes.state) {
    if (key.empty()) return InvalidArgumentError("TurnWrites::state: agent state key must not be empty");
  }
  for (const StoredEvent& event : writes.events) {
    if (event.agent_id != writes.agent_id) return OtherAgent("an event", event.agent_id, writes);
    if (event.type.empty()) return InvalidArgumentError("TurnWrites::events: event type must not be empty");
    nlohmann::json payload = nlohmann::json::parse(event.payload_json, nullptr, false);
    if (payload.is_discarded() || !payload.is_object()) {
      return InvalidArgumentError("TurnWrites::events: event payload must be a JSON object, got: " +
                                  event.payload_json.substr(0, 80));
    }
  }
  for (const RequestRecord& record : writes.records) {
    if (record.agent_id != writes.agent_id) return OtherAgent("a request record", record.agent_id, writes);
  }
  if (writes.growth && writes.growth->agent_id != writes.agent_id) {
    return OtherAgent("a growth point", writes.growth->agent_id, writes);
  }
  return Status::Ok();
}

Status Store::CommitTurn(const TurnWrites& writes) {
  STRATA_RETURN_IF_ERROR(CheckTurnWrites(writes));
  for (const ContextChange& change : writes.changes) {
    STRATA_RETURN_IF_ERROR(ApplyChange(writes.agent_id, change));
  }
  for (const auto& [key, value] : writes.state) {
    STRATA_RETURN_IF_ERROR(PutAgentState(writes.agent_id, key, value));
  }
  for (const StoredEvent& event : writes.events) STRATA_RETURN_IF_ERROR(AppendEvent(event).status());
  for (const RequestRecord& record : writes.records) STRATA_RETURN_IF_ERROR(AppendRequest(record));
  if (writes.growth) STRATA_RETURN_IF_ERROR(RecordGrowth(*writes.growth));
  return Status::Ok();
}

}  // namespace strata
