// The prefix-cache state an Agent stores: written without a JSON tree, read back as it was.
#include "agent/cache_state.h"

#include <algorithm>
#include <catch2/catch.hpp>
#include <cstring>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace strata::agent_internal {
namespace {

using turn_internal::PrefixReference;
using turn_internal::SegmentSignature;

PrefixReference Reference() {
  PrefixReference r;
  r.history_blocks = 7;
  r.hashes = {1, 2, 3};
  r.signatures = {
      {"system", Layer::kSystem, SegmentKind::kUser, SegmentState::kLive, "", 11},
      {"doc \"a\"\\b", Layer::kDocs, SegmentKind::kUser, SegmentState::kLive, "v1\n\t\x01", 0xffffffffffffffffULL},
      {"h-\xc3\xa9t\xc3\xa9", Layer::kHistory, SegmentKind::kUser, SegmentState::kMasked, "", 42},
  };
  return r;
}

TEST_CASE("the stored cache state's header is what nlohmann::json prints of it") {
  const PrefixReference r = Reference();
  const std::vector<uint64_t> hashes = {0x0102030405060708ULL, 99, 0};
  const std::string value = EncodeCacheState("salt", 64, hashes, r);
  nlohmann::json sigs = nlohmann::json::array();
  for (const SegmentSignature& s : r.signatures) {
    sigs.push_back({s.id, static_cast<int>(s.layer), static_cast<int>(s.state), s.version, s.hash});
  }
  const nlohmann::json header = {{"salt_hash", turn_internal::Fnv64("salt")},
                                 {"block_tokens", 64},
                                 {"history_blocks", r.history_blocks},
                                 {"signatures", sigs}};
  const std::string expected_header = header.dump() + '\n';
  REQUIRE(value.size() == expected_header.size() + hashes.size() * 8);
  CHECK(value.substr(0, expected_header.size()) == expected_header);
  CHECK(std::memcmp(value.data() + expected_header.size(), hashes.data(), hashes.size() * 8) == 0);
}

TEST_CASE(
    "a cache state stored whole (the format before chunks) reads back as written, and only under "
    "its salt and block size") {
  const PrefixReference r = Reference();
  const std::vector<uint64_t> hashes = {5, 6, 7, 8};
  const std::string value = EncodeCacheState("salt", 64, hashes, r);
  PromptBlocks blocks;
  PrefixReference back;
  REQUIRE(DecodeCacheState(value, "salt", 64, &blocks, &back).value());
  CHECK(blocks.hashes == hashes);
  CHECK(blocks.salt == "salt");
  CHECK(blocks.block_tokens == 64);
  CHECK(back.hashes == hashes);
  CHECK(back.history_blocks == 7);
  REQUIRE(back.signatures.size() == r.signatures.size());
  for (size_t i = 0; i < r.signatures.size(); ++i) {
    CHECK(back.signatures[i].id == r.signatures[i].id);
    CHECK(back.signatures[i].layer == r.signatures[i].layer);
    CHECK(back.signatures[i].state == r.signatures[i].state);
    CHECK(back.signatures[i].version == r.signatures[i].version);
    CHECK(back.signatures[i].hash == r.signatures[i].hash);
  }
  PromptBlocks untouched;
  CHECK_FALSE(DecodeCacheState(value, "other salt", 64, &untouched, &back).value());
  CHECK_FALSE(DecodeCacheState(value, "salt", 16, &untouched, &back).value());
  CHECK(untouched.hashes.empty());
}

// A store of agent state values: what CacheStateWriter's writes leave.
struct StateMap {
  std::map<std::string, std::string> values;
  void Apply(const std::vector<std::pair<std::string, std::string>>& writes) {
    for (const auto& [key, value] : writes) values[key] = value;
  }
  ChunkReader Reader() const {
    return [this](char what, size_t index) -> StatusOr<std::optional<std::string>> {
      auto it = values.find(ChunkKey("prefix_cache", what, index));
      if (it == values.end()) return std::optional<std::string>();
      return std::optional<std::string>(it->second);
    };
  }
};

// A reference with `n` signatures (ids s0, s1, ...) and `hashes` as its blocks.
PrefixReference Grown(size_t n, const std::vector<uint64_t>& hashes) {
  PrefixReference r;
  r.history_blocks = static_cast<int64_t>(hashes.size());
  r.hashes = hashes;
  for (size_t i = 0; i < n; ++i)
    r.signatures.push_back({"s" + std::to_string(i), Layer::kHistory, SegmentKind::kUser,
                            SegmentState::kLive, "", 0xF000000000000000ULL + i});
  return r;
}

void CheckReadBack(const StateMap& map, const std::vector<uint64_t>& hashes,
                   const PrefixReference& r) {
  PromptBlocks blocks;
  PrefixReference back;
  bool chunked = false;
  REQUIRE(DecodeCacheState(map.values.at("prefix_cache"), "salt", 64, &blocks, &back, map.Reader(),
                           &chunked)
              .value());
  CHECK(chunked);
  CHECK(blocks.hashes == hashes);
  CHECK(back.hashes == hashes);
  CHECK(back.history_blocks == r.history_blocks);
  REQUIRE(back.signatures.size() == r.signatures.size());
  for (size_t i = 0; i < r.signatures.size(); ++i) {
    CHECK(back.signatures[i].id == r.signatures[i].id);
    CHECK(back.signatures[i].hash == r.signatures[i].hash);
  }
}

std::vector<uint64_t> Chain(size_t n, uint64_t seed) {
  std::vector<uint64_t> out;
  uint64_t h = seed;
  for (size_t i = 0; i < n; ++i) out.push_back(h = turn_internal::Fnv64(std::to_string(h)));
  return out;
}

TEST_CASE("a chunked cache state reads back as written across chunk boundaries") {
  for (size_t n :
       {size_t{0}, size_t{1}, kHashesPerChunk, kHashesPerChunk + 1, 2 * kHashesPerChunk + 7}) {
    INFO(n << " hashes");
    const std::vector<uint64_t> hashes = Chain(n, 1);
    const PrefixReference r = Grown(n % 700, hashes);
    CacheStateWriter writer("prefix_cache");
    StateMap map;
    map.Apply(writer.Writes("salt", 64, hashes, r));
    CheckReadBack(map, hashes, r);
    // Under another salt or block size: nothing is read.
    PromptBlocks untouched;
    PrefixReference back;
    CHECK_FALSE(DecodeCacheState(map.values.at("prefix_cache"), "other", 64, &untouched, &back,
                                 map.Reader())
                    .value());
    // A chunk missing: no state rather than part of one.
    if (n > 0) {
      StateMap holed = map;
      holed.values.erase(ChunkKey("prefix_cache", 'h', (n - 1) / kHashesPerChunk));
      CHECK_FALSE(DecodeCacheState(holed.values.at("prefix_cache"), "salt", 64, &untouched, &back,
                                   holed.Reader())
                      .value());
      CHECK(untouched.hashes.empty());
    }
  }
}

// Each of `writes` (header first, then chunks) as a writer that stored nothing writes it.
std::vector<std::pair<std::string, std::string>> SameAsFresh(
    const std::vector<std::pair<std::string, std::string>>& writes,
    const std::vector<uint64_t>& hashes, const PrefixReference& r) {
  CacheStateWriter fresh("prefix_cache");
  std::map<std::string, std::string> whole;
  for (auto& [key, value] : fresh.Writes("salt", 64, hashes, r)) whole[key] = value;
  std::vector<std::pair<std::string, std::string>> out;
  for (const auto& write : writes) out.emplace_back(write.first, whole[write.first]);
  return out;
}

TEST_CASE("a turn's cache state writes the header and only the chunks from the first change") {
  CacheStateWriter writer("prefix_cache");
  StateMap map;
  std::vector<uint64_t> hashes = Chain(3 * kHashesPerChunk + 10, 1);
  PrefixReference r = Grown(600, hashes);
  auto first = writer.Writes("salt", 64, hashes, r);
  CHECK(first.size() == 1 + 4 + 3);  // the header, four chunks of hashes, three of signatures
  map.Apply(first);
  writer.Stored();
  // A turn that appends: the header and the last chunk of each.
  hashes = Chain(3 * kHashesPerChunk + 30, 1);
  r = Grown(603, hashes);
  CHECK(writer.signatures_encoded() == 600);
  auto appended = writer.Writes("salt", 64, hashes, r);
  REQUIRE(appended.size() == 3);
  CHECK(appended[1].first == ChunkKey("prefix_cache", 'h', 3));
  CHECK(appended[2].first == ChunkKey("prefix_cache", 's', 2));
  // The last chunk continues from its stored text: only the three new signatures are encoded,
  // and the chunk is the one a writer that stored nothing writes.
  CHECK(writer.signatures_encoded() == 603);
  CHECK(appended == SameAsFresh(appended, hashes, r));
  map.Apply(appended);
  writer.Stored();
  CheckReadBack(map, hashes, r);
  // Not stored: the next turn continues from the chunk as stored, not as last written.
  hashes = Chain(3 * kHashesPerChunk + 40, 1);
  r = Grown(605, hashes);
  auto lost = writer.Writes("salt", 64, hashes, r);
  CHECK(lost == SameAsFresh(lost, hashes, r));
  CHECK(writer.signatures_encoded() == 605);
  hashes = Chain(3 * kHashesPerChunk + 50, 1);
  r = Grown(606, hashes);
  auto retried = writer.Writes("salt", 64, hashes, r);
  CHECK(retried == SameAsFresh(retried, hashes, r));
  CHECK(writer.signatures_encoded() == 608);
  map.Apply(retried);
  writer.Stored();
  CheckReadBack(map, hashes, r);
  // A signature of the last chunk changed in place (a mask near the end): that chunk is encoded
  // from its start.
  r.signatures[601].state = SegmentState::kMasked;
  auto masked = writer.Writes("salt", 64, hashes, r);
  CHECK(masked == SameAsFresh(masked, hashes, r));
  CHECK(writer.signatures_encoded() == 608 + (606 - 2 * kSignaturesPerChunk));
  map.Apply(masked);
  writer.Stored();
  CheckReadBack(map, hashes, r);
  // A change early on (a compaction near the start): every chunk from there.
  std::vector<uint64_t> edited = hashes;
  const std::vector<uint64_t> tail = Chain(edited.size() - 5, 7);
  std::copy(tail.begin(), tail.end(), edited.begin() + 5);
  PrefixReference changed = Grown(603, edited);
  changed.signatures[3].state = SegmentState::kMasked;
  auto rewritten = writer.Writes("salt", 64, edited, changed);
  CHECK(rewritten.size() == 1 + 4 + 3);
  // Not stored (the turn's commit failed): the next turn writes against what is stored.
  auto again = writer.Writes("salt", 64, hashes, r);
  CHECK(again.size() == 1);  // nothing changed since the last stored state
  map.Apply(writer.Writes("salt", 64, edited, changed));
  writer.Stored();
  CheckReadBack(map, edited, changed);
  // Shorter than before (the header's counts end it; the longer chunks stay unread).
  const std::vector<uint64_t> shorter(edited.begin(), edited.begin() + kHashesPerChunk + 3);
  const PrefixReference fewer = Grown(10, shorter);
  map.Apply(writer.Writes("salt", 64, shorter, fewer));
  writer.Stored();
  CheckReadBack(map, shorter, fewer);
}

}  // namespace
}  // namespace strata::agent_internal
