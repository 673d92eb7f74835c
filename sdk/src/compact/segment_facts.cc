#include "compact/segment_facts.h"

#include <utility>

#include "compact/common.h"
#include "compact/placeholder.h"
#include "core/identifiers.h"

namespace strata::compact_internal {

const std::vector<std::string>& SegmentFacts::ContentIds(size_t i) {
  KeptFacts& f = facts_[i];
  if (!f.content_ids) f.content_ids = internal::RankedIdentifiers(in_->history[i]->content);
  return *f.content_ids;
}

const std::vector<std::string>& SegmentFacts::MessageIds(size_t i) {
  const Segment& s = *in_->history[i];
  if (s.tool_calls.empty()) return ContentIds(i);
  KeptFacts& f = facts_[i];
  if (!f.message_ids) {
    std::string text = s.content;
    for (const ToolCall& call : s.tool_calls) text += "\n" + call.arguments;
    f.message_ids = internal::RankedIdentifiers(text);
  }
  return *f.message_ids;
}

const std::string& SegmentFacts::RecallId(size_t i) {
  KeptFacts& f = facts_[i];
  if (!f.recall_id) f.recall_id = RecallIdOf(*in_->history[i]);
  return *f.recall_id;
}

const std::string& SegmentFacts::ExitStatus(size_t i) {
  KeptFacts& f = facts_[i];
  if (!f.exit_status) f.exit_status = ExitStatusOf(in_->history[i]->content);
  return *f.exit_status;
}

SegmentFacts SegmentFactsCache::Begin(const CompactionInput& in) const {
  SegmentFacts out;
  out.in_ = &in;
  out.keyed_ = !in.history.empty() && in.history_fingerprints.size() == in.history.size();
  out.facts_.resize(in.history.size());
  if (!out.keyed_) return out;
  internal::MutexLock lock(mu_);
  for (size_t i = 0; i < in.history.size(); ++i) {
    const Segment& s = *in.history[i];
    KeptFacts& f = out.facts_[i];
    auto kept = by_id_.find(s.id);
    if (kept != by_id_.end() && kept->second.fingerprint == in.history_fingerprints[i] &&
        kept->second.content_bytes == s.content.size() && kept->second.recall_field == s.recall_id) {
      f = kept->second;
      continue;
    }
    f.fingerprint = in.history_fingerprints[i];
    f.content_bytes = s.content.size();
    f.recall_field = s.recall_id;
  }
  return out;
}

void SegmentFactsCache::Keep(SegmentFacts facts) {
  if (!facts.keyed_) return;
  std::unordered_map<std::string, KeptFacts> fresh;
  fresh.reserve(facts.facts_.size());
  for (size_t i = 0; i < facts.facts_.size(); ++i) {
    fresh.emplace(facts.in_->history[i]->id, std::move(facts.facts_[i]));
  }
  internal::MutexLock lock(mu_);
  by_id_.swap(fresh);
}

}  // namespace strata::compact_internal
