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

// Doubles open-addressing `table` (a power of two in size) when one more entry would fill it
// beyond half, placing each entry again by hash_of(entry); empty(entry) tells a free slot.
template <typename Entry, typename HashOf, typename IsEmpty>
void GrowForOneMore(std::vector<Entry>* table, size_t used, HashOf hash_of, IsEmpty empty) {
  if (2 * (used + 1) <= table->size()) return;
  std::vector<Entry> old = std::exchange(*table, std::vector<Entry>(table->size() * 2));
  const size_t mask = table->size() - 1;
  for (const Entry& e : old) {
    if (empty(e)) continue;
    size_t at = hash_of(e) & mask;
    while (!empty((*table)[at])) at = (at + 1) & mask;
    (*table)[at] = e;
  }
}

}  // namespace

CallIndex::CallIndex(const CompactionInput& in, SegmentFacts& facts)
    : in_(in), facts_(facts), t_(facts.call_tables()) {
  // The kept tables describe the first t_.segments segments, this input's at their index (Begin
  // drops them when one of them holding calls changed in place), unless results lacked their call
  // (a new one may answer).
  const bool continues = t_.valid && t_.orphans == 0 &&
                         (t_.segments <= facts.kept() ||
                          (t_.plan == facts.plan() && t_.segments == in.history.size()));
  if (continues && Add(t_.segments)) {
    continued_ = true;
  } else {
    t_ = KeptCallTables();
    Add(0);
  }
  t_.plan =
      facts.plan();  // another index of this plan (a relaxed protection) takes them as they are
}

bool CallIndex::Add(size_t from) {
  const std::vector<const Segment*>& h = in_.history;
  t_.valid = true;
  if (t_.calls.empty()) t_.calls.resize(TableSize(h.size()));
  if (t_.latest.empty()) t_.latest.resize(TableSize(h.size()));
  t_.superseded.resize(h.size(), 0);
  t_.answered_later.resize(h.size(), 0);
  t_.previous.resize(h.size(), KeptCallTables::kEmpty);
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
    GrowForOneMore(
        &t_.latest, t_.latest_used, [](const KeptCallTables::Latest& e) { return e.key; },
        [](const KeptCallTables::Latest& e) { return e.result == KeptCallTables::kEmpty; });
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
        t_.superseded[e.result] = 1;
        t_.previous[i] = e.result;
        e.result = static_cast<uint32_t>(i);
        break;
      }
    }
    // A result that is not an error log answers the call for every result before it; those before
    // the first one already marked were marked with it.
    if (h[i]->kind == SegmentKind::kErrorLog) continue;
    for (uint32_t k = t_.previous[i]; k != KeptCallTables::kEmpty && !t_.answered_later[k];
         k = t_.previous[k]) {
      t_.answered_later[k] = 1;
    }
  }
  return true;
}

const ToolCall& CallIndex::CallAt(const Slot& slot) const {
  return in_.history[slot.segment]->tool_calls[slot.call];
}

bool CallIndex::Insert(uint64_t hash, uint32_t segment, uint32_t call, size_t from) {
  GrowForOneMore(
      &t_.calls, t_.calls_used, [](const Slot& s) { return s.hash; },
      [](const Slot& s) { return s.segment == KeptCallTables::kEmpty; });
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
