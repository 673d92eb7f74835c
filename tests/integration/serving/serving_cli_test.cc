// `strata plan` and `strata bench` run as a user would run them (bench against a strata-sim child).
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstdio>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>
#include "testing/command.h"

namespace strata {
namespace {

using Result = testing::CommandResult;
using testing::ReadFile;

Result Run(const std::string& args) {
  return testing::RunCommand(std::string(STRATA_CLI_PATH) + " " + args + " 2>&1");
}

std::string TempPath(const std::string& name) {
  return "/tmp/strata_serving_cli_" + std::to_string(::getpid()) + "_" + name;
}

TEST_CASE("strata plan --json prints the GLM-5.3-Flash sizing and bad flags exit 2",
          "[serving][cli]") {
  Result r = Run("plan --model glm-5.3-flash --kv-dtype fp8 --gpus 8 --gpu-memory-gib 80 --json");
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  nlohmann::json j = nlohmann::json::parse(r.output);
  CHECK(j["kv_bytes_per_token"] == 7579);
  CHECK(j["kv_capacity_tokens"] == 4356448);
  CHECK(j["max_concurrency"]["32768"] == 111);
  CHECK(j["max_concurrency"]["131072"] == 29);
  CHECK(j["max_concurrency"]["524288"] == 7);
  CHECK(j["max_concurrency"]["1048576"] == 3);
  Result table = Run("plan --model llama-3.1-70b");
  CHECK(table.exit_code == 0);
  CHECK_THAT(table.output, Catch::Contains("320.00 KiB") && Catch::Contains("over context"));
  Result list = Run("plan --list");
  CHECK_THAT(list.output, Catch::Contains("deepseek-v3") && Catch::Contains("source:"));
  CHECK(Run("plan --model gpt-9").exit_code == 2);
  CHECK(Run("plan --kv-dtype int4").exit_code == 2);
  Result oom = Run("plan --model deepseek-v3 --gpu-memory-gib 80");
  CHECK(oom.exit_code == 1);
  CHECK_THAT(oom.output, Catch::Contains("missing per GPU"));
}

const char kFastSim[] =
    "--prefill-us 0.01 --decode-us 100 --output-tokens 8 --block-size 512 --kv-block-tokens 512 "
    "--kv-capacity-tokens 400000";

TEST_CASE(
    "strata bench: a small matrix against strata-sim writes one JSON cell per "
    "(length, concurrency, cache state)",
    "[serving][cli]") {
  const std::string json_file = TempPath("bench.json");
  const std::string html_file = TempPath("bench.html");
  Result r = Run(std::string("bench --sim ") + STRATA_SIM_PATH + " --sim-args '" + kFastSim +
                 "' --lengths 4k,16k --concurrency 1,2 --requests 2 --output-tokens 8 --json " +
                 json_file + " --html " + html_file);
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  nlohmann::json j = nlohmann::json::parse(ReadFile(json_file));
  REQUIRE(j["cells"].size() == 8);
  CHECK_THAT(r.output, Catch::Contains("client p50"));
  for (const auto& cell : j["cells"]) {
    INFO(cell.dump());
    CHECK(cell["errors"] == 0);
    CHECK(cell["requests"] == cell["concurrency"].get<int>() * 2);
    CHECK(cell["ttft_ms"]["p50"].get<double>() > 0);
    CHECK(cell["ttft_ms"]["p99"].get<double>() >= cell["ttft_ms"]["p50"].get<double>());
    CHECK(cell["tpot_ms"].contains("p90"));
    // The bench's own CPU time per request, beside the TTFT it measured.
    CHECK(cell["client_ms"]["p50"].get<double>() > 0);
    CHECK(cell["client_ms"]["p99"].get<double>() >= cell["client_ms"]["p50"].get<double>());
    CHECK(cell["throughput_tokens_per_s"].get<double>() > 0);
    // Cold cells send fresh documents (only the short system prompt can be reused); warm ones
    // re-send a primed document.
    if (cell["cache"] == "cold") CHECK(cell["cached_share"].get<double>() < 0.2);
    if (cell["cache"] == "warm") CHECK(cell["cached_share"].get<double>() > 0.8);
  }
  std::string html = ReadFile(html_file);
  CHECK_THAT(html, Catch::Contains("Chart.js v4.6.1") && Catch::Contains("<canvas id=\"ttft\"") &&
                       Catch::Contains("\"cells\""));
  std::remove(json_file.c_str());
  std::remove(html_file.c_str());
}

TEST_CASE("strata bench --traces cuts the agents' contexts from the repository's trajectories",
          "[serving][cli]") {
  const std::string json_file = TempPath("traces_bench.json");
  Result r = Run(std::string("bench --sim ") + STRATA_SIM_PATH + " --sim-args '" + kFastSim +
                 "' --traces " + STRATA_TEST_TRACES_DIR +
                 " --lengths 4k,64k --concurrency 1 --requests 2 --output-tokens 8 --no-progress"
                 " --json " +
                 json_file);
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  nlohmann::json j = nlohmann::json::parse(ReadFile(json_file));
  CHECK(j["workload"]["kind"] == "traces");
  CHECK(j["workload"]["trace_files"] == 19);
  REQUIRE(j["cells"].size() == 4);
  for (const auto& cell : j["cells"]) {
    INFO(cell.dump());
    CHECK(cell["errors"] == 0);
    // About the target length per request (estimated at 4 bytes per token).
    const double per_request = cell["prompt_tokens"].get<double>() / cell["requests"].get<double>();
    CHECK(per_request > 0.5 * cell["length"].get<double>());
    CHECK(per_request < 1.5 * cell["length"].get<double>());
    if (cell["cache"] == "cold") CHECK(cell["cached_share"].get<double>() < 0.2);
    if (cell["cache"] == "warm") CHECK(cell["cached_share"].get<double>() > 0.8);
  }
  Result missing = Run("bench --traces /nonexistent-trace-dir --no-progress");
  CHECK(missing.exit_code == 2);
  CHECK_THAT(missing.output, Catch::Contains("/nonexistent-trace-dir"));
  std::remove(json_file.c_str());
}

TEST_CASE("strata bench --pools sends through a pool set and reports queue waits",
          "[serving][cli]") {
  const std::string pools_file = TempPath("pools.json");
  const std::string json_file = TempPath("pools_bench.json");
  std::ofstream(pools_file) << R"({"pools": [
      {"name": "short", "max_input_tokens": 8192, "endpoints": ["sim"], "max_concurrency": 1},
      {"name": "long", "max_input_tokens": 65536, "endpoints": ["sim"], "max_concurrency": 1}],
    "ladder": ["wait", "refuse"]})";
  Result r = Run(std::string("bench --sim ") + STRATA_SIM_PATH + " --sim-args '" + kFastSim +
                 "' --lengths 4k --concurrency 3 --cache cold --requests 2 --pools " + pools_file +
                 " --json " + json_file);
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  nlohmann::json j = nlohmann::json::parse(ReadFile(json_file));
  REQUIRE(j["cells"].size() == 1);
  CHECK(j["cells"][0]["mode"] == "pools");
  CHECK(j["cells"][0]["errors"] == 0);
  // Three agents against a cap of one: the later ones waited in the short pool's queue.
  CHECK(j["cells"][0]["queue_wait_ms"]["p99"].get<double>() > 0);
  Result bad = Run("bench --lengths 10q --no-progress");
  CHECK(bad.exit_code == 2);
  CHECK_THAT(bad.output, Catch::Contains("\"10q\" is not a length"));
  std::remove(pools_file.c_str());
  std::remove(json_file.c_str());
}

