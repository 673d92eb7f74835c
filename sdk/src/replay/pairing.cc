// PairingChecker (pairing.h): the pairing of calls and results, checked from where a body stops
// sharing its predecessor's bytes.
#include "replay/pairing.h"

#include <algorithm>
#include <nlohmann/json.hpp>
#include <utility>

#include "core/json_scan.h"

namespace strata::replay_internal {

bool PairingChecker::Check(const BuiltRequest& built) {
  const std::string_view t = built.body;
  // The previous body's split is continued when this body is the render after it.
  const bool continues = built.previous_render_serial != 0 &&
                         built.previous_render_serial == serial_ && !states_.empty();
  serial_ = built.render_serial;
  internal::JsonArraySplit split;
  if (!internal::SplitMemberArray(t, "messages", continues ? &split_ : nullptr,
                                  continues ? built.unchanged_bytes : 0, &split)) {
    return Reset();
  }
  split_ = std::move(split);
  // The previous body's messages this one kept, as far as they were checked.
  const size_t keep = std::min(split_.reused, states_.size());
  states_.resize(keep);
  State state = keep > 0 ? states_.back() : State{};
  for (size_t k = keep; k < split_.elements.size(); ++k) {
    const auto [begin, end] = split_.elements[k];
    const nlohmann::json message =
        nlohmann::json::parse(t.substr(begin, end - begin), nullptr, false);
    if (message.is_discarded()) return false;
    const std::string role = message.value("role", "");
    if (role == "tool") {
      auto it = std::find(state.open.begin(), state.open.end(), message.value("tool_call_id", ""));
      if (!state.after_calls || it == state.open.end()) return false;
      state.open.erase(it);
    } else {
      if (!state.open.empty()) return false;
      state.after_calls = false;
      if (role == "assistant" && message.contains("tool_calls")) {
        for (const auto& call : message["tool_calls"]) state.open.push_back(call.value("id", ""));
        state.after_calls = true;
      }
    }
    states_.push_back(state);
  }
  return state.open.empty();
}

bool PairingChecker::Reset() {
  split_ = internal::JsonArraySplit();
  states_.clear();
  return false;
}

}  // namespace strata::replay_internal
