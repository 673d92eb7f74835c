#include "strata/segment.h"

#include <atomic>
#include <cstdint>

#include "core/text_util.h"

namespace strata {

std::string_view LayerName(Layer layer) {
  switch (layer) {
    case Layer::kSystem: return "system";
    case Layer::kTools: return "tools";
    case Layer::kIndex: return "index";
    case Layer::kDocs: return "docs";
    case Layer::kHistory: return "history";
    case Layer::kVolatile: return "volatile";
  }
  return "unknown";
}

std::optional<Layer> ParseLayer(std::string_view name) {
  for (int i = 0; i < kLayerCount; ++i) {
    if (LayerName(static_cast<Layer>(i)) == name) return static_cast<Layer>(i);
  }
  return std::nullopt;
}

namespace {
std::atomic<uint64_t> recall_ids_computed{0};
}  // namespace

uint64_t internal::RecallIdsComputed() {
  return recall_ids_computed.load(std::memory_order_relaxed);
}

std::string RecallIdFor(std::string_view original) {
  recall_ids_computed.fetch_add(1, std::memory_order_relaxed);
  return "r-" + internal::Sha256Hex(original).substr(0, 16);
}

std::string_view SegmentKindName(SegmentKind kind) {
  switch (kind) {
    case SegmentKind::kSystem: return "system";
    case SegmentKind::kTools: return "tools";
    case SegmentKind::kIndex: return "index";
    case SegmentKind::kDoc: return "doc";
    case SegmentKind::kUser: return "user";
    case SegmentKind::kAssistant: return "assistant";
    case SegmentKind::kToolCall: return "tool_call";
    case SegmentKind::kToolResult: return "tool_result";
    case SegmentKind::kErrorLog: return "error_log";
    case SegmentKind::kSummary: return "summary";
    case SegmentKind::kVolatile: return "volatile";
  }
  return "unknown";
}

std::string_view SegmentStateName(SegmentState state) {
  switch (state) {
    case SegmentState::kLive: return "live";
    case SegmentState::kMasked: return "masked";
    case SegmentState::kSummarized: return "summarized";
    case SegmentState::kEvicted: return "evicted";
  }
  return "unknown";
}

std::string_view HygieneActionName(HygieneAction action) {
  switch (action) {
    case HygieneAction::kNone: return "none";
    case HygieneAction::kTruncated: return "truncated";
    case HygieneAction::kDeduplicated: return "deduplicated";
    case HygieneAction::kFolded: return "folded";
  }
  return "unknown";
}

}  // namespace strata