TEST_CASE("strata bench --affinity-replicas: prefix affinity keeps agents' turns cached across "
          "replicas",
          "[serving][cli]") {
  const std::string json_file = TempPath("affinity.json");
  // Sequential turns of 8 agents on 2 replicas, run concurrently. With the pool's load factor at
  // least the number of replicas no turn is moved off its key's replica, whatever the timing: with
  // affinity every later turn finds its prefix; with a key per request, a turn that lands on the
  // replica that did not serve its agent's previous turn finds less of it.
  Result r = Run(std::string("bench --sim ") + STRATA_SIM_PATH + " --sim-args '" + kFastSim +
                 "' --affinity-replicas 2 --affinity-load-factor 2 --lengths 4k --no-progress "
                 "--json " +
                 json_file);
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  nlohmann::json j = nlohmann::json::parse(ReadFile(json_file));
  REQUIRE(j["arms"].size() == 2);
  CHECK(j["arms"][0]["routing"] == "prefix affinity");
  CHECK(j["arms"][0]["load_factor"] == 2.0);
  CHECK(j["arms"][0]["errors"] == 0);
  CHECK(j["arms"][1]["errors"] == 0);
  CHECK(j["arms"][0]["cached_share"].get<double>() > 0.85);
  CHECK(j["arms"][1]["cached_share"].get<double>() < j["arms"][0]["cached_share"].get<double>());
  // With the default factor (1.25) the load bound moves some turns when agents overlap: how many
  // depends on timing (82-91% on an idle machine, 74% seen under a parallel test run), so only
  // that the run succeeds is checked.
  Result bounded = Run(std::string("bench --sim ") + STRATA_SIM_PATH + " --sim-args '" + kFastSim +
                       "' --affinity-replicas 2 --lengths 4k --no-progress --json " + json_file);
  CHECK(bounded.exit_code == 0);
  CHECK(nlohmann::json::parse(ReadFile(json_file))["arms"][0]["load_factor"] == 1.25);
  std::remove(json_file.c_str());
}

}  // namespace
}  // namespace strata
