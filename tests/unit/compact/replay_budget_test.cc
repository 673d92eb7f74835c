// `strata replay TRACE --budget N --compare ...` end to end, as a user runs it.
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>

#include "testing/traces.h"

namespace {

#ifdef STRATA_CLI_PATH
int Run(const std::string& arguments) {
  const std::string command = std::string("\"") + STRATA_CLI_PATH + "\" " + arguments + " >/dev/null 2>&1";
  const int status = std::system(command.c_str());
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

TEST_CASE("strata replay --budget compares policies and keeps strata within the budget", "[compact][cli]") {
  const std::string trace = strata::testing::TestTracePath("mini-swe-agent/astropy__astropy-14182.jsonl");
  const std::string summary = "/tmp/strata_replay_budget_" + std::to_string(::getpid()) + ".json";
  const std::string out = "/tmp/strata_replay_budget_" + std::to_string(::getpid()) + ".jsonl";
  REQUIRE(Run("replay \"" + trace + "\" --budget 6000 --tokenizer estimate --compare strata,sliding,none --summary-json \"" +
              summary + "\" --out \"" + out + "\"") == 0);
  std::ifstream in(summary);
  nlohmann::json doc = nlohmann::json::parse(in);
  CHECK(doc["budget"] == 6000);
  const auto& strata = doc["policies"]["strata"];
  CHECK(strata["requests"] == 25);
  CHECK(strata["budget_violations"] == 0);
  CHECK(strata["pairing_errors"] == 0);
  CHECK(strata["peak_tokens"].get<int>() <= 6000);
  CHECK(strata["compactions"].get<int>() > 0);
  CHECK(doc["policies"]["none"]["budget_violations"].get<int>() > 0);
  CHECK(strata["cost"].get<double>() < doc["policies"]["sliding"]["cost"].get<double>());
  // One line per turn and policy, each with the request and its policy.
  std::ifstream lines(out);
  size_t count = 0, compactions = 0;
  for (std::string line; std::getline(lines, line); ++count) {
    nlohmann::json turn = nlohmann::json::parse(line);
    CHECK(turn["request"].contains("messages"));
    CHECK(turn["policy"] == turn["stats"]["policy"]);
    if (turn["policy"] == "strata" && turn.contains("compactions")) {
      ++compactions;
      CHECK(turn["compactions"][0]["tokens_before"].get<int>() > 0);
    }
  }
  CHECK(count == 75);
  CHECK(compactions == strata["compactions"].get<size_t>());
  std::remove(summary.c_str());
  std::remove(out.c_str());

  // Usage errors exit with 2: a comparison needs a tokenizer; unknown policies; a list for --policy.
  CHECK(Run("replay \"" + trace + "\" --budget 6000 --compare strata,none") == 2);
  CHECK(Run("replay \"" + trace + "\" --budget 6000 --tokenizer estimate --policy lru") == 2);
  CHECK(Run("replay \"" + trace + "\" --budget 6000 --tokenizer estimate --policy strata,none") == 2);
}
#endif

}  // namespace
