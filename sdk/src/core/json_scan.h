// A light scan of JSON text (private to strata; any component that links strata::core may include
// it): where a value, a string or an array's elements begin and end, without parsing or
// validating them. The chat template's request parse and the sidecar proxy's request bodies use
// it to find the parts of a text that changed since an earlier one (whatever the scan passes over
// is validated when those parts are parsed); compact's summary request uses it to find where a
// body it built, valid already, ends its messages; replay's pairing check to find a body's new
// messages.
#ifndef STRATA_CORE_JSON_SCAN_H_
#define STRATA_CORE_JSON_SCAN_H_

#include <cstddef>
#include <memory>
#include <string_view>
#include <utility>
#include <vector>

namespace strata::internal {

// ' ', '\t', '\n' or '\r'.
inline bool IsJsonSpace(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

// The first position at or after `i` that is not JSON whitespace (t.size() at the end).
size_t SkipJsonSpace(std::string_view t, size_t i);

// The end (one past the closing quote) of the JSON string starting at t[pos] == '"', or npos.
size_t SkipJsonString(std::string_view t, size_t pos);

// The end of the JSON value starting at t[pos] (a string, an object or array by its brackets, a
// scalar up to the next ',', '}', ']' or space), or npos. Not validated.
size_t SkipJsonValue(std::string_view t, size_t pos);

// The [begin, end) byte ranges of an array's elements, in order, held in chunks of kChunk: a list
// that continues another's first elements (AssignPrefix), or a copy, shares its full chunks
// instead of copying them, so continuing the split of a long conversation costs its new elements.
// Only full chunks are shared, and a full chunk is never written again (a list appends to its
// partial last chunk, which is its own: copied, not shared), so lists sharing chunks may be used
// from several threads, each list by one.
class JsonElements {
 public:
  using Element = std::pair<size_t, size_t>;
  static constexpr size_t kChunk = 256;

  JsonElements() = default;
  JsonElements(const JsonElements& other) { AssignPrefix(other, other.size_); }
  JsonElements& operator=(const JsonElements& other) {
    AssignPrefix(other, other.size_);
    return *this;
  }
  JsonElements(JsonElements&&) noexcept = default;
  JsonElements& operator=(JsonElements&&) noexcept = default;

  size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  const Element& operator[](size_t i) const { return (*chunks_[i / kChunk])[i % kChunk]; }
  const Element& back() const { return (*this)[size_ - 1]; }
  void clear() {
    chunks_.clear();
    size_ = 0;
  }
  void emplace_back(size_t begin, size_t end);
  // Becomes the first `n` elements of `other` (n <= other.size(); `other` may be this list).
  void AssignPrefix(const JsonElements& other, size_t n);

 private:
  std::vector<std::shared_ptr<std::vector<Element>>> chunks_;
  size_t size_ = 0;
};

// Cuts the elements of an array from t[j], just after its '[' (`after_element` false) or just
// after an element (true), appending each one's [begin, end) to *elements. One past the array's
// ']', or npos when the text is not an array there.
size_t SplitJsonArray(std::string_view t, size_t j, bool after_element, JsonElements* elements);

// Walks the members of a JSON object: from t[from], just after its '{' (`after_member` false) or
// just after a member's value (true), calls `member(key, value_begin)` for each member, with `key`
// the text between its quotes (escapes left as they are) and `value_begin` where its value
// starts. `member` returns where that value ends (e.g. SkipJsonValue's answer), or npos to stop.
// One past the object's '}', or npos when the text is not an object there or `member` stopped.
template <typename Member>
size_t WalkJsonObject(std::string_view t, size_t from, bool after_member, const Member& member) {
  constexpr size_t npos = std::string_view::npos;
  size_t i = SkipJsonSpace(t, from);
  for (bool first = !after_member;; first = false) {
    if (i < t.size() && t[i] == '}') return i + 1;
    if (!first) {
      if (i >= t.size() || t[i] != ',') return npos;
      i = SkipJsonSpace(t, i + 1);
    }
    if (i >= t.size() || t[i] != '"') return npos;
    const size_t key_end = SkipJsonString(t, i);
    if (key_end == npos) return npos;
    const std::string_view key = t.substr(i + 1, key_end - i - 2);
    i = SkipJsonSpace(t, key_end);
    if (i >= t.size() || t[i] != ':') return npos;
    const size_t value_end = member(key, SkipJsonSpace(t, i + 1));
    if (value_end == npos) return npos;
    i = SkipJsonSpace(t, value_end);
  }
}

// Where a JSON object's top-level array member is, and each of its elements: byte ranges.
struct JsonArraySplit {
  size_t array_begin = 0;                           // the '['
  size_t array_end = 0;                             // one past the ']'
  JsonElements elements;                            // [begin, end) of each element
  size_t reused = 0;  // the leading elements taken from the base split (SplitMemberArray)
};

// Finds the top-level member `key` of the object `t` and cuts its array into its elements. False
// when the scan does not take `t` apart: not an object, `key` missing or given twice, a key with
// an escape (it might spell `key`), a value that is not an array, anything malformed, or anything
// but whitespace after the object. With `base` (the split of an earlier text) and `prefix` (the
// bytes the two texts share), the shared part is not walked again: the keys before the array and
// the elements that end inside the prefix are the base's (a scalar's end depends on the byte after
// it, hence inside).
bool SplitMemberArray(std::string_view t, std::string_view key, const JsonArraySplit* base,
                      size_t prefix, JsonArraySplit* out);

}  // namespace strata::internal

#endif  // STRATA_CORE_JSON_SCAN_H_
