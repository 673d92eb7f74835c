// Undoing a failed Run() or Complete() (turn_rollback.h).
#include "agent/turn_rollback.h"

#include <string>
#include <utility>

namespace strata::agent_internal {

TurnRollback::TurnRollback(const Context& context) : before_(context.Snapshot()) {}

Status TurnRollback::Undo(Context& context, Status failure) {
  Status rewound = context.Rewind(std::move(before_));
  if (rewound.ok()) return failure;
  return Status(failure.code(), failure.message() + "; undoing the call failed too (" +
                                    rewound.message() +
                                    "): the context keeps what the failed call appended");
}

}  // namespace strata::agent_internal
