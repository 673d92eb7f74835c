#include "core/identifiers.h"
#include "core/thread_annotations.h"

#include <algorithm>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>

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
inline bool IsIdentChar(char c) { return ClassOf(c) != 0; }
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
  const size_t n = text.size();
  for (size_t i = 0; i < n;) {
    if (!IsIdentChar(text[i])) {
      ++i;
      continue;
    }
    size_t j = i;
    while (j < n && IsIdentChar(text[j])) ++j;
    // Trim punctuation a sentence or a path listing may leave at the ends.
    size_t begin = i, end = j;
    while (end > begin && (text[end - 1] == '.' || text[end - 1] == '-' || text[end - 1] == '/')) {
      --end;
    }
    while (begin < end && (text[begin] == '.' || text[begin] == '-')) ++begin;
    const std::string_view word = text.substr(begin, end - begin);
    bool is_path = false;
    if (LooksLikeIdentifier(word, &is_path) ||
        (i >= 4 && word.size() >= 4 && IsAlpha(word[0]) &&
         (Precedes(text, i, "def ") || Precedes(text, i, "class ")))) {
      Seen& s = seen[word];
      if (s.count++ == 0) s.first = order++;
      s.path = is_path;
      for (std::string_view definer : kDefiners) {
        if (Precedes(text, i, definer)) s.defined = true;
      }
    }
    i = j;
  }
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
