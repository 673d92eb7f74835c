#include "tokenize/line_memo.h"

#include <cstring>
#include <functional>

namespace strata::tokenize_internal {

namespace {
constexpr size_t kFirstSlots = 1024;
}  // namespace

uint64_t LineMemo::DefaultHash(std::string_view line) {
  return std::hash<std::string_view>()(line);
}

int64_t LineMemo::FindLocked(std::string_view line, uint64_t hash) const {
  if (slots_.empty()) return -1;
  const size_t mask = slots_.size() - 1;
  const uint32_t tag = static_cast<uint32_t>(hash >> 32);
  for (size_t i = hash & mask;; i = (i + 1) & mask) {
    const Slot& slot = slots_[i];
    if (slot.entry == 0) return -1;
    if (slot.tag != tag) continue;
    const Entry& e = entries_[slot.entry - 1];
    if (e.hash == hash && e.text_size == line.size() &&
        std::memcmp(texts_.data() + e.text_offset, line.data(), line.size()) == 0)
      return slot.entry - 1;
  }
}

void LineMemo::PlaceLocked(uint32_t index) {
  const size_t mask = slots_.size() - 1;
  const uint64_t hash = entries_[index].hash;
  size_t i = hash & mask;
  while (slots_[i].entry != 0) i = (i + 1) & mask;
  slots_[i] = Slot{static_cast<uint32_t>(hash >> 32), index + 1};
}

void LineMemo::StartOverLocked() {
  texts_.clear();
  ids_.clear();
  entries_.clear();
  std::fill(slots_.begin(), slots_.end(), Slot{0, 0});
  charged_ = 0;
  ++restarts_;
}

bool LineMemo::AppendKept(std::string_view line, std::vector<int32_t>* ids) const {
  const uint64_t hash = hash_(line);
  internal::MutexLock lock(mu_);
  const int64_t found = FindLocked(line, hash);
  if (found < 0) return false;
  const Entry& e = entries_[static_cast<size_t>(found)];
  const int32_t* first = ids_.data() + e.ids_offset;
  ids->insert(ids->end(), first, first + e.ids_size);
  return true;
}

void LineMemo::Keep(std::string_view line, const int32_t* first, size_t count) {
  const size_t charge = Charge(line.size(), count);
  if (charge > max_bytes_ / 4) return;
  const uint64_t hash = hash_(line);
  internal::MutexLock lock(mu_);
  if (FindLocked(line, hash) >= 0) return;
  if (charged_ + charge > max_bytes_) StartOverLocked();
  if ((entries_.size() + 1) * 2 > slots_.size()) {
    slots_.assign(slots_.empty() ? kFirstSlots : slots_.size() * 2, Slot{0, 0});
    for (uint32_t i = 0; i < entries_.size(); ++i) PlaceLocked(i);
  }
  entries_.push_back(Entry{hash, static_cast<uint32_t>(texts_.size()),
                           static_cast<uint32_t>(line.size()), static_cast<uint32_t>(ids_.size()),
                           static_cast<uint32_t>(count)});
  texts_.append(line);
  ids_.insert(ids_.end(), first, first + count);
  PlaceLocked(static_cast<uint32_t>(entries_.size() - 1));
  charged_ += charge;
}

LineMemo::Stats LineMemo::stats() const {
  internal::MutexLock lock(mu_);
  Stats s;
  s.entries = entries_.size();
  s.text_bytes = texts_.size();
  s.charged_bytes = charged_;
  s.restarts = restarts_;
  return s;
}

}  // namespace strata::tokenize_internal
