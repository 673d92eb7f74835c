// The writes of one Agent turn (turn_batch.h).
#include "agent/turn_batch.h"

#include <utility>

#include "strata/client.h"

namespace strata {
namespace agent_internal {

Status AgentJournal::Record(const ContextChange& change) {
  if (drop_) return Status::Ok();
  Status written = Status::Ok();
  if (collect_ == nullptr && !change.compaction) {
    written = inner_->Record(change);
  } else {
    ContextChange copy = change;
    copy.compaction.reset();
    if (collect_ != nullptr) {
      collect_->push_back(std::move(copy));
      return Status::Ok();
    }
    written = inner_->Record(copy);
  }
  if (written.ok()) ++stored_;
  return written;
}

TurnBatch::TurnBatch(Store* store, AgentJournal* journal, std::string agent_id)
    : store_(store), journal_(store != nullptr ? journal : nullptr) {
  writes_.agent_id = std::move(agent_id);
  if (journal_ != nullptr) journal_->Collect(&writes_.changes);
}

Status TurnBatch::Commit() {
  AgentJournal* journal = journal_;
  Release();
  if (store_ == nullptr) return Status::Ok();
  Status committed = store_->CommitTurn(writes_);
  if (committed.ok() && journal != nullptr && !writes_.changes.empty()) journal->CountStored();
  Clear();
  return committed;
}

void TurnBatch::Discard() {
  Release();
  Clear();
}

void TurnBatch::Release() {
  if (journal_ != nullptr) journal_->Collect(nullptr);
  journal_ = nullptr;
}

void TurnBatch::Clear() { writes_ = TurnWrites{writes_.agent_id, {}, {}, {}, {}, std::nullopt}; }

Status BatchSink::Write(const RequestRecord& record) {
  batch_->writes().records.push_back(record);
  return Status::Ok();
}

Status BatchSink::WriteEvent(const PrefixBreakEvent& event) {
  StoredEvent e;
  e.agent_id = event.agent_id;
  e.turn = turn_;
  e.type = "prefix_break";
  e.payload_json = PrefixBreakToJson(event);
  batch_->writes().events.push_back(std::move(e));
  return Status::Ok();
}

}  // namespace agent_internal
}  // namespace strata
