#include "replay_store.h"

#include <algorithm>
#include <nlohmann/json.hpp>
#include <utility>

namespace strata::cli {

StatusOr<std::unique_ptr<ReplayPersistence>> ReplayPersistence::Open(const std::string& db_path,
                                                                     ContextOptions options) {
  STRATA_ASSIGN_OR_RETURN(std::unique_ptr<Store> store, OpenSqliteStore(db_path));
  Status deleted = store->DeleteAgent(options.agent.id);
  if (!deleted.ok() && deleted.code() != StatusCode::kNotFound) return deleted;
  STRATA_ASSIGN_OR_RETURN(std::unique_ptr<Context> context,
                          CreateContext(*store, std::move(options)));
  return std::unique_ptr<ReplayPersistence>(
      new ReplayPersistence(std::move(store), std::move(context)));
}

Status ReplayPersistence::OnTurn(const BuiltRequest& request) {
  const std::string& body = request.body;
  const ContextStats stats = context_->Stats();
  if (!previous_history_.empty() &&
      body.compare(0, previous_history_.size(), previous_history_) != 0) {
    size_t n = std::min(previous_history_.size(), body.size());
    size_t reused = static_cast<size_t>(
        std::mismatch(body.begin(), body.begin() + n, previous_history_.begin()).first -
        body.begin());
    StoredEvent event;
    event.agent_id = context_->options().agent.id;
    event.turn = static_cast<int64_t>(stats.turns);
    event.type = "prefix_break";
    nlohmann::ordered_json payload;
    payload["reused_bytes"] = reused;
    payload["previous_history_bytes"] = previous_history_.size();
    payload["request_bytes"] = body.size();
    event.payload_json = payload.dump();
    STRATA_RETURN_IF_ERROR(store_->AppendEvent(event).status());
  }
  previous_history_.assign(body, 0, std::min(request.history_end_bytes, body.size()));
  return store_->RecordGrowth(GrowthPointOf(*context_));
}

}  // namespace strata::cli
