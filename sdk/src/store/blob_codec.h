// Content hashing and compression of the store's blobs (private to strata::store).
#ifndef STRATA_SRC_STORE_BLOB_CODEC_H_
#define STRATA_SRC_STORE_BLOB_CODEC_H_

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "strata/status.h"

namespace strata::store_internal {

// How a blob's bytes are stored (the blobs.codec column; persisted, never renumber).
enum class BlobCodec : int { kRaw = 0, kZstd = 1 };

// Lower-case hex of raw bytes.
std::string Hex(std::string_view raw);

// zstd frame of `data` at `level` (1..19).
StatusOr<std::string> ZstdCompress(std::string_view data, int level);
// Inverse of ZstdCompress; DATA_LOSS when the frame is damaged or does not hold `raw_size` bytes.
StatusOr<std::string> ZstdDecompress(std::string_view frame, size_t raw_size);

// The content of blob `hash` from its stored columns raw_size, codec and data, as both backends
// keep them (raw_size std::nullopt: the blob row is missing). DATA_LOSS naming the blob, and
// `where` (the store) for a missing one, when the row is damaged.
StatusOr<std::string> DecodeStoredBlob(const std::string& hash, std::optional<int64_t> raw_size,
                                       int64_t codec, std::string data, const std::string& where);

}  // namespace strata::store_internal

#endif  // STRATA_SRC_STORE_BLOB_CODEC_H_
