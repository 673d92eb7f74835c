// `strata replay --db`, `strata inspect` and `strata growth` run as a user would run them.
#include <sqlite3.h>
#include <sys/wait.h>

#include <catch2/catch.hpp>
#include <cstdio>
#include <fstream>
#include <iterator>

#include "strata/store.h"
#include "testing/command.h"
#include "testing/temp_dir.h"
#include "testing/traces.h"

namespace strata {
namespace {

using testing::TempDir;

using Result = testing::CommandResult;
using testing::ReadFile;

// The CLI with `args`; stdout and stderr in the output.
Result Run(const std::string& args) {
  return testing::RunCommand(std::string(STRATA_CLI_PATH) + " " + args + " 2>&1");
}

const std::string kTrace =
    testing::TestTracePath("mini-swe-agent/sympy__sympy-15976.jsonl");

TEST_CASE("replay --db persists the agent, inspect and growth read it back", "[store][cli]") {
  TempDir dir;
  const std::string db = dir.File("agents.db");
  Result replay = Run("replay " + kTrace + " --db " + db + " -q");
  INFO(replay.output);
  REQUIRE(replay.exit_code == 0);
  // Replaying again under another id adds a second agent; the same id would be replaced.
  REQUIRE(Run("replay " + kTrace + " --db " + db + " --agent second -q").exit_code == 0);
  REQUIRE(Run("replay " + kTrace + " --db " + db + " --agent second -q").exit_code == 0);

  Result list = Run("inspect --db " + db);
  INFO(list.output);
  CHECK(list.exit_code == 0);
  CHECK_THAT(list.output, Catch::Contains("2 agents") && Catch::Contains("sympy__sympy-15976") &&
                              Catch::Contains("second"));

  Result show = Run("inspect --db " + db + " --agent sympy__sympy-15976");
  INFO(show.output);
  CHECK(show.exit_code == 0);
  CHECK_THAT(show.output, Catch::Contains("LAYER") && Catch::Contains("history") &&
                              Catch::Contains("compactions: 0") &&
                              Catch::Contains("recent requests"));

  // The stored context is the replayed one.
  auto store = OpenSqliteStore(db);
  REQUIRE(store.ok());
  auto growth = (*store)->Growth("sympy__sympy-15976");
  REQUIRE(growth.ok());
  REQUIRE(growth->size() > 20);
  auto context = OpenContext(**store, "second");
  REQUIRE(context.ok());
  CHECK((*context)->Stats().turns > 20);
  store->reset();

  const std::string svg = dir.File("growth.svg"), csv = dir.File("growth.csv");
  Result chart =
      Run("growth --db " + db + " --agent sympy__sympy-15976 --svg " + svg + " --csv " + csv);
  INFO(chart.output);
  CHECK(chart.exit_code == 0);
  std::string svg_text = ReadFile(svg);
  CHECK_THAT(svg_text, Catch::StartsWith("<svg") &&
                           Catch::Contains("Context growth: sympy__sympy-15976") &&
                           Catch::Contains("<polygon") && Catch::Contains(">history</text>") &&
                           Catch::Contains(">turn</text>") && Catch::EndsWith("</svg>\n"));
  std::string csv_text = ReadFile(csv);
  CHECK_THAT(csv_text,
             Catch::StartsWith("turn,unix_ms,system,tools,index,docs,history,volatile,total"));
  CHECK(std::count(csv_text.begin(), csv_text.end(), '\n') ==
        static_cast<long>(growth->size() + 1));
}

TEST_CASE("the store commands exit 2 on usage errors and 1 on failures", "[store][cli]") {
  TempDir dir;
  const std::string db = dir.File("agents.db");
  REQUIRE(Run("replay " + kTrace + " --db " + db + " -q").exit_code == 0);
  CHECK(Run("inspect").exit_code == 2);
  CHECK(Run("inspect --db " + dir.File("missing.db")).exit_code == 2);
  CHECK(Run("growth --db " + db).exit_code == 2);
  CHECK(Run("growth --db " + db + " --agent sympy__sympy-15976").exit_code == 2);  // no output
  Result unknown = Run("growth --db " + db + " --agent nobody --svg " + dir.File("x.svg"));
  CHECK(unknown.exit_code == 1);
  CHECK_THAT(unknown.output, Catch::Contains("nobody") && Catch::Contains("sympy__sympy-15976"));
  std::ofstream(dir.File("junk.db"))
      << "this is not a database, just some text padding it out. "
         "SQLite needs at least a header's worth of bytes to complain.";
  Result junk = Run("inspect --db " + dir.File("junk.db"));
  CHECK(junk.exit_code == 1);
  CHECK_THAT(junk.output, Catch::Contains("DATA_LOSS"));
  CHECK(Run("inspect --help").exit_code == 0);
  CHECK(Run("growth --help").exit_code == 0);
}

TEST_CASE("inspect reports a damaged segment row instead of crashing", "[store][cli]") {
  TempDir dir;
  const std::string db = dir.File("agents.db");
  REQUIRE(Run("replay " + kTrace + " --db " + db + " --agent a -q").exit_code == 0);
  sqlite3* handle = nullptr;
  REQUIRE(sqlite3_open(db.c_str(), &handle) == SQLITE_OK);
  REQUIRE(sqlite3_exec(handle, "UPDATE segments SET layer = 77 WHERE id = (SELECT min(id) FROM segments WHERE layer = 4)",
                       nullptr, nullptr, nullptr) == SQLITE_OK);
  sqlite3_close(handle);
  // Before: free(): invalid pointer (an array indexed by the stored layer).
  Result show = Run("inspect --db " + db + " --agent a");
  INFO(show.output);
  CHECK(show.exit_code == 1);
  CHECK_THAT(show.output, Catch::Contains("DATA_LOSS") && Catch::Contains("of agent \"a\"") &&
                              Catch::Contains("column layer holds 77"));
}

TEST_CASE("inspect totals an agent's request tokens by purpose, its summaries' included", "[store][cli]") {
  TempDir dir;
  const std::string db = dir.File("agents.db");
  {
    auto store = OpenSqliteStore(db);
    REQUIRE(store.ok());
    ContextOptions options;
    options.agent.id = "a";
    REQUIRE((*store)->CreateAgent(options).ok());
    auto record = [&](const std::string& purpose, int64_t input, int64_t cached, int64_t output) {
      RequestRecord r;
      r.agent_id = "a";
      r.request_id = "a-" + std::to_string(input);
      r.purpose = purpose;
      r.started_unix_ms = 1700000000000 + input;
      r.input_tokens = input;
      r.cached_tokens_reported = cached;
      r.cached_tokens_predicted = cached - 16;
      r.output_tokens = output;
      REQUIRE((*store)->AppendRequest(r).ok());
    };
    record("turn", 1000, 0, 40);
    record("turn", 1100, 992, 60);
    record("compaction", 1150, 1088, 300);  // a cache-keeping summary request
  }
  Result show = Run("inspect --db " + db + " --agent a --requests 1");
  INFO(show.output);
  CHECK(show.exit_code == 0);
  // Every stored record is counted, not only the --requests shown.
  CHECK_THAT(show.output,
             Catch::Contains("requests for turn: 2, input 2100 tokens (cached 992 reported, 960 "
                             "predicted), output 100") &&
                 Catch::Contains("requests for compaction: 1, input 1150 tokens (cached 1088 "
                                 "reported, 1072 predicted), output 300"));
  Result json = Run("inspect --db " + db + " --agent a --json");
  INFO(json.output);
  REQUIRE(json.exit_code == 0);
  CHECK_THAT(json.output,
             Catch::Contains(R"("request_tokens":{"compaction":{"requests":1,"input_tokens":1150,)"
                             R"("cached_tokens_reported":1088,"cached_tokens_predicted":1072,)"
                             R"("output_tokens":300},"turn":{"requests":2,"input_tokens":2100,)"));
}

TEST_CASE("growth and inspect show the tokens of the turns' summary requests", "[store][cli]") {
  TempDir dir;
  const std::string db = dir.File("agents.db");
  {
    auto store = OpenSqliteStore(db);
    REQUIRE(store.ok());
    ContextOptions options;
    options.agent.id = "a";
    REQUIRE((*store)->CreateAgent(options).ok());
    for (int64_t turn = 1; turn <= 3; ++turn) {
      GrowthPoint p;
      p.agent_id = "a";
      p.turn = turn;
      p.unix_ms = 1700000000000 + turn;
      p.layer_tokens[static_cast<int>(Layer::kHistory)] = 1000 * turn;
      if (turn == 2) {  // a compaction whose cache-keeping summary request was mostly cached
        p.compactions = 1;
        p.invalidated_tokens = 500;
        p.summary_input_tokens = 2150;
        p.summary_cached_tokens = 2048;
        p.summary_output_tokens = 310;
      }
      REQUIRE((*store)->RecordGrowth(p).ok());
    }
  }
  const std::string svg = dir.File("growth.svg"), csv = dir.File("growth.csv");
  Result chart = Run("growth --db " + db + " --agent a --svg " + svg + " --csv " + csv);
  INFO(chart.output);
  REQUIRE(chart.exit_code == 0);
  const std::string csv_text = ReadFile(csv);
  CHECK_THAT(csv_text, Catch::StartsWith("turn,unix_ms,system,tools,index,docs,history,volatile,"
                                         "total,compactions,invalidated_tokens,"
                                         "summary_input_tokens,summary_cached_tokens,"
                                         "summary_output_tokens\n"));
  CHECK_THAT(csv_text,
             Catch::Contains("\n2,1700000000002,0,0,0,0,2000,0,2000,1,500,2150,2048,310\n") &&
                 Catch::Contains("\n3,1700000000003,0,0,0,0,3000,0,3000,0,0,0,0,0\n"));
  CHECK_THAT(ReadFile(svg), Catch::Contains("summaries 2.15K in (2.05K cached), 310 out"));
  Result show = Run("inspect --db " + db + " --agent a");
  INFO(show.output);
  CHECK(show.exit_code == 0);
  CHECK_THAT(show.output, Catch::Contains("growth: 3 points") &&
                              Catch::Contains("summary requests in the growth curve: input 2150 "
                                              "tokens (cached 2048), output 310"));
}

TEST_CASE("growth opens read-only: an empty file stays empty", "[store][cli]") {
  TempDir dir;
  const std::string empty = dir.File("empty.db");
  std::ofstream(empty).close();
  Result chart = Run("growth --db " + empty + " --agent a --csv " + dir.File("g.csv"));
  INFO(chart.output);
  CHECK(chart.exit_code == 1);
  CHECK(ReadFile(empty).empty());
}

}  // namespace
}  // namespace strata
