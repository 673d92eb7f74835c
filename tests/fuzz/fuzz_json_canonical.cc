// The JSON canonicalizer (core/json_text.h): any input is either refused with a reason or
// canonicalized, and canonical text is a fixed point (canonicalizing it again gives the same bytes).
// For valid UTF-8 input, AppendJsonString must produce a JSON string literal that parses back to the
// input, of the size JsonStringSize predicts.
#include <nlohmann/json.hpp>
#include <string>

#include "core/json_text.h"
#include "fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text = strata::fuzz::AsText(data, size);
  auto canonical = strata::internal::CanonicalizeJson(text, "fuzz input");
  if (canonical.ok()) {
    auto again = strata::internal::CanonicalizeJson(*canonical, "canonical text");
    STRATA_FUZZ_CHECK(again.ok(), "canonical text refused: " + again.status().ToString());
    STRATA_FUZZ_CHECK(*again == *canonical, "canonicalization is not a fixed point");
  } else {
    STRATA_FUZZ_CHECK(!canonical.status().message().empty(), "refused without a reason");
  }
  // String escaping (defined for valid UTF-8 only).
  bool valid_utf8 = true;
  try {
    (void)nlohmann::json(std::string(text)).dump();
  } catch (const nlohmann::json::exception&) {
    valid_utf8 = false;
  }
  if (valid_utf8) {
    std::string out;
    strata::internal::AppendJsonString(out, text);
    STRATA_FUZZ_CHECK(out.size() == strata::internal::JsonStringSize(text),
                      "JsonStringSize differs from AppendJsonString");
    auto parsed = nlohmann::json::parse(out, nullptr, false);
    STRATA_FUZZ_CHECK(parsed.is_string() && parsed.get<std::string>() == text,
                      "AppendJsonString does not round-trip");
  }
  return 0;
}
