// Undoing a failed Run() or Complete() (private to strata::agent): the context's snapshot, taken
// before the call, is put back when the call fails, in memory and, through the context's journal,
// in the store, so that a failed call changes nothing (strata/agent.h).
#ifndef STRATA_SRC_AGENT_TURN_ROLLBACK_H_
#define STRATA_SRC_AGENT_TURN_ROLLBACK_H_

#include "strata/context.h"
#include "strata/status.h"

namespace strata::agent_internal {

// What a context held before a call that may fail. Costs one copy of the context's segments.
class TurnRollback {
 public:
  // Remembers what `context` holds now.
  explicit TurnRollback(const Context& context);

  // Puts `context` back as it was at construction (Context::Rewind) and returns `failure`. When
  // the rewind itself fails (the store refused the change: the context then still holds what the
  // call added, in memory as in the store), `failure` carries a note that says so.
  Status Undo(Context& context, Status failure);

 private:
  ContextSnapshot before_;
};

}  // namespace strata::agent_internal

#endif  // STRATA_SRC_AGENT_TURN_ROLLBACK_H_
