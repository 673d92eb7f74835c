// strata's estimator (MakeEstimateTokenizer, strata/tokenizer.h) seen from inside strata.
#ifndef STRATA_SRC_CORE_ESTIMATE_TOKENIZER_H_
#define STRATA_SRC_CORE_ESTIMATE_TOKENIZER_H_

#include <cstddef>
#include <cstdint>
#include <optional>

#include "strata/tokenizer.h"

namespace strata::internal {

// What `tokenizer`.Count() gives for any text of `bytes` bytes when `tokenizer` is strata's
// estimator (its count depends on the length alone), without the text: lets a stream be counted
// without holding it. nullopt for any other tokenizer.
std::optional<size_t> EstimateCountForBytes(const Tokenizer& tokenizer, uint64_t bytes);

}  // namespace strata::internal

#endif  // STRATA_SRC_CORE_ESTIMATE_TOKENIZER_H_
