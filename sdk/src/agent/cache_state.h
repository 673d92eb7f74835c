// The prefix-cache state an Agent keeps in its store (private to strata::agent): what the server's
// cache holds of its last request and what the next request is compared with, so that a reopened
// agent predicts and explains prefix breaks as the one that wrote it would.
#ifndef STRATA_SRC_AGENT_CACHE_STATE_H_
#define STRATA_SRC_AGENT_CACHE_STATE_H_

#include <string>
#include <string_view>
#include <vector>

#include "strata/prefix_cache.h"
#include "transport/turn.h"

namespace strata::agent_internal {

// The stored value: a JSON header (the hash of `salt`, `block_tokens`, the reference's history
// blocks and signatures), '\n', then `hashes` (the blocks the server's cache holds) as
// little-endian uint64 (8 bytes each).
std::string EncodeCacheState(std::string_view salt, size_t block_tokens,
                             const std::vector<uint64_t>& hashes,
                             const turn_internal::PrefixReference& reference);

// Reads a stored value back when it was written under `salt` with `block_tokens`: the blocks
// (salt, block tokens, hashes) into *blocks and the reference (its hashes are the blocks') into
// *reference. False, changing nothing, for a value of another salt or block size, or one that does
// not parse.
bool DecodeCacheState(std::string_view value, const std::string& salt, size_t block_tokens,
                      PromptBlocks* blocks, turn_internal::PrefixReference* reference);

}  // namespace strata::agent_internal

#endif  // STRATA_SRC_AGENT_CACHE_STATE_H_
