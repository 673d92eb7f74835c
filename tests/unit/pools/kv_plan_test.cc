// The KV planner against values computed by hand from each profile's published architecture.
#include "strata/kv_plan.h"

#include <catch2/catch.hpp>

namespace strata {
namespace {

constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;

KvPlan Plan(const std::string& name, KvDtype dtype) {
  StatusOr<ModelProfile> model = FindModelProfile(name);
  REQUIRE(model.ok());
  DeploymentOptions d = model->default_deployment;
  d.kv_dtype = dtype;
  StatusOr<KvPlan> plan = PlanKv(*model, d);
  REQUIRE(plan.ok());
  return *plan;
}

TEST_CASE("GLM-5.3-Flash: 11 sparse MLA layers of 656 B + pooled indexer, constant KDA state",
          "[pools][plan]") {
  KvPlan plan = Plan("glm-5.3-flash", KvDtype::kFp8);
  // 11 layers x (656 B fp8 latent entry + 132 B indexer key / 4 tokens per pool) = 7579 B: the
  // "about 7.6 KB per token" of the architecture.
  CHECK(plan.kv_bytes_per_token == 11 * (656 + 33));
  CHECK(plan.kv_bytes_per_token_per_gpu == Approx(7579));  // MLA latents replicate per rank
  // 34 KDA layers x 64 heads x 128 x 128 fp32 = 136 MiB per sequence, split over 8 ranks.
  CHECK(plan.state_bytes_per_sequence == 34LL * 64 * 128 * 128 * 4);
  CHECK(plan.state_bytes_per_sequence == 136LL * 1024 * 1024);
  CHECK(plan.state_bytes_per_sequence_per_gpu == Approx(17825792.0));
  // 8 x 80 GiB at 90% = 72 GiB per GPU, minus 298/8 GiB of weights and 4 GiB overhead.
  CHECK(plan.kv_memory_gib_per_gpu == Approx(30.75));
  // floor(30.75 GiB / (7579 B x 16)) blocks of 16 tokens.
  CHECK(plan.kv_capacity_tokens == 4356448);
  REQUIRE(plan.pools.size() == 4);
  // floor(0.9 x 30.75 GiB / (L/16 x 7579 x 16 + 17825792)).
  CHECK(plan.pools[0].max_concurrency == 111);
  CHECK(plan.pools[1].max_concurrency == 29);
  CHECK(plan.pools[2].max_concurrency == 7);
  CHECK(plan.pools[3].max_concurrency == 3);
  CHECK(plan.pools[3].bytes_per_sequence == 7964983296LL);
  CHECK_FALSE(plan.pools[3].exceeds_context);
}

TEST_CASE("GLM-5.3-Flash in bf16: the latent costs 1024 B, the fp8 indexer stays 33 B",
          "[pools][plan]") {
  KvPlan plan = Plan("glm-5.3-flash", KvDtype::kBf16);
  CHECK(plan.kv_bytes_per_token == 11 * (1024 + 33));
}

TEST_CASE("DeepSeek-V3: 61 layers x 576 values (the published ~68.6 KiB per token in bf16)",
          "[pools][plan]") {
  KvPlan bf16 = Plan("deepseek-v3", KvDtype::kBf16);
  CHECK(bf16.kv_bytes_per_token == 61 * 576 * 2);  // 70272 B = 68.625 KiB
  CHECK(bf16.kv_bytes_per_token == 70272);
  CHECK(bf16.state_bytes_per_sequence == 0);
  // 8 x 140 GiB at 90% = 126 GiB, minus 625/8 GiB weights and 4 GiB: 43.875 GiB per GPU, which
  // holds 670400 tokens (MLA latents are replicated on each rank).
  CHECK(bf16.kv_memory_gib_per_gpu == Approx(43.875));
  CHECK(bf16.kv_capacity_tokens == 670400);
  CHECK(bf16.pools[0].max_concurrency == 18);
  CHECK(bf16.pools[1].max_concurrency == 4);
  // 512K and 1M exceed DeepSeek-V3's 163840-token context.
  CHECK(bf16.pools[2].exceeds_context);
  CHECK(bf16.pools[2].max_concurrency == 0);
  CHECK(bf16.pools[3].max_concurrency == 0);
  KvPlan fp8 = Plan("deepseek-v3", KvDtype::kFp8);
  CHECK(fp8.kv_bytes_per_token == 61 * 576);
}

TEST_CASE("Llama-3.1-70B: 80 layers x 2 x 8 KV heads x 128 x 2 B = 320 KiB, split over 4 ranks",
          "[pools][plan]") {
  KvPlan plan = Plan("llama-3.1-70b", KvDtype::kBf16);
  CHECK(plan.kv_bytes_per_token == 327680);
  CHECK(plan.kv_bytes_per_token_per_gpu == Approx(81920));
  CHECK(plan.kv_memory_gib_per_gpu == Approx(72 - 131.5 / 4 - 4));
  CHECK(plan.kv_capacity_tokens == 460384);
  CHECK(plan.pools[0].max_concurrency == 12);
  CHECK(plan.pools[1].max_concurrency == 3);
  CHECK(plan.pools[2].exceeds_context);
  KvPlan fp8 = Plan("llama-3.1-70b", KvDtype::kFp8);
  CHECK(fp8.kv_bytes_per_token == 163840);
}

TEST_CASE("Llama-3.1-405B: 126 layers, the published ~504 KiB per token in bf16", "[pools][plan]") {
  KvPlan plan = Plan("llama-3.1-405b", KvDtype::kBf16);
  CHECK(plan.kv_bytes_per_token == 2 * 126 * 8 * 128 * 2);
  CHECK(plan.kv_bytes_per_token == 504 * 1024);
}

TEST_CASE("more GPUs than KV heads replicate GQA heads instead of splitting further",
          "[pools][plan]") {
  ModelProfile model = *FindModelProfile("llama-3.1-70b");
  DeploymentOptions d = model.default_deployment;
  d.gpus = 16;
  KvPlan plan = *PlanKv(model, d);
  CHECK(plan.kv_bytes_per_token_per_gpu == Approx(327680.0 / 8));
}

TEST_CASE("output reserve, block rounding and headroom enter the concurrency", "[pools][plan]") {
  ModelProfile model = *FindModelProfile("llama-3.1-70b");
  DeploymentOptions d = model.default_deployment;
  d.headroom = 0;
  d.block_tokens = 1000;
  d.output_reserve_tokens = 500;
  d.pool_lengths = {1000};
  KvPlan plan = *PlanKv(model, d);
  // 1500 tokens -> 2 blocks of 1000 tokens x 81920 B per GPU.
  CHECK(plan.pools[0].blocks_per_sequence == 2);
  CHECK(plan.pools[0].bytes_per_sequence == 2 * 1000 * 81920);
  const double kv = (72 - 131.5 / 4 - 4) * kGiB;
  CHECK(plan.pools[0].max_concurrency == static_cast<int64_t>(kv / (2 * 1000 * 81920.0)));
  CHECK(plan.kv_capacity_tokens % 1000 == 0);
}

TEST_CASE("weights that do not fit are refused with the missing memory", "[pools][plan]") {
  ModelProfile model = *FindModelProfile("deepseek-v3");
  DeploymentOptions d = model.default_deployment;
  d.gpu_memory_gib = 80;
  StatusOr<KvPlan> plan = PlanKv(model, d);
  REQUIRE_FALSE(plan.ok());
  CHECK(plan.status().code() == StatusCode::kResourceExhausted);
  CHECK_THAT(plan.status().message(), Catch::Contains("missing per GPU"));
  CHECK_THAT(plan.status().message(), Catch::Contains("--gpus"));
}

TEST_CASE("bad deployment options and names are refused with the offending value",
          "[pools][plan]") {
  ModelProfile model = *FindModelProfile("glm-5.3-flash");
  DeploymentOptions d = model.default_deployment;
  d.gpus = 0;
  CHECK(PlanKv(model, d).status().code() == StatusCode::kInvalidArgument);
  d = model.default_deployment;
  d.headroom = 1;
  CHECK_THAT(PlanKv(model, d).status().message(), Catch::Contains("1.000"));
  StatusOr<ModelProfile> unknown = FindModelProfile("gpt-9");
  CHECK(unknown.status().code() == StatusCode::kNotFound);
  CHECK_THAT(unknown.status().message(), Catch::Contains("glm-5.3-flash"));
  CHECK(ParseKvDtype("int4").status().code() == StatusCode::kInvalidArgument);
  CHECK(*ParseKvDtype("fp8") == KvDtype::kFp8);
}

}  // namespace
}  // namespace strata
