// The KV-cache planner: bytes per token, KV capacity and safe concurrency per pool length.
#include "strata/kv_plan.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <sstream>

namespace strata {
namespace {

constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;

std::string Fixed(double value, int digits) {
  std::ostringstream out;
  out.setf(std::ios::fixed);
  out.precision(digits);
  out << value;
  return out.str();
}

// Bytes one token adds to one layer of `group` (0 for linear attention).
double TokenBytesPerLayer(const LayerGroup& group, KvDtype dtype) {
  double bytes = 0;
  switch (group.kind) {
    case LayerGroup::Kind::kGqa: {
      const double values = 2.0 * group.kv_heads * group.head_dim;
      bytes = dtype == KvDtype::kFp8 ? values : 2.0 * values;
      break;
    }
    case LayerGroup::Kind::kMla: {
      const double values = static_cast<double>(group.kv_lora_rank) + group.rope_dim;
      if (dtype == KvDtype::kFp8) {
        bytes = group.fp8_entry_bytes > 0 ? group.fp8_entry_bytes : values;
      } else {
        bytes = 2.0 * values;
      }
      break;
    }
    case LayerGroup::Kind::kLinear:
      return 0;
  }
  if (group.side_entry_bytes > 0) {
    bytes += static_cast<double>(group.side_entry_bytes) / std::max(1, group.side_pool);
  }
  return bytes;
}

// How many ranks share (split) one token's entry of `group` under tensor parallelism.
double SplitFactor(const LayerGroup& group, int gpus) {
  switch (group.kind) {
    case LayerGroup::Kind::kGqa:
      return std::max(1, std::min(gpus, group.kv_heads));
    case LayerGroup::Kind::kMla:
      return 1;  // the latent serves every head: each rank keeps all of it
    case LayerGroup::Kind::kLinear:
      return std::max(1, std::min(gpus, group.heads));
  }
  return 1;
}

ModelProfile Glm53Flash() {
  ModelProfile p;
  p.name = "glm-5.3-flash";
  p.description =
      "GLM-5.3-Flash (320B MoE, 18B active): 34 KDA linear-attention + 11 sparse MLA layers, 1M "
      "context";
  p.source =
      "zai-org/GLM-5.3-Flash config.json: 45 layers = 34 KDA (64 heads x 128 key x 128 value, "
      "fp32 state) + 11 DSA layers (MLA, kv_lora_rank 512, qk_rope_head_dim 0; fp8 entry 656 B as "
      "in FlashMLA's sparse fp8 layout); lightning indexer keys 132 B (128 fp8 + fp32 scale) "
      "pooled 4:1 (index_kpool 4)";
  LayerGroup mla;
  mla.kind = LayerGroup::Kind::kMla;
  mla.layers = 11;
  mla.kv_lora_rank = 512;
  mla.rope_dim = 0;
  mla.fp8_entry_bytes = 656;
  mla.side_entry_bytes = 132;
  mla.side_pool = 4;
  LayerGroup kda;
  kda.kind = LayerGroup::Kind::kLinear;
  kda.layers = 34;
  kda.heads = 64;
  kda.key_dim = 128;
  kda.value_dim = 128;
  kda.state_bytes_per_value = 4;
  p.groups = {mla, kda};
  p.weights_gib = 298;  // 320e9 parameters at one byte (FP8 checkpoint)
  p.weights_note = "FP8 checkpoint, 320B parameters at 1 byte";
  p.max_context_tokens = 1048576;
  p.default_deployment.kv_dtype = KvDtype::kFp8;
  p.default_deployment.gpus = 8;
  p.default_deployment.gpu_memory_gib = 80;
  return p;
}

ModelProfile DeepSeekV3() {
  ModelProfile p;
  p.name = "deepseek-v3";
  p.description = "DeepSeek-V3 (671B MoE, 37B active): 61 MLA layers, 128K context";
  p.source =
      "deepseek-ai/DeepSeek-V3 config.json: num_hidden_layers 61, kv_lora_rank 512, "
      "qk_rope_head_dim 64, max_position_embeddings 163840; fp8 cache: the 576-value latent at 1 "
      "byte";
  LayerGroup mla;
  mla.kind = LayerGroup::Kind::kMla;
  mla.layers = 61;
  mla.kv_lora_rank = 512;
  mla.rope_dim = 64;
  p.groups = {mla};
  p.weights_gib = 625;  // 671e9 parameters at one byte (FP8 checkpoint)
  p.weights_note = "FP8 checkpoint, 671B parameters at 1 byte";
  p.max_context_tokens = 163840;
  p.default_deployment.kv_dtype = KvDtype::kBf16;
  p.default_deployment.gpus = 8;
  p.default_deployment.gpu_memory_gib = 140;  // H200
  return p;
}

ModelProfile Llama(const std::string& name, int layers, double weights_gib, const std::string& note,
                   int gpus, double gpu_gib, KvDtype dtype) {
  ModelProfile p;
  p.name = name;
  p.description = "Llama " + name.substr(6) + " (dense, GQA 8 KV heads x 128), 128K context";
  p.source = "meta-llama/Llama-" + name.substr(6) + " config.json: num_hidden_layers " +
             std::to_string(layers) +
             ", num_key_value_heads 8, head_dim 128 (hidden_size / num_attention_heads), "
             "max_position_embeddings 131072";
  LayerGroup gqa;
  gqa.kind = LayerGroup::Kind::kGqa;
  gqa.layers = layers;
  gqa.kv_heads = 8;
  gqa.head_dim = 128;
  p.groups = {gqa};
  p.weights_gib = weights_gib;
  p.weights_note = note;
  p.max_context_tokens = 131072;
  p.default_deployment.kv_dtype = dtype;
  p.default_deployment.gpus = gpus;
  p.default_deployment.gpu_memory_gib = gpu_gib;
  return p;
}

}  // namespace

std::string KvDtypeName(KvDtype dtype) { return dtype == KvDtype::kFp8 ? "fp8" : "bf16"; }

StatusOr<KvDtype> ParseKvDtype(const std::string& name) {
  if (name == "bf16" || name == "bfloat16" || name == "auto") return KvDtype::kBf16;
  if (name == "fp8" || name == "fp8_e4m3") return KvDtype::kFp8;
  return InvalidArgumentError("unknown KV dtype \"" + name + "\" (known: bf16, fp8)");
}

const std::vector<ModelProfile>& ModelProfiles() {
  static const std::vector<ModelProfile>* profiles = new std::vector<ModelProfile>{
      Glm53Flash(), DeepSeekV3(),
      Llama("llama-3.1-70b", 80, 131.5, "BF16 checkpoint, 70.6B parameters at 2 bytes", 4, 80,
            KvDtype::kBf16),
      Llama("llama-3.1-405b", 126, 378, "FP8 checkpoint, 405.9B parameters at 1 byte", 8, 80,
            KvDtype::kFp8)};
  return *profiles;
}

StatusOr<ModelProfile> FindModelProfile(const std::string& name) {
  std::string known;
  for (const ModelProfile& p : ModelProfiles()) {
    if (p.name == name) return p;
    known += (known.empty() ? "" : ", ") + p.name;
  }
  return NotFoundError("unknown model profile \"" + name + "\" (known: " + known + ")");
}

StatusOr<KvPlan> PlanKv(const ModelProfile& model, const DeploymentOptions& d) {
  if (d.gpus < 1) return InvalidArgumentError("gpus must be >= 1, got " + std::to_string(d.gpus));
  if (!(d.gpu_memory_gib > 0)) {
    return InvalidArgumentError("GPU memory must be > 0 GiB, got " + Fixed(d.gpu_memory_gib, 2));
  }
  if (!(d.gpu_memory_utilization > 0 && d.gpu_memory_utilization <= 1)) {
    return InvalidArgumentError("GPU memory utilization must be in (0, 1], got " +
                                Fixed(d.gpu_memory_utilization, 3));
  }
  if (!(d.headroom >= 0 && d.headroom < 1)) {
    return InvalidArgumentError("headroom must be in [0, 1), got " + Fixed(d.headroom, 3));
  }
  if (d.block_tokens < 1) {
    return InvalidArgumentError("block size must be >= 1 token, got " +
                                std::to_string(d.block_tokens));
  }
  if (d.overhead_gib_per_gpu < 0) {
    return InvalidArgumentError("overhead must be >= 0 GiB, got " +
                                Fixed(d.overhead_gib_per_gpu, 2));
  }
  if (d.output_reserve_tokens < 0) {
    return InvalidArgumentError("output reserve must be >= 0 tokens, got " +
                                std::to_string(d.output_reserve_tokens));
  }
  for (int64_t length : d.pool_lengths) {
    if (length < 1) {
      return InvalidArgumentError("pool length must be >= 1 token, got " + std::to_string(length));
    }
  }

  KvPlan plan;
  plan.model = model.name;
  plan.kv_dtype = d.kv_dtype;
  plan.deployment = d;
  plan.weights_gib = d.weights_gib >= 0 ? d.weights_gib : model.weights_gib;

  double token_bytes = 0, token_bytes_gpu = 0, state_bytes = 0, state_bytes_gpu = 0;
  for (const LayerGroup& g : model.groups) {
    if (g.kind == LayerGroup::Kind::kLinear) {
      const double state = static_cast<double>(g.layers) * g.heads * g.key_dim * g.value_dim *
                           g.state_bytes_per_value;
      state_bytes += state;
      state_bytes_gpu += state / SplitFactor(g, d.gpus);
    } else {
      const double per_token = g.layers * TokenBytesPerLayer(g, d.kv_dtype);
      token_bytes += per_token;
      token_bytes_gpu += per_token / SplitFactor(g, d.gpus);
    }
  }
  if (!(token_bytes > 0)) {
    return InvalidArgumentError("model profile \"" + model.name +
                                "\" has no layer whose cache grows per token");
  }
  plan.kv_bytes_per_token = static_cast<int64_t>(std::llround(token_bytes));
  plan.kv_bytes_per_token_per_gpu = token_bytes_gpu;
  plan.state_bytes_per_sequence = static_cast<int64_t>(std::llround(state_bytes));
  plan.state_bytes_per_sequence_per_gpu = state_bytes_gpu;

  const double kv_gib = d.gpu_memory_gib * d.gpu_memory_utilization - plan.weights_gib / d.gpus -
                        d.overhead_gib_per_gpu;
  if (!(kv_gib > 0)) {
    return ResourceExhaustedError(
        "no memory left for KV cache on " + model.name + ": " + std::to_string(d.gpus) + " x " +
        Fixed(d.gpu_memory_gib, 1) + " GiB at " + Fixed(d.gpu_memory_utilization * 100, 0) +
        "% leaves " + Fixed(d.gpu_memory_gib * d.gpu_memory_utilization, 2) +
        " GiB per GPU, the weights take " + Fixed(plan.weights_gib / d.gpus, 2) +
        " GiB and the overhead " + Fixed(d.overhead_gib_per_gpu, 2) + " GiB (" + Fixed(-kv_gib, 2) +
        " GiB missing per GPU); use more GPUs (--gpus), larger ones "
        "(--gpu-memory-gib) or smaller weights (--weights-gib)");
  }
  plan.kv_memory_gib_per_gpu = kv_gib;
  const double kv_bytes = kv_gib * kGiB;
  const double block_bytes = token_bytes_gpu * d.block_tokens;
  plan.kv_capacity_tokens =
      static_cast<int64_t>(std::floor(kv_bytes / block_bytes)) * d.block_tokens;

  for (int64_t length : d.pool_lengths) {
    PoolPlan pool;
    pool.pool_length = length;
    const int64_t tokens = length + d.output_reserve_tokens;
    pool.blocks_per_sequence = (tokens + d.block_tokens - 1) / d.block_tokens;
    const double per_sequence =
        static_cast<double>(pool.blocks_per_sequence) * block_bytes + state_bytes_gpu;
    pool.bytes_per_sequence = static_cast<int64_t>(std::ceil(per_sequence));
    pool.exceeds_context = model.max_context_tokens > 0 && tokens > model.max_context_tokens;
    pool.max_concurrency =
        pool.exceeds_context
            ? 0
            : static_cast<int64_t>(std::floor(kv_bytes * (1.0 - d.headroom) / per_sequence));
    plan.pools.push_back(pool);
  }
  return plan;
}

}  // namespace strata
