// strata/tokenizer_spec.h — tokenizers made from a spec string: the exact tokenizers (Hugging Face
// tokenizer.json byte-level BPE, SentencePiece) and the calibrated estimator, with what works on
// them (Decode, TokenId, incremental and streamed encoding). The interfaces they implement are in
// strata/tokenizer.h.
//
// A spec names a tokenizer the way a user writes it on the command line or in a config file:
//   hf:PATH/tokenizer.json   Hugging Face tokenizer.json with a byte-level BPE model (GLM-4/5,
//                            Qwen2/3, DeepSeek-V3, Llama-3, GPT-2 style files), run by strata.
//   spm:PATH/model.model     a SentencePiece model, through libsentencepiece.
//   estimate                 bytes-per-token estimator, 4 bytes per token.
//   estimate:3.5             estimator with an explicit ratio (> 0).
//   estimate:FAMILY          estimator with a ratio measured on the project's traces for a
//                            tokenizer family (EstimateFamilies(): qwen3, deepseek_v3, glm,
//                            spm-test).
//
//   STRATA_ASSIGN_OR_RETURN(std::unique_ptr<strata::Tokenizer> tok,
//                           strata::MakeTokenizer("hf:models/glm/tokenizer.json"));
//   std::vector<int32_t> ids = tok->Encode("Hello <|user|>");   // added tokens are recognised
//   STRATA_ASSIGN_OR_RETURN(std::string text, strata::Decode(*tok, ids));
//
// What the Hugging Face backend supports, and refuses with an error naming the component:
//   model: BPE (byte-level; ignore_merges honoured). WordPiece, Unigram, WordLevel: refused.
//   normalizer: null, NFC, NFD, NFKC, NFKD, Lowercase, Sequence of these. Others: refused.
//   pre_tokenizer: Split (Regex or String pattern, every behavior, invert), ByteLevel
//     (add_prefix_space, use_regex), Digits, Sequence of these; a ByteLevel step is required.
//     Others (Metaspace, Whitespace, BertPreTokenizer, ...): refused.
//   added tokens: matched leftmost-longest on the input text before normalization and
//     pre-tokenization; lstrip / rstrip / single_word tokens are refused. The post-processor is
//     not applied: Encode never adds BOS/EOS, chat templates put special tokens in the text.
// Regexes run on PCRE2 (UTF + UCP, JIT when available). Invalid UTF-8 input bytes are replaced by
// U+FFFD before encoding.
//
// Thread safety: every tokenizer returned here is thread-safe (see strata/tokenizer.h); the free
// functions are thread-safe.
#ifndef STRATA_TOKENIZER_SPEC_H_
#define STRATA_TOKENIZER_SPEC_H_

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "strata/status.h"
#include "strata/tokenizer.h"

