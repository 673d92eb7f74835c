// MaskPlaceholder (strata/builtin_policies.h): the line that stands in for a masked tool result,
// naming the call, its size, its exit status, the identifiers it mentioned and how to recall it.
#include <algorithm>
#include <memory>
#include <cctype>
#include <nlohmann/json.hpp>
#include <set>
#include <unordered_map>

#include "compact/common.h"
#include "compact/placeholder.h"
#include "core/identifiers.h"
#include "core/utf8.h"
#include "strata/builtin_policies.h"

namespace strata {

namespace {

std::string Clip(const std::string& text, size_t max_bytes) {
  return internal::Utf8Prefix(text, max_bytes);
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

// The exit status an output shows, or "" (mini-swe-agent's <returncode>, "exit code N", ...): the
// last occurrence of the first marker (in kExitMarkers' order) that is followed by a number.
// Every marker contains "xit ", so one forward pass over the occurrences of that finds them all
// (reverse searches for each marker cost a scan of the whole output per marker).
std::string ExitStatus(const std::string& text) {
  const size_t tag = text.find("<returncode>");
  if (tag != std::string::npos && tag < 64) {
    size_t begin = tag + 12, end = text.find("</returncode>", begin);
    if (end != std::string::npos && end - begin <= 4) return text.substr(begin, end - begin);
  }
  static constexpr const char* kExitMarkers[] = {"exit code ", "exit code: ", "Exit code: ",
                                                 "exit status ", "Exit status: "};
  constexpr size_t kMarkers = sizeof(kExitMarkers) / sizeof(kExitMarkers[0]);
  size_t last[kMarkers];
  std::fill(std::begin(last), std::end(last), std::string::npos);
  for (size_t x = text.find("xit "); x != std::string::npos; x = text.find("xit ", x + 1)) {
    if (x == 0) continue;
    for (size_t m = 0; m < kMarkers; ++m) {
      if (text.compare(x - 1, std::char_traits<char>::length(kExitMarkers[m]), kExitMarkers[m]) == 0)
        last[m] = x - 1;
    }
  }
  for (size_t m = 0; m < kMarkers; ++m) {
    if (last[m] == std::string::npos) continue;
    size_t begin = last[m] + std::char_traits<char>::length(kExitMarkers[m]), end = begin;
    while (end < text.size() && (std::isdigit(static_cast<unsigned char>(text[end])) || text[end] == '-')) ++end;
    if (end > begin && end - begin <= 4) return text.substr(begin, end - begin);
  }
  return "";
}

}  // namespace

std::string compact_internal::ExitStatusOf(const std::string& text) { return ExitStatus(text); }

std::string compact_internal::MaskPlaceholderFrom(const PlaceholderFacts& facts,
                                                  const Segment& result, const ToolCall* call,
                                                  size_t max_identifiers,
                                                  const PresentNames& already_present,
                                                  size_t original_bytes) {
  const size_t bytes = original_bytes > 0 ? original_bytes : result.content.size();
  std::string text = "[strata: masked output of " + ArgumentsDigest(call) + ", " +
                     compact_internal::Thousands(static_cast<long long>(bytes)) + " bytes";
  if (!facts.exit_status.empty()) text += ", exit " + facts.exit_status;
  if (max_identifiers > 0) {
    std::vector<std::string> names;
    const std::vector<std::string>& ranked = facts.identifiers;
    const size_t considered = std::min(ranked.size(), max_identifiers + already_present.size());
    for (size_t k = 0; k < considered && names.size() < max_identifiers; ++k) {
      const std::string& name = ranked[k];
      if (!already_present.contains(name) &&
          (call == nullptr || call->arguments.find(name) == std::string::npos)) {
        names.push_back(name);
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
  text += "; recall " + facts.recall_id + "]";
  return text;
}

std::string MaskPlaceholder(const Segment& result, const ToolCall* call, const std::string& recall_id,
                            size_t max_identifiers, const std::set<std::string>& already_present,
                            size_t original_bytes) {
  const std::shared_ptr<const std::vector<std::string>> ranked =
      max_identifiers > 0 ? internal::RankedIdentifiers(result.content)
                          : std::make_shared<const std::vector<std::string>>();
  const compact_internal::PlaceholderFacts facts{*ranked, ExitStatus(result.content), recall_id};
  compact_internal::PresentNames present;
  for (const std::string& name : already_present) present.insert(name);
  return compact_internal::MaskPlaceholderFrom(facts, result, call, max_identifiers, present,
                                               original_bytes);
}

}  // namespace strata
