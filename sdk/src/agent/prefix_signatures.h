// What identifies each rendered segment of an agent's request, and the causes of a prefix break
// told from two requests' signatures (private to strata::agent).
#ifndef STRATA_SRC_AGENT_PREFIX_SIGNATURES_H_
#define STRATA_SRC_AGENT_PREFIX_SIGNATURES_H_

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "strata/context.h"

namespace strata::agent_internal {

// What identifies a rendered segment, to tell which ones changed between two requests.
struct Signature {
  std::string id;
  Layer layer = Layer::kHistory;
  SegmentState state = SegmentState::kLive;
  std::string version;
  uint64_t hash = 0;
};

// FNV-1a of `text`, continuing from `h`.
uint64_t Fnv64(std::string_view text, uint64_t h = 1469598103934665603ULL);

// The signatures of the segments `context` renders (volatile, evicted and summarized ones left
// out).
std::vector<Signature> Signatures(const Context& context);
// As stored with the prefix-cache state, and back (entries that do not parse are skipped).
nlohmann::json SignaturesToJson(const std::vector<Signature>& sigs);
std::vector<Signature> SignaturesFromJson(const nlohmann::json& j);

// Every reason the rendered segments changed from `before` to `now` (stable layers: each change;
// history: "compaction" when this build compacted, else "history segment changed"); the first
// changed segment into *first_id and *first_layer.
std::vector<std::string> BreakCauses(const std::vector<Signature>& before,
                                     const std::vector<Signature>& now, bool compacted,
                                     const std::vector<LintWarning>& warnings,
                                     std::string* first_id, Layer* first_layer);

// "a, b and c" ("unknown" for none).
std::string JoinCauses(const std::vector<std::string>& causes);

}  // namespace strata::agent_internal

#endif  // STRATA_SRC_AGENT_PREFIX_SIGNATURES_H_
