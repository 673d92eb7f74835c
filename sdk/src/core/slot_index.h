// SlotIndex: finds entries kept in the caller's own array by their 64-bit hash (private to
// strata; any component that links strata::core may include it). An open-addressing table of
// 8-byte slots, each the high half of an entry's hash and its index: a lookup that misses reads
// one slot, and the caller compares an entry's key only when the halves agree. The memos of
// texts (TextMemo) and of a tokenizer's lines (LineMemo) find their entries with it, where maps of
// nodes read a node, a cache miss, per step of a bucket's chain.
//
// Not thread-safe (its owner's lock guards it).
#ifndef STRATA_CORE_SLOT_INDEX_H_
#define STRATA_CORE_SLOT_INDEX_H_

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <vector>

namespace strata::internal {

class SlotIndex {
 public:
  static constexpr size_t kNone = ~size_t{0};

  // The index of the entry whose hash is `hash` and for which is_key(index) is true, or kNone.
  template <typename IsKey>
  size_t Find(uint64_t hash, IsKey is_key) const {
    if (slots_.empty()) return kNone;
    const size_t mask = slots_.size() - 1;
    const uint32_t tag = static_cast<uint32_t>(hash >> 32);
    for (size_t i = hash & mask;; i = (i + 1) & mask) {
      const Slot& slot = slots_[i];
      if (slot.entry == 0) return kNone;
      if (slot.tag == tag && is_key(size_t{slot.entry} - 1)) return slot.entry - 1;
    }
  }

  // Makes room for one more entry: with `entries` entries indexed, the table grows (doubling, at
  // most half full) when it must, and places them again with hash_of(index).
  template <typename HashOf>
  void ReserveOneMore(size_t entries, HashOf hash_of) {
    if ((entries + 1) * 2 <= slots_.size()) return;
    slots_.assign(slots_.empty() ? kFirstSlots : slots_.size() * 2, Slot{0, 0});
    for (size_t i = 0; i < entries; ++i) Place(hash_of(i), i);
  }

  // Indexes entry `index` under `hash` (after ReserveOneMore).
  void Place(uint64_t hash, size_t index) {
    const size_t mask = slots_.size() - 1;
    size_t i = hash & mask;
    while (slots_[i].entry != 0) i = (i + 1) & mask;
    slots_[i] = Slot{static_cast<uint32_t>(hash >> 32), static_cast<uint32_t>(index + 1)};
  }

  // Forgets every entry; the table keeps its size.
  void Clear() { std::fill(slots_.begin(), slots_.end(), Slot{0, 0}); }

 private:
  struct Slot {
    uint32_t tag;    // the high half of the entry's hash
    uint32_t entry;  // its index plus one; 0: empty
  };
  static constexpr size_t kFirstSlots = 256;
  std::vector<Slot> slots_;  // a power of two, at most half full
};

}  // namespace strata::internal

#endif  // STRATA_CORE_SLOT_INDEX_H_
