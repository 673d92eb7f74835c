// AgentConfig <-> JSON (strict: unknown keys and wrong types are refused with their key path) and
// the budget an agent configuration gives.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <string>

#include "core/json_text.h"
#include "core/utf8.h"
#include "strata/agent.h"

namespace strata {
namespace {

using json = nlohmann::ordered_json;

json LimitToJson(const BudgetLimit& limit) {
  json out = json::object();
  if (limit.kind == BudgetLimit::Kind::kFraction) {
    out["fraction"] = limit.fraction;
  } else {
    out["tokens"] = limit.tokens;
  }
  return out;
}

const char* SystemLayoutName(SystemLayout layout) {
  return layout == SystemLayout::kMessagePerSegment ? "message_per_segment" : "single_message";
}

// Reads one JSON object, field by field, remembering which keys were used, so that the keys left
// over can be refused by name. Every error names the full key path.
class ObjectReader {
 public:
  ObjectReader(const json& value, std::string path) : value_(value), path_(std::move(path)) {}

  Status Check() const {
    if (!value_.is_object()) return InvalidArgumentError(Where("") + "expected an object");
    return Status::Ok();
  }
  // Every key not read is an error (listing the keys this object accepts).
  Status Finish() const {
    for (auto it = value_.begin(); it != value_.end(); ++it) {
      if (!used_.count(it.key())) {
        std::string known;
        for (const std::string& k : used_order_) known += (known.empty() ? "" : ", ") + k;
        return InvalidArgumentError(
            "unknown key \"" + Join(it.key()) + "\" in the agent configuration (" +
            (path_.empty() ? std::string("top level") : path_) + " accepts: " + known + ")");
      }
    }
    return Status::Ok();
  }

  Status String(const char* key, std::string* out) {
    const json* v = Take(key);
    if (v == nullptr) return Status::Ok();
    if (!v->is_string()) return Type(key, "a string", *v);
    *out = v->get<std::string>();
    return Status::Ok();
  }
  Status Bool(const char* key, bool* out) {
    const json* v = Take(key);
    if (v == nullptr) return Status::Ok();
    if (!v->is_boolean()) return Type(key, "true or false", *v);
    *out = v->get<bool>();
    return Status::Ok();
  }
  Status OptBool(const char* key, std::optional<bool>* out) {
    const json* v = Take(key);
    if (v == nullptr || v->is_null()) return Status::Ok();
    if (!v->is_boolean()) return Type(key, "true, false or null", *v);
    *out = v->get<bool>();
    return Status::Ok();
  }
  Status Int(const char* key, int64_t* out) {
    const json* v = Take(key);
    if (v == nullptr) return Status::Ok();
    if (!v->is_number_integer()) return Type(key, "an integer", *v);
    *out = v->get<int64_t>();
    return Status::Ok();
  }
  Status OptInt(const char* key, std::optional<int64_t>* out) {
    const json* v = Take(key);
    if (v == nullptr || v->is_null()) return Status::Ok();
    if (!v->is_number_integer()) return Type(key, "an integer or null", *v);
    *out = v->get<int64_t>();
    return Status::Ok();
  }
  Status Int32(const char* key, int* out) {
    int64_t value = *out;
    STRATA_RETURN_IF_ERROR(Int(key, &value));
    if (value < INT32_MIN || value > INT32_MAX) {
      return InvalidArgumentError(Where(key) + std::to_string(value) +
                                  " does not fit a 32-bit integer");
    }
    *out = static_cast<int>(value);
    return Status::Ok();
  }
  Status Size(const char* key, size_t* out) {
    const json* v = Take(key);
    if (v == nullptr) return Status::Ok();
    if (!v->is_number_unsigned()) return Type(key, "a non-negative integer", *v);
    *out = v->get<size_t>();
    return Status::Ok();
  }
  Status Number(const char* key, double* out) {
    const json* v = Take(key);
    if (v == nullptr) return Status::Ok();
    if (!v->is_number()) return Type(key, "a number", *v);
    *out = v->get<double>();
    return Status::Ok();
  }
  Status Strings(const char* key, std::vector<std::string>* out) {
    const json* v = Take(key);
    if (v == nullptr) return Status::Ok();
    if (!v->is_array()) return Type(key, "an array of strings", *v);
    std::vector<std::string> values;
    for (size_t i = 0; i < v->size(); ++i) {
      if (!(*v)[i].is_string()) {
        return InvalidArgumentError(Join(key) + "[" + std::to_string(i) +
                                    "]: expected a string, got " + (*v)[i].dump());
      }
      values.push_back((*v)[i].get<std::string>());
    }
    *out = std::move(values);
    return Status::Ok();
  }
  Status Limit(const char* key, BudgetLimit* out) {
    const json* v = Take(key);
    if (v == nullptr) return Status::Ok();
    ObjectReader r(*v, Join(key));
    STRATA_RETURN_IF_ERROR(r.Check());
    if (v->size() != 1 || !(v->contains("fraction") || v->contains("tokens"))) {
      return InvalidArgumentError(
          Where(key) + "expected {\"fraction\": f} or {\"tokens\": n}, got " + v->dump());
    }
    if (v->contains("fraction")) {
      double f = 0;
      STRATA_RETURN_IF_ERROR(r.Number("fraction", &f));
      *out = BudgetLimit::Fraction(f);
    } else {
      int64_t n = 0;
      STRATA_RETURN_IF_ERROR(r.Int("tokens", &n));
      *out = BudgetLimit::Tokens(n);
    }
    return Status::Ok();
  }
  // A nested object: `read` fills it from a reader that must consume all its keys.
  template <typename F>
  Status Object(const char* key, F&& read) {
    const json* v = Take(key);
    if (v == nullptr) return Status::Ok();
    ObjectReader r(*v, Join(key));
    STRATA_RETURN_IF_ERROR(r.Check());
    STRATA_RETURN_IF_ERROR(read(r));
    return r.Finish();
  }

