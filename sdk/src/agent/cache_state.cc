// The prefix-cache state an Agent keeps in its store (cache_state.h).
#include "agent/cache_state.h"

#include <algorithm>
#include <charconv>
#include <cstring>
#include <nlohmann/json.hpp>
#include <utility>
#include <vector>

#include "core/json_text.h"

namespace strata::agent_internal {
namespace {

using json = nlohmann::json;
using turn_internal::Fnv64;
using turn_internal::SegmentSignature;

// Entries that do not parse are skipped.
std::vector<SegmentSignature> SignaturesFromJson(const json& j) {
  std::vector<SegmentSignature> out;
  if (!j.is_array()) return out;
  for (const json& e : j) {
    if (!e.is_array() || e.size() != 5 || !e[0].is_string() || !e[1].is_number_integer() ||
        !e[2].is_number_integer() || !e[3].is_string() || !e[4].is_number_unsigned()) {
      continue;
    }
    // The stored signature has no kind: it is not compared (Context::FingerprintsAfter).
    out.push_back(SegmentSignature{e[0].get<std::string>(), static_cast<Layer>(e[1].get<int>()),
                                   SegmentKind::kUser, static_cast<SegmentState>(e[2].get<int>()),
                                   e[3].get<std::string>(), e[4].get<uint64_t>()});
  }
  return out;
}

// `n` in decimal, appended to *out.
template <typename Int>
void AppendDecimal(Int n, std::string* out) {
  char digits[24];
  const std::to_chars_result end = std::to_chars(digits, digits + sizeof(digits), n);
  out->append(digits, end.ptr);
}

// signatures[begin, end) as the entries of a JSON array ([id, layer, state, version, hash] each,
// separated by commas, no brackets), appended to *out; `first` when none precede them there.
void AppendSignatureEntries(const std::vector<SegmentSignature>& signatures, size_t begin,
                            size_t end, bool first, std::string* out) {
  for (size_t i = begin; i < end; ++i) {
    const SegmentSignature& s = signatures[i];
    if (i > begin || !first) out->push_back(',');
    out->push_back('[');
    internal::AppendJsonString(*out, s.id);
    out->push_back(',');
    AppendDecimal(static_cast<int>(s.layer), out);
    out->push_back(',');
    AppendDecimal(static_cast<int>(s.state), out);
    out->push_back(',');
    internal::AppendJsonString(*out, s.version);
    out->push_back(',');
    AppendDecimal(s.hash, out);
    out->push_back(']');
  }
}

// signatures[begin, end) as a JSON array of [id, layer, state, version, hash], appended to *out.
void AppendSignatures(const std::vector<SegmentSignature>& signatures, size_t begin, size_t end,
                      std::string* out) {
  out->push_back('[');
  AppendSignatureEntries(signatures, begin, end, /*first=*/true, out);
  out->push_back(']');
}

// hashes[begin, end) as little-endian uint64, appended to *out.
void AppendHashes(const std::vector<uint64_t>& hashes, size_t begin, size_t end, std::string* out) {
  const size_t at = out->size();
  out->resize(at + (end - begin) * 8);
  if (end > begin) std::memcpy(out->data() + at, hashes.data() + begin, (end - begin) * 8);
}

bool SameSignature(const SegmentSignature& a, const SegmentSignature& b) {
  return a.hash == b.hash && a.layer == b.layer && a.state == b.state && a.id == b.id &&
         a.version == b.version;
}

}  // namespace

std::string EncodeCacheState(std::string_view salt, size_t block_tokens,
                             const std::vector<uint64_t>& hashes,
                             const turn_internal::PrefixReference& reference) {
  // The header as nlohmann::json prints it (keys in order, signatures as
  // [id, layer, state, version, hash]), written in one pass: no tree of it is built.
  std::string out = "{\"block_tokens\":" + std::to_string(block_tokens) +
                    ",\"history_blocks\":" + std::to_string(reference.history_blocks) +
                    ",\"salt_hash\":" + std::to_string(Fnv64(salt)) + ",\"signatures\":";
  AppendSignatures(reference.signatures, 0, reference.signatures.size(), &out);
  out += "}\n";
  AppendHashes(hashes, 0, hashes.size(), &out);
  return out;
}

std::string ChunkKey(std::string_view key, char what, size_t index) {
  return std::string(key) + '/' + what + '/' + std::to_string(index);
}

StatusOr<bool> DecodeCacheState(std::string_view value, const std::string& salt,
                                size_t block_tokens, PromptBlocks* blocks,
                                turn_internal::PrefixReference* reference,
                                const ChunkReader& read_chunk, bool* chunked) {
  if (chunked != nullptr) *chunked = false;
  size_t nl = value.find('\n');
  if (nl == std::string_view::npos) return false;
  json header = json::parse(value.substr(0, nl), nullptr, false);
  if (!header.is_object() || header.value("salt_hash", uint64_t{0}) != Fnv64(salt) ||
      header.value("block_tokens", size_t{0}) != block_tokens) {
    return false;
  }
  PromptBlocks out;
  out.salt = salt;
  out.block_tokens = block_tokens;
  std::vector<SegmentSignature> signatures;
  if (header.contains("hash_count")) {
    // Chunked: the hashes and signatures are in their chunks.
    const size_t hash_count = header.value("hash_count", size_t{0});
    const size_t signature_count = header.value("signature_count", size_t{0});
    if (!read_chunk) return false;
    for (size_t k = 0; out.hashes.size() < hash_count; ++k) {
      STRATA_ASSIGN_OR_RETURN(std::optional<std::string> chunk, read_chunk('h', k));
      const size_t n = std::min(kHashesPerChunk, hash_count - out.hashes.size());
      if (!chunk || chunk->size() != n * 8) return false;
      const size_t at = out.hashes.size();
      out.hashes.resize(at + n);
      std::memcpy(out.hashes.data() + at, chunk->data(), n * 8);
    }
    for (size_t k = 0; signatures.size() < signature_count; ++k) {
      STRATA_ASSIGN_OR_RETURN(std::optional<std::string> chunk, read_chunk('s', k));
      if (!chunk) return false;
      std::vector<SegmentSignature> part = SignaturesFromJson(json::parse(*chunk, nullptr, false));
      const size_t n = std::min(kSignaturesPerChunk, signature_count - signatures.size());
      if (part.size() != n) return false;
      signatures.insert(signatures.end(), part.begin(), part.end());
    }
    if (chunked != nullptr) *chunked = true;
  } else {
    size_t n = (value.size() - nl - 1) / 8;
    out.hashes.resize(n);
    if (n > 0) std::memcpy(out.hashes.data(), value.data() + nl + 1, n * 8);
    signatures = SignaturesFromJson(header.contains("signatures") ? header["signatures"] : json());
  }
  reference->hashes = out.hashes;
  reference->history_blocks = header.value("history_blocks", int64_t{0});
  reference->signatures = std::move(signatures);
  *blocks = std::move(out);
  return true;
}

std::vector<std::pair<std::string, std::string>> CacheStateWriter::Writes(
    std::string_view salt, size_t block_tokens, const std::vector<uint64_t>& hashes,
    const turn_internal::PrefixReference& reference) {
  const std::vector<SegmentSignature>& signatures = reference.signatures;
  // The first entries that differ from what is stored; their chunks are written from their start.
  const size_t same_hashes = SharedChainPrefix(hashes_, hashes);
  size_t same_signatures = 0;
  const size_t comparable = std::min(signatures_.size(), signatures.size());
  while (same_signatures < comparable &&
         SameSignature(signatures_[same_signatures], signatures[same_signatures]))
    ++same_signatures;
  std::vector<std::pair<std::string, std::string>> writes;
  // The header as nlohmann::json prints it (keys in order).
  writes.emplace_back(key_, "{\"block_tokens\":" + std::to_string(block_tokens) +
                                ",\"hash_count\":" + std::to_string(hashes.size()) +
                                ",\"history_blocks\":" + std::to_string(reference.history_blocks) +
                                ",\"salt_hash\":" + std::to_string(Fnv64(salt)) +
                                ",\"signature_count\":" + std::to_string(signatures.size()) +
                                "}\n");
  // A chunk is written whole when any of its entries changed or it now ends earlier (the header's
  // counts say where the entries end: chunks past them are left, unread). Unchanged: none.
  const bool hashes_changed = same_hashes < hashes.size() || hashes.size() != hashes_.size();
  for (size_t k = same_hashes / kHashesPerChunk;
       hashes_changed && k * kHashesPerChunk < hashes.size(); ++k) {
    std::string chunk;
    AppendHashes(hashes, k * kHashesPerChunk, std::min(hashes.size(), (k + 1) * kHashesPerChunk),
                 &chunk);
    writes.emplace_back(ChunkKey(key_, 'h', k), std::move(chunk));
  }
  const bool signatures_changed =
      same_signatures < signatures.size() || signatures.size() != signatures_.size();
  signature_chunk_.Begin();
  for (size_t k = same_signatures / kSignaturesPerChunk;
       signatures_changed && k * kSignaturesPerChunk < signatures.size(); ++k) {
    const size_t begin = k * kSignaturesPerChunk;
    const size_t end = std::min(signatures.size(), begin + kSignaturesPerChunk);
    // The entries the store holds unchanged are not encoded again.
    const std::string& entries =
        signature_chunk_.Write(k, begin, end, same_signatures,
                               [&signatures](size_t from, size_t to, bool first, std::string* out) {
                                 AppendSignatureEntries(signatures, from, to, first, out);
                               });
    std::string chunk;
    chunk.reserve(entries.size() + 2);
    chunk.append("[").append(entries).append("]");
    writes.emplace_back(ChunkKey(key_, 's', k), std::move(chunk));
  }
  pending_ = true;
  pending_hash_from_ = same_hashes;
  pending_hashes_.assign(hashes.begin() + static_cast<std::ptrdiff_t>(same_hashes), hashes.end());
  pending_signature_from_ = same_signatures;
  pending_signatures_.assign(signatures.begin() + static_cast<std::ptrdiff_t>(same_signatures),
                             signatures.end());
  return writes;
}

void CacheStateWriter::Stored() {
  if (!pending_) return;
  pending_ = false;
  hashes_.resize(pending_hash_from_);
  hashes_.insert(hashes_.end(), pending_hashes_.begin(), pending_hashes_.end());
  signatures_.resize(pending_signature_from_);
  signatures_.insert(signatures_.end(), pending_signatures_.begin(), pending_signatures_.end());
  signature_chunk_.Stored();
}

void CacheStateWriter::Loaded(const std::vector<uint64_t>& hashes,
                              const std::vector<SegmentSignature>& signatures) {
  pending_ = false;
  hashes_ = hashes;
  signatures_ = signatures;
  signature_chunk_.Reset();  // encoded whole when the last chunk is next written
}

}  // namespace strata::agent_internal
