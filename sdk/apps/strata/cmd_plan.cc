// `strata plan`: sizes a deployment's KV cache (strata/kv_plan.h). A table for people, or one JSON
// object with --json.
#include <cstdio>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "commands.h"
#include "strata/kv_plan.h"

namespace strata::cli {
namespace {

struct PlanArgs {
  std::string model = "glm-5.3-flash";
  bool list = false;
  std::string kv_dtype;
  int gpus = 0;
  double gpu_memory_gib = 0;
  double utilization = 0;
  double weights_gib = -1;
  double overhead_gib = -1;
  int block_tokens = 0;
  double headroom = -1;
  int64_t output_reserve = -1;
  bool json = false;
};

std::string Human(double bytes) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  int unit = 0;
  while (bytes >= 1024 && unit < 4) {
    bytes /= 1024;
    ++unit;
  }
  char out[32];
  std::snprintf(out, sizeof(out), unit == 0 ? "%.0f %s" : "%.2f %s", bytes, units[unit]);
  return out;
}

std::string LengthName(int64_t tokens) {
  if (tokens % 1048576 == 0) return std::to_string(tokens / 1048576) + "M";
  if (tokens % 1024 == 0) return std::to_string(tokens / 1024) + "K";
  return std::to_string(tokens);
}

void List() {
  for (const ModelProfile& p : ModelProfiles()) {
    std::cout << p.name << "\n  " << p.description << "\n  source: " << p.source
              << "\n  weights: " << p.weights_gib << " GiB (" << p.weights_note
              << "), default deployment: " << p.default_deployment.gpus << " x "
              << p.default_deployment.gpu_memory_gib << " GiB, KV "
              << KvDtypeName(p.default_deployment.kv_dtype) << "\n";
  }
}

void Run(const PlanArgs& args) {
  if (args.list) {
    List();
    return;
  }
  StatusOr<ModelProfile> model = FindModelProfile(args.model);
  if (!model.ok()) throw CLI::ValidationError("--model", model.status().message());
  DeploymentOptions d = model->default_deployment;
  if (!args.kv_dtype.empty()) {
    StatusOr<KvDtype> dtype = ParseKvDtype(args.kv_dtype);
    if (!dtype.ok()) throw CLI::ValidationError("--kv-dtype", dtype.status().message());
    d.kv_dtype = *dtype;
  }
  if (args.gpus != 0) d.gpus = args.gpus;
  if (args.gpu_memory_gib != 0) d.gpu_memory_gib = args.gpu_memory_gib;
  if (args.utilization != 0) d.gpu_memory_utilization = args.utilization;
  if (args.weights_gib >= 0) d.weights_gib = args.weights_gib;
  if (args.overhead_gib >= 0) d.overhead_gib_per_gpu = args.overhead_gib;
  if (args.block_tokens != 0) d.block_tokens = args.block_tokens;
  if (args.headroom >= 0) d.headroom = args.headroom;
  if (args.output_reserve >= 0) d.output_reserve_tokens = args.output_reserve;
  StatusOr<KvPlan> plan = PlanKv(*model, d);
  if (!plan.ok()) {
    if (plan.status().code() == StatusCode::kInvalidArgument) {
      throw CLI::ValidationError("plan", plan.status().message());
    }
    throw CommandFailed{plan.status().message()};
  }
  if (args.json) {
    nlohmann::ordered_json out;
    out["model"] = plan->model;
    out["kv_dtype"] = KvDtypeName(plan->kv_dtype);
    out["gpus"] = d.gpus;
    out["gpu_memory_gib"] = d.gpu_memory_gib;
    out["gpu_memory_utilization"] = d.gpu_memory_utilization;
    out["weights_gib"] = plan->weights_gib;
    out["overhead_gib_per_gpu"] = d.overhead_gib_per_gpu;
    out["block_tokens"] = d.block_tokens;
    out["headroom"] = d.headroom;
    out["output_reserve_tokens"] = d.output_reserve_tokens;
    out["kv_bytes_per_token"] = plan->kv_bytes_per_token;
    out["kv_bytes_per_token_per_gpu"] = plan->kv_bytes_per_token_per_gpu;
    out["state_bytes_per_sequence"] = plan->state_bytes_per_sequence;
    out["kv_memory_gib_per_gpu"] = plan->kv_memory_gib_per_gpu;
    out["kv_capacity_tokens"] = plan->kv_capacity_tokens;
    nlohmann::ordered_json concurrency = nlohmann::ordered_json::object();
    nlohmann::ordered_json exceeds = nlohmann::ordered_json::array();
    for (const PoolPlan& pool : plan->pools) {
      concurrency[std::to_string(pool.pool_length)] = pool.max_concurrency;
      if (pool.exceeds_context) exceeds.push_back(std::to_string(pool.pool_length));
    }
    out["max_concurrency"] = concurrency;
    out["exceeds_context"] = exceeds;
    out["source"] = model->source;
    std::cout << out.dump(2) << "\n";
    return;
  }
  std::printf("model          %s (%s)\n", plan->model.c_str(), model->description.c_str());
  std::printf(
      "deployment     %d x %.1f GiB GPUs at %.0f%%, weights %.1f GiB, overhead %.1f GiB/GPU\n",
      d.gpus, d.gpu_memory_gib, d.gpu_memory_utilization * 100, plan->weights_gib,
      d.overhead_gib_per_gpu);
  std::printf("KV dtype       %s, %d-token blocks, %.0f%% headroom\n",
              KvDtypeName(plan->kv_dtype).c_str(), d.block_tokens, d.headroom * 100);
  std::printf("KV per token   %s (%lld B) per model copy, %s per GPU\n",
              Human(static_cast<double>(plan->kv_bytes_per_token)).c_str(),
              static_cast<long long>(plan->kv_bytes_per_token),
              Human(plan->kv_bytes_per_token_per_gpu).c_str());
  if (plan->state_bytes_per_sequence > 0) {
    std::printf("state per seq  %s (linear attention), %s per GPU\n",
                Human(static_cast<double>(plan->state_bytes_per_sequence)).c_str(),
                Human(plan->state_bytes_per_sequence_per_gpu).c_str());
  }
  std::printf("KV memory      %.2f GiB per GPU\n", plan->kv_memory_gib_per_gpu);
  std::printf("KV capacity    %lld tokens\n\n", static_cast<long long>(plan->kv_capacity_tokens));
  std::printf("%-8s %14s %16s\n", "pool", "per sequence", "max concurrent");
  for (const PoolPlan& pool : plan->pools) {
    if (pool.exceeds_context) {
      std::printf("%-8s %14s %16s\n", LengthName(pool.pool_length).c_str(), "-", "over context");
    } else {
      std::printf("%-8s %14s %16lld\n", LengthName(pool.pool_length).c_str(),
                  Human(static_cast<double>(pool.bytes_per_sequence)).c_str(),
                  static_cast<long long>(pool.max_concurrency));
    }
  }
  std::printf("\nsource: %s\n", model->source.c_str());
}

}  // namespace

