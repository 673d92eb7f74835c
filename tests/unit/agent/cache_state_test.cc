// The prefix-cache state an Agent stores: written without a JSON tree, read back as it was.
#include "agent/cache_state.h"

#include <catch2/catch.hpp>
#include <cstring>
#include <nlohmann/json.hpp>

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

TEST_CASE("a stored cache state reads back as written, and only under its salt and block size") {
  const PrefixReference r = Reference();
  const std::vector<uint64_t> hashes = {5, 6, 7, 8};
  const std::string value = EncodeCacheState("salt", 64, hashes, r);
  PromptBlocks blocks;
  PrefixReference back;
  REQUIRE(DecodeCacheState(value, "salt", 64, &blocks, &back));
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
  CHECK_FALSE(DecodeCacheState(value, "other salt", 64, &untouched, &back));
  CHECK_FALSE(DecodeCacheState(value, "salt", 16, &untouched, &back));
  CHECK(untouched.hashes.empty());
}

}  // namespace
}  // namespace strata::agent_internal
