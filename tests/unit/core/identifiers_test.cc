#include "core/identifiers.h"

#include <algorithm>
#include <catch2/catch.hpp>
#include <cctype>
#include <random>
#include <string>
#include <unordered_map>
#include <vector>

#include "testing/traces.h"

namespace strata::internal {
namespace {

using Names = std::vector<std::string>;

TEST_CASE("ExtractIdentifiers ranks defined names, then paths, then frequent names", "[core][identifiers]") {
  const std::string text =
      "Traceback in src/app/models.py: parse_config failed; parse_config again; see MyWidget and "
      "version 1.2.3. The end.\ndef load_settings(path):\n    pass\nclass Parser:\n";
  CHECK(ExtractIdentifiers(text, 10) ==
        Names{"load_settings", "Parser", "src/app/models.py", "parse_config", "MyWidget"});
  // At most `limit`, the best ranked first.
  CHECK(ExtractIdentifiers(text, 2) == Names{"load_settings", "Parser"});
  CHECK(ExtractIdentifiers(text, 0).empty());
}

TEST_CASE("ExtractIdentifiers ignores prose, numbers and sentence punctuation", "[core][identifiers]") {
  CHECK(ExtractIdentifiers("Hello world. This is fine, version 1.2.3 of the tool.", 16).empty());
  CHECK(ExtractIdentifiers("", 16).empty());
  // A trailing dot or slash is punctuation, not part of the name; dotted names keep their dots.
  CHECK(ExtractIdentifiers("Edit os.path.join. Then list build/out/.", 16) == Names{"build/out", "os.path.join"});
}


// The scan as it was written first (std::isalnum and friends, a std::string per word): the
// reference the table-driven scan must match name for name and rank for rank.
bool ReferenceIsIdentChar(unsigned char c) {
  return std::isalnum(c) || c == '_' || c == '.' || c == '/' || c == '-';
}

bool ReferenceLooksLikeIdentifier(const std::string& w, bool* is_path) {
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
    if (i > 0 && std::isupper(c) && std::islower(static_cast<unsigned char>(w[i - 1])))
      inner_upper = true;
  }
  if (!alpha) return false;
  *is_path = slashes > 0;
  if (slashes > 0) return true;
  if (dots > 0) {
    for (size_t i = 1; i + 1 < w.size(); ++i) {
      if (w[i] == '.' && std::isalpha(static_cast<unsigned char>(w[i - 1])) &&
          (std::isalpha(static_cast<unsigned char>(w[i + 1])) || w[i + 1] == '_'))
        return true;
    }
    return false;
  }
  return underscore || (inner_upper && lower);
}

Names ReferenceRank(const std::string& text) {
  struct Seen {
    size_t count = 0, first = 0;
    bool path = false, defined = false;
  };
  std::unordered_map<std::string, Seen> seen;
  size_t order = 0;
  for (size_t i = 0; i < text.size();) {
    if (!ReferenceIsIdentChar(static_cast<unsigned char>(text[i]))) {
      ++i;
      continue;
    }
    size_t j = i;
    while (j < text.size() && ReferenceIsIdentChar(static_cast<unsigned char>(text[j]))) ++j;
    std::string word = text.substr(i, j - i);
    while (!word.empty() && (word.back() == '.' || word.back() == '-' || word.back() == '/'))
      word.pop_back();
    while (!word.empty() && (word.front() == '.' || word.front() == '-')) word.erase(word.begin());
    bool is_path = false;
    if (ReferenceLooksLikeIdentifier(word, &is_path) ||
        (i >= 4 && word.size() >= 4 && std::isalpha(static_cast<unsigned char>(word[0])) &&
         (text.compare(i - 4, 4, "def ") == 0 || (i >= 6 && text.compare(i - 6, 6, "class ") == 0)))) {
      Seen& s = seen[word];
      if (s.count++ == 0) s.first = order++;
      s.path = is_path;
      for (const char* definer : {"def ", "class ", "function ", "func ", "fn ", "struct ", "interface "}) {
        const size_t n = std::char_traits<char>::length(definer);
        if (i >= n && text.compare(i - n, n, definer) == 0) s.defined = true;
      }
    }
    i = j;
  }
  auto score = [](const Seen& s) { return s.count + (s.defined ? 4 : 0) + (s.path ? 2 : 0); };
  std::vector<std::pair<std::string, Seen>> ranked(seen.begin(), seen.end());
  std::sort(ranked.begin(), ranked.end(), [&](const auto& a, const auto& b) {
    if (score(a.second) != score(b.second)) return score(a.second) > score(b.second);
    return a.second.first < b.second.first;
  });
  Names out;
  for (auto& r : ranked) out.push_back(r.first);
  return out;
}

TEST_CASE("ExtractIdentifiers ranks every fixture message as the first scan did", "[core][identifiers]") {
  size_t texts = 0, names = 0;
  for (const auto& trajectory : strata::testing::TestTraceContents()) {
    for (const std::string& content : trajectory) {
      const Names expected = ReferenceRank(content);
      REQUIRE(ExtractIdentifiers(content, static_cast<size_t>(-1)) == expected);
      REQUIRE(*RankedIdentifiers(content) == expected);
      REQUIRE(ExtractIdentifiers(content, 16) ==
              Names(expected.begin(), expected.begin() + std::min<size_t>(16, expected.size())));
      ++texts;
      names += expected.size();
    }
  }
  CHECK(texts > 100);
  CHECK(names > 1000);
  // Bytes the traces may lack: every byte value, punctuation at the ends of words, definers.
  std::mt19937 rng(7);
  const std::string alphabet = "aZ_./-9 \n\x80\xc3\xa9(def class fn struct ";
  for (int round = 0; round < 2000; ++round) {
    std::string text;
    const size_t length = rng() % 700;  // both sides of the memo's 512 bytes
    for (size_t k = 0; k < length; ++k) {
      text.push_back(rng() % 4 == 0 ? static_cast<char>(rng() % 256)
                                    : alphabet[rng() % alphabet.size()]);
    }
    REQUIRE(ExtractIdentifiers(text, static_cast<size_t>(-1)) == ReferenceRank(text));
  }
}

TEST_CASE("ExtractIdentifiers reads words across the scan's 64-byte blocks whole",
          "[core][identifiers]") {
  // The scan finds words 64 bytes at a time: words ending at, starting at and running over the
  // blocks' edges (one over several blocks), texts ending inside and at the end of a block.
  const std::string long_name = "very_long_module_name/" + std::string(80, 'x') + "/tail_part.py";
  const std::string text = std::string(60, ' ') + "abcd_efgh" + std::string(55, ',') + long_name +
                           " def " + std::string(63, 'y') + " class SomeName";
  for (size_t cut = 60; cut <= text.size(); ++cut) {
    const std::string part = text.substr(0, cut);
    REQUIRE(ExtractIdentifiers(part, static_cast<size_t>(-1)) == ReferenceRank(part));
  }
  CHECK(ExtractIdentifiers(text, 16) ==
        Names{std::string(63, 'y'), "SomeName", long_name, "abcd_efgh"});
  // Random words of 1 to 200 identifier characters between single separators.
  std::mt19937 rng(11);
  const std::string letters = "abcXYZ_./-09";
  const std::string separators = " \n(:,\x80";
  for (int round = 0; round < 300; ++round) {
    std::string random;
    while (random.size() < 1000) {
      const size_t length = 1 + rng() % 200;
      for (size_t k = 0; k < length; ++k) random.push_back(letters[rng() % letters.size()]);
      random.push_back(separators[rng() % separators.size()]);
    }
    REQUIRE(ExtractIdentifiers(random, static_cast<size_t>(-1)) == ReferenceRank(random));
  }
}

}  // namespace
}  // namespace strata::internal
