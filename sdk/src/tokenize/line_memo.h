// LineMemo: the ids of lines a tokenizer encoded, found again by the line's text (private to
// strata::tokenize). A text counted alone and then encoded again inside a prompt (a tool result's
// count at append, then the request's count) pays for its lines once.
//
// Flat: the lines' texts and ids live in two arenas, each line an entry of offsets, and a
// SlotIndex (an open-addressing table of hash halves and entry indexes) finds them. A lookup that
// misses reads one slot (the hash tells most lines apart before their text is compared); keeping a
// line appends to the arenas and writes a slot, without an allocation of its own; starting over
// resets four sizes and clears the table. A memo of nodes, four allocations per line, spent a third
// of appending a tool result at 1M tokens in its lookups and inserts (cache misses and the
// allocator).
//
// Bounded: each line is charged its text, four bytes an id and kEntryCharge; when keeping one
// would take the sum past `max_bytes` the memo starts over, and a line charged more than a
// quarter of it is not kept.
//
// Thread safety: every method may be called from any thread (one lock).
#ifndef STRATA_TOKENIZE_LINE_MEMO_H_
#define STRATA_TOKENIZE_LINE_MEMO_H_

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/slot_index.h"
#include "core/thread_annotations.h"

namespace strata::tokenize_internal {

class LineMemo {
 public:
  // A line's charge beyond its text and ids: its entry and its share of the table's slots.
  static constexpr size_t kEntryCharge = 64;

  using HashFn = uint64_t (*)(std::string_view line);
  static uint64_t DefaultHash(std::string_view line);

  // `max_bytes` is capped at 1 GB (the arenas' offsets are 32 bits). `hash`: tests pass one
  // that makes lines collide.
  explicit LineMemo(size_t max_bytes, HashFn hash = &DefaultHash)
      : max_bytes_(std::min(max_bytes, size_t{1} << 30)), hash_(hash) {}
  LineMemo(const LineMemo&) = delete;
  LineMemo& operator=(const LineMemo&) = delete;

  // Appends the ids kept for `line` to `ids` and returns true; returns false (and leaves `ids`
  // as it was) when the line is not kept.
  bool AppendKept(std::string_view line, std::vector<int32_t>* ids) const;

  // Keeps `count` ids from `first` for `line` (a line kept already keeps its ids).
  void Keep(std::string_view line, const int32_t* first, size_t count);

  // What a line of `text_bytes` with `id_count` ids is charged.
  static size_t Charge(size_t text_bytes, size_t id_count) {
    return text_bytes + id_count * sizeof(int32_t) + kEntryCharge;
  }

  struct Stats {
    size_t entries = 0;
    size_t text_bytes = 0;     // the lines' texts
    size_t charged_bytes = 0;  // the sum of the lines' charges
    size_t restarts = 0;       // how often the memo started over
  };
  Stats stats() const;

 private:
  struct Entry {
    uint64_t hash;
    uint32_t text_offset, text_size;
    uint32_t ids_offset, ids_size;
  };
  // The index of the entry kept for `line`, or SlotIndex::kNone.
  size_t FindLocked(std::string_view line, uint64_t hash) const STRATA_REQUIRES(mu_);
  void StartOverLocked() STRATA_REQUIRES(mu_);

  const size_t max_bytes_;
  const HashFn hash_;
  mutable internal::Mutex mu_;
  std::string texts_ STRATA_GUARDED_BY(mu_);
  std::vector<int32_t> ids_ STRATA_GUARDED_BY(mu_);
  std::vector<Entry> entries_ STRATA_GUARDED_BY(mu_);
  internal::SlotIndex index_ STRATA_GUARDED_BY(mu_);  // entries_ by their hash
  size_t charged_ STRATA_GUARDED_BY(mu_) = 0;
  size_t restarts_ STRATA_GUARDED_BY(mu_) = 0;
};

}  // namespace strata::tokenize_internal

#endif  // STRATA_TOKENIZE_LINE_MEMO_H_
