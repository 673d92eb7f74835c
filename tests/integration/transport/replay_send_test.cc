// `strata replay TRACE --send --endpoint URL [--grpc]` against strata-sim scripted with the same trace.
#include <catch2/catch.hpp>

#include <nlohmann/json.hpp>

#include <cstdio>
#include <fstream>
#include <string>

#include "sim_server.h"
#include "testing/command.h"
#include "testing/traces.h"

namespace strata {
namespace {

#ifdef STRATA_CLI_PATH
std::string Run(const std::string& command, int* exit_code) {
  strata::testing::CommandResult result = strata::testing::RunCommand(command + " 2>&1");
  *exit_code = result.exit_code;
  return result.output;
}

TEST_CASE("strata replay --send sends every turn and predicts the simulator's cached tokens", "[transport][cli]") {
  const std::string trace = strata::testing::TestTracePath("swe-agent/ctf-crypto-BabyEncryption.jsonl");
  REQUIRE(std::ifstream(trace).good());
  for (bool grpc : {false, true}) {
    sim::SimOptions options;
    options.trajectory_path = trace;
    options.grpc_port = 0;
    auto sim = sim::SimServer::Start(options).value();
    const std::string records = std::string(STRATA_BINARY_DIR) + "/replay_send_records.jsonl";
    const std::string summary = std::string(STRATA_BINARY_DIR) + "/replay_send_summary.json";
    std::string command = std::string(STRATA_CLI_PATH) + " replay " + trace + " --send --records " + records +
                          " --summary-json " + summary + " --block-size 16 " +
                          (grpc ? "--grpc --endpoint " + sim->grpc_target() : "--endpoint " + sim->base_url());
    int code = -1;
    std::string output = Run(command, &code);
    INFO(command << "\n" << output);
    REQUIRE(code == 0);
    nlohmann::json s = nlohmann::json::parse(std::ifstream(summary));
    CHECK(s["failed"] == 0);
    CHECK(s["turns"].get<int>() > 5);
    CHECK(s["turns_with_prediction_mismatch"] == 0);
    CHECK(s["cached_tokens_reported"] == s["cached_tokens_predicted"]);
    CHECK(s["cached_tokens_reported"].get<int64_t>() > 0);
    CHECK(static_cast<int>(sim->requests().size()) == s["turns"].get<int>());
    CHECK(sim->requests().back().protocol == (grpc ? "grpc" : "http"));
    std::ifstream in(records);
    std::string line;
    int lines = 0;
    while (std::getline(in, line)) {
      auto r = nlohmann::json::parse(line);
      if (r["type"] == "request") {
        CHECK(r["code"] == "OK");
        ++lines;
      }
    }
    CHECK(lines == s["turns"].get<int>());
  }
}
TEST_CASE("strata replay --send --budget compacts before sending and keeps predictions exact", "[transport][cli][compact]") {
  const std::string trace = strata::testing::TestTracePath("mini-swe-agent/astropy__astropy-14182.jsonl");
  REQUIRE(std::ifstream(trace).good());
  sim::SimOptions options;
  options.trajectory_path = trace;
  auto sim = sim::SimServer::Start(options).value();
  const std::string summary = std::string(STRATA_BINARY_DIR) + "/replay_send_budget_summary.json";
  const std::string command = std::string(STRATA_CLI_PATH) + " replay " + trace + " --send --endpoint " +
                              sim->base_url() + " --budget 6000 --tokenizer estimate --summary-json " + summary;
  int code = -1;
  std::string output = Run(command, &code);
  INFO(command << "\n" << output);
  REQUIRE(code == 0);
  nlohmann::json s = nlohmann::json::parse(std::ifstream(summary));
  CHECK(s["failed"] == 0);
  CHECK(s["turns"] == 25);
  CHECK(s["cached_tokens_reported"] == s["cached_tokens_predicted"]);
  CHECK(s["prefix_breaks"].get<int>() > 0);  // each compaction is reported as one
  // The last request the server saw carries compacted history and stays far below the full trace.
  const std::string last = sim->requests().back().body;  // requests() returns a copy
  CHECK((last.find("[strata: masked output of") != std::string::npos ||
         last.find("[strata: summary of turns") != std::string::npos));
  CHECK(last.size() < 6000 * 4 + 4096);
  // One policy only: the conversation is really sent.
  CHECK(Run(std::string(STRATA_CLI_PATH) + " replay " + trace + " --send --endpoint " + sim->base_url() +
                " --budget 6000 --policy strata,sliding",
            &code)
            .find("one policy") != std::string::npos);
  CHECK(code == 2);
}
#endif


}  // namespace
}  // namespace strata
