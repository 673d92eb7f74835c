// The prefix-cache state an Agent keeps in its store (cache_state.h).
#include "agent/cache_state.h"

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

}  // namespace

std::string EncodeCacheState(std::string_view salt, size_t block_tokens,
                             const std::vector<uint64_t>& hashes,
                             const turn_internal::PrefixReference& reference) {
  // The header as nlohmann::json prints it (keys in order, signatures as
  // [id, layer, state, version, hash]), written in one pass: it is written every turn and holds
  // one entry per segment, so no tree of it is built.
  std::string out = "{\"block_tokens\":" + std::to_string(block_tokens) +
                    ",\"history_blocks\":" + std::to_string(reference.history_blocks) +
                    ",\"salt_hash\":" + std::to_string(Fnv64(salt)) + ",\"signatures\":[";
  for (size_t i = 0; i < reference.signatures.size(); ++i) {
    const SegmentSignature& s = reference.signatures[i];
    if (i > 0) out.push_back(',');
    out.push_back('[');
    internal::AppendJsonString(out, s.id);
    out += ',' + std::to_string(static_cast<int>(s.layer)) + ',' +
           std::to_string(static_cast<int>(s.state)) + ',';
    internal::AppendJsonString(out, s.version);
    out += ',' + std::to_string(s.hash) + ']';
  }
  out += "]}\n";
  const size_t at = out.size();
  out.resize(at + hashes.size() * 8);
  if (!hashes.empty()) std::memcpy(out.data() + at, hashes.data(), hashes.size() * 8);
  return out;
}

bool DecodeCacheState(std::string_view value, const std::string& salt, size_t block_tokens,
                      PromptBlocks* blocks, turn_internal::PrefixReference* reference) {
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
  size_t n = (value.size() - nl - 1) / 8;
  out.hashes.resize(n);
  if (n > 0) std::memcpy(out.hashes.data(), value.data() + nl + 1, n * 8);
  reference->hashes = out.hashes;
  reference->history_blocks = header.value("history_blocks", int64_t{0});
  reference->signatures = SignaturesFromJson(header.contains("signatures") ? header["signatures"] : json());
  *blocks = std::move(out);
  return true;
}

}  // namespace strata::agent_internal
