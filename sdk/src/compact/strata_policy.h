// The strata policy (MakeStrataPolicy in strata/builtin_policies.h) as tests compare it with the
// whole computation.
#ifndef STRATA_SRC_COMPACT_STRATA_POLICY_H_
#define STRATA_SRC_COMPACT_STRATA_POLICY_H_

#include <memory>

#include "strata/builtin_policies.h"

namespace strata::compact_internal {

// The strata policy without its early stop: it derives every candidate of every plan, where
// MakeStrataPolicy's (without the cost model) stops at the latest ones that reach the plan's need.
// Both must plan the same edits; tests check it.
std::unique_ptr<CompactionPolicy> MakeStrataPolicyConsideringEveryCandidate(
    StrataPolicyOptions options = {});

}  // namespace strata::compact_internal

#endif  // STRATA_SRC_COMPACT_STRATA_POLICY_H_
