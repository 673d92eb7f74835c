// strata/kv_plan.h — how many tokens of KV cache a deployment holds, and how many requests of each
// pool length it can run at once (`strata plan`).
//
// A ModelProfile describes the attention layers of a model as the server allocates their cache:
// full-attention layers whose entries grow with every token (GQA: K and V per KV head; MLA: one
// compressed latent per token), optional per-layer side caches (a sparse-attention indexer that
// keeps one entry per `pool` tokens) and linear-attention layers whose recurrent state is constant
// per sequence. A DeploymentOptions adds the hardware (GPUs, memory), the weights and overheads,
// the page size and the headroom. PlanKv() turns both into a KvPlan:
//
//   strata::StatusOr<strata::ModelProfile> model = strata::FindModelProfile("glm-5.3-flash");
//   strata::DeploymentOptions deployment = model->default_deployment;
//   deployment.kv_dtype = strata::KvDtype::kFp8;
//   strata::StatusOr<strata::KvPlan> plan = strata::PlanKv(*model, deployment);
//   if (plan.ok()) use(plan->kv_bytes_per_token, plan->kv_capacity_tokens,
//                      plan->pools[3].max_concurrency);  // at 1M tokens
//
// Tensor parallelism is modelled as the servers do it: GQA caches are split across
// min(gpus, kv_heads) ranks, MLA latents are replicated on every rank (one latent serves all
// heads), linear-attention state is split by heads. Capacity is therefore computed per GPU.
//
// Thread safety: plain functions over value types.
#ifndef STRATA_KV_PLAN_H_
#define STRATA_KV_PLAN_H_

#include <cstdint>
#include <string>
#include <vector>

#include "strata/status.h"