 private:
  const json* Take(const char* key) {
    used_.insert(key);
    used_order_.push_back(key);
    auto it = value_.find(key);
    return it == value_.end() ? nullptr : &*it;
  }
  std::string Join(const std::string& key) const { return path_.empty() ? key : path_ + "." + key; }
  std::string Where(const std::string& key) const {
    std::string p = key.empty() ? path_ : Join(key);
    return (p.empty() ? std::string("agent configuration") : p) + ": ";
  }
  Status Type(const char* key, const char* expected, const json& got) const {
    const std::string shown = internal::Utf8Prefix(got.dump(), 40);
    return InvalidArgumentError(Where(key) + "expected " + expected + ", got " + shown);
  }

  const json& value_;
  std::string path_;
  std::set<std::string> used_;
  std::vector<std::string> used_order_;
};

// The "policy" object of an agent configuration.
Status ReadPolicy(ObjectReader& o, AgentPolicyConfig* p) {
  STRATA_RETURN_IF_ERROR(o.String("name", &p->name));
  STRATA_RETURN_IF_ERROR(o.Size("keep_turns", &p->keep_turns));
  STRATA_RETURN_IF_ERROR(o.Size("keep_tool_results", &p->keep_tool_results));
  STRATA_RETURN_IF_ERROR(o.Bool("keep_first_user", &p->keep_first_user));
  STRATA_RETURN_IF_ERROR(o.Strings("exclude_tools", &p->exclude_tools));
  STRATA_RETURN_IF_ERROR(o.Strings("ephemeral_tools", &p->ephemeral_tools));
  STRATA_RETURN_IF_ERROR(o.Size("placeholder_identifiers", &p->placeholder_identifiers));
  STRATA_RETURN_IF_ERROR(o.Size("tokens_per_identifier", &p->tokens_per_identifier));
  STRATA_RETURN_IF_ERROR(o.Size("max_summary_tokens", &p->max_summary_tokens));
  STRATA_RETURN_IF_ERROR(o.Bool("cost_model", &p->cost_model));
  STRATA_RETURN_IF_ERROR(o.Number("uncached_price", &p->uncached_price));
  STRATA_RETURN_IF_ERROR(o.Number("cached_price", &p->cached_price));
  STRATA_RETURN_IF_ERROR(o.Number("prior_remaining_turns", &p->prior_remaining_turns));
  STRATA_RETURN_IF_ERROR(o.Number("prior_weight", &p->prior_weight));
  STRATA_RETURN_IF_ERROR(o.Number("below_trigger_margin", &p->below_trigger_margin));
  STRATA_RETURN_IF_ERROR(o.Size("use_window_turns", &p->use_window_turns));
  STRATA_RETURN_IF_ERROR(o.Bool("mask_after_use", &p->mask_after_use));
  return o.Size("last_n", &p->last_n);
}

// INVALID_ARGUMENT naming the key, the value and the range when `value` is outside [min, max].
template <typename T>
Status InRange(const char* key, T value, T min, T max, const char* why = "") {
  if (value >= min && value <= max) return Status::Ok();
  return InvalidArgumentError(std::string(key) + " = " + std::to_string(value) +
                              " is out of range: use " + std::to_string(min) + " to " +
                              std::to_string(max) + why);
}

Status InRange(const char* key, double value, double min, double max) {
  if (std::isfinite(value) && value >= min && value <= max) return Status::Ok();
  std::ostringstream message;
  message << key << " = " << value << " is out of range: use " << min << " to " << max;
  return InvalidArgumentError(message.str());
}

Status CheckBudgetRanges(const AgentBudgetConfig& b) {
  STRATA_RETURN_IF_ERROR(InRange<int64_t>("budget.window", b.window, 1, kMaxAgentWindowTokens));
  for (const auto& [key, reserve] : {std::pair<const char*, const std::optional<int64_t>*>{
                                         "budget.reserve_output", &b.reserve_output},
                                     {"budget.reserve_reasoning", &b.reserve_reasoning},
                                     {"budget.reserve_headroom", &b.reserve_headroom}}) {
    if (*reserve) STRATA_RETURN_IF_ERROR(InRange<int64_t>(key, **reserve, 0, b.window));
  }
  for (const auto& [key, limit] :
       {std::pair<const char*, const BudgetLimit*>{"budget.trigger", &b.trigger},
        {"budget.target", &b.target}}) {
    if (limit->kind == BudgetLimit::Kind::kTokens) {
      STRATA_RETURN_IF_ERROR(InRange<int64_t>(key, limit->tokens, 0, b.window));
    } else {
      STRATA_RETURN_IF_ERROR(InRange(key, limit->fraction, 0.0, 1.0));
    }
  }
  return Status::Ok();
}

Status CheckEndpointRanges(const AgentEndpointConfig& e) {
  STRATA_RETURN_IF_ERROR(InRange<int64_t>("endpoint.max_output_tokens", e.max_output_tokens, 0,
                                          kMaxAgentWindowTokens));
  STRATA_RETURN_IF_ERROR(
      InRange<int64_t>("endpoint.deadline_ms", e.deadline_ms, 0, kMaxAgentTimeoutMs));
  for (const auto& [key, value] :
       {std::pair<const char*, int64_t>{"endpoint.connect_timeout_ms", e.connect_timeout_ms},
        {"endpoint.first_byte_timeout_ms", e.first_byte_timeout_ms},
        {"endpoint.idle_timeout_ms", e.idle_timeout_ms},
        {"endpoint.total_timeout_ms", e.total_timeout_ms}}) {
    STRATA_RETURN_IF_ERROR(InRange<int64_t>(key, value, 1, kMaxAgentTimeoutMs));
  }
  return InRange<int64_t>("endpoint.max_attempts", e.max_attempts, 1, kMaxRetryAttempts,
                          " (attempts in total, retries included)");
}

}  // namespace

Status CheckAgentConfigRanges(const AgentConfig& c) {
  STRATA_RETURN_IF_ERROR(CheckBudgetRanges(c.budget));
  const size_t max_window = static_cast<size_t>(kMaxAgentWindowTokens);
  const AgentPolicyConfig& p = c.policy;
  STRATA_RETURN_IF_ERROR(InRange<size_t>("policy.keep_turns", p.keep_turns, 0, kMaxAgentCount));
  STRATA_RETURN_IF_ERROR(
      InRange<size_t>("policy.keep_tool_results", p.keep_tool_results, 0, kMaxAgentCount));
  STRATA_RETURN_IF_ERROR(
      InRange<size_t>("policy.max_summary_tokens", p.max_summary_tokens, 0, max_window));
  STRATA_RETURN_IF_ERROR(InRange<size_t>("policy.last_n", p.last_n, 0, kMaxAgentCount));
  const HygieneOptions& h = c.hygiene;
  STRATA_RETURN_IF_ERROR(
      InRange<size_t>("hygiene.max_segment_tokens", h.max_segment_tokens, 0, max_window));
  STRATA_RETURN_IF_ERROR(InRange("hygiene.head_share", h.head_share, 0.0, 1.0));
  STRATA_RETURN_IF_ERROR(
      InRange<size_t>("hygiene.min_repeat_run", h.min_repeat_run, 0, kMaxAgentCount));
  STRATA_RETURN_IF_ERROR(InRange<size_t>("hygiene.min_bytes", h.min_bytes, 0, max_window));
  STRATA_RETURN_IF_ERROR(InRange<size_t>("message_overhead_tokens", c.message_overhead_tokens, 0,
                                         kMaxMessageOverheadTokens));
  STRATA_RETURN_IF_ERROR(CheckEndpointRanges(c.endpoint));
  STRATA_RETURN_IF_ERROR(InRange<size_t>("cache.block_tokens", c.cache.block_tokens, 1, 65536));
  STRATA_RETURN_IF_ERROR(InRange<size_t>("cache.bytes_per_token", c.cache.bytes_per_token, 1, 64));
  STRATA_RETURN_IF_ERROR(
      InRange<size_t>("cache.capacity_blocks", c.cache.capacity_blocks, 0, size_t{1} << 32));
  STRATA_RETURN_IF_ERROR(
      InRange("recall.max_share_of_target", c.recall.max_share_of_target, 0.0, 1.0));
  return InRange<int64_t>("recall.protect_turns", c.recall.protect_turns, 0, kMaxAgentCount);
}

std::string AgentConfigToJson(const AgentConfig& c) {
  json j;
  j["identity"] = {{"id", c.identity.id},
                   {"tenant", c.identity.tenant},
                   {"scope", c.identity.scope},
                   {"model_version", c.identity.model_version},
                   {"template_version", c.identity.template_version}};
  j["tokenizer"] = c.tokenizer;
  j["chat_template"] = c.chat_template;
  json budget;
  budget["window"] = c.budget.window;
  if (c.budget.reserve_output) budget["reserve_output"] = *c.budget.reserve_output;
  if (c.budget.reserve_reasoning) budget["reserve_reasoning"] = *c.budget.reserve_reasoning;
  if (c.budget.reserve_headroom) budget["reserve_headroom"] = *c.budget.reserve_headroom;
  budget["trigger"] = LimitToJson(c.budget.trigger);
  budget["target"] = LimitToJson(c.budget.target);
  budget["enforce"] = c.budget.enforce;
  j["budget"] = budget;
  j["policy"] = {{"name", c.policy.name},
                 {"keep_turns", c.policy.keep_turns},
                 {"keep_tool_results", c.policy.keep_tool_results},
                 {"keep_first_user", c.policy.keep_first_user},
                 {"exclude_tools", c.policy.exclude_tools},
                 {"ephemeral_tools", c.policy.ephemeral_tools},
                 {"placeholder_identifiers", c.policy.placeholder_identifiers},
                 {"tokens_per_identifier", c.policy.tokens_per_identifier},
                 {"max_summary_tokens", c.policy.max_summary_tokens},
                 {"cost_model", c.policy.cost_model},
                 {"uncached_price", c.policy.uncached_price},
                 {"cached_price", c.policy.cached_price},
                 {"prior_remaining_turns", c.policy.prior_remaining_turns},
                 {"prior_weight", c.policy.prior_weight},
                 {"below_trigger_margin", c.policy.below_trigger_margin},
                 {"use_window_turns", c.policy.use_window_turns},
                 {"mask_after_use", c.policy.mask_after_use},
                 {"last_n", c.policy.last_n}};
  j["hygiene"] = {{"max_segment_tokens", c.hygiene.max_segment_tokens},
                  {"head_share", c.hygiene.head_share},
                  {"deduplicate", c.hygiene.deduplicate},
                  {"fold_error_logs", c.hygiene.fold_error_logs},
                  {"min_repeat_run", c.hygiene.min_repeat_run},
                  {"min_bytes", c.hygiene.min_bytes}};
  j["render"] = {{"model", c.render.model},
                 {"system_layout", SystemLayoutName(c.render.system_layout)},
                 {"reasoning_field", c.render.reasoning_field},
                 {"volatile_role", c.render.volatile_role}};
  j["keep_originals"] = c.keep_originals;
  j["message_overhead_tokens"] = c.message_overhead_tokens;
  const AgentEndpointConfig& e = c.endpoint;
  json endpoint = {
      {"backend", e.backend},         {"base_url", e.base_url},
      {"api_key_env", e.api_key_env}, {"deployment_secret_env", e.deployment_secret_env},
      {"stream", e.stream},           {"max_output_tokens", e.max_output_tokens}};
  endpoint["thinking"] = e.thinking ? json(*e.thinking) : json(nullptr);
  endpoint["reasoning_effort"] = e.reasoning_effort;
  endpoint["send_cache_salt"] = e.send_cache_salt;
  endpoint["deadline_ms"] = e.deadline_ms;
  endpoint["connect_timeout_ms"] = e.connect_timeout_ms;
  endpoint["first_byte_timeout_ms"] = e.first_byte_timeout_ms;
  endpoint["idle_timeout_ms"] = e.idle_timeout_ms;
  endpoint["total_timeout_ms"] = e.total_timeout_ms;
  endpoint["max_attempts"] = e.max_attempts;
  j["endpoint"] = endpoint;
  j["cache"] = {{"block_tokens", c.cache.block_tokens},
                {"bytes_per_token", c.cache.bytes_per_token},
                {"capacity_blocks", c.cache.capacity_blocks}};
  j["recall"] = {{"expose_tool", c.recall.expose_tool},
                 {"max_share_of_target", c.recall.max_share_of_target},
                 {"protect_turns", c.recall.protect_turns}};
  j["store_path"] = c.store_path;
  return j.dump();
}

StatusOr<AgentConfig> AgentConfigFromJson(std::string_view text) {
  // Printing a value in a message recurses once per level: refuse a hostile nesting first.
  STRATA_RETURN_IF_ERROR(internal::CheckJsonDepth(text, "agent configuration"));
  json root = json::parse(text.begin(), text.end(), nullptr, false);
  if (root.is_discarded()) {
    return InvalidArgumentError("agent configuration is not valid JSON: " +
                                internal::Utf8Prefix(text, 80));
  }
  AgentConfig c;
  ObjectReader r(root, "");
  STRATA_RETURN_IF_ERROR(r.Check());
  STRATA_RETURN_IF_ERROR(r.Object("identity", [&](ObjectReader& o) -> Status {
    STRATA_RETURN_IF_ERROR(o.String("id", &c.identity.id));
    STRATA_RETURN_IF_ERROR(o.String("tenant", &c.identity.tenant));
    STRATA_RETURN_IF_ERROR(o.String("scope", &c.identity.scope));
    STRATA_RETURN_IF_ERROR(o.String("model_version", &c.identity.model_version));
    return o.String("template_version", &c.identity.template_version);
  }));
  STRATA_RETURN_IF_ERROR(r.String("tokenizer", &c.tokenizer));
  STRATA_RETURN_IF_ERROR(r.String("chat_template", &c.chat_template));
  STRATA_RETURN_IF_ERROR(r.Object("budget", [&](ObjectReader& o) -> Status {
    STRATA_RETURN_IF_ERROR(o.Int("window", &c.budget.window));
    STRATA_RETURN_IF_ERROR(o.OptInt("reserve_output", &c.budget.reserve_output));
    STRATA_RETURN_IF_ERROR(o.OptInt("reserve_reasoning", &c.budget.reserve_reasoning));
    STRATA_RETURN_IF_ERROR(o.OptInt("reserve_headroom", &c.budget.reserve_headroom));
    STRATA_RETURN_IF_ERROR(o.Limit("trigger", &c.budget.trigger));
    STRATA_RETURN_IF_ERROR(o.Limit("target", &c.budget.target));
    return o.Bool("enforce", &c.budget.enforce);
  }));
  STRATA_RETURN_IF_ERROR(
      r.Object("policy", [&](ObjectReader& o) { return ReadPolicy(o, &c.policy); }));
  STRATA_RETURN_IF_ERROR(r.Object("hygiene", [&](ObjectReader& o) -> Status {
    STRATA_RETURN_IF_ERROR(o.Size("max_segment_tokens", &c.hygiene.max_segment_tokens));
    STRATA_RETURN_IF_ERROR(o.Number("head_share", &c.hygiene.head_share));
    STRATA_RETURN_IF_ERROR(o.Bool("deduplicate", &c.hygiene.deduplicate));
    STRATA_RETURN_IF_ERROR(o.Bool("fold_error_logs", &c.hygiene.fold_error_logs));
    STRATA_RETURN_IF_ERROR(o.Size("min_repeat_run", &c.hygiene.min_repeat_run));
    return o.Size("min_bytes", &c.hygiene.min_bytes);
  }));
  STRATA_RETURN_IF_ERROR(r.Object("render", [&](ObjectReader& o) -> Status {
    STRATA_RETURN_IF_ERROR(o.String("model", &c.render.model));
    std::string layout = SystemLayoutName(c.render.system_layout);
    STRATA_RETURN_IF_ERROR(o.String("system_layout", &layout));
    if (layout == "single_message") {
      c.render.system_layout = SystemLayout::kSingleMessage;
    } else if (layout == "message_per_segment") {
      c.render.system_layout = SystemLayout::kMessagePerSegment;
    } else {
      return InvalidArgumentError("render.system_layout: \"" + layout +
                                  "\" is not a layout (single_message, message_per_segment)");
    }
    STRATA_RETURN_IF_ERROR(o.String("reasoning_field", &c.render.reasoning_field));
    return o.String("volatile_role", &c.render.volatile_role);
  }));
  STRATA_RETURN_IF_ERROR(r.Bool("keep_originals", &c.keep_originals));
  STRATA_RETURN_IF_ERROR(r.Size("message_overhead_tokens", &c.message_overhead_tokens));
  STRATA_RETURN_IF_ERROR(r.Object("endpoint", [&](ObjectReader& o) -> Status {
    AgentEndpointConfig& e = c.endpoint;
    STRATA_RETURN_IF_ERROR(o.String("backend", &e.backend));
    STRATA_RETURN_IF_ERROR(o.String("base_url", &e.base_url));
    STRATA_RETURN_IF_ERROR(o.String("api_key_env", &e.api_key_env));
    STRATA_RETURN_IF_ERROR(o.String("deployment_secret_env", &e.deployment_secret_env));
    STRATA_RETURN_IF_ERROR(o.Bool("stream", &e.stream));
    STRATA_RETURN_IF_ERROR(o.Int("max_output_tokens", &e.max_output_tokens));
    STRATA_RETURN_IF_ERROR(o.OptBool("thinking", &e.thinking));
    STRATA_RETURN_IF_ERROR(o.String("reasoning_effort", &e.reasoning_effort));
    STRATA_RETURN_IF_ERROR(o.Bool("send_cache_salt", &e.send_cache_salt));
    STRATA_RETURN_IF_ERROR(o.Int("deadline_ms", &e.deadline_ms));
    STRATA_RETURN_IF_ERROR(o.Int("connect_timeout_ms", &e.connect_timeout_ms));
    STRATA_RETURN_IF_ERROR(o.Int("first_byte_timeout_ms", &e.first_byte_timeout_ms));
    STRATA_RETURN_IF_ERROR(o.Int("idle_timeout_ms", &e.idle_timeout_ms));
    STRATA_RETURN_IF_ERROR(o.Int("total_timeout_ms", &e.total_timeout_ms));
    return o.Int32("max_attempts", &e.max_attempts);
  }));
  STRATA_RETURN_IF_ERROR(r.Object("cache", [&](ObjectReader& o) -> Status {
    STRATA_RETURN_IF_ERROR(o.Size("block_tokens", &c.cache.block_tokens));
    STRATA_RETURN_IF_ERROR(o.Size("bytes_per_token", &c.cache.bytes_per_token));
    return o.Size("capacity_blocks", &c.cache.capacity_blocks);
  }));
  STRATA_RETURN_IF_ERROR(r.Object("recall", [&](ObjectReader& o) -> Status {
    STRATA_RETURN_IF_ERROR(o.Bool("expose_tool", &c.recall.expose_tool));
    STRATA_RETURN_IF_ERROR(o.Number("max_share_of_target", &c.recall.max_share_of_target));
    return o.Int("protect_turns", &c.recall.protect_turns);
  }));
  STRATA_RETURN_IF_ERROR(r.String("store_path", &c.store_path));
  STRATA_RETURN_IF_ERROR(r.Finish());
  STRATA_RETURN_IF_ERROR(CheckAgentConfigRanges(c));
  return c;
}

StatusOr<Budget> ResolveBudget(const AgentBudgetConfig& config) {
  Budget budget;
  budget.window = config.window;
  if (config.window <= 0) {
    return InvalidArgumentError("budget.window " + std::to_string(config.window) +
                                " must be positive (the model's context length, e.g. 1048576)");
  }
  budget.reserve_output =
      config.reserve_output.value_or(std::min<int64_t>(32768, config.window / 8));
  budget.reserve_reasoning =
      config.reserve_reasoning.value_or(std::min<int64_t>(16384, config.window / 16));
  budget.reserve_headroom =
      config.reserve_headroom.value_or(std::min<int64_t>(16384, config.window / 16));
  budget.trigger = config.trigger;
  budget.target = config.target;
  // Reserves must leave at least a quarter of the window for input; name the reserve to lower.
  const int64_t min_input = std::max<int64_t>(1, config.window / 4);
  const int64_t reserves =
      budget.reserve_output + budget.reserve_reasoning + budget.reserve_headroom;
  if (budget.reserve_output >= 0 && budget.reserve_reasoning >= 0 && budget.reserve_headroom >= 0 &&
      config.window - reserves < min_input) {
    const std::pair<const char*, int64_t> all[] = {{"reserve_output", budget.reserve_output},
                                                   {"reserve_reasoning", budget.reserve_reasoning},
                                                   {"reserve_headroom", budget.reserve_headroom}};
    const auto* largest =
        std::max_element(std::begin(all), std::end(all),
                         [](const auto& a, const auto& b) { return a.second < b.second; });
    const int64_t excess = min_input - (config.window - reserves);
    return InvalidArgumentError(
        "budget reserves (" + std::to_string(reserves) + " tokens) leave " +
        std::to_string(config.window - reserves) + " of the window of " +
        std::to_string(config.window) + " tokens for input, less than a quarter (" +
        std::to_string(min_input) + "): lower budget." + largest->first + " by at least " +
        std::to_string(excess) + " tokens (from " + std::to_string(largest->second) + " to " +
        std::to_string(std::max<int64_t>(0, largest->second - excess)) +
        "), or leave the reserves unset so that they scale with the window");
  }
  STRATA_RETURN_IF_ERROR(budget.Validate());
  return budget;
}

}  // namespace strata
