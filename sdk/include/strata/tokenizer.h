// strata/tokenizer.h — counting the tokens a model server will count.
//
// A Tokenizer turns text into token ids. strata uses it to size segments, layers and whole requests
// against a Budget. Implementations: a bytes-per-token estimator (built into strata::core, used when
// no model file is configured) and exact tokenizers (Hugging Face tokenizer.json byte-level BPE,
// SentencePiece) in strata::tokenize.
//
//   std::unique_ptr<strata::Tokenizer> est = strata::MakeEstimateTokenizer(3.6);
//   size_t n = est->Count("hello world");
//
// Thread safety: every Tokenizer implementation is thread-safe; one instance may be shared by all
// contexts of a process.
#ifndef STRATA_TOKENIZER_H_
#define STRATA_TOKENIZER_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "strata/status.h"

namespace strata {

// Counts (and, when exact, encodes) tokens. Implementations: the estimator here, the exact
// tokenizers of strata/tokenize.h.
class Tokenizer {
 public:
  virtual ~Tokenizer() = default;

  // A stable name that identifies the tokenizer and its configuration, e.g. "estimate:4" or
  // "hf-bpe:<sha256 of tokenizer.json>". Persisted with token counts it produced.
  virtual std::string Name() const = 0;

  // True when counts are approximations (the estimator); exact tokenizers return false.
  virtual bool IsEstimate() const = 0;

  // Token ids for `text` (valid UTF-8). The estimator returns an empty vector.
  virtual std::vector<int32_t> Encode(std::string_view text) const = 0;

  // Number of tokens of `text`. Exact tokenizers may do this faster than Encode().size().
  virtual size_t Count(std::string_view text) const = 0;
};

// Counts the input tokens of a whole rendered request (an OpenAI Chat Completions body) as the
// server will: through its chat template and tokenizer (strata/chat_template.h makes one). A
// Context given one (ContextOptions::request_counter) enforces its budget on exact counts.
// Implementations are thread-safe.
class RequestTokenCounter {
 public:
  virtual ~RequestTokenCounter() = default;
  // e.g. "glm-5.3:1+hf-bpe:<hash>".
  virtual std::string Name() const = 0;
  virtual StatusOr<size_t> CountRequest(std::string_view request_body) const = 0;
};

// An estimator that assumes `bytes_per_token` UTF-8 bytes per token (must be > 0; values <= 0 are
// replaced by 4.0). Count rounds up; an empty text has 0 tokens.
std::unique_ptr<Tokenizer> MakeEstimateTokenizer(double bytes_per_token = 4.0);

}  // namespace strata

#endif  // STRATA_TOKENIZER_H_
