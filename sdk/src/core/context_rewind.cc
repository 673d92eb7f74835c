// Context, rewinding: Rewind() returns the context, in place, to an earlier snapshot (an agent's
// failed turn undone). The snapshot is restored into a fresh state first (which validates it), the
// journal records the change that turns the stored context into it, and only then does the fresh
// state replace this one. A mark (Mark(), RewindToMark()) costs what changes after it: each change
// keeps the previous values of what it alters (KeepForMark, from Record()), and the snapshot of the
// mark is made from the current one and those values only when it is rewound to.
#include <algorithm>
#include <map>
#include <set>
#include <utility>

#include "core/context_impl.h"

namespace strata {
namespace {

bool SameCalls(const std::vector<ToolCall>& a, const std::vector<ToolCall>& b) {
  return std::equal(a.begin(), a.end(), b.begin(), b.end(),
                    [](const ToolCall& x, const ToolCall& y) {
                      return x.id == y.id && x.name == y.name && x.arguments == y.arguments;
                    });
}

// Every stored field of a segment equal.
bool SameSegment(const Segment& a, const Segment& b) {
  return a.id == b.id && a.seq == b.seq && a.position == b.position && a.kind == b.kind &&
         a.layer == b.layer && a.content == b.content && a.reasoning == b.reasoning &&
         SameCalls(a.tool_calls, b.tool_calls) && a.tool_call_id == b.tool_call_id &&
         a.name == b.name && a.version == b.version && a.order == b.order && a.turn == b.turn &&
         a.tokens == b.tokens && a.pinned == b.pinned && a.state == b.state &&
         a.hygiene == b.hygiene && a.recall_id == b.recall_id && a.duplicate_of == b.duplicate_of &&
         a.policy == b.policy;
}

// The change that turns a context holding `now` into one holding `target`.
ContextChange ChangeTo(const ContextSnapshot& now, const ContextSnapshot& target) {
  ContextChange change;
  std::map<std::string, const Segment*> current;
  for (const Segment& s : now.segments) current[s.id] = &s;
  std::set<std::string> kept;
  for (const Segment& s : target.segments) {
    kept.insert(s.id);
    auto it = current.find(s.id);
    if (it == current.end() || !SameSegment(*it->second, s)) change.upserted.push_back(s);
  }
  for (const Segment& s : now.segments) {
    if (!kept.count(s.id)) change.removed_ids.push_back(s.id);
  }
  std::map<std::string, const std::string*> originals;
  for (const auto& [recall_id, content] : now.originals) originals[recall_id] = &content;
  std::set<std::string> kept_originals;
  for (const auto& [recall_id, content] : target.originals) {
    kept_originals.insert(recall_id);
    auto it = originals.find(recall_id);
    if (it == originals.end() || *it->second != content)
      change.originals.emplace_back(recall_id, content);
  }
  for (const auto& [recall_id, content] : now.originals) {
    if (!kept_originals.count(recall_id)) change.removed_originals.push_back(recall_id);
  }
  change.turn = target.turn;
  return change;
}

}  // namespace

Status Context::Impl::Rewind(ContextSnapshot snapshot) {
  ContextChange change = ChangeTo(Snapshot(), snapshot);
  Impl fresh(options_);
  STRATA_RETURN_IF_ERROR(fresh.LoadSnapshot(std::move(snapshot)));
  const bool unchanged = change.upserted.empty() && change.removed_ids.empty() &&
                         change.originals.empty() && change.removed_originals.empty() &&
                         change.turn == turn_;
  if (unchanged) {
    mark_.reset();  // as a rewind that changes something drops it (a fresh state has none)
    return Status::Ok();
  }
  if (options_.journal != nullptr) STRATA_RETURN_IF_ERROR(options_.journal->Record(change));
  // Kept across the rewind: what no snapshot holds, and the id counters (an id once given to a
  // segment is never given to another, so that views naming segment ids stay unambiguous).
  std::vector<std::pair<std::string, std::string>> volatile_items = std::move(volatile_);
  std::vector<CompactionReport> compactions = std::move(compactions_);
  const uint64_t next_seq = std::max(next_seq_, fresh.next_seq_);
  const int64_t next_position = std::max(next_position_, fresh.next_position_);
  *this = std::move(fresh);
  volatile_ = std::move(volatile_items);
  compactions_ = std::move(compactions);
  next_seq_ = next_seq;
  next_position_ = next_position;
  return Status::Ok();
}

void Context::Impl::Mark() {
  mark_.emplace();
  mark_->turn = turn_;
}

void Context::Impl::KeepForMark(const ContextChange& change) {
  auto keep_segment = [this](const std::string& id) {
    if (mark_->segments.count(id) != 0) return;
    const Segment* now = Find(id);
    mark_->segments.emplace(id, now != nullptr ? std::optional<Segment>(*now) : std::nullopt);
  };
  for (const Segment& s : change.upserted) keep_segment(s.id);
  for (const std::string& id : change.removed_ids) keep_segment(id);
  auto keep_original = [this](const std::string& recall_id) {
    if (mark_->originals.count(recall_id) != 0) return;
    auto now = recall_.find(recall_id);
    mark_->originals.emplace(recall_id, now != recall_.end()
                                            ? std::optional<std::string>(now->second)
                                            : std::nullopt);
  };
  for (const auto& [recall_id, content] : change.originals) keep_original(recall_id);
  for (const std::string& recall_id : change.removed_originals) keep_original(recall_id);
}

Status Context::Impl::RewindToMark() {
  if (!mark_) {
    return FailedPreconditionError(
        "no mark to rewind to: call Mark() first (Rewind(), RewindToMark() and ClearMark() drop "
        "it)");
  }
  // The snapshot of the mark: the current one, with what changed since put back as it was.
  ContextSnapshot now = Snapshot();
  ContextSnapshot marked;
  marked.turn = mark_->turn;
  for (Segment& s : now.segments) {
    if (mark_->segments.count(s.id) == 0) marked.segments.push_back(std::move(s));
  }
  for (const auto& [id, then] : mark_->segments) {
    if (then) marked.segments.push_back(*then);
  }
  for (auto& [recall_id, content] : now.originals) {
    if (mark_->originals.count(recall_id) == 0)
      marked.originals.emplace_back(recall_id, std::move(content));
  }
  for (const auto& [recall_id, then] : mark_->originals) {
    if (then) marked.originals.emplace_back(recall_id, *then);
  }
  std::sort(marked.originals.begin(), marked.originals.end());  // as Snapshot() orders them
  return Rewind(std::move(marked));  // drops the mark when it succeeds (a fresh state has none)
}

}  // namespace strata
