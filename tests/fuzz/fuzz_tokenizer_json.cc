// The tokenizer.json loader: the input is a tokenizer.json text, given to MakeHfTokenizerFromJson.
// A refused file must say why; an accepted one must encode a few texts (ASCII, code, non-ASCII,
// invalid UTF-8) with Count equal to the size of Encode, and every id it produces must decode.
#include <string>
#include <vector>

#include "fuzz_util.h"
#include "strata/tokenizer_spec.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto tokenizer = strata::MakeHfTokenizerFromJson(strata::fuzz::AsText(data, size), "fuzz");
  if (!tokenizer.ok()) {
    STRATA_FUZZ_CHECK(!tokenizer.status().message().empty(), "a refused tokenizer.json without a reason");
    return 0;
  }
  static const char* const kTexts[] = {"Hello, world!", "def f(x):\n    return x  # ok\n",
                                       "caf\xc3\xa9 \xe4\xb8\xad\xe6\x96\x87 \xf0\x9f\x98\x80", "\xff\xfe bad",
                                       "", "   \n\n\t"};
  for (const char* text : kTexts) {
    std::vector<int32_t> ids = (*tokenizer)->Encode(text);
    STRATA_FUZZ_CHECK((*tokenizer)->Count(text) == ids.size(), "Count differs from Encode().size()");
    auto decoded = strata::Decode(**tokenizer, ids);
    STRATA_FUZZ_CHECK(decoded.ok(), "an id Encode produced does not decode: " + decoded.status().ToString());
  }
  return 0;
}
