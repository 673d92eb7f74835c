// The id of a forked agent (Agent::Fork; private to strata::agent).
#ifndef STRATA_SRC_AGENT_FORK_ID_H_
#define STRATA_SRC_AGENT_FORK_ID_H_

#include <string>
#include <string_view>

#include "strata/agent.h"
#include "strata/status.h"

namespace strata::agent_internal {

// The id of fork number `n` of the agent `parent_id`: ForkOptions::id when set, else
// "<parent_id>.fork-<n>", with parent_id cut (on a UTF-8 character boundary) so that the whole id
// has at most ForkOptions::max_id_length bytes when that is set. INVALID_ARGUMENT, naming the
// values, for an id over max_id_length, or a max_id_length that leaves no byte of the parent id
// before the suffix.
StatusOr<std::string> ForkChildId(std::string_view parent_id, const ForkOptions& options, int n);

}  // namespace strata::agent_internal

#endif  // STRATA_SRC_AGENT_FORK_ID_H_
