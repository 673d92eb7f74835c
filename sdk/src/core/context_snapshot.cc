// Context, snapshots: Snapshot() copies the stable and history segments with the kept originals;
// restoring one (Context::Restore) places the stable segments back in their layers and replays the
// history's bookkeeping (open calls, dedupe index, hygiene counters), refusing a history whose tool
// calls are not paired.
#include <algorithm>
#include <unordered_set>

#include "core/context_impl.h"

namespace strata {

using internal::IsAssistantKind;
using internal::IsRendered;
using internal::IsToolResultKind;
using internal::JoinNames;
using internal::OutputKey;
using internal::RenderOrderLess;

ContextSnapshot Context::Impl::Snapshot() const {
  ContextSnapshot snapshot;
  for (const auto& layer : stable_) {
    snapshot.segments.insert(snapshot.segments.end(), layer.begin(), layer.end());
  }
  snapshot.segments.insert(snapshot.segments.end(), history_.begin(), history_.end());
  snapshot.originals.assign(recall_.begin(), recall_.end());
  std::sort(snapshot.originals.begin(), snapshot.originals.end());
  snapshot.turn = turn_;
  return snapshot;
}

Status Context::Impl::LoadSnapshot(ContextSnapshot snapshot) {
  std::unordered_set<std::string> ids;
  std::vector<Segment> layers[kLayerCount];  // indexed by Layer
  uint64_t max_seq = 0;
  for (Segment& s : snapshot.segments) {
    if (s.id.empty()) return InvalidArgumentError("snapshot has a segment with an empty id");
    if (!ids.insert(s.id).second) {
      return InvalidArgumentError("snapshot has two segments with id \"" + s.id + "\"");
    }
    const int layer = static_cast<int>(s.layer);  // as stored: may be out of the enum's range
    if (layer < 0 || layer >= kLayerCount || s.layer == Layer::kVolatile) {
      return InvalidArgumentError("snapshot segment \"" + s.id + "\" has layer " +
                                  std::to_string(layer) + ", which cannot be restored");
    }
    max_seq = std::max(max_seq, s.seq);
    layers[layer].push_back(std::move(s));
  }
  for (auto& [id, original] : snapshot.originals) recall_.emplace(id, std::move(original));
  turn_ = snapshot.turn;
  next_seq_ = max_seq + 1;
  for (Layer layer : internal::kStableLayers) {
    std::vector<Segment>& segments = layers[internal::LayerIndex(layer)];
    std::sort(segments.begin(), segments.end(), RenderOrderLess);
    StableSlot(layer) = std::move(segments);
  }
  std::vector<Segment>& history = layers[internal::LayerIndex(Layer::kHistory)];
  std::sort(history.begin(), history.end(), RenderOrderLess);
  STRATA_RETURN_IF_ERROR(ReplaySnapshotHistory(std::move(history)));
  for (Layer layer : internal::kStableLayers) ReindexStable(layer);
  RebuildHeader();
  return Status::Ok();
}

// Appends the restored history (in render order) and rebuilds what the appends maintain, checking
// that every tool call is answered before anything else follows it.
Status Context::Impl::ReplaySnapshotHistory(std::vector<Segment> history) {
  for (Segment& s : history) {
    next_position_ = std::max(next_position_, s.position + 1);
    if (!IsRendered(s)) {
      ApplyHistoryAppend(std::move(s));
      continue;
    }
    if (IsAssistantKind(s.kind)) {
      if (!open_calls_.empty()) {
        return InvalidArgumentError("snapshot history: assistant segment \"" + s.id +
                                    "\" follows unanswered tool calls (" + JoinNames(open_calls_) +
                                    ")");
      }
      RegisterCalls(s);
    } else if (IsToolResultKind(s.kind)) {
      auto open = std::find(open_calls_.begin(), open_calls_.end(), s.tool_call_id);
      if (open == open_calls_.end()) {
        return InvalidArgumentError("snapshot history: tool result \"" + s.id + "\" answers \"" +
                                    s.tool_call_id + "\", which is not an open call");
      }
      open_calls_.erase(open);
      if (s.hygiene != HygieneAction::kDeduplicated && s.state == SegmentState::kLive) {
        const ToolCall& call = *FindLastCall(s.tool_call_id);
        auto original = s.recall_id.empty() ? recall_.end() : recall_.find(s.recall_id);
        IndexOutput(OutputKey(call.name, call.arguments,
                              original == recall_.end() ? s.content : original->second),
                    s.tool_call_id);
      }
      if (s.hygiene == HygieneAction::kDeduplicated) duplicates_of_[s.duplicate_of].push_back(s.id);
      CountHygiene(s, +1);
    } else if (!open_calls_.empty()) {
      return InvalidArgumentError("snapshot history: segment \"" + s.id +
                                  "\" follows unanswered tool calls (" + JoinNames(open_calls_) +
                                  ")");
    }
    ApplyHistoryAppend(std::move(s));
  }
  return Status::Ok();
}

}  // namespace strata
