#include "compact/plan_memo.h"

#include <utility>

namespace strata::compact_internal {

PlanMemo::Counts PlanMemo::CountsOf(const CompactionInput& in) {
  return {in.stable_tokens,
          in.volatile_tokens,
          in.history_tokens,
          in.total_tokens,
          in.limit_tokens,
          in.trigger_tokens,
          in.target_tokens,
          in.message_overhead_tokens,
          in.round,
          static_cast<uint64_t>(in.turn),
          in.forced ? 1u : 0u,
          in.history.size(),
          in.history_fingerprints.size()};
}

std::string PlanMemo::Key(const CompactionInput& in) {
  if (in.history_fingerprints.size() != in.history.size() || in.history.empty()) return "";
  std::string key;
  auto add = [&key](uint64_t v) { key.append(reinterpret_cast<const char*>(&v), sizeof(v)); };
  auto add_text = [&](const std::string& t) {
    add(t.size());
    key += t;
  };
  for (uint64_t v : CountsOf(in)) add(v);
  add_text(in.tokenizer != nullptr ? in.tokenizer->Name() : "");  // names say how it counts
  for (size_t i = 0; i < in.history.size(); ++i) {
    const Segment& s = *in.history[i];
    add_text(s.id);
    add(in.history_fingerprints[i]);
    add_text(s.tool_call_id);
    add_text(s.name);
    add_text(s.recall_id);
    add((static_cast<uint64_t>(s.kind) << 32) | (static_cast<uint64_t>(s.state) << 16) |
        (static_cast<uint64_t>(s.hygiene) << 8) | (s.pinned ? 1 : 0));
    add(s.tokens);
    add(static_cast<uint64_t>(s.turn));
    add(in.OriginalBytes(i));
  }
  return key;
}

std::optional<HistoryEdit> PlanMemo::Find(const CompactionInput& in, std::string* key) {
  key->clear();
  const Counts counts = CountsOf(in);
  {
    internal::MutexLock lock(mu_);
    if (!kept_ || counts != counts_) return std::nullopt;
  }
  *key = Key(in);  // a pass over the history: not under the lock
  if (key->empty()) return std::nullopt;
  internal::MutexLock lock(mu_);
  if (!kept_ || *key != key_) return std::nullopt;
  return plan_;
}

void PlanMemo::Keep(const CompactionInput& in, const HistoryEdit& plan, std::string key) {
  if (key.empty()) key = Key(in);
  if (key.empty()) return;
  internal::MutexLock lock(mu_);
  kept_ = true;
  counts_ = CountsOf(in);
  key_ = std::move(key);
  plan_ = plan;
}

}  // namespace strata::compact_internal
