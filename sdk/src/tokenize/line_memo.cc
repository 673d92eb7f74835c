#include "tokenize/line_memo.h"

#include <cstring>
#include <functional>

namespace strata::tokenize_internal {

uint64_t LineMemo::DefaultHash(std::string_view line) {
  return std::hash<std::string_view>()(line);
}

size_t LineMemo::FindLocked(std::string_view line, uint64_t hash) const {
  // The arrays, read under mu_ (FindLocked requires it) for the comparison below.
  const Entry* entries = entries_.data();
  const char* texts = texts_.data();
  return index_.Find(hash, [&](size_t i) {
    const Entry& e = entries[i];
    return e.hash == hash && e.text_size == line.size() &&
           std::memcmp(texts + e.text_offset, line.data(), line.size()) == 0;
  });
}

void LineMemo::StartOverLocked() {
  texts_.clear();
  ids_.clear();
  entries_.clear();
  index_.Clear();
  charged_ = 0;
  ++restarts_;
}

bool LineMemo::AppendKept(std::string_view line, std::vector<int32_t>* ids) const {
  const uint64_t hash = hash_(line);
  internal::MutexLock lock(mu_);
  const size_t found = FindLocked(line, hash);
  if (found == internal::SlotIndex::kNone) return false;
  const Entry& e = entries_[found];
  const int32_t* first = ids_.data() + e.ids_offset;
  ids->insert(ids->end(), first, first + e.ids_size);
  return true;
}

void LineMemo::Keep(std::string_view line, const int32_t* first, size_t count) {
  const size_t charge = Charge(line.size(), count);
  if (charge > max_bytes_ / 4) return;
  const uint64_t hash = hash_(line);
  internal::MutexLock lock(mu_);
  if (FindLocked(line, hash) != internal::SlotIndex::kNone) return;
  if (charged_ + charge > max_bytes_) StartOverLocked();
  const Entry* entries = entries_.data();
  index_.ReserveOneMore(entries_.size(), [entries](size_t i) { return entries[i].hash; });
  entries_.push_back(Entry{hash, static_cast<uint32_t>(texts_.size()),
                           static_cast<uint32_t>(line.size()), static_cast<uint32_t>(ids_.size()),
                           static_cast<uint32_t>(count)});
  texts_.append(line);
  ids_.insert(ids_.end(), first, first + count);
  index_.Place(hash, entries_.size() - 1);
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
