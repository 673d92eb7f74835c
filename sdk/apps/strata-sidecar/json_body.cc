// Why a request body is not JSON (json_body.h).
#include "json_body.h"

#include <cstdio>
#include <nlohmann/json.hpp>

namespace strata::sidecar {

size_t FirstInvalidUtf8(std::string_view text) {
  const auto* s = reinterpret_cast<const unsigned char*>(text.data());
  const size_t n = text.size();
  size_t i = 0;
  while (i < n) {
    const unsigned char c = s[i];
    size_t length = 0;
    unsigned char low = 0x80;
    unsigned char high = 0xbf;
    if (c < 0x80) {
      ++i;
      continue;
    } else if (c >= 0xc2 && c <= 0xdf) {
      length = 2;
    } else if (c >= 0xe0 && c <= 0xef) {
      length = 3;
      if (c == 0xe0) low = 0xa0;   // overlong
      if (c == 0xed) high = 0x9f;  // UTF-16 surrogates
    } else if (c >= 0xf0 && c <= 0xf4) {
      length = 4;
      if (c == 0xf0) low = 0x90;   // overlong
      if (c == 0xf4) high = 0x8f;  // above U+10FFFF
    } else {
      return i;
    }
    if (i + length > n) return i;
    if (s[i + 1] < low || s[i + 1] > high) return i;
    for (size_t k = 2; k < length; ++k) {
      if (s[i + k] < 0x80 || s[i + k] > 0xbf) return i;
    }
    i += length;
  }
  return std::string_view::npos;
}

namespace {

// The parser's explanation without its "[json.exception....] " prefix, cut after 200 bytes on a
// character boundary (the text is valid UTF-8 here: the body was checked first).
std::string Reason(const char* what) {
  std::string reason(what);
  const size_t prefix = reason.find("] ");
  if (reason.rfind("[json.exception.", 0) == 0 && prefix != std::string::npos) {
    reason.erase(0, prefix + 2);
  }
  if (reason.size() > 200) {
    size_t cut = 200;
    while (cut > 0 && (static_cast<unsigned char>(reason[cut]) & 0xc0) == 0x80) --cut;
    reason = reason.substr(0, cut) + "...";
  }
  return reason;
}

}  // namespace

std::string DescribeJsonError(std::string_view text, std::string_view what) {
  const size_t invalid = FirstInvalidUtf8(text);
  if (invalid != std::string_view::npos) {
    char byte[8];
    std::snprintf(byte, sizeof(byte), "0x%02X", static_cast<unsigned char>(text[invalid]));
    return std::string(what) + " is not valid UTF-8: the byte " + byte + " at offset " +
           std::to_string(invalid) +
           " starts no valid character (JSON text must be UTF-8; escape other bytes as \\uXXXX)";
  }
  try {
    const nlohmann::json parsed = nlohmann::json::parse(text.begin(), text.end());
    (void)parsed;
  } catch (const nlohmann::json::parse_error& e) {
    return std::string(what) + " is not valid JSON at byte " + std::to_string(e.byte) + ": " +
           Reason(e.what());
  } catch (const nlohmann::json::exception& e) {
    // out_of_range.406: a number beyond double's range (1e400).
    return std::string(what) + " is not valid JSON: " + Reason(e.what()) +
           " (numbers must fit a double)";
  }
  return "";
}

}  // namespace strata::sidecar