void RegisterPlan(CLI::App& app) {
  auto args = std::make_shared<PlanArgs>();
  CLI::App* cmd = app.add_subcommand(
      "plan", "Size a deployment's KV cache: bytes per token, capacity, safe concurrency per pool");
  cmd->add_option("--model", args->model, "Model profile (see --list); default glm-5.3-flash");
  cmd->add_flag("--list", args->list, "List the model profiles with their sources");
  cmd->add_option("--kv-dtype", args->kv_dtype,
                  "KV cache precision: bf16 or fp8 (default: the profile's)");
  cmd->add_option("--gpus", args->gpus, "GPUs per replica (tensor parallel)")
      ->check(CLI::PositiveNumber);
  cmd->add_option("--gpu-memory-gib", args->gpu_memory_gib, "Memory of one GPU in GiB")
      ->check(CLI::PositiveNumber);
  cmd->add_option("--gpu-memory-utilization", args->utilization,
                  "Share of GPU memory the server uses (default 0.90)")
      ->check(CLI::Range(0.01, 1.0));
  cmd->add_option("--weights-gib", args->weights_gib, "Weights of the whole model in GiB")
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--overhead-gib", args->overhead_gib,
                  "Activations and runtime per GPU (default 4)")
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--block-tokens", args->block_tokens, "Tokens per KV page (default 16)")
      ->check(CLI::PositiveNumber);
  cmd->add_option("--headroom", args->headroom, "Share of KV memory kept free (default 0.10)")
      ->check(CLI::Range(0.0, 0.99));
  cmd->add_option("--output-reserve", args->output_reserve,
                  "Tokens reserved per sequence for output (default 0)")
      ->check(CLI::NonNegativeNumber);
  cmd->add_flag("--json", args->json,
                "Print one JSON object (kv_bytes_per_token, kv_capacity_tokens, max_concurrency)");
  cmd->footer("Exit status: 0 ok, 2 usage error, 1 when the weights leave no memory for KV.");
  cmd->callback([args] { Run(*args); });
}

}  // namespace strata::cli
