// `strata replay TRACE --budget N [--policy strata,none,sliding,last-n] [--tokenizer SPEC]`: replays
// the trace under a token budget with each policy and compares them (strata/eval.h).
#ifndef STRATA_APPS_STRATA_REPLAY_BUDGET_H_
#define STRATA_APPS_STRATA_REPLAY_BUDGET_H_

#include <CLI/CLI.hpp>

#include <cstddef>
#include <string>

namespace strata::cli {

struct ReplayBudgetArgs {
  size_t budget = 0;                // --budget: input tokens a request may hold
  std::string policies;             // --policy: comma-separated
  std::string tokenizer;            // --tokenizer SPEC (shared with the plain replay)
  size_t block_tokens = 16;         // --block-tokens
  double trigger = 0.95;            // --trigger (strata policy)
  double target = 0.7;              // --target (strata policy)
  size_t keep_turns = 2;            // --keep-turns
  size_t keep_tool_results = 3;     // --keep-tool-results
  std::string exclude_tools;        // --exclude-tools a,b
  std::string ephemeral_tools;      // --ephemeral-tools a,b
  bool explain = false;             // --explain: print each strata compaction's candidates (ExplainCompaction)
};

void AddReplayBudgetOptions(CLI::App* cmd, ReplayBudgetArgs* args);

// True when the budgeted replay was asked for (--budget or --policy).
bool WantsBudgetReplay(const ReplayBudgetArgs& args);

// Runs it; `out` and `summary_json` as for the plain replay (lines carry the policy name).
// Throws CommandFailed on errors.
void RunReplayBudget(const std::string& trace, const ReplayBudgetArgs& args, const std::string& out,
                     const std::string& summary_json, bool quiet);

}  // namespace strata::cli

#endif  // STRATA_APPS_STRATA_REPLAY_BUDGET_H_
