#include "store/blob_codec.h"

#include <zstd.h>

namespace strata::store_internal {

std::string Hex(std::string_view raw) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string out;
  out.reserve(raw.size() * 2);
  for (unsigned char c : raw) {
    out.push_back(kDigits[c >> 4]);
    out.push_back(kDigits[c & 15]);
  }
  return out;
}

StatusOr<std::string> ZstdCompress(std::string_view data, int level) {
  std::string out(ZSTD_compressBound(data.size()), '\0');
  size_t n = ZSTD_compress(out.data(), out.size(), data.data(), data.size(), level);
  if (ZSTD_isError(n)) {
    return InternalError(std::string("zstd compression failed: ") + ZSTD_getErrorName(n));
  }
  out.resize(n);
  return out;
}

StatusOr<std::string> ZstdDecompress(std::string_view frame, size_t raw_size) {
  // The size recorded next to the blob is checked against the frame's own header before anything
  // is allocated: a damaged row must not make the reader ask for gigabytes.
  const unsigned long long declared = ZSTD_getFrameContentSize(frame.data(), frame.size());
  if (declared == ZSTD_CONTENTSIZE_ERROR || declared == ZSTD_CONTENTSIZE_UNKNOWN) {
    return DataLossError("stored blob is not a zstd frame with a recorded size");
  }
  if (declared != raw_size) {
    return DataLossError("stored blob's frame holds " + std::to_string(declared) + " bytes, its row says " +
                         std::to_string(raw_size));
  }
  std::string out(raw_size, '\0');
  size_t n = ZSTD_decompress(out.data(), out.size(), frame.data(), frame.size());
  if (ZSTD_isError(n)) {
    return DataLossError(std::string("stored blob does not decompress: ") + ZSTD_getErrorName(n));
  }
  if (n != raw_size) {
    return DataLossError("stored blob decompresses to " + std::to_string(n) + " bytes, expected " +
                         std::to_string(raw_size));
  }
  return out;
}

StatusOr<std::string> DecodeStoredBlob(const std::string& hash, std::optional<int64_t> raw_size,
                                       int64_t codec, std::string data, const std::string& where) {
  if (!raw_size) return DataLossError("blob " + Hex(hash) + " is missing from " + where);
  if (*raw_size < 0) {
    return DataLossError("blob " + Hex(hash) + " has a negative size " + std::to_string(*raw_size));
  }
  const size_t size = static_cast<size_t>(*raw_size);
  if (codec == static_cast<int>(BlobCodec::kRaw)) {
    if (data.size() != size) return DataLossError("blob " + Hex(hash) + " has the wrong size");
    return data;
  }
  if (codec != static_cast<int>(BlobCodec::kZstd)) {
    return DataLossError("blob " + Hex(hash) + " has unknown codec " + std::to_string(codec));
  }
  return ZstdDecompress(data, size);
}

}  // namespace strata::store_internal