namespace strata {

// The precision of the KV cache entries (vLLM --kv-cache-dtype).
enum class KvDtype : int { kBf16 = 0, kFp8 = 1 };
// "bf16" / "fp8".
std::string KvDtypeName(KvDtype dtype);
// Parses "bf16" or "fp8" (also "fp8_e4m3", "bfloat16", "auto" = bf16). INVALID_ARGUMENT otherwise.
StatusOr<KvDtype> ParseKvDtype(const std::string& name);

// One kind of layer and what it caches.
struct LayerGroup {
  // What a layer of the group caches.
  enum class Kind : int {
    kGqa = 0,  // K and V per KV head: 2 * kv_heads * head_dim values per token
    kMla = 1,  // one latent (kv_lora_rank + rope_dim values) per token, replicated per TP rank
    kLinear =
        2,  // constant recurrent state per sequence: heads * key_dim * value_dim values (fp32)
  };
  Kind kind = Kind::kGqa;  // selects which of the fields below apply
  int layers = 0;          // layers of this kind in the model
  // kGqa
  int kv_heads = 0;
  int head_dim = 0;  // kGqa: dimension of one head
  // kMla
  int kv_lora_rank = 0;
  int rope_dim = 0;  // kMla: rotary dimension per entry
  // Bytes per token per layer of an fp8 entry when the server's fp8 layout is not simply one byte
  // per value (e.g. 656 for FlashMLA's fp8 format: 512 fp8 values, 4 fp32 scales, 64 bf16 values).
  // 0: one byte per value.
  int fp8_entry_bytes = 0;
  // A side cache per layer (e.g. a sparse-attention indexer's keys), always in its own precision:
  // `side_entry_bytes` per entry, one entry per `side_pool` tokens. 0: none.
  int side_entry_bytes = 0;
  int side_pool = 1;  // tokens per side-cache entry. Default 1
  // kLinear
  int heads = 0;
  int key_dim = 0;                // kLinear: key dimension per head
  int value_dim = 0;              // kLinear: value dimension per head
  int state_bytes_per_value = 4;  // fp32 recurrent state
};

// The hardware and server settings of one replica that PlanKv() sizes the cache for.
struct DeploymentOptions {
  KvDtype kv_dtype = KvDtype::kBf16;  // precision of the KV entries; default bf16
  // GPUs serving one replica (tensor parallel). Default 8.
  int gpus = 8;
  // Memory of one GPU in GiB. Default 80 (H100 80GB).
  double gpu_memory_gib = 80;
  // Share of GPU memory the server may use (vLLM --gpu-memory-utilization). Default 0.90.
  double gpu_memory_utilization = 0.90;
  // Weights of the whole model in GiB, split evenly across the GPUs. Default -1 (< 0): the
  // profile's value.
  double weights_gib = -1;
  // Activations, CUDA graphs and runtime per GPU in GiB. Default 4.
  double overhead_gib_per_gpu = 4;
  // Tokens per KV page/block; a sequence holds whole blocks. Default 16 (vLLM's default).
  int block_tokens = 16;
  // Share of the KV memory kept free when computing safe concurrency (bursts, fragmentation,
  // output growth). Default 0.10.
  double headroom = 0.10;
  // Tokens reserved per sequence beyond its pool length for output and reasoning. Default 0: the
  // pool length is the whole sequence.
  int64_t output_reserve_tokens = 0;
  // Pool lengths to compute the safe concurrency for. Default 32K, 128K, 512K, 1M.
  std::vector<int64_t> pool_lengths = {32768, 131072, 524288, 1048576};
};

// A model's cache-relevant architecture and the deployment it is usually served on; the built-in
// ones come from ModelProfiles().
struct ModelProfile {
  std::string name;         // e.g. "glm-5.3-flash"
  std::string description;  // one line
  std::string source;       // where the architecture numbers come from
  std::vector<LayerGroup> groups;  // the attention layers, by kind
  double weights_gib = 0;    // of the checkpoint the default deployment serves
  std::string weights_note;  // e.g. "FP8 checkpoint"
  int64_t max_context_tokens = 0;  // the model's context window; 0: unknown (no limit checked)
  DeploymentOptions default_deployment;  // the hardware the profile's source serves it on
};

// The built-in profiles: glm-5.3-flash, deepseek-v3, llama-3.1-70b, llama-3.1-405b.
const std::vector<ModelProfile>& ModelProfiles();
// NOT_FOUND naming the known profiles when `name` is none of them.
StatusOr<ModelProfile> FindModelProfile(const std::string& name);

// One pool length's result in a KvPlan.
struct PoolPlan {
  int64_t pool_length = 0;  // tokens per sequence (input) in this pool
  // KV blocks one sequence holds: pool_length + output reserve, rounded up to whole blocks.
  int64_t blocks_per_sequence = 0;
  int64_t bytes_per_sequence = 0;  // per GPU: KV blocks + constant state
  int64_t max_concurrency = 0;     // sequences of this length that fit with headroom; 0 when none
  bool exceeds_context = false;    // pool_length + reserve > the model's context
};

// What PlanKv() computed: the cache a token costs, the tokens a replica holds, and the safe
// concurrency per pool length.
struct KvPlan {
  std::string model;                  // ModelProfile::name
  KvDtype kv_dtype = KvDtype::kBf16;  // DeploymentOptions::kv_dtype
  // Bytes of cache one token adds to one copy of the model (all layers, side caches included): the
  // figure model cards and calculators publish.
  int64_t kv_bytes_per_token = 0;
  // What one token costs on one GPU after tensor-parallel splitting / replication.
  double kv_bytes_per_token_per_gpu = 0;
  // Constant per-sequence state (linear attention) of the whole model and per GPU.
  int64_t state_bytes_per_sequence = 0;
  double state_bytes_per_sequence_per_gpu = 0;  // of those, on one GPU
  double weights_gib = 0;  // of the whole model: the deployment's, or the profile's when unset
  double kv_memory_gib_per_gpu = 0;  // memory left for KV on one GPU
  int64_t kv_capacity_tokens = 0;    // whole blocks of KV the replica holds (state not counted)
  std::vector<PoolPlan> pools;       // one per DeploymentOptions::pool_lengths
  DeploymentOptions deployment;  // the options the plan was computed with, as given
};

// Computes the plan. INVALID_ARGUMENT for bad options (gpus < 1, memory <= 0, utilization outside
// (0, 1], headroom outside [0, 1), block_tokens < 1); RESOURCE_EXHAUSTED when the weights and
// overheads leave no memory for KV (the message says how much is missing).
StatusOr<KvPlan> PlanKv(const ModelProfile& model, const DeploymentOptions& deployment);

}  // namespace strata

#endif  // STRATA_KV_PLAN_H_
