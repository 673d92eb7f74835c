// strata/identifiers.h — the code identifiers and file paths a text mentions.
//
// strata keeps these when it shortens content (masked tool results, folded stack traces,
// deduplicated outputs, summaries), because they are what an agent most often needs again: the
// names it will grep for, open and edit.
//
//   std::vector<std::string> names = strata::ExtractIdentifiers(output, 16);
//
// Thread safety: a pure function.
#ifndef STRATA_IDENTIFIERS_H_
#define STRATA_IDENTIFIERS_H_

#include <cstddef>
#include <string>
#include <vector>

namespace strata {

// Identifiers in `text`: snake_case, CamelCase, dotted.names, paths/with.ext, and names that follow
// "def "/"class "/"function "/"struct "... Ranked: names the text defines, then paths, then by
// frequency, ties by first appearance. At most `limit`.
std::vector<std::string> ExtractIdentifiers(const std::string& text, size_t limit);

}  // namespace strata

#endif  // STRATA_IDENTIFIERS_H_
