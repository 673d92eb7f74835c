// A light scan of JSON text (json_scan.h).
#include "core/json_scan.h"

#include <algorithm>
#include <cstring>

namespace strata::internal {

size_t SkipJsonSpace(std::string_view t, size_t i) {
  while (i < t.size() && IsJsonSpace(t[i])) ++i;
  return i;
}

size_t SkipJsonString(std::string_view t, size_t pos) {
  // Quote to quote with memchr (chat bodies are mostly string bytes): a quote ends the string
  // when the backslashes right before it, counted back to the string's start, are even in number.
  size_t from = pos + 1;
  while (from < t.size()) {
    const void* found = std::memchr(t.data() + from, '"', t.size() - from);
    if (found == nullptr) break;
    const size_t quote = static_cast<size_t>(static_cast<const char*>(found) - t.data());
    size_t backslashes = 0;
    while (quote - backslashes > pos + 1 && t[quote - backslashes - 1] == '\\') ++backslashes;
    if (backslashes % 2 == 0) return quote + 1;
    from = quote + 1;
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

void JsonElements::emplace_back(size_t begin, size_t end) {
  if (size_ % kChunk == 0) {  // the last chunk is full (or there is none): a new one
    chunks_.push_back(std::make_shared<std::vector<Element>>());
    chunks_.back()->reserve(kChunk);
  }
  chunks_.back()->emplace_back(begin, end);
  ++size_;
}

void JsonElements::AssignPrefix(const JsonElements& other, size_t n) {
  const size_t whole = n / kChunk;
  std::vector<std::shared_ptr<std::vector<Element>>> chunks(
      other.chunks_.begin(), other.chunks_.begin() + static_cast<std::ptrdiff_t>(whole));
  if (n % kChunk != 0) {  // the partial chunk is copied: this list appends to it
    const std::vector<Element>& partial = *other.chunks_[whole];
    auto own = std::make_shared<std::vector<Element>>();
    own->reserve(kChunk);
    own->assign(partial.begin(), partial.begin() + static_cast<std::ptrdiff_t>(n % kChunk));
    chunks.push_back(std::move(own));
  }
  chunks_ = std::move(chunks);
  size_ = n;
}

size_t SplitJsonArray(std::string_view t, size_t j, bool after_element, JsonElements* elements) {
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

bool SplitMemberArray(std::string_view t, std::string_view key, const JsonArraySplit* base,
                      size_t prefix, JsonArraySplit* out) {
  constexpr size_t npos = std::string_view::npos;
  bool seen = false;
  const auto member = [&](std::string_view name, size_t i) -> size_t {
    if (name.find('\\') != npos) return npos;
    if (name != key) return SkipJsonValue(t, i);
    if (seen || i >= t.size() || t[i] != '[') return npos;
    seen = true;
    out->array_begin = i;
    out->array_end = SplitJsonArray(t, i + 1, false, &out->elements);
    return out->array_end;
  };
  out->elements.clear();
  out->reused = 0;
  size_t end = npos;
  if (base != nullptr && base->array_begin < prefix) {
    out->array_begin = base->array_begin;
    size_t& reused = out->reused;
    // The base's elements ending inside the prefix: a leading run (elements are in order).
    size_t low = 0, high = base->elements.size();
    while (low < high) {
      const size_t mid = low + (high - low) / 2;
      if (base->elements[mid].second < prefix) {
        low = mid + 1;
      } else {
        high = mid;
      }
    }
    reused = low;
    out->elements.AssignPrefix(base->elements, reused);
    out->array_end =
        SplitJsonArray(t, reused > 0 ? out->elements.back().second : out->array_begin + 1,
                       reused > 0, &out->elements);
    if (out->array_end == npos) return false;
    seen = true;
    end = WalkJsonObject(t, out->array_end, /*after_member=*/true, member);
  } else {
    const size_t i = SkipJsonSpace(t, 0);
    if (i >= t.size() || t[i] != '{') return false;
    end = WalkJsonObject(t, i + 1, /*after_member=*/false, member);
  }
  return end != npos && seen && SkipJsonSpace(t, end) == t.size();
}

}  // namespace strata::internal
