// Undoing a failed Run() or Complete() (private to strata::agent): the context is marked before the
// call (Context::Mark) and rewound to the mark when the call fails, in memory and, through the
// context's journal, in the store, so that a failed call changes nothing (strata/agent.h).
#ifndef STRATA_SRC_AGENT_TURN_ROLLBACK_H_
#define STRATA_SRC_AGENT_TURN_ROLLBACK_H_

#include "agent/turn_batch.h"
#include "strata/context.h"
#include "strata/status.h"

namespace strata::agent_internal {

// What a context held before a call that may fail. Costs what the call changes (the values it
// replaces), not a copy of the context; a call that succeeds drops the mark when this goes.
class TurnRollback {
 public:
  // Marks what `context` holds now. `context` must outlive this. `own_mark` false: the mark the
  // caller set stays where it is, and is kept when the call succeeds
  // (TurnOptions::undo_to_caller_mark).
  explicit TurnRollback(Context& context, bool own_mark = true);
  ~TurnRollback();
  TurnRollback(const TurnRollback&) = delete;
  TurnRollback& operator=(const TurnRollback&) = delete;

  // Puts the context back as it was at construction (Context::RewindToMark) and returns
  // `failure`. When the rewind itself fails (the store refused the change: the context
  // then still holds what the call added, in memory as in the store), `failure` carries a note
  // that says so. `unstored` (may be null): the journal of a context none of whose changes since
  // the mark reached the store; the rewind then changes the memory only (the store holds the
  // mark's state already), and writes nothing.
  Status Undo(Status failure, AgentJournal* unstored = nullptr);

 private:
  Context& context_;
  bool own_mark_;
};

}  // namespace strata::agent_internal

#endif  // STRATA_SRC_AGENT_TURN_ROLLBACK_H_
