// strata-sim's request parsing (sim_impl.h): the shape of a request body at about memory speed.
// A JSON parser builds every string byte by byte; the engine needs the body's structure, its types
// and a few short fields, while nearly all of an agent's request is the text of its messages. So
// the long string values are checked as the parser would check them, then left out of what is
// parsed.
#include <array>
#include <cstring>

#include "sim_impl.h"

namespace strata::sim::sim_internal {
namespace {

// String values at most this long are parsed as they are.
constexpr size_t kElidedStringBytes = 4096;

// Fields the engine reads the text of (sim_engine.cc): never elided, whatever their length.
bool EngineReadsText(std::string_view key) {
  return key == "model" || key == "cache_salt" || key == "extra_key" || key == "rid" ||
         key == "request_id" || key == "role";
}

int HexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// The \uXXXX escape at text[i] (text[i] == 'u'), or -1 when it is not four hex digits.
int Escaped16(std::string_view text, size_t i) {
  if (i + 4 >= text.size()) return -1;
  int value = 0;
  for (size_t k = 1; k <= 4; ++k) {
    const int digit = HexValue(text[i + k]);
    if (digit < 0) return -1;
    value = value * 16 + digit;
  }
  return value;
}

// Length of the valid UTF-8 character at text[i] (a lead byte >= 0x80), 0 when it is not one.
size_t Utf8Length(std::string_view text, size_t i) {
  const auto* s = reinterpret_cast<const unsigned char*>(text.data());
  const unsigned char c = s[i];
  size_t length = 0;
  unsigned char low = 0x80, high = 0xbf;
  if (c >= 0xc2 && c <= 0xdf) {
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
    return 0;
  }
  if (i + length > text.size() || s[i + 1] < low || s[i + 1] > high) return 0;
  for (size_t k = 2; k < length; ++k) {
    if (s[i + k] < 0x80 || s[i + k] > 0xbf) return 0;
  }
  return length;
}

// Bytes a string's content may hold as they are: printable ASCII but the quote and the backslash.
const std::array<bool, 256>& PlainBytes() {
  static const std::array<bool, 256> table = [] {
    std::array<bool, 256> t{};
    for (int c = 0x20; c < 0x80; ++c) t[c] = c != '"' && c != '\\';
    return t;
  }();
  return table;
}

// The string whose content starts at text[i]: the index of its closing quote, or npos when the
// parser would refuse it (a control character, a bad escape or surrogate pair, invalid UTF-8, no
// end).
size_t StringEnd(std::string_view text, size_t i) {
  const std::array<bool, 256>& plain = PlainBytes();
  const size_t n = text.size();
  while (i < n) {
    const auto c = static_cast<unsigned char>(text[i]);
    if (plain[c]) {
      ++i;
    } else if (c == '"') {
      return i;
    } else if (c == '\\') {
      if (i + 1 >= n) return std::string_view::npos;
      const char e = text[i + 1];
      if (e == 'u') {
        const int unit = Escaped16(text, i + 1);
        if (unit < 0 || (unit >= 0xdc00 && unit <= 0xdfff)) return std::string_view::npos;
        if (unit >= 0xd800 && unit <= 0xdbff) {  // a high surrogate: a low one must follow
          const int next = i + 7 < n && text[i + 6] == '\\' && text[i + 7] == 'u'
                               ? Escaped16(text, i + 7)
                               : -1;
          if (next < 0xdc00 || next > 0xdfff) return std::string_view::npos;
          i += 12;
        } else {
          i += 6;
        }
      } else if (std::strchr("\"\\/bfnrt", e) != nullptr && e != '\0') {
        i += 2;
      } else {
        return std::string_view::npos;
      }
    } else if (c < 0x20) {
      return std::string_view::npos;
    } else {
      const size_t length = Utf8Length(text, i);
      if (length == 0) return std::string_view::npos;
      i += length;
    }
  }
  return std::string_view::npos;
}

}  // namespace

json ParseRequestShape(std::string_view body) {
  std::string shape;
  size_t copied = 0;  // body[copied, ...) is not in `shape` yet
  std::string_view last_key;
  for (size_t i = 0;;) {
    const size_t open = body.find('"', i);
    if (open == std::string_view::npos) break;
    const size_t close = StringEnd(body, open + 1);
    if (close == std::string_view::npos) return json::parse(body, nullptr, false);
    size_t after = close + 1;
    while (after < body.size() && std::strchr(" \t\r\n", body[after]) != nullptr &&
           body[after] != '\0') {
      ++after;
    }
    const std::string_view content = body.substr(open + 1, close - open - 1);
    if (after < body.size() && body[after] == ':') {
      last_key = content;
    } else if (content.size() > kElidedStringBytes && !EngineReadsText(last_key)) {
      shape.append(body.substr(copied, open + 1 - copied));  // up to the opening quote
      copied = close;                                         // from the closing quote
    }
    i = close + 1;
  }
  if (copied == 0) return json::parse(body, nullptr, false);
  shape.append(body.substr(copied));
  return json::parse(shape, nullptr, false);
}

}  // namespace strata::sim::sim_internal
