#include "core/identifiers.h"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>

#include "core/thread_annotations.h"

// STRATA_IDENTIFIERS_SCALAR builds the scalar classification where SSE2 is available too (a test
// runs it: tests/unit/core/CMakeLists.txt).
#if defined(__SSE2__) && !defined(STRATA_IDENTIFIERS_SCALAR)
#define STRATA_IDENTIFIERS_SSE2 1
#include <emmintrin.h>
#endif

namespace strata::internal {
namespace {

// Character classes of the "C" locale (the ASCII letters and digits; bytes above 0x7f are none),
// as a table: the scan reads every byte of every tool result a policy looks at.
enum CharClass : unsigned char {
  kLower = 1,
  kUpper = 2,
  kDigit = 4,
  kIdentPunct = 8,  // '_', '.', '/', '-'
};

struct CharClasses {
  unsigned char of[256] = {};
  constexpr CharClasses() {
    for (int c = 'a'; c <= 'z'; ++c) of[c] = kLower;
    for (int c = 'A'; c <= 'Z'; ++c) of[c] = kUpper;
    for (int c = '0'; c <= '9'; ++c) of[c] = kDigit;
    for (unsigned char c : {'_', '.', '/', '-'}) of[c] = kIdentPunct;
  }
};
constexpr CharClasses kClasses;

inline unsigned char ClassOf(char c) { return kClasses.of[static_cast<unsigned char>(c)]; }
inline bool IsAlpha(char c) { return (ClassOf(c) & (kLower | kUpper)) != 0; }

// A word counts as an identifier when it looks like code: a path (has '/' and a letter), a dotted
// name (a.b), snake_case, or camelCase/PascalCase with an inner capital.
bool LooksLikeIdentifier(std::string_view w, bool* is_path) {
  if (w.size() < 4 || w.size() > 120) return false;
  bool alpha = false, underscore = false, inner_upper = false, lower = false;
  size_t dots = 0, slashes = 0;
  for (size_t i = 0; i < w.size(); ++i) {
    const unsigned char k = ClassOf(w[i]);
    if (k & (kLower | kUpper)) alpha = true;
    if (k & kLower) lower = true;
    if (w[i] == '_') underscore = true;
    if (w[i] == '.') ++dots;
    if (w[i] == '/') ++slashes;
    if (i > 0 && (k & kUpper) && (ClassOf(w[i - 1]) & kLower)) inner_upper = true;
  }
  if (!alpha) return false;
  *is_path = slashes > 0;
  if (slashes > 0) return true;
  if (dots > 0) {
    // a.b but not a sentence end or a version number: letters on both sides of a dot.
    for (size_t i = 1; i + 1 < w.size(); ++i) {
      if (w[i] == '.' && IsAlpha(w[i - 1]) && (IsAlpha(w[i + 1]) || w[i + 1] == '_')) return true;
    }
    return false;
  }
  return underscore || (inner_upper && lower);
}

// Whether `text` has `word` just before position `at`.
inline bool Precedes(std::string_view text, size_t at, std::string_view word) {
  return at >= word.size() && text.compare(at - word.size(), word.size(), word) == 0;
}

// Bit i of each mask says what byte i of a block of up to 64 bytes is: an identifier character,
// a letter, or "special" (a capital, or '_', '.', '/', '-'). Bytes past the block's size are none.
struct BlockMasks {
  uint64_t ident = 0;
  uint64_t letter = 0;
  uint64_t special = 0;
};

#if defined(STRATA_IDENTIFIERS_SSE2)
// Whether each byte of x is in [lo, lo + count), as 0xff or 0: x - lo below count, compared signed
// after both are shifted by 128.
inline __m128i InRange(__m128i x, char lo, char count) {
  const __m128i shifted = _mm_add_epi8(x, _mm_set1_epi8(static_cast<char>(128 - lo)));
  return _mm_cmplt_epi8(shifted, _mm_set1_epi8(static_cast<char>(count - 128)));
}

BlockMasks Classify(const char* p, size_t size) {
  alignas(16) char padded[64];
  if (size < 64) {
    std::memset(padded, 0, sizeof(padded));
    std::memcpy(padded, p, size);
    p = padded;
  }
  BlockMasks m;
  for (int part = 0; part < 4; ++part) {
    const __m128i x = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p + 16 * part));
    const __m128i lower = InRange(x, 'a', 26);
    const __m128i upper = InRange(x, 'A', 26);
    const __m128i digit = InRange(x, '0', 10);
    const __m128i punct = _mm_or_si128(
        _mm_or_si128(_mm_cmpeq_epi8(x, _mm_set1_epi8('_')), _mm_cmpeq_epi8(x, _mm_set1_epi8('.'))),
        _mm_or_si128(_mm_cmpeq_epi8(x, _mm_set1_epi8('/')), _mm_cmpeq_epi8(x, _mm_set1_epi8('-'))));
    const __m128i letter = _mm_or_si128(lower, upper);
    const __m128i special = _mm_or_si128(upper, punct);
    const __m128i ident = _mm_or_si128(_mm_or_si128(letter, digit), punct);
    const int shift = 16 * part;
    m.ident |= static_cast<uint64_t>(static_cast<uint16_t>(_mm_movemask_epi8(ident))) << shift;
    m.letter |= static_cast<uint64_t>(static_cast<uint16_t>(_mm_movemask_epi8(letter))) << shift;
    m.special |= static_cast<uint64_t>(static_cast<uint16_t>(_mm_movemask_epi8(special))) << shift;
  }
  return m;
}
#else
BlockMasks Classify(const char* p, size_t size) {
  BlockMasks m;
  for (size_t i = 0; i < size; ++i) {
    const unsigned char k = ClassOf(p[i]);
    m.ident |= static_cast<uint64_t>(k != 0) << i;
    m.letter |= static_cast<uint64_t>((k & (kLower | kUpper)) != 0) << i;
    m.special |= static_cast<uint64_t>((k & (kUpper | kIdentPunct)) != 0) << i;
  }
  return m;
}
#endif

