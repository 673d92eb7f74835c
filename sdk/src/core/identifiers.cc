#include "core/identifiers.h"
#include "core/thread_annotations.h"

#include <algorithm>
#include <cctype>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>

namespace strata::internal {
namespace {

bool IsIdentChar(unsigned char c) {
  return std::isalnum(c) || c == '_' || c == '.' || c == '/' || c == '-';
}

// A word counts as an identifier when it looks like code: a path (has '/' and a letter), a dotted
// name (a.b), snake_case, or camelCase/PascalCase with an inner capital.
bool LooksLikeIdentifier(const std::string& w, bool* is_path) {
  if (w.size() < 4 || w.size() > 120) return false;
  bool alpha = false, underscore = false, inner_upper = false, lower = false;
  size_t dots = 0, slashes = 0;
  for (size_t i = 0; i < w.size(); ++i) {
    const unsigned char c = static_cast<unsigned char>(w[i]);
    if (std::isalpha(c)) alpha = true;
    if (std::islower(c)) lower = true;
    if (c == '_') underscore = true;
    if (c == '.') ++dots;
    if (c == '/') ++slashes;
    if (i > 0 && std::isupper(c) && std::islower(static_cast<unsigned char>(w[i - 1]))) inner_upper = true;
  }
  if (!alpha) return false;
  *is_path = slashes > 0;
  if (slashes > 0) return true;
  if (dots > 0) {
    // a.b but not a sentence end or a version number: letters on both sides of a dot.
    for (size_t i = 1; i + 1 < w.size(); ++i) {
      if (w[i] == '.' && std::isalpha(static_cast<unsigned char>(w[i - 1])) &&
          (std::isalpha(static_cast<unsigned char>(w[i + 1])) || w[i + 1] == '_'))
        return true;
    }
    return false;
  }
  return underscore || (inner_upper && lower);
}


// Every identifier of `text`, ranked (ExtractIdentifiers without a limit).
std::vector<std::string> RankIdentifiers(const std::string& text) {
  constexpr size_t limit = static_cast<size_t>(-1);
  struct Seen {
    size_t count = 0;
    size_t first = 0;
    bool path = false;
    bool defined = false;  // follows "def ", "class ", "function ", "struct ", ...
  };
  std::unordered_map<std::string, Seen> seen;
  size_t order = 0;
  for (size_t i = 0; i < text.size();) {
    if (!IsIdentChar(static_cast<unsigned char>(text[i]))) {
      ++i;
      continue;
    }
    size_t j = i;
    while (j < text.size() && IsIdentChar(static_cast<unsigned char>(text[j]))) ++j;
    std::string word = text.substr(i, j - i);
    // Trim punctuation a sentence or a path listing may leave at the ends.
    while (!word.empty() && (word.back() == '.' || word.back() == '-' || word.back() == '/')) word.pop_back();
    while (!word.empty() && (word.front() == '.' || word.front() == '-')) word.erase(word.begin());
    bool is_path = false;
    if (LooksLikeIdentifier(word, &is_path) || (i >= 4 && word.size() >= 4 && std::isalpha(static_cast<unsigned char>(word[0])) &&
                                                 (text.compare(i - 4, 4, "def ") == 0 || (i >= 6 && text.compare(i - 6, 6, "class ") == 0)))) {
      Seen& s = seen[word];
      if (s.count++ == 0) s.first = order++;
      s.path = is_path;
      static constexpr const char* kDefiners[] = {"def ", "class ", "function ", "func ", "fn ", "struct ", "interface "};
      for (const char* definer : kDefiners) {
        const size_t n = std::char_traits<char>::length(definer);
        if (i >= n && text.compare(i - n, n, definer) == 0) s.defined = true;
      }
    }
    i = j;
  }
  // Rank: what the output defines, then paths, then by frequency; ties by first appearance.
  auto score = [](const Seen& s) { return s.count + (s.defined ? 4 : 0) + (s.path ? 2 : 0); };
  std::vector<std::pair<std::string, Seen>> ranked(seen.begin(), seen.end());
  std::sort(ranked.begin(), ranked.end(), [&](const auto& a, const auto& b) {
    if (score(a.second) != score(b.second)) return score(a.second) > score(b.second);
    return a.second.first < b.second.first;
  });
  std::vector<std::string> out;
  for (size_t i = 0; i < ranked.size() && out.size() < limit; ++i) out.push_back(ranked[i].first);
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
