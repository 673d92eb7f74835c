#include <algorithm>
#include <cctype>
#include <nlohmann/json.hpp>
#include <set>
#include <unordered_map>

#include "strata/compact.h"

namespace strata {
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

std::string Clip(const std::string& text, size_t max_bytes) {
  if (text.size() <= max_bytes) return text;
  size_t cut = max_bytes;
  while (cut > 0 && (static_cast<unsigned char>(text[cut]) & 0xC0) == 0x80) --cut;
  return text.substr(0, cut) + "...";
}

std::string OneLine(std::string text) {
  for (char& c : text) {
    if (c == '\n' || c == '\r' || c == '\t') c = ' ';
  }
  return text;
}

// "bash(command=\"ls -la\")" from a call's JSON arguments; the raw text when they are not an object.
std::string ArgumentsDigest(const ToolCall* call) {
  if (call == nullptr) return "tool";
  std::string digest = call->name + "(";
  nlohmann::json args = nlohmann::json::parse(call->arguments, nullptr, false);
  if (args.is_object()) {
    bool first = true;
    for (auto it = args.begin(); it != args.end(); ++it) {
      if (!first) digest += ", ";
      first = false;
      digest += it.key() + "=";
      digest += it->is_string() ? "\"" + Clip(OneLine(it->get<std::string>()), 100) + "\""
                                : Clip(it->dump(), 60);
    }
  } else {
    digest += Clip(OneLine(call->arguments), 100);
  }
  return digest + ")";
}

// The exit status an output shows, or "" (mini-swe-agent's <returncode>, "exit code N", ...).
std::string ExitStatus(const std::string& text) {
  const size_t tag = text.find("<returncode>");
  if (tag != std::string::npos && tag < 64) {
    size_t begin = tag + 12, end = text.find("</returncode>", begin);
    if (end != std::string::npos && end - begin <= 4) return text.substr(begin, end - begin);
  }
  for (const char* marker : {"exit code ", "exit code: ", "Exit code: ", "exit status ", "Exit status: "}) {
    size_t at = text.rfind(marker);
    if (at == std::string::npos) continue;
    size_t begin = at + std::char_traits<char>::length(marker), end = begin;
    while (end < text.size() && (std::isdigit(static_cast<unsigned char>(text[end])) || text[end] == '-')) ++end;
    if (end > begin && end - begin <= 4) return text.substr(begin, end - begin);
  }
  return "";
}

std::string Thousands(size_t n) {
  std::string digits = std::to_string(n), out;
  for (size_t i = 0; i < digits.size(); ++i) {
    if (i && (digits.size() - i) % 3 == 0) out.push_back(',');
    out.push_back(digits[i]);
  }
  return out;
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

std::string MaskPlaceholder(const Segment& result, const ToolCall* call, const std::string& recall_id,
                            size_t max_identifiers, const std::set<std::string>& already_present) {
  std::string text = "[strata: masked output of " + ArgumentsDigest(call) + ", " +
                     Thousands(result.content.size()) + " bytes";
  const std::string exit = ExitStatus(result.content);
  if (!exit.empty()) text += ", exit " + exit;
  if (max_identifiers > 0) {
    std::vector<std::string> names;
    for (std::string& name : ExtractIdentifiers(result.content, max_identifiers + already_present.size())) {
      if (names.size() == max_identifiers) break;
      if (already_present.count(name) == 0 && (call == nullptr || call->arguments.find(name) == std::string::npos)) {
        names.push_back(std::move(name));
      }
    }
    const size_t max_bytes = 40 * max_identifiers;
    size_t used = 0;
    for (size_t i = 0; i < names.size() && used + names[i].size() <= max_bytes; ++i) {
      text += i ? ", " : "; mentions: ";
      text += names[i];
      used += names[i].size() + 2;
    }
  }
  text += "; recall " + recall_id + "]";
  return text;
}

}  // namespace strata