// Every identifier of `text`, ranked (ExtractIdentifiers without a limit). Words are views into
// `text` until the ranked ones are copied out.
std::vector<std::string> RankIdentifiers(std::string_view text) {
  struct Seen {
    size_t count = 0;
    size_t first = 0;
    bool path = false;
    bool defined = false;  // follows "def ", "class ", "function ", "struct ", ...
  };
  static constexpr std::string_view kDefiners[] = {"def ", "class ",  "function ", "func ",
                                                   "fn ",  "struct ", "interface "};
  std::unordered_map<std::string_view, Seen> seen;
  size_t order = 0;
  // A word [start, end) of identifier characters, with whether it has a letter and whether it has
  // a capital or punctuation ("special"): most words of a tool result are plain words and numbers,
  // told apart by these two without another pass over them.
  auto word_found = [&](size_t start, size_t end, bool letter, bool special) {
    if (!letter) return;  // neither test below can pass
    // Every definer ends with a space: a word not after one follows none.
    const bool after_space = start > 0 && text[start - 1] == ' ';
    std::string_view word;
    bool is_path = false;
    bool identifier = false;
    if (!special) {
      // Lower-case letters and digits only: no punctuation to trim, no path, dot, underscore or
      // inner capital, so only a definer before it makes it a name.
      word = text.substr(start, end - start);
    } else {
      // Trim punctuation a sentence or a path listing may leave at the ends.
      size_t begin = start;
      while (end > begin &&
             (text[end - 1] == '.' || text[end - 1] == '-' || text[end - 1] == '/')) {
        --end;
      }
      while (begin < end && (text[begin] == '.' || text[begin] == '-')) ++begin;
      word = text.substr(begin, end - begin);
      identifier = LooksLikeIdentifier(word, &is_path);
    }
    if (!identifier && !(after_space && start >= 4 && word.size() >= 4 && IsAlpha(word[0]) &&
                         (Precedes(text, start, "def ") || Precedes(text, start, "class ")))) {
      return;
    }
    Seen& s = seen[word];
    if (s.count++ == 0) s.first = order++;
    s.path = is_path;
    if (after_space) {
      for (std::string_view definer : kDefiners) {
        if (Precedes(text, start, definer)) s.defined = true;
      }
    }
  };
  // The words, found 64 bytes at a time from the blocks' masks: a branch per word, not per byte.
  const size_t n = text.size();
  size_t word_start = 0;
  bool in_word = false, letter = false, special = false;
  for (size_t base = 0; base < n; base += 64) {
    const BlockMasks m = Classify(text.data() + base, std::min<size_t>(64, n - base));
    size_t b = 0;
    while (b < 64) {
      if (!in_word) {
        const uint64_t ahead = m.ident & (~uint64_t{0} << b);
        if (ahead == 0) break;
        b = static_cast<size_t>(__builtin_ctzll(ahead));
        word_start = base + b;
        in_word = true;
        letter = special = false;
      }
      const uint64_t gaps = ~m.ident & (~uint64_t{0} << b);
      const size_t e = gaps == 0 ? 64 : static_cast<size_t>(__builtin_ctzll(gaps));
      const uint64_t range =
          (e == 64 ? ~uint64_t{0} : (uint64_t{1} << e) - 1) & (~uint64_t{0} << b);
      letter = letter || (m.letter & range) != 0;
      special = special || (m.special & range) != 0;
      if (e == 64) break;  // the word goes on into the next block
      word_found(word_start, base + e, letter, special);
      in_word = false;
      b = e;
    }
  }
  if (in_word) word_found(word_start, n, letter, special);
  // Rank: what the output defines, then paths, then by frequency; ties by first appearance.
  struct Ranked {
    size_t score;
    size_t first;
    std::string_view word;
  };
  std::vector<Ranked> ranked;
  ranked.reserve(seen.size());
  for (const auto& [word, s] : seen) {
    ranked.push_back({s.count + (s.defined ? 4 : 0) + (s.path ? 2 : 0), s.first, word});
  }
  std::sort(ranked.begin(), ranked.end(), [](const Ranked& a, const Ranked& b) {
    if (a.score != b.score) return a.score > b.score;
    return a.first < b.first;
  });
  std::vector<std::string> out;
  out.reserve(ranked.size());
  for (const Ranked& r : ranked) out.emplace_back(r.word);
  return out;
}

