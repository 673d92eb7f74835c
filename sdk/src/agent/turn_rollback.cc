// Undoing a failed Run() or Complete() (turn_rollback.h).
#include "agent/turn_rollback.h"

#include <string>

namespace strata::agent_internal {

TurnRollback::TurnRollback(Context& context) : context_(context) { context_.Mark(); }

TurnRollback::~TurnRollback() { context_.ClearMark(); }

Status TurnRollback::Undo(Status failure) {
  Status rewound = context_.RewindToMark();
  if (rewound.ok()) return failure;
  return Status(failure.code(), failure.message() + "; undoing the call failed too (" +
                                    rewound.message() +
                                    "): the context keeps what the failed call appended");
}

}  // namespace strata::agent_internal
