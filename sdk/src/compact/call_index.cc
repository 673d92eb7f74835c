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

CallIndex::CallIndex(const CompactionInput& in, SegmentFacts& facts)
    : in_(in), facts_(facts), t_(facts.call_tables()) {
  // The kept tables describe the first t_.segments segments, this input's at their index (Begin
  // drops them when one of them holding calls changed in place), unless results lacked their call
  // (a new one may answer).
  const bool continues = t_.valid && t_.segments <= facts.kept() && t_.orphans == 0;
  if (continues && Add(t_.segments)) {
    continued_ = true;
    return;
  }
  t_ = KeptCallTables();
  Add(0);
}

bool CallIndex::Add(size_t from) {
  const std::vector<const Segment*>& h = in_.history;
  t_.valid = true;
  if (t_.calls.empty()) t_.calls.resize(TableSize(h.size()));
  if (t_.latest.empty()) t_.latest.resize(TableSize(h.size()));
  t_.superseded.resize(h.size(), false);
  t_.segments = h.size();
  for (size_t i = from; i < h.size(); ++i) {
    if (h[i]->tool_calls.empty()) continue;
    const std::vector<uint64_t>& hashes = facts_.CallIdHashes(i);
    for (size_t c = 0; c < hashes.size(); ++c) {
      if (!Insert(hashes[c], static_cast<uint32_t>(i), static_cast<uint32_t>(c), from))
        return false;
    }
  }
  // The results in order: each one supersedes the latest before it with the same call.
  for (size_t i = from; i < h.size(); ++i) {
    if (!IsToolResult(*h[i])) continue;
    const Slot* slot = Find(i);
    if (slot == nullptr) {
      ++t_.orphans;
      continue;
    }
    if (2 * (t_.latest_used + 1) > t_.latest.size()) {
      std::vector<KeptCallTables::Latest> old =
          std::exchange(t_.latest, std::vector<KeptCallTables::Latest>(t_.latest.size() * 2));
      const size_t mask = t_.latest.size() - 1;
      for (const auto& e : old) {
        if (e.result == KeptCallTables::kEmpty) continue;
        size_t at = e.key & mask;
        while (t_.latest[at].result != KeptCallTables::kEmpty) at = (at + 1) & mask;
        t_.latest[at] = e;
      }
    }
    const uint64_t key = facts_.CallKeyHashes(slot->segment)[slot->call];
    const ToolCall& call = CallAt(*slot);
    const size_t mask = t_.latest.size() - 1;
    for (size_t at = key & mask;; at = (at + 1) & mask) {
      KeptCallTables::Latest& e = t_.latest[at];
      if (e.result == KeptCallTables::kEmpty) {
        e = {key, static_cast<uint32_t>(i)};
        ++t_.latest_used;
        break;
      }
      if (e.key != key) continue;
      const ToolCall* other = Of(e.result);
      if (other != nullptr && other->name == call.name && other->arguments == call.arguments) {
        t_.superseded[e.result] = true;
        e.result = static_cast<uint32_t>(i);
        break;
      }
    }
  }
  return true;
}

const ToolCall& CallIndex::CallAt(const Slot& slot) const {
  return in_.history[slot.segment]->tool_calls[slot.call];
}

bool CallIndex::Insert(uint64_t hash, uint32_t segment, uint32_t call, size_t from) {
  if (2 * (t_.calls_used + 1) > t_.calls.size()) {
    std::vector<Slot> old = std::exchange(t_.calls, std::vector<Slot>(t_.calls.size() * 2));
    const size_t mask = t_.calls.size() - 1;
    for (const Slot& s : old) {
      if (s.segment == KeptCallTables::kEmpty) continue;
      size_t at = s.hash & mask;
      while (t_.calls[at].segment != KeptCallTables::kEmpty) at = (at + 1) & mask;
      t_.calls[at] = s;
    }
  }
  const std::string& id = in_.history[segment]->tool_calls[call].id;
  const size_t mask = t_.calls.size() - 1;
  for (size_t at = hash & mask;; at = (at + 1) & mask) {
    Slot& slot = t_.calls[at];
    if (slot.segment == KeptCallTables::kEmpty) {
      slot = Slot{hash, segment, call};
      ++t_.calls_used;
      return true;
    }
    if (slot.hash == hash && CallAt(slot).id == id) {
      if (slot.segment < from) return false;  // an id an indexed call holds: index again
      slot.segment = segment;  // a later call with the same id takes its place
      slot.call = call;
      return true;
    }
  }
}

const CallIndex::Slot* CallIndex::Find(size_t i) const {
  const std::string& id = in_.history[i]->tool_call_id;
  const uint64_t hash = facts_.ResultCallIdHash(i);
  const size_t mask = t_.calls.size() - 1;
  for (size_t at = hash & mask;; at = (at + 1) & mask) {
    const Slot& slot = t_.calls[at];
    if (slot.segment == KeptCallTables::kEmpty) return nullptr;
    if (slot.hash == hash && CallAt(slot).id == id) return &slot;
  }
}

const ToolCall* CallIndex::Of(size_t i) const {
  const Slot* slot = Find(i);
  return slot != nullptr ? &CallAt(*slot) : nullptr;
}

}  // namespace strata::compact_internal
