// Internal base of strata's exact tokenizers: adds Decode and token lookup to the public Tokenizer
// interface without widening it (strata/tokenizer.h is shared by every component).
#ifndef STRATA_SRC_TOKENIZE_EXACT_TOKENIZER_H_
#define STRATA_SRC_TOKENIZE_EXACT_TOKENIZER_H_

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "strata/status.h"
#include "strata/tokenizer.h"

namespace strata::tokenize_internal {

class ExactTokenizer : public Tokenizer {
 public:
  bool IsEstimate() const override { return false; }
  virtual StatusOr<std::string> Decode(const std::vector<int32_t>& ids) const = 0;
  virtual StatusOr<int32_t> TokenId(std::string_view token) const = 0;

  // Places where `text` may be cut for incremental counting (request_counter.cc): appends to `cuts`,
  // ascending, every position c with from < c < text.size() at which
  //   Encode(text) == Encode(text[0, c)) + Encode(text[c, end))
  // holds, also for every text that has the same bytes as `text` up to c + CutContext() and any
  // bytes after. Several cuts hold together: the pieces between them encode to the ids of the whole.
  // Default: none (the whole text is encoded).
  virtual void FindCuts(std::string_view text, size_t from, std::vector<size_t>* cuts) const {
    (void)text;
    (void)from;
    (void)cuts;
  }
  // How many bytes after a cut its validity depends on (see FindCuts).
  virtual size_t CutContext() const { return 0; }
};

// Reads a whole file; NOT_FOUND / DATA_LOSS with the path in the message.
StatusOr<std::string> ReadFile(const std::string& path);

// hf_bpe.cc
StatusOr<std::unique_ptr<ExactTokenizer>> MakeHfBpe(std::string_view json_text, std::string name);
// sentencepiece_tokenizer.cc
StatusOr<std::unique_ptr<ExactTokenizer>> MakeSentencePiece(const std::string& path);

}  // namespace strata::tokenize_internal

#endif  // STRATA_SRC_TOKENIZE_EXACT_TOKENIZER_H_
