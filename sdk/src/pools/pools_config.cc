// A pool set's configuration: its JSON and the degradation steps' names (pools_impl.h).
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "strata/pools.h"

namespace strata {

std::string DegradationStepName(DegradationStep step) {
  switch (step) {
    case DegradationStep::kCompact:
      return "compact";
    case DegradationStep::kFork:
      return "fork";
    case DegradationStep::kWait:
      return "wait";
    case DegradationStep::kRefuse:
      return "refuse";
  }
  return "unknown";
}

StatusOr<DegradationStep> ParseDegradationStep(const std::string& name) {
  if (name == "compact") return DegradationStep::kCompact;
  if (name == "fork") return DegradationStep::kFork;
  if (name == "wait") return DegradationStep::kWait;
  if (name == "refuse") return DegradationStep::kRefuse;
  return InvalidArgumentError("unknown degradation step \"" + name +
                              "\" (known: compact, fork, wait, refuse)");
}

namespace {

// A JSON array of degradation step names into *out; INVALID_ARGUMENT naming `field`.
Status ParseSteps(const nlohmann::json& value, const std::string& field,
                  std::vector<DegradationStep>* out) {
  if (!value.is_array()) return InvalidArgumentError("\"" + field + "\" must be an array of steps");
  out->clear();
  for (const nlohmann::json& s : value) {
    if (!s.is_string())
      return InvalidArgumentError("\"" + field + "\" holds a non-string: " + s.dump());
    StatusOr<DegradationStep> step = ParseDegradationStep(s.get<std::string>());
    if (!step.ok()) return InvalidArgumentError("\"" + field + "\": " + step.status().message());
    out->push_back(*step);
  }
  return Status();
}

// A JSON number into *out; INVALID_ARGUMENT naming `field` and the value otherwise.
Status ParseNumber(const nlohmann::json& value, const std::string& field, double* out) {
  if (!value.is_number()) {
    return InvalidArgumentError("\"" + field + "\" must be a number, got " + value.dump());
  }
  *out = value.get<double>();
  return Status();
}

// Entry `index` of "pools"; INVALID_ARGUMENT naming the field ("pools[1].max_queue").
StatusOr<PoolConfig> ParsePoolConfig(const nlohmann::json& p, size_t index) {
  using nlohmann::json;
  const std::string where = "pools[" + std::to_string(index) + "]";
  if (!p.is_object()) return InvalidArgumentError(where + " is not an object");
  double x = 0;
  PoolConfig pool;
  for (auto pit = p.begin(); pit != p.end(); ++pit) {
    const std::string field = where + "." + pit.key();
    const json& pv = pit.value();
    if (pit.key() == "name") {
      if (!pv.is_string()) return InvalidArgumentError("\"" + field + "\" must be a string");
      pool.name = pv.get<std::string>();
    } else if (pit.key() == "endpoints") {
      if (!pv.is_array()) return InvalidArgumentError("\"" + field + "\" must be an array of URLs");
      for (const json& e : pv) {
        if (!e.is_string())
          return InvalidArgumentError("\"" + field + "\" holds a non-string: " + e.dump());
        pool.endpoints.push_back(e.get<std::string>());
      }
    } else if (pit.key() == "max_input_tokens") {
      STRATA_RETURN_IF_ERROR(ParseNumber(pv, field, &x));
      pool.max_input_tokens = static_cast<int64_t>(x);
    } else if (pit.key() == "max_concurrency") {
      STRATA_RETURN_IF_ERROR(ParseNumber(pv, field, &x));
      pool.max_concurrency = static_cast<int>(x);
    } else if (pit.key() == "max_queue") {
      STRATA_RETURN_IF_ERROR(ParseNumber(pv, field, &x));
      pool.max_queue = static_cast<int>(x);
    } else if (pit.key() == "queue_timeout_ms") {
      STRATA_RETURN_IF_ERROR(ParseNumber(pv, field, &x));
      pool.queue_timeout = std::chrono::milliseconds(static_cast<int64_t>(x));
    } else if (pit.key() == "output_reserve_tokens") {
      STRATA_RETURN_IF_ERROR(ParseNumber(pv, field, &x));
      pool.output_reserve_tokens = static_cast<int64_t>(x);
    } else {
      return InvalidArgumentError("unknown key \"" + field +
                                  "\" (known: name, max_input_tokens, endpoints, "
                                  "max_concurrency, max_queue, queue_timeout_ms, "
                                  "output_reserve_tokens)");
    }
  }
  return pool;
}

}  // namespace

StatusOr<PoolSetConfig> ParsePoolSetConfig(std::string_view json_text) {
  using nlohmann::json;
  json j = json::parse(json_text.begin(), json_text.end(), nullptr, false);
  if (j.is_discarded() || !j.is_object()) {
    return InvalidArgumentError("pool config is not a JSON object");
  }
  PoolSetConfig config;
  for (auto it = j.begin(); it != j.end(); ++it) {
    const std::string& k = it.key();
    const json& v = it.value();
    double x = 0;
    if (k == "pools") {
      if (!v.is_array()) return InvalidArgumentError("\"pools\" must be an array");
      for (size_t i = 0; i < v.size(); ++i) {
        STRATA_ASSIGN_OR_RETURN(PoolConfig pool, ParsePoolConfig(v[i], i));
        config.pools.push_back(std::move(pool));
      }
    } else if (k == "ladder") {
      STRATA_RETURN_IF_ERROR(ParseSteps(v, k, &config.ladder));
    } else if (k == "alert_ladder") {
      STRATA_RETURN_IF_ERROR(ParseSteps(v, k, &config.alert_ladder));
    } else if (k == "turn_reserve_tokens") {
      STRATA_RETURN_IF_ERROR(ParseNumber(v, k, &x));
      config.turn_reserve_tokens = static_cast<int64_t>(x);
    } else if (k == "load_factor") {
      STRATA_RETURN_IF_ERROR(ParseNumber(v, k, &config.load_factor));
    } else if (k == "virtual_nodes") {
      STRATA_RETURN_IF_ERROR(ParseNumber(v, k, &x));
      config.virtual_nodes = static_cast<int>(x);
    } else if (k == "affinity_prefix_bytes") {
      STRATA_RETURN_IF_ERROR(ParseNumber(v, k, &x));
      config.affinity_prefix_bytes = static_cast<size_t>(std::max(0.0, x));
    } else if (k == "unhealthy_after_failures") {
      STRATA_RETURN_IF_ERROR(ParseNumber(v, k, &x));
      config.unhealthy_after_failures = static_cast<int>(x);
    } else if (k == "unhealthy_cooldown_ms") {
      STRATA_RETURN_IF_ERROR(ParseNumber(v, k, &x));
      config.unhealthy_cooldown = std::chrono::milliseconds(static_cast<int64_t>(x));
    } else if (k == "kv_capacity_tokens") {
      STRATA_RETURN_IF_ERROR(ParseNumber(v, k, &x));
      config.kv_capacity_tokens = static_cast<int64_t>(x);
    } else if (k == "kv_watermark") {
      STRATA_RETURN_IF_ERROR(ParseNumber(v, k, &config.kv_watermark));
    } else if (k == "long_share_watermark") {
      STRATA_RETURN_IF_ERROR(ParseNumber(v, k, &config.long_share_watermark));
    } else if (k == "long_share_window") {
      STRATA_RETURN_IF_ERROR(ParseNumber(v, k, &x));
      config.long_share_window = static_cast<int>(x);
    } else if (k == "alert_long_max_concurrency") {
      STRATA_RETURN_IF_ERROR(ParseNumber(v, k, &x));
      config.alert_long_max_concurrency = static_cast<int>(x);
    } else {
      return InvalidArgumentError(
          "unknown key \"" + k +
          "\" (known: pools, ladder, alert_ladder, turn_reserve_tokens, load_factor, "
          "virtual_nodes, affinity_prefix_bytes, unhealthy_after_failures, unhealthy_cooldown_ms, "
          "kv_capacity_tokens, kv_watermark, long_share_watermark, long_share_window, "
          "alert_long_max_concurrency)");
    }
  }
  return config;
}

}  // namespace strata
