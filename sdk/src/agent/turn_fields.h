// The per-call request fields of TurnOptions::extra_fields: refusing the fields the agent owns and
// merging the rest into the agent's own (private to strata::agent).
#ifndef STRATA_SRC_AGENT_TURN_FIELDS_H_
#define STRATA_SRC_AGENT_TURN_FIELDS_H_

#include <string>
#include <utility>
#include <vector>

#include "strata/context.h"
#include "strata/status.h"

namespace strata::agent_internal {

// INVALID_ARGUMENT when TurnOptions::extra_fields names a field the agent owns.
Status CheckTurnFields(const std::vector<std::pair<std::string, std::string>>& extra);

// TurnOptions::extra_fields (checked) merged into the agent's fields of one request: a field the
// profile renders too is replaced, either output-cap name replaces the other.
void MergeTurnFields(const std::vector<std::pair<std::string, std::string>>& extra,
                     BuildOptions* build);

}  // namespace strata::agent_internal

#endif  // STRATA_SRC_AGENT_TURN_FIELDS_H_
