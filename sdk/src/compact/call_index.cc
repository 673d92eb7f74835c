#include "compact/call_index.h"

#include <utility>

#include "compact/history_units.h"

namespace strata::compact_internal {

namespace {

// The smallest power of two at least twice `n` (and at least 16): a table that holds n entries at
// most half full.
size_t TableSize(size_t n) {
  size_t size = 16;
  while (size < 2 * n) size <<= 1;
  return size;
}

}  // namespace

CallIndex::CallIndex(const CompactionInput& in, SegmentFacts& facts) : in_(in), facts_(facts) {
  const std::vector<const Segment*>& h = in.history;
  slots_.resize(TableSize(h.size()));
  for (size_t i = 0; i < h.size(); ++i) {
    if (h[i]->tool_calls.empty()) continue;
    const std::vector<uint64_t>& hashes = facts.CallIdHashes(i);
    for (size_t c = 0; c < hashes.size(); ++c) {
      Insert(hashes[c], static_cast<uint32_t>(i), static_cast<uint32_t>(c));
    }
  }
}

const ToolCall& CallIndex::CallAt(const Slot& slot) const {
  return in_.history[slot.segment]->tool_calls[slot.call];
}

void CallIndex::Insert(uint64_t hash, uint32_t segment, uint32_t call) {
  if (2 * (used_ + 1) > slots_.size()) {
    std::vector<Slot> old = std::exchange(slots_, std::vector<Slot>(slots_.size() * 2));
    used_ = 0;
    for (const Slot& s : old) {
      if (s.segment != kEmpty) Insert(s.hash, s.segment, s.call);
    }
  }
  const std::string& id = in_.history[segment]->tool_calls[call].id;
  const size_t mask = slots_.size() - 1;
  for (size_t at = hash & mask;; at = (at + 1) & mask) {
    Slot& slot = slots_[at];
    if (slot.segment == kEmpty) {
      slot = Slot{hash, segment, call};
      ++used_;
      return;
    }
    if (slot.hash == hash && CallAt(slot).id == id) {
      slot.segment = segment;  // a later call with the same id takes its place
      slot.call = call;
      return;
    }
  }
}

const CallIndex::Slot* CallIndex::Find(size_t i) const {
  const std::string& id = in_.history[i]->tool_call_id;
  const uint64_t hash = facts_.ResultCallIdHash(i);
  const size_t mask = slots_.size() - 1;
  for (size_t at = hash & mask;; at = (at + 1) & mask) {
    const Slot& slot = slots_[at];
    if (slot.segment == kEmpty) return nullptr;
    if (slot.hash == hash && CallAt(slot).id == id) return &slot;
  }
}

const ToolCall* CallIndex::Of(size_t i) const {
  const Slot* slot = Find(i);
  return slot != nullptr ? &CallAt(*slot) : nullptr;
}

std::vector<bool> CallIndex::Superseded() const {
  const std::vector<const Segment*>& h = in_.history;
  std::vector<bool> superseded(h.size(), false);
  // The calls of the results after k, by the hash of their tool and arguments.
  struct Later {
    uint64_t key = 0;
    const Slot* call = nullptr;
  };
  std::vector<Later> later(TableSize(h.size()));
  const size_t mask = later.size() - 1;
  for (size_t k = h.size(); k-- > 0;) {
    if (!IsToolResult(*h[k])) continue;
    const Slot* call = Find(k);
    if (call == nullptr) continue;
    const uint64_t key = facts_.CallKeyHashes(call->segment)[call->call];
    const ToolCall& c = CallAt(*call);
    for (size_t at = key & mask;; at = (at + 1) & mask) {
      Later& seen = later[at];
      if (seen.call == nullptr) {
        seen = Later{key, call};
        break;
      }
      if (seen.key != key) continue;
      const ToolCall& other = CallAt(*seen.call);
      if (other.name == c.name && other.arguments == c.arguments) {
        superseded[k] = true;
        break;
      }
    }
  }
  return superseded;
}

}  // namespace strata::compact_internal
