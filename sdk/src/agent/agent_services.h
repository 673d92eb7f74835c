// The objects AgentServices injects, made ready for an agent (private to strata::agent): an
// injected compaction policy behind the owning wrapper the agent keeps, and the check that a
// shared tokenizer is the one the configuration names.
#ifndef STRATA_SRC_AGENT_AGENT_SERVICES_H_
#define STRATA_SRC_AGENT_AGENT_SERVICES_H_

#include <memory>
#include <string>
#include <string_view>

#include "strata/compaction_policy.h"
#include "strata/status.h"
#include "strata/tokenizer.h"

namespace strata::agent_internal {

// A policy that forwards every call to `policy` (not owned; it must outlive the wrapper).
std::unique_ptr<CompactionPolicy> BorrowPolicy(CompactionPolicy* policy);

// The Tokenizer::Name() the tokenizer `spec` makes has, without building it: for "hf:" and "spm:"
// the file's hash (what MakeTokenizer names them by), else the name of the (cheap) estimator.
StatusOr<std::string> TokenizerNameOf(std::string_view spec);

// OK when `shared` is the tokenizer `spec` makes (same Name()); else FAILED_PRECONDITION naming
// both and what to do.
Status CheckSharedTokenizer(const Tokenizer& shared, const std::string& spec);

}  // namespace strata::agent_internal

#endif  // STRATA_SRC_AGENT_AGENT_SERVICES_H_
