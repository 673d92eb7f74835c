#include "core/utf8.h"

#include <cstdint>

namespace strata::internal {
namespace {

bool IsContinuation(unsigned char c) { return (c & 0xC0) == 0x80; }

// The length a UTF-8 sequence starting with lead byte `c` has (1 for ASCII), 0 when `c` cannot
// start one (a continuation byte, 0xF8 and above).
size_t LeadLength(unsigned char c) {
  if (c < 0x80) return 1;
  if ((c & 0xE0) == 0xC0) return 2;
  if ((c & 0xF0) == 0xE0) return 3;
  if ((c & 0xF8) == 0xF0) return 4;
  return 0;
}

// The length of the valid UTF-8 sequence at text[i], 0 when the bytes there are not one.
size_t ValidSequenceAt(std::string_view text, size_t i) {
  const auto c = static_cast<unsigned char>(text[i]);
  const size_t len = LeadLength(c);
  if (len <= 1 || i + len > text.size()) return len == 1 ? 1 : 0;
  static constexpr uint32_t kLeadMask[] = {0, 0, 0x1F, 0x0F, 0x07};
  static constexpr uint32_t kMin[] = {0, 0, 0x80, 0x800, 0x10000};
  uint32_t cp = c & kLeadMask[len];
  for (size_t k = 1; k < len; ++k) {
    const auto next = static_cast<unsigned char>(text[i + k]);
    if (!IsContinuation(next)) return 0;
    cp = (cp << 6) | (next & 0x3F);
  }
  const bool valid = cp >= kMin[len] && cp <= 0x10FFFF && (cp < 0xD800 || cp > 0xDFFF);
  return valid ? len : 0;
}

}  // namespace

size_t Utf8Floor(std::string_view text, size_t max_bytes) {
  if (max_bytes >= text.size()) return text.size();
  // Look back (at most 3 bytes) for the lead byte of the character byte max_bytes belongs to.
  for (size_t back = 0; back <= 3 && back <= max_bytes; ++back) {
    const size_t at = max_bytes - back;
    const auto c = static_cast<unsigned char>(text[at]);
    if (IsContinuation(c)) continue;
    // A lead byte whose sequence reaches past max_bytes starts the character being cut.
    return back > 0 && LeadLength(c) > back ? at : max_bytes;
  }
  return max_bytes;  // continuation bytes without a lead: invalid text, cut where asked
}

std::string Utf8Prefix(std::string_view text, size_t max_bytes, std::string_view marker) {
  if (text.size() <= max_bytes) return std::string(text);
  std::string out(text.substr(0, Utf8Floor(text, max_bytes)));
  out.append(marker);
  return out;
}

bool IsValidUtf8(std::string_view text) {
  for (size_t i = 0; i < text.size();) {
    const size_t len = ValidSequenceAt(text, i);
    if (len == 0) return false;
    i += len;
  }
  return true;
}

std::string ToValidUtf8(std::string_view text) {
  if (IsValidUtf8(text)) return std::string(text);
  std::string out;
  out.reserve(text.size() + 8);
  for (size_t i = 0; i < text.size();) {
    const size_t len = ValidSequenceAt(text, i);
    if (len == 0) {
      out += "\xEF\xBF\xBD";
      ++i;
    } else {
      out.append(text.data() + i, len);
      i += len;
    }
  }
  return out;
}

}  // namespace strata::internal
