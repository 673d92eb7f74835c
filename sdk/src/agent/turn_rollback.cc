// Undoing a failed Run() or Complete() (turn_rollback.h).
#include "agent/turn_rollback.h"

#include <string>

namespace strata::agent_internal {

TurnRollback::TurnRollback(Context& context, bool own_mark)
    : context_(context), own_mark_(own_mark) {
  if (own_mark_) context_.Mark();
}

TurnRollback::~TurnRollback() {
  if (own_mark_) context_.ClearMark();
}

Status TurnRollback::Undo(Status failure, AgentJournal* unstored) {
  if (unstored != nullptr) unstored->Drop(true);
  Status rewound = context_.RewindToMark();
  if (unstored != nullptr) unstored->Drop(false);
  if (rewound.ok()) return failure;
  return Status(failure.code(), failure.message() + "; undoing the call failed too (" +
                                    rewound.message() +
                                    "): the context keeps what the failed call appended");
}

}  // namespace strata::agent_internal
