// The prefix-cache state an Agent keeps in its store (private to strata::agent): what the server's
// cache holds of its last request and what the next request is compared with, so that a reopened
// agent predicts and explains prefix breaks as the one that wrote it would.
#ifndef STRATA_SRC_AGENT_CACHE_STATE_H_
#define STRATA_SRC_AGENT_CACHE_STATE_H_

#include <cstddef>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/chunk_text.h"
#include "strata/prefix_cache.h"
#include "strata/status.h"
#include "transport/turn.h"

namespace strata::agent_internal {

// The whole state as one value (the format before chunks, still read): a JSON header (the hash of
// `salt`, `block_tokens`, the reference's history blocks and signatures), '\n', then `hashes` (the
// blocks the server's cache holds) as little-endian uint64 (8 bytes each).
std::string EncodeCacheState(std::string_view salt, size_t block_tokens,
                             const std::vector<uint64_t>& hashes,
                             const turn_internal::PrefixReference& reference);

// The state in chunks, as CacheStateWriter stores it: under `key` a JSON header (the hash of the
// salt, block_tokens, history_blocks, and how many hashes and signatures there are, in chunks of
// kHashesPerChunk and kSignaturesPerChunk), and each chunk under its own key (ChunkKey): a
// turn at 1M tokens rewrites its last chunks, not every block hash and signature.
inline constexpr size_t kHashesPerChunk = 512;      // 4 KB of hashes
inline constexpr size_t kSignaturesPerChunk = 256;  // one JSON array of signatures
// The key of chunk `index` of the hashes ('h') or signatures ('s') stored under `key`.
std::string ChunkKey(std::string_view key, char what, size_t index);

// Reads a stored value back when it was written under `salt` with `block_tokens`: the blocks
// (salt, block tokens, hashes) into *blocks and the reference (its hashes are the blocks') into
// *reference. A chunked header's chunks are read with `read_chunk(what, index)` ('h' or 's', as
// ChunkKey names them; nullopt: not stored).
// False, changing nothing, for a value of another salt or block size, one that does not parse, or
// a missing or short chunk. *chunked (when given): whether the value was the chunked header.
using ChunkReader = std::function<StatusOr<std::optional<std::string>>(char what, size_t index)>;
StatusOr<bool> DecodeCacheState(std::string_view value, const std::string& salt,
                                size_t block_tokens, PromptBlocks* blocks,
                                turn_internal::PrefixReference* reference,
                                const ChunkReader& read_chunk = nullptr, bool* chunked = nullptr);

// What an Agent last stored of its prefix-cache state under one key, so that a turn stores the
// header and only the chunks from the first entry that changed. Thread safety: none (the Agent's
// turn lock).
class CacheStateWriter {
 public:
  explicit CacheStateWriter(std::string key) : key_(std::move(key)) {}

  // The (key, value) pairs that store this state: the header, then each chunk of hashes and of
  // signatures from the first whose entries differ from the state last Stored() (or Loaded()).
  std::vector<std::pair<std::string, std::string>> Writes(
      std::string_view salt, size_t block_tokens, const std::vector<uint64_t>& hashes,
      const turn_internal::PrefixReference& reference);
  // The last Writes() are stored (their commit succeeded): the next compares with them.
  void Stored();
  // The state as read back from the chunked format (DecodeCacheState with *chunked true).
  void Loaded(const std::vector<uint64_t>& hashes,
              const std::vector<turn_internal::SegmentSignature>& signatures);
  // How many signatures Writes() has encoded: a chunk's entries stored and unchanged since are
  // not encoded again (for tests).
  size_t signatures_encoded() const { return signature_chunk_.encoded(); }

 private:
  const std::string key_;
  std::vector<uint64_t> hashes_;  // as stored
  std::vector<turn_internal::SegmentSignature> signatures_;
  bool pending_ = false;  // what the last Writes() would store, from its first changed entries
  size_t pending_hash_from_ = 0;
  std::vector<uint64_t> pending_hashes_;
  size_t pending_signature_from_ = 0;
  std::vector<turn_internal::SegmentSignature> pending_signatures_;
  internal::ChunkText signature_chunk_;  // the last chunk of signatures' text
};

}  // namespace strata::agent_internal

#endif  // STRATA_SRC_AGENT_CACHE_STATE_H_
