// strata::ExplainCompaction (explain.cc) and `strata replay --budget N --explain` on a known trace.
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>

#include "strata/builtin_policies.h"

namespace strata {
namespace {

TEST_CASE("ExplainCompaction lists the candidates, their saving and cost, and the chosen set", "[compact][explain]") {
  CompactionReport report;
  report.turn = 12;
  report.tokens_before = 7700;
  report.tokens_after = 5300;
  CHECK(ExplainCompaction(report).empty());  // no explanation: nothing to say

  CompactionExplanation& x = report.explanation;
  x.mode = "trigger";
  x.remaining_turns = 9.5;
  x.horizon_turns = 6;
  x.need_tokens = 1204;
  x.boundary_segment_id = "s31";
  x.tokens_removed = 3410;
  x.invalidated_tokens = 5122;
  x.expected_saving = 2046;
  x.invalidation_cost = 1540;
  CompactionCandidate chosen;
  chosen.segment_id = "s31";
  chosen.action = "mask";
  chosen.tokens_removed = 1880;
  chosen.invalidated_tokens = 5122;
  chosen.expected_saving = 1128;
  chosen.invalidation_cost = 2917;
  chosen.value = "superseded";
  chosen.chosen = true;
  CompactionCandidate skipped = chosen;
  skipped.segment_id = "s40";
  skipped.value = "in use";
  skipped.chosen = false;
  x.candidates = {chosen, skipped};
  const std::string text = ExplainCompaction(report);
  std::istringstream lines(text);
  std::string line;
  REQUIRE(std::getline(lines, line));
  CHECK(line == "turn 12: trigger; remaining turns ~9.5 (horizon 6.0); prices 1/0.1; need 1,204 tokens; "
                "7,700 -> 5,300 tokens");
  REQUIRE(std::getline(lines, line));
  CHECK(line == "  chosen: boundary s31, removes 3,410 tokens, invalidates 5,122: saving 2,046 > cost 1,540");
  REQUIRE(std::getline(lines, line));
  CHECK_THAT(line, Catch::StartsWith("  * mask"));
  CHECK_THAT(line, Catch::Contains("s31"));
  CHECK_THAT(line, Catch::Contains("1,880"));
  CHECK_THAT(line, Catch::EndsWith("superseded"));
  REQUIRE(std::getline(lines, line));
  CHECK_THAT(line, Catch::StartsWith("    mask"));
  CHECK_THAT(line, Catch::EndsWith("in use"));
  CHECK_FALSE(std::getline(lines, line));
}

#ifdef STRATA_CLI_PATH
TEST_CASE("strata replay --budget N --explain explains each compaction of a known trace", "[compact][explain][cli]") {
  const std::string trace = std::string(STRATA_TEST_TRACES_DIR) + "/mini-swe-agent/astropy__astropy-14182.jsonl";
  const std::string out = "/tmp/strata_explain_" + std::to_string(::getpid()) + ".txt";
  const std::string command = std::string("\"") + STRATA_CLI_PATH + "\" replay \"" + trace +
                              "\" --budget 6000 --tokenizer estimate --policy strata --explain >\"" + out + "\" 2>&1";
  const int status = std::system(command.c_str());
  REQUIRE(WIFEXITED(status));
  REQUIRE(WEXITSTATUS(status) == 0);
  std::ifstream in(out);
  std::stringstream buffer;
  buffer << in.rdbuf();
  const std::string text = buffer.str();
  std::remove(out.c_str());
  // One explanation per compaction, each with its chosen set and its candidates.
  size_t explanations = 0, chosen_lines = 0, candidates = 0, marked = 0;
  std::istringstream lines(text);
  for (std::string line; std::getline(lines, line);) {
    if (line.rfind("turn ", 0) == 0 && line.find("remaining turns ~") != std::string::npos) ++explanations;
    if (line.rfind("  chosen: boundary s", 0) == 0) ++chosen_lines;
    if (line.rfind("  * ", 0) == 0) ++marked;
    if ((line.rfind("  * ", 0) == 0 || line.rfind("    ", 0) == 0) && line.find(" removes ") != std::string::npos) {
      ++candidates;
    }
  }
  INFO(text);
  CHECK(explanations > 0);
  CHECK(chosen_lines == explanations);
  CHECK(marked >= explanations);
  CHECK(candidates >= marked);
  // The summary table still follows, with the number of compactions the explanations describe.
  CHECK_THAT(text, Catch::Contains("compactions"));
}
#endif

}  // namespace
}  // namespace strata