// The ranked identifiers of the texts seen recently, process-wide. A compaction policy reads the
// same segments at every build (each tool result, each recent assistant message) and segments do
// not change, so each distinct text is scanned once. Keyed by the text's length and 64-bit hash
// (hashing is far cheaper than the scan); bounded by the bytes of the identifiers held, emptied
// when full. Short texts are scanned every time (cheaper than keeping them).
class IdentifierMemo {
 public:
  static IdentifierMemo& Get() {
    static IdentifierMemo* memo = new IdentifierMemo();  // never destroyed: used until exit
    return *memo;
  }

  std::shared_ptr<const std::vector<std::string>> Ranked(const std::string& text) {
    const Key key{text.size(), std::hash<std::string_view>{}(text)};
    {
      internal::MutexLock lock(mu_);
      auto it = entries_.find(key);
      if (it != entries_.end()) return it->second;
    }
    auto ranked = std::make_shared<const std::vector<std::string>>(RankIdentifiers(text));
    size_t bytes = kEntryOverhead;
    for (const std::string& id : *ranked) bytes += id.size() + sizeof(std::string);
    internal::MutexLock lock(mu_);
    if (bytes_ + bytes > kMaxBytes) {
      entries_.clear();
      bytes_ = 0;
    }
    if (entries_.emplace(key, ranked).second) bytes_ += bytes;
    return ranked;
  }

  static constexpr size_t kMinTextBytes = 512;

 private:
  static constexpr size_t kMaxBytes = size_t{64} << 20;
  static constexpr size_t kEntryOverhead = 96;
  struct Key {
    size_t size;
    size_t hash;
    bool operator==(const Key& o) const { return size == o.size && hash == o.hash; }
  };
  struct KeyHash {
    size_t operator()(const Key& k) const { return k.hash ^ (k.size * 0x9e3779b97f4a7c15ULL); }
  };
  internal::Mutex mu_;
  std::unordered_map<Key, std::shared_ptr<const std::vector<std::string>>, KeyHash> entries_
      STRATA_GUARDED_BY(mu_);
  size_t bytes_ STRATA_GUARDED_BY(mu_) = 0;
};

}  // namespace

std::shared_ptr<const std::vector<std::string>> RankedIdentifiers(const std::string& text) {
  if (text.size() < IdentifierMemo::kMinTextBytes) {
    return std::make_shared<const std::vector<std::string>>(RankIdentifiers(text));
  }
  return IdentifierMemo::Get().Ranked(text);
}

std::vector<std::string> ExtractIdentifiers(const std::string& text, size_t limit) {
  if (text.size() < IdentifierMemo::kMinTextBytes) {
    std::vector<std::string> all = RankIdentifiers(text);
    if (all.size() > limit) all.resize(limit);
    return all;
  }
  std::shared_ptr<const std::vector<std::string>> ranked = IdentifierMemo::Get().Ranked(text);
  const size_t n = std::min(limit, ranked->size());
  return std::vector<std::string>(ranked->begin(), ranked->begin() + static_cast<std::ptrdiff_t>(n));
}

}  // namespace strata::internal
