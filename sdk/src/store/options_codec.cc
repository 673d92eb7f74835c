#include "store/options_codec.h"

#include <nlohmann/json.hpp>

namespace strata::store_internal {

std::string OptionsToJson(const ContextOptions& o) {
  nlohmann::ordered_json j;
  j["agent"] = {{"id", o.agent.id},
                {"tenant", o.agent.tenant},
                {"scope", o.agent.scope},
                {"model_version", o.agent.model_version},
                {"template_version", o.agent.template_version}};
  j["render"] = {{"model", o.render.model},
                 {"system_layout", static_cast<int>(o.render.system_layout)},
                 {"reasoning_field", o.render.reasoning_field},
                 {"volatile_role", o.render.volatile_role}};
  j["hygiene"] = {{"max_segment_tokens", o.hygiene.max_segment_tokens},
                  {"head_share", o.hygiene.head_share},
                  {"deduplicate", o.hygiene.deduplicate},
                  {"fold_error_logs", o.hygiene.fold_error_logs},
                  {"min_repeat_run", o.hygiene.min_repeat_run},
                  {"min_bytes", o.hygiene.min_bytes}};
  j["keep_originals"] = o.keep_originals;
  return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

// Fields missing from the stored JSON (written by an older strata) keep their defaults.
StatusOr<ContextOptions> OptionsFromJson(const std::string& text, const std::string& agent_id) {
  nlohmann::json j = nlohmann::json::parse(text, nullptr, false);
  if (j.is_discarded() || !j.is_object()) {
    return DataLossError("stored options of agent \"" + agent_id + "\" are not valid JSON");
  }
  ContextOptions o;
  auto get = [](const nlohmann::json& obj, const char* key, auto& field) {
    auto it = obj.find(key);
    if (it != obj.end() && !it->is_null()) {
      it->get_to(field);
    }
  };
  try {
    if (auto a = j.find("agent"); a != j.end()) {
      get(*a, "id", o.agent.id);
      get(*a, "tenant", o.agent.tenant);
      get(*a, "scope", o.agent.scope);
      get(*a, "model_version", o.agent.model_version);
      get(*a, "template_version", o.agent.template_version);
    }
    if (auto r = j.find("render"); r != j.end()) {
      get(*r, "model", o.render.model);
      int layout = static_cast<int>(o.render.system_layout);
      get(*r, "system_layout", layout);
      o.render.system_layout = static_cast<SystemLayout>(layout);
      get(*r, "reasoning_field", o.render.reasoning_field);
      get(*r, "volatile_role", o.render.volatile_role);
    }
    if (auto h = j.find("hygiene"); h != j.end()) {
      get(*h, "max_segment_tokens", o.hygiene.max_segment_tokens);
      get(*h, "head_share", o.hygiene.head_share);
      get(*h, "deduplicate", o.hygiene.deduplicate);
      get(*h, "fold_error_logs", o.hygiene.fold_error_logs);
      get(*h, "min_repeat_run", o.hygiene.min_repeat_run);
      get(*h, "min_bytes", o.hygiene.min_bytes);
    }
    get(j, "keep_originals", o.keep_originals);
  } catch (const nlohmann::json::exception& e) {
    return DataLossError("stored options of agent \"" + agent_id + "\" are malformed: " + e.what());
  }
  return o;
}

}  // namespace strata::store_internal
