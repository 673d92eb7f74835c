#include "core/identifiers.h"

#include <algorithm>
#include <cctype>
#include <string>
#include <unordered_map>

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

}  // namespace

std::vector<std::string> ExtractIdentifiers(const std::string& text, size_t limit) {
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

}  // namespace strata::internal
