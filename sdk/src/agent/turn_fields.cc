// The per-call request fields of TurnOptions::extra_fields (turn_fields.h).
#include "agent/turn_fields.h"

#include <algorithm>
#include <set>

namespace strata::agent_internal {

Status CheckTurnFields(const std::vector<std::pair<std::string, std::string>>& extra) {
  static const std::set<std::string> kOwned = {
      "model", "messages", "tools", "stream", "stream_options", "cache_salt", "request_id", "rid"};
  for (const auto& field : extra) {
    if (field.first.empty() || kOwned.count(field.first)) {
      return InvalidArgumentError("TurnOptions::extra_fields: \"" + field.first +
                                  "\" is a field the agent sets itself (model, messages, tools, "
                                  "stream, stream_options, cache_salt, request_id, rid): remove "
                                  "it");
    }
  }
  return Status::Ok();
}

void MergeTurnFields(const std::vector<std::pair<std::string, std::string>>& extra,
                     BuildOptions* build) {
  auto is_cap = [](const std::string& name) {
    return name == "max_tokens" || name == "max_completion_tokens";
  };
  std::vector<std::pair<std::string, std::string>>& fields = build->extra_fields;
  for (const auto& field_in : extra) {
    // Not a structured binding: clang 14 (the fuzz and sanitizer builds) cannot capture one.
    const std::string& name = field_in.first;
    const std::string& value = field_in.second;
    auto same = std::find_if(fields.begin(), fields.end(),
                             [&](const auto& field) { return field.first == name; });
    if (same == fields.end() && is_cap(name)) {
      same = std::find_if(fields.begin(), fields.end(),
                          [&](const auto& field) { return is_cap(field.first); });
    }
    if (same != fields.end()) {
      *same = {name, value};
    } else {
      fields.emplace_back(name, value);
    }
  }
}

}  // namespace strata::agent_internal
