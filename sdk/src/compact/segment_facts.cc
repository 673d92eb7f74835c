#include "compact/segment_facts.h"

#include <algorithm>
#include <string_view>
#include <unordered_map>
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

const std::vector<std::string>& SegmentFacts::CallIds(size_t i, const std::string& arguments) {
  KeptFacts& f = facts_[i];
  if (!f.call_ids || f.call_arguments != arguments) {
    f.call_ids = internal::RankedIdentifiers(arguments);
    f.call_arguments = arguments;
  }
  return *f.call_ids;
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

namespace {

// Whether `facts` (kept for it) still describe segment `s` with fingerprint `fingerprint`.
bool Describes(const KeptFacts& facts, const Segment& s, uint64_t fingerprint) {
  return facts.fingerprint == fingerprint && facts.content_bytes == s.content.size() &&
         facts.recall_field == s.recall_id;
}

// Fresh facts of segment `s`.
void Reset(KeptFacts& facts, const Segment& s, uint64_t fingerprint) {
  facts = KeptFacts();
  facts.fingerprint = fingerprint;
  facts.content_bytes = s.content.size();
  facts.recall_field = s.recall_id;
}

}  // namespace

SegmentFacts SegmentFactsCache::Begin(const CompactionInput& in) {
  SegmentFacts out;
  out.in_ = &in;
  out.keyed_ = !in.history.empty() && in.history_fingerprints.size() == in.history.size();
  if (!out.keyed_) {
    out.facts_.resize(in.history.size());
    return out;
  }
  internal::MutexLock lock(mu_);
  // A history whose kept segments are all at their own index (it only grew, or changed segments
  // in place) takes the kept facts whole, in place: no entry is moved.
  const size_t kept = std::min(ids_.size(), in.history.size());
  size_t same = 0;
  while (same < kept && ids_[same] == in.history[same]->id) ++same;
  if (same == kept && facts_.size() == ids_.size()) {
    out.facts_ = std::move(facts_);
    facts_.clear();
    out.facts_.resize(in.history.size());
    for (size_t i = 0; i < in.history.size(); ++i) {
      const uint64_t fingerprint = in.history_fingerprints[i];
      if (i >= kept || !Describes(out.facts_[i], *in.history[i], fingerprint)) {
        Reset(out.facts_[i], *in.history[i], fingerprint);
      }
    }
    return out;
  }
  out.facts_.resize(in.history.size());
  std::unordered_map<std::string_view, size_t> index;  // ids_ by id, once a segment moved
  for (size_t i = 0; i < in.history.size(); ++i) {
    const Segment& s = *in.history[i];
    KeptFacts& f = out.facts_[i];
    size_t k = i;
    if (k >= ids_.size() || ids_[k] != s.id) {
      if (index.empty()) {
        index.reserve(ids_.size());
        for (size_t j = 0; j < ids_.size(); ++j) index.emplace(ids_[j], j);
      }
      auto found = index.find(s.id);
      k = found == index.end() ? ids_.size() : found->second;
    }
    // Segment ids are unique in an input, so each kept entry is taken at most once.
    if (k < facts_.size() && Describes(facts_[k], s, in.history_fingerprints[i])) {
      f = std::move(facts_[k]);
      continue;
    }
    Reset(f, s, in.history_fingerprints[i]);
  }
  facts_.clear();
  return out;
}

void SegmentFactsCache::Keep(SegmentFacts facts) {
  if (!facts.keyed_) return;
  const std::vector<const Segment*>& history = facts.in_->history;
  internal::MutexLock lock(mu_);
  ids_.resize(history.size());
  for (size_t i = 0; i < history.size(); ++i) {
    if (ids_[i] != history[i]->id) ids_[i] = history[i]->id;
  }
  facts_ = std::move(facts.facts_);
}

}  // namespace strata::compact_internal
