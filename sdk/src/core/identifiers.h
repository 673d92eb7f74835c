// core/identifiers.h — the code identifiers and file paths a text mentions (internal to strata).
//
// strata keeps these when it shortens content (masked tool results, folded stack traces,
// deduplicated outputs, summaries), because they are what an agent most often needs again: the
// names it will grep for, open and edit. Used by core's hygiene, compact's policies, placeholders
// and summarizers, and replay's retention metric (strata/replay/eval.h); not public API.
// Other components reach it as "core/identifiers.h" (sdk/src is on their private include path)
// and link strata::core, which defines it (identifiers.cc).
//
//   std::vector<std::string> names = strata::internal::ExtractIdentifiers(output, 16);
//
// Thread safety: thread-safe; a pure function of its arguments (the identifiers of texts of 512
// bytes or more are kept in a bounded process-wide memo, so a text read at every build is scanned
// once).
#ifndef STRATA_CORE_IDENTIFIERS_H_
#define STRATA_CORE_IDENTIFIERS_H_

#include <cstddef>
#include <memory>
#include <string>
#include <vector>

namespace strata::internal {

// Identifiers in `text`: snake_case, CamelCase, dotted.names, paths/with.ext, and names that follow
// "def "/"class "/"function "/"struct "... Ranked: names the text defines, then paths, then by
// frequency, ties by first appearance. At most `limit`.
std::vector<std::string> ExtractIdentifiers(const std::string& text, size_t limit);

// Every identifier of `text`, ranked as ExtractIdentifiers ranks them (ExtractIdentifiers(text, n)
// is its first n), shared instead of copied: for a caller that keeps them with the text they came
// from (a policy's per-segment facts).
std::shared_ptr<const std::vector<std::string>> RankedIdentifiers(const std::string& text);

}  // namespace strata::internal

#endif  // STRATA_CORE_IDENTIFIERS_H_