namespace strata {

// The largest tokenizer file (hf: or spm:) MakeTokenizer reads: 64 MiB. Published tokenizer.json
// files are far below it (Qwen3's 11 MB, Gemma 3's 33 MB); a larger file is refused before it is
// read.
inline constexpr uint64_t kMaxTokenizerFileBytes = uint64_t{64} << 20;

// Creates the tokenizer named by `spec` (see above). Errors: INVALID_ARGUMENT for a malformed spec,
// an unsupported tokenizer.json component (the message names it), a file that is not a regular
// file (a FIFO, a device such as /dev/zero, a directory: refused without reading or waiting) or
// one above kMaxTokenizerFileBytes; NOT_FOUND for a missing file, DATA_LOSS for an unreadable or
// corrupt file.
StatusOr<std::unique_ptr<Tokenizer>> MakeTokenizer(std::string_view spec);

// A Hugging Face tokenizer.json given as text; `name` becomes part of Name() ("hf-bpe:<name>").
StatusOr<std::unique_ptr<Tokenizer>> MakeHfTokenizerFromJson(std::string_view json_text,
                                                             std::string_view name);

// Text for `ids` of an exact tokenizer made by this header (added tokens decode to their content).
// Errors: UNIMPLEMENTED for the estimator, OUT_OF_RANGE for an id not in the vocabulary.
StatusOr<std::string> Decode(const Tokenizer& tokenizer, const std::vector<int32_t>& ids);

// The id of an added/special token (e.g. "<|user|>") or of a vocabulary entry with exactly this
// text, or NOT_FOUND. Estimators: UNIMPLEMENTED.
StatusOr<int32_t> TokenId(const Tokenizer& tokenizer, std::string_view token);

// A calibrated bytes-per-token ratio for one tokenizer family (measured as docs/tokenizers.md says).
struct EstimateFamily {
  std::string name;           // "qwen3"
  double bytes_per_token;     // UTF-8 bytes per token on the traces' message contents
  double mean_abs_error;      // mean |estimate - exact| / exact per message (messages >= 64 bytes)
  std::string measured_with;  // the exact tokenizer the ratio was measured against
};

// The families `estimate:FAMILY` accepts, with the figures docs/tokenizers.md reports.
const std::vector<EstimateFamily>& EstimateFamilies();

// Encodes a sequence of texts that mostly repeat the previous text's beginning (an agent's
// successive prompts): each result equals tokenizer.Encode(text) / Count(text), but only the part
// after the common prefix with the previous text is encoded again, from the last place before it
// where the tokenizer allows the text to be cut (a Hugging Face byte-level BPE tokenizer: before an
// added token, and after a newline that nothing merges across). Other tokenizers encode each
// distinct text whole. `tokenizer` is not owned and must outlive the encoder.
// Thread safety: not thread-safe (one encoder per thread or agent).
class IncrementalEncoder {
 public:
  // An encoder over `tokenizer` (not owned; must outlive the encoder) with no previous text.
  explicit IncrementalEncoder(const Tokenizer& tokenizer);
  ~IncrementalEncoder();
  // Moves the encoder, its previous text and its state; `other` must not be used afterwards.
  IncrementalEncoder(IncrementalEncoder&& other) noexcept;
  // Moves the encoder, its previous text and its state; `other` must not be used afterwards.
  IncrementalEncoder& operator=(IncrementalEncoder&& other) noexcept;

  // Ids of `text` (empty for an estimator); valid until the next call.
  const std::vector<int32_t>& Encode(std::string_view text);
  // Encode(text) for a caller that knows the first `known_prefix` bytes of `text` are those of
  // the previous text (e.g. a render that continued the previous one): they are not compared
  // again. Requires that they are; the result is then Encode(text)'s.
  const std::vector<int32_t>& Encode(std::string_view text, size_t known_prefix);
  // Tokens of `text`, without keeping ids (an encoder used only for counts keeps none).
  size_t Count(std::string_view text);
  // Count(text) for a caller that knows the first `known_prefix` bytes of `text` are those of the
  // previous text: they are not compared again. Requires that they are; the result is then
  // Count(text)'s.
  size_t Count(std::string_view text, size_t known_prefix);
  // The previous text (what the next one is compared with); empty for an estimator, whose counts
  // keep nothing.
  const std::string& text() const;
  // How many leading ids (or, after Count(), tokens) of the last call's result were carried over
  // from the call before it unchanged: the ids before the first piece it encoded again. Equal to
  // the whole result when the text did not change; 0 after the first call, after an estimator's,
  // and when the kept state could not be continued. A caller keeping something derived from the
  // ids (e.g. block hashes) recomputes only what follows this many.
  size_t unchanged() const;

 private:
  struct State;
  std::unique_ptr<State> state_;
};

// Counts (and with `ids`, encodes) a text that arrives in consecutive chunks, such as a large file
// read piece by piece, holding only the text after the last place the tokenizer allows it to be
// cut (a Hugging Face byte-level BPE tokenizer: before an added token, and after a newline that
// nothing merges across; so for text with lines, about a line). The result equals
// tokenizer.Count() / Encode() of the whole text. Other tokenizers hold the whole text until
// Finish(), except strata's estimator, which counts the length alone and holds nothing.
// Thread safety: not thread-safe.
class StreamEncoder {
 public:
  // A stream encoder over `tokenizer` (not owned; must outlive the encoder), at the start of a text.
  explicit StreamEncoder(const Tokenizer& tokenizer);
  ~StreamEncoder();

  // Adds the next chunk; the ids of the text that became final are appended to `ids` if given.
  void Append(std::string_view chunk, std::vector<int32_t>* ids = nullptr);
  // Ends the text: encodes what is left (ids appended to `ids` if given) and returns the tokens of
  // the whole text.
  size_t Finish(std::vector<int32_t>* ids = nullptr);
  // Bytes held, not encoded yet.
  size_t pending_bytes() const;

 private:
  struct State;
  std::unique_ptr<State> state_;
};

}  // namespace strata

#endif  // STRATA_TOKENIZER_SPEC_H_
