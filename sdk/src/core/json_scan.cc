// A light scan of JSON text (json_scan.h).
#include "core/json_scan.h"

namespace strata::internal {

size_t SkipJsonSpace(std::string_view t, size_t i) {
  while (i < t.size() && IsJsonSpace(t[i])) ++i;
  return i;
}

size_t SkipJsonString(std::string_view t, size_t pos) {
  for (size_t i = pos + 1; i < t.size(); ++i) {
    if (t[i] == '\\') {
      ++i;
    } else if (t[i] == '"') {
      return i + 1;
    }
  }
  return std::string_view::npos;
}

size_t SkipJsonValue(std::string_view t, size_t pos) {
  if (pos >= t.size()) return std::string_view::npos;
  const char c = t[pos];
  if (c == '"') return SkipJsonString(t, pos);
  if (c == '{' || c == '[') {
    size_t depth = 0;
    for (size_t i = pos; i < t.size(); ++i) {
      const char d = t[i];
      if (d == '"') {
        i = SkipJsonString(t, i);
        if (i == std::string_view::npos) return i;
        --i;
      } else if (d == '{' || d == '[') {
        ++depth;
      } else if (d == '}' || d == ']') {
        if (--depth == 0) return i + 1;
      }
    }
    return std::string_view::npos;
  }
  size_t i = pos;
  while (i < t.size() && t[i] != ',' && t[i] != '}' && t[i] != ']' && !IsJsonSpace(t[i])) ++i;
  return i == pos ? std::string_view::npos : i;
}

size_t SplitJsonArray(std::string_view t, size_t j, bool after_element,
                      std::vector<std::pair<size_t, size_t>>* elements) {
  constexpr size_t npos = std::string_view::npos;
  j = SkipJsonSpace(t, j);
  if (j < t.size() && t[j] == ']') return j + 1;
  if (after_element) {
    if (j >= t.size() || t[j] != ',') return npos;
    j = SkipJsonSpace(t, j + 1);
  }
  for (;;) {
    const size_t end = SkipJsonValue(t, j);
    if (end == npos) return npos;
    elements->emplace_back(j, end);
    j = SkipJsonSpace(t, end);
    if (j < t.size() && t[j] == ',') {
      j = SkipJsonSpace(t, j + 1);
      continue;
    }
    return j < t.size() && t[j] == ']' ? j + 1 : npos;
  }
}

}  // namespace strata::internal
