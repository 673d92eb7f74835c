// strata-sidecar's joining of the streamed fragments that arrive together, so that the gRPC
// service and the HTTP proxy write one event per part of what arrived together instead of one per
// upstream event.
#ifndef STRATA_APPS_STRATA_SIDECAR_DELTA_JOINER_H_
#define STRATA_APPS_STRATA_SIDECAR_DELTA_JOINER_H_

#include <optional>
#include <utility>

#include "strata/transport.h"

namespace strata::sidecar {

// Joins consecutive fragments of the same part (content, reasoning, or one tool call's arguments)
// while the transport says another follows at once (StreamDelta::more_follows). A joined fragment
// goes on when the next one belongs to another part and with the last of those that arrived
// together, so no fragment waits for the network. Not thread-safe: one per streamed answer.
class DeltaJoiner {
 public:
  // Adds a fragment; calls `emit(const StreamDelta&)` for each joined fragment that is complete.
  template <typename Emit>
  void Add(const StreamDelta& d, Emit&& emit) {
    if (pending_ && !SamePart(*pending_, d)) Flush(emit);
    if (pending_) {
      pending_->text += d.text;
      // A tool call's id and name, once known, come with each of its later fragments.
      if (!d.tool_call_id.empty()) pending_->tool_call_id = d.tool_call_id;
      if (!d.tool_name.empty()) pending_->tool_name = d.tool_name;
    } else {
      pending_ = d;
    }
    if (!d.more_follows) Flush(emit);
  }

  // Emits what is held (a transport whose last fragment said more follows, e.g. a custom one).
  template <typename Emit>
  void Flush(Emit&& emit) {
    if (!pending_) return;
    StreamDelta joined = std::move(*pending_);
    pending_.reset();
    joined.more_follows = false;
    emit(joined);
  }

 private:
  static bool SamePart(const StreamDelta& a, const StreamDelta& b) {
    return a.kind == b.kind && (a.kind != StreamDelta::Kind::kToolCallArguments ||
                                a.tool_call_index == b.tool_call_index);
  }

  std::optional<StreamDelta> pending_;
};

}  // namespace strata::sidecar

#endif  // STRATA_APPS_STRATA_SIDECAR_DELTA_JOINER_H_
