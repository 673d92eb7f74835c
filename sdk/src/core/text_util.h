// Text helpers of strata::core: UTF-8 validation, SHA-256, volatile-content lint (cutting and
// repairing UTF-8: core/utf8.h).
#ifndef STRATA_CORE_TEXT_UTIL_H_
#define STRATA_CORE_TEXT_UTIL_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "strata/status.h"

namespace strata::internal {

// OK if `text` is valid UTF-8 (no overlong forms, surrogates or code points above U+10FFFF);
// otherwise INVALID_ARGUMENT naming `what`, the offending byte and its offset.
Status ValidateUtf8(std::string_view text, std::string_view what);

// Length of the common prefix of `a` and `b` (compared 4 KB at a time with memcmp).
size_t CommonPrefix(std::string_view a, std::string_view b);

// Appends `added` to `text`, which later appends continue: when it must allocate, it takes room
// for half as much again (a text of its exact size would move whole to larger memory at the next
// append).
void AppendGrowing(std::string& text, std::string_view added);

// SHA-256 of `data`: the 32 bytes of the digest, and their lowercase hex.
std::string Sha256(std::string_view data);
std::string Sha256Hex(std::string_view data);
// How many recall ids RecallIdFor (strata/segment.h) computed in this process, each a SHA-256 of
// a content: tests check that a compaction hashes the content of a segment it masks once.
uint64_t RecallIdsComputed();

// A volatile-looking value in text meant to be stable (rendering rule 8).
struct LintHit {
  std::string what;  // "timestamp", "uuid" or "date phrase"
  size_t offset = 0;
  std::string excerpt;
};
// Scans for ISO-8601 date-times, UUIDs and phrases such as "today is". At most `max_hits` hits.
std::vector<LintHit> ScanVolatileLooking(std::string_view text, size_t max_hits = 8);

}  // namespace strata::internal

#endif  // STRATA_CORE_TEXT_UTIL_H_
