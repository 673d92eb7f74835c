// PairingChecker (pairing.h): the pairing of calls and results, checked from where a body stops
// sharing its predecessor's bytes.
#include "replay/pairing.h"

#include <algorithm>
#include <nlohmann/json.hpp>
#include <utility>

#include "core/json_scan.h"

namespace strata::replay_internal {
namespace {

constexpr size_t npos = std::string_view::npos;

// Where the value of the body's (last) "messages" member starts, if it is an array; else npos.
size_t MessagesArray(std::string_view t) {
  const size_t open = internal::SkipJsonSpace(t, 0);
  if (open >= t.size() || t[open] != '{') return npos;
  size_t found = npos;
  const size_t end =
      internal::WalkJsonObject(t, open + 1, false, [&](std::string_view key, size_t value) {
        if (key == "messages") found = value;
        return internal::SkipJsonValue(t, value);
      });
  if (end == npos || found >= t.size() || t[found] != '[') return npos;
  return found;
}

}  // namespace

bool PairingChecker::Check(const BuiltRequest& built) {
  const std::string_view t = built.body;
  const bool continues = built.previous_render_serial != 0 &&
                         built.previous_render_serial == serial_ && array_begin_ != npos &&
                         array_begin_ < built.unchanged_bytes;
  serial_ = built.render_serial;
  size_t keep = 0;  // messages of the previous body that are this one's, with their states
  if (continues) {
    keep = static_cast<size_t>(std::upper_bound(ends_.begin(), ends_.end(), built.unchanged_bytes) -
                               ends_.begin());
  } else {
    array_begin_ = MessagesArray(t);
    if (array_begin_ == npos) return Reset();
  }
  ends_.resize(keep);
  states_.resize(keep);
  State state = keep > 0 ? states_.back() : State{};
  std::vector<std::pair<size_t, size_t>> elements;
  const size_t array_end =
      internal::SplitJsonArray(t, keep > 0 ? ends_.back() : array_begin_ + 1, keep > 0, &elements);
  if (array_end == npos) return Reset();
  for (const auto& [begin, end] : elements) {
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
    ends_.push_back(end);
    states_.push_back(state);
  }
  return state.open.empty();
}

bool PairingChecker::Reset() {
  array_begin_ = npos;
  ends_.clear();
  states_.clear();
  return false;
}

}  // namespace strata::replay_internal
