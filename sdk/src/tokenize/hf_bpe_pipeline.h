// The text side of the byte-level BPE tokenizer (hf_bpe.cc): tokenizer.json's normalizer and
// pre-tokenizer steps, read from the file and applied to a span of text before BPE. Defined in
// hf_bpe_pipeline.cc, after the reference `tokenizers` crate (normalizers, pre_tokenizers, and
// NormalizedString::split for the Split behaviors).
#ifndef STRATA_SRC_TOKENIZE_HF_BPE_PIPELINE_H_
#define STRATA_SRC_TOKENIZE_HF_BPE_PIPELINE_H_

#include <cstddef>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "strata/status.h"

namespace strata::tokenize_internal {

// A piece of the text being pre-tokenized: a byte range of the (normalized) span.
struct Piece {
  size_t begin;
  size_t end;
};

// A PCRE2 regex, compiled once, matched from any thread (hf_bpe_pipeline.cc).
class Regex;

enum class NormKind { kNfc, kNfd, kNfkc, kNfkd, kLowercase };

// The normalizers of tokenizer.json's "normalizer" (null: none), a Sequence flattened in order;
// INVALID_ARGUMENT for one strata does not support or a Sequence nested too deep.
StatusOr<std::vector<NormKind>> ParseNormalizer(const nlohmann::json& j, int depth = 0);
// `text` with one normalizer applied.
std::string ApplyNormalizer(NormKind kind, const std::string& text);

enum class SplitBehavior { kRemoved, kIsolated, kMergedWithPrevious, kMergedWithNext, kContiguous };

// One pre-tokenizer step: a regex split with a behavior.
struct PreStep {
  PreStep();
  ~PreStep();
  PreStep(PreStep&&) noexcept;
  PreStep& operator=(PreStep&&) noexcept;

  std::unique_ptr<Regex> regex;  // null: no split (ByteLevel without use_regex)
  SplitBehavior behavior = SplitBehavior::kIsolated;
  bool invert = false;
  bool add_prefix_space = false;  // ByteLevel only
  bool digits = false;            // the Digits pre-tokenizer (a `\p{N}` split)
};

// Appends the steps of tokenizer.json's "pre_tokenizer" `j` (null: none) to `steps`, a Sequence
// flattened in order; sets *has_byte_level when one is ByteLevel. INVALID_ARGUMENT for a step
// strata does not support, a regex PCRE2 does not compile or a Sequence nested too deep.
Status ParsePreTokenizer(const nlohmann::json& j, std::vector<PreStep>* steps,
                         bool* has_byte_level, int depth = 0);

// Splits piece `p` of `text` with the step's regex and behavior (NormalizedString::split),
// appending the resulting pieces to `out`; the scratch vectors are reused between calls.
void SplitPiece(const PreStep& step, const std::string& text, Piece p, std::vector<Piece>* out,
                std::vector<Piece>* scratch_matches, std::vector<std::pair<Piece, bool>>* scratch);

}  // namespace strata::tokenize_internal

#endif  // STRATA_SRC_TOKENIZE_HF_BPE_PIPELINE_H_
