// The writes of one Agent turn, collected while the turn runs and committed in one
// Store::CommitTurn: the journal wrapper that collects the context's changes, the batch that holds
// them with the turn's state, records and events, and the RecordSink that adds to it. Private to
// strata::agent. Not thread-safe: used under the Agent's mutex.
#ifndef STRATA_AGENT_TURN_BATCH_H_
#define STRATA_AGENT_TURN_BATCH_H_

#include <cstdint>
#include <string>
#include <vector>

#include "strata/context.h"
#include "strata/record.h"
#include "strata/store.h"

namespace strata {
namespace agent_internal {

// Wraps the store's journal: changes go through unchanged except that a compaction's report is
// left out, because the agent records one event per build with the exact counts the request had.
// During a turn (Collect) the changes are kept instead, for the turn's one Store::CommitTurn; a
// turn that fails keeps them out of the store, and its rollback's change (Context::Rewind) then
// rewrites rows as they are already stored.
class AgentJournal final : public ContextJournal {
 public:
  explicit AgentJournal(ContextJournal* inner) : inner_(inner) {}
  Status Record(const ContextChange& change) override;
  // Keeps the changes in *changes from now on; nullptr writes them through again.
  void Collect(std::vector<ContextChange>* changes) { collect_ = changes; }
  // While true, changes are neither written nor kept: the rewind of a failed call whose changes
  // never reached the store (the store already holds what the rewind returns to).
  void Drop(bool drop) { drop_ = drop; }
  // How many times the context's changes reached the store: each change written through, and
  // each committed turn that held changes (CountStored).
  int64_t stored() const { return stored_; }
  void CountStored() { ++stored_; }

 private:
  ContextJournal* inner_;
  std::vector<ContextChange>* collect_ = nullptr;
  bool drop_ = false;
  int64_t stored_ = 0;
};

// The writes of one Agent turn, committed in one Store::CommitTurn (nothing collected without a
// store). The journal collects into it while it lives.
class TurnBatch {
 public:
  TurnBatch(Store* store, AgentJournal* journal, std::string agent_id);
  ~TurnBatch() { Release(); }
  TurnBatch(const TurnBatch&) = delete;
  TurnBatch& operator=(const TurnBatch&) = delete;

  bool active() const { return store_ != nullptr; }
  TurnWrites& writes() { return writes_; }
  // Commits what was collected (journal writes through again); the store's error when refused.
  Status Commit();
  // Drops what was collected (a failed turn); the journal writes through again.
  void Discard();

 private:
  void Release();
  void Clear();
  Store* store_;
  AgentJournal* journal_;
  TurnWrites writes_;
};

// A RecordSink over a TurnBatch: the turn's record and prefix-break event join its writes.
class BatchSink final : public RecordSink {
 public:
  BatchSink(TurnBatch* batch, int64_t turn) : batch_(batch), turn_(turn) {}
  Status Write(const RequestRecord& record) override;
  Status WriteEvent(const PrefixBreakEvent& event) override;

 private:
  TurnBatch* batch_;
  int64_t turn_;
};

}  // namespace agent_internal
}  // namespace strata

#endif  // STRATA_AGENT_TURN_BATCH_H_
