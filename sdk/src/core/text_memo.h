// TextMemo: values parsed from texts, found again by their text, bounded (private to strata; any
// component that links strata::core may include it). Parsers of requests that repeat earlier
// texts byte for byte keep what they parsed of each one here: the chat template's messages
// (tokenize), the sidecar proxy's messages.
//
// Each entry is charged `charge(text size)` (its text, its parsed value, its entry and slots); when
// an insert would take the sum past `max_bytes` the memo starts over, and a text charged more than
// a quarter of it is not kept.
//
// Thread safety: every method may be called from any thread (one lock).
#ifndef STRATA_CORE_TEXT_MEMO_H_
#define STRATA_CORE_TEXT_MEMO_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/slot_index.h"

namespace strata::internal {

// The memo's hash: its length and at most 4 KB of a text (2 KB at each end). Equal texts hash
// alike and the memo compares whole texts, so a megabyte message (a system prompt a client
// sends on every request) is read once by the comparison instead of twice.
struct SampledTextHash {
  static constexpr size_t kEnd = 2048;
  size_t operator()(std::string_view text) const {
    const std::hash<std::string_view> hash;
    if (text.size() <= 2 * kEnd) return hash(text);
    const size_t head = hash(text.substr(0, kEnd));
    const size_t tail = hash(text.substr(text.size() - kEnd));
    return head ^ (tail * 0x9e3779b97f4a7c15ULL) ^ (text.size() * 0xc2b2ae3d27d4eb4fULL);
  }
};

template <typename Value>
class TextMemo {
 public:
  using Charge = size_t (*)(size_t text_bytes);

  TextMemo(size_t max_bytes, Charge charge) : max_bytes_(max_bytes), charge_(charge) {}
  TextMemo(const TextMemo&) = delete;
  TextMemo& operator=(const TextMemo&) = delete;

  // The value kept for `text`, or null.
  std::shared_ptr<const Value> Find(std::string_view text) {
    const uint64_t hash = SampledTextHash()(text);
    std::lock_guard<std::mutex> lock(mu_);
    const size_t found = FindLocked(text, hash);
    return found == SlotIndex::kNone ? nullptr : entries_[found].value;
  }

  // Keeps `value` for `text` (a text kept already keeps its value).
  void Insert(std::string_view text, std::shared_ptr<const Value> value) {
    const size_t charge = charge_(text.size());
    if (charge > max_bytes_ / 4) return;
    const uint64_t hash = SampledTextHash()(text);
    std::lock_guard<std::mutex> lock(mu_);
    if (FindLocked(text, hash) != SlotIndex::kNone) return;
    if (bytes_ + charge > max_bytes_) ClearLocked();
    index_.ReserveOneMore(entries_.size(), [this](size_t i) { return entries_[i].hash; });
    entries_.push_back(Entry{hash, std::string(text), std::move(value)});
    index_.Place(hash, entries_.size() - 1);
    bytes_ += charge;
  }

  void Clear() {
    std::lock_guard<std::mutex> lock(mu_);
    ClearLocked();
  }

  struct Stats {
    size_t entries = 0;
    size_t text_bytes = 0;     // the texts held (the keys)
    size_t charged_bytes = 0;  // the sum of the entries' charges
  };
  Stats stats() {
    std::lock_guard<std::mutex> lock(mu_);
    Stats s;
    s.entries = entries_.size();
    s.charged_bytes = bytes_;
    for (const Entry& e : entries_) s.text_bytes += e.text.size();
    return s;
  }

 private:
  // The entries in the order they were kept, found through index_ by their hash.
  struct Entry {
    uint64_t hash;
    std::string text;
    std::shared_ptr<const Value> value;
  };

  size_t FindLocked(std::string_view text, uint64_t hash) const {
    return index_.Find(
        hash, [&](size_t i) { return entries_[i].hash == hash && entries_[i].text == text; });
  }

  void ClearLocked() {
    entries_.clear();
    index_.Clear();
    bytes_ = 0;
  }

  const size_t max_bytes_;
  const Charge charge_;
  std::mutex mu_;
  std::vector<Entry> entries_;  // guarded by mu_
  SlotIndex index_;             // guarded by mu_
  size_t bytes_ = 0;            // guarded by mu_
};

}  // namespace strata::internal

#endif  // STRATA_CORE_TEXT_MEMO_H_
