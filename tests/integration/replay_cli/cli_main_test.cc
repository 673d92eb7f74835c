// What every `strata` command shares (sdk/apps/strata/main.cc): output that could not be written
// is a failure with a message, and an unknown command is a usage error that lists the commands.
#include <catch2/catch.hpp>
#include <string>

#include "testing/command.h"
#include "testing/temp_dir.h"

namespace strata {
namespace {

using Result = testing::CommandResult;

Result Run(const std::string& args, const std::string& redirect = "2>&1") {
  return testing::RunCommand(std::string(STRATA_CLI_PATH) + " " + args + " " + redirect);
}

const std::string kTrace =
    std::string(STRATA_TEST_TRACES_DIR) + "/mini-swe-agent/sympy__sympy-15976.jsonl";

TEST_CASE("every command that writes standard output exits 1 when it cannot", "[cli]") {
  testing::TempDir dir;
  const std::string db = dir.File("agents.db");
  REQUIRE(Run("replay " + kTrace + " -q --db " + db + " --agent a").exit_code == 0);
  // Before: inspect and plan exited 0 having written nothing.
  for (const std::string& args :
       {"inspect --db " + db, "inspect --db " + db + " --agent a",
        "inspect --db " + db + " --agent a --json", std::string("plan"), std::string("plan --list"),
        std::string("plan --json"), "replay " + kTrace,
        "growth --db " + db + " --agent a --csv " + dir.File("g.csv"),
        "tokens --tokenizer estimate " + kTrace, std::string("--help"),
        std::string("plan --help")}) {
    INFO(args);
    Result ok = Run(args, "2>&1 >/dev/null");
    INFO(ok.output);
    REQUIRE(ok.exit_code == 0);  // the same command with somewhere to write succeeds
    Result full = Run(args, "2>&1 >/dev/full");
    INFO(full.output);
    CHECK(full.exit_code == 1);
    CHECK_THAT(full.output, Catch::Contains("strata: writing to standard output failed ("));
  }
  // Output small enough to be buffered fails at the final flush, which knows why.
  CHECK_THAT(Run("plan", "2>&1 >/dev/full").output,
             Catch::Contains("writing to standard output failed (No space left on device)"));
}

TEST_CASE("an unknown command is named, the commands are listed, exit 2", "[cli]") {
  for (const char* args :
       {"frobnicate", "frobnicate --help", "frobnicate --db x.db", "Replay x"}) {
    INFO(args);
    Result result = Run(args);
    INFO(result.output);
    CHECK(result.exit_code == 2);
    const std::string name = std::string(args).substr(0, std::string(args).find(' '));
    CHECK_THAT(result.output, Catch::Contains("strata: unknown command \"" + name + "\""));
    CHECK_THAT(result.output,
               Catch::Contains("replay, tokens, inspect, growth, prompt, run, plan, bench, probe"));
  }
  // No command at all is still CLI11's usage error; a known one still runs.
  CHECK(Run("").exit_code == 2);
  CHECK(Run("plan", ">/dev/null 2>&1").exit_code == 0);
}

}  // namespace
}  // namespace strata
