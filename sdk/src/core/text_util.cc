#include "core/text_util.h"

#include <openssl/evp.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <cstdio>
#include <cstring>

namespace strata::internal {

size_t CommonPrefix(std::string_view a, std::string_view b) {
  const size_t n = std::min(a.size(), b.size());
  size_t i = 0;
  constexpr size_t kChunk = 4096;
  while (i + kChunk <= n && std::memcmp(a.data() + i, b.data() + i, kChunk) == 0) i += kChunk;
  while (i < n && a[i] == b[i]) ++i;
  return i;
}

void AppendGrowing(std::string& text, std::string_view added) {
  const size_t size = text.size() + added.size();
  if (size > text.capacity()) text.reserve(size + size / 2);
  text.append(added);
}

Status ValidateUtf8(std::string_view text, std::string_view what) {
  const auto* s = reinterpret_cast<const unsigned char*>(text.data());
  const size_t n = text.size();
  size_t i = 0;
  while (i < n) {
    // Fast path over ASCII, 8 bytes at a time.
    while (i + 8 <= n) {
      uint64_t word;
      std::memcpy(&word, s + i, 8);
      if (word & 0x8080808080808080ULL) break;
      i += 8;
    }
    if (i >= n) break;
    const unsigned char c = s[i];
    if (c < 0x80) {
      ++i;
      continue;
    }
    size_t len = 0;
    uint32_t cp = 0, min_cp = 0;
    if ((c & 0xE0) == 0xC0) len = 2, cp = c & 0x1F, min_cp = 0x80;
    else if ((c & 0xF0) == 0xE0) len = 3, cp = c & 0x0F, min_cp = 0x800;
    else if ((c & 0xF8) == 0xF0) len = 4, cp = c & 0x07, min_cp = 0x10000;
    bool ok = len != 0 && i + len <= n;
    for (size_t k = 1; ok && k < len; ++k) {
      if ((s[i + k] & 0xC0) != 0x80) ok = false;
      else cp = (cp << 6) | (s[i + k] & 0x3F);
    }
    if (ok && (cp < min_cp || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF))) ok = false;
    if (!ok) {
      char byte[8];
      std::snprintf(byte, sizeof byte, "0x%02X", c);
      return InvalidArgumentError(std::string(what) + " is not valid UTF-8: invalid sequence at byte " +
                                  std::to_string(i) + " (" + byte +
                                  "); convert the text to UTF-8 before passing it (for example, "
                                  "decode it with replacement characters)");
    }
    i += len;
  }
  return Status::Ok();
}

std::string Sha256(std::string_view data) {
  // Fetched once: with EVP_sha256() every EVP_Digest looks the implementation up again (0.8 us
  // against 0.57 us for a 600-byte hash, measured).
  static EVP_MD* const fetched = EVP_MD_fetch(nullptr, "SHA256", nullptr);
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int length = 0;
  EVP_Digest(data.data(), data.size(), digest, &length, fetched != nullptr ? fetched : EVP_sha256(),
             nullptr);
  return std::string(reinterpret_cast<const char*>(digest), length);
}

std::string Sha256Hex(std::string_view data) {
  static constexpr char kHex[] = "0123456789abcdef";
  const std::string digest = Sha256(data);
  std::string out(2 * digest.size(), '0');
  for (size_t i = 0; i < digest.size(); ++i) {
    const auto byte = static_cast<unsigned char>(digest[i]);
    out[2 * i] = kHex[byte >> 4];
    out[2 * i + 1] = kHex[byte & 15];
  }
  return out;
}

namespace {

bool IsDigitAt(std::string_view t, size_t i) {
  return i < t.size() && t[i] >= '0' && t[i] <= '9';
}
bool IsHexAt(std::string_view t, size_t i) {
  return i < t.size() && std::isxdigit(static_cast<unsigned char>(t[i]));
}
bool IsAlnumAt(std::string_view t, size_t i) {
  return i < t.size() && std::isalnum(static_cast<unsigned char>(t[i]));
}
bool DigitsAt(std::string_view t, size_t i, size_t count) {
  for (size_t k = 0; k < count; ++k)
    if (!IsDigitAt(t, i + k)) return false;
  return true;
}

// YYYY-MM-DD[T ]HH:MM at i; returns the match length or 0.
size_t MatchTimestamp(std::string_view t, size_t i) {
  if (i > 0 && IsAlnumAt(t, i - 1)) return 0;
  if (!DigitsAt(t, i, 4) || i + 16 > t.size() || t[i + 4] != '-' || !DigitsAt(t, i + 5, 2) ||
      t[i + 7] != '-' || !DigitsAt(t, i + 8, 2) || (t[i + 10] != 'T' && t[i + 10] != ' ') ||
      !DigitsAt(t, i + 11, 2) || t[i + 13] != ':' || !DigitsAt(t, i + 14, 2))
    return 0;
  size_t end = i + 16;
  if (end + 3 <= t.size() && t[end] == ':' && DigitsAt(t, end + 1, 2)) end += 3;
  return end - i;
}

// 8-4-4-4-12 hex digits at i; returns 36 or 0.
size_t MatchUuid(std::string_view t, size_t i) {
  if (i > 0 && IsAlnumAt(t, i - 1)) return 0;
  static constexpr size_t kGroups[] = {8, 4, 4, 4, 12};
  size_t p = i;
  for (size_t g = 0; g < 5; ++g) {
    for (size_t k = 0; k < kGroups[g]; ++k, ++p)
      if (!IsHexAt(t, p)) return 0;
    if (g < 4) {
      if (p >= t.size() || t[p] != '-') return 0;
      ++p;
    }
  }
  if (IsAlnumAt(t, p)) return 0;
  return p - i;
}

constexpr std::string_view kDatePhrases[] = {"today is",    "today's date", "current date",
                                             "current time", "the time is",  "as of today"};

size_t MatchPhrase(std::string_view t, size_t i) {
  for (std::string_view phrase : kDatePhrases) {
    if (i + phrase.size() > t.size()) continue;
    if (i > 0 && IsAlnumAt(t, i - 1)) continue;
    bool equal = true;
    for (size_t k = 0; k < phrase.size() && equal; ++k)
      equal = std::tolower(static_cast<unsigned char>(t[i + k])) == phrase[k];
    if (equal) return phrase.size();
  }
  return 0;
}

}  // namespace

std::vector<LintHit> ScanVolatileLooking(std::string_view text, size_t max_hits) {
  std::vector<LintHit> hits;
  for (size_t i = 0; i < text.size() && hits.size() < max_hits; ++i) {
    const unsigned char c = static_cast<unsigned char>(text[i]);
    size_t length = 0;
    const char* what = nullptr;
    if (c >= '0' && c <= '9') {
      if ((length = MatchTimestamp(text, i))) what = "timestamp";
    }
    if (!what && std::isxdigit(c) && (length = MatchUuid(text, i))) what = "uuid";
    if (!what && (c == 't' || c == 'T' || c == 'c' || c == 'C' || c == 'a' || c == 'A') &&
        (length = MatchPhrase(text, i)))
      what = "date phrase";
    if (what) {
      hits.push_back({what, i, std::string(text.substr(i, length))});
      i += length - 1;
    }
  }
  return hits;
}

}  // namespace strata::internal
