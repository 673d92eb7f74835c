// The budget options of `strata replay` (--budget N [--policy P] [--tokenizer SPEC] and the strata
// policy's knobs) and the policy comparison `--compare strata,none,sliding,last-n,clear-tool-uses,
// observation-masking`, which replays the trace under the budget once per policy
// (strata/replay/eval.h) and prints a table.
#ifndef STRATA_APPS_STRATA_REPLAY_BUDGET_H_
#define STRATA_APPS_STRATA_REPLAY_BUDGET_H_

#include <CLI/CLI.hpp>

#include <cstddef>
#include <memory>
#include <string>

#include "strata/builtin_policies.h"

namespace strata::cli {

struct ReplayBudgetArgs {
  size_t budget = 0;                // --budget: input tokens a request may hold (0: no budget)
  std::string policy = "strata";    // --policy: the compaction policy of the replay
  bool policy_given = false;        // --policy was on the command line
  std::string compare;              // --compare: comma-separated policies to compare
  std::string tokenizer;            // --tokenizer SPEC (exact counts; the estimator without it)
  size_t block_tokens = 16;         // --block-tokens (--compare)
  double trigger = 0.95;            // --trigger (strata policy)
  double target = 0.7;              // --target (strata policy)
  size_t keep_turns = 2;            // --keep-turns
  size_t keep_tool_results = 3;     // --keep-tool-results
  std::string exclude_tools;        // --exclude-tools a,b
  std::string ephemeral_tools;      // --ephemeral-tools a,b
  bool explain = false;             // --explain: print each strata compaction's candidates (ExplainCompaction)
};

void AddReplayBudgetOptions(CLI::App* cmd, ReplayBudgetArgs* args);

// Throws CLI::ValidationError (exit 2): --policy or --compare without --budget, a list given to
// --policy, an unknown policy, --trigger/--target outside (0, 1] or a target above the trigger.
void ValidateReplayBudgetArgs(const ReplayBudgetArgs& args);

// The policy of --policy with the strata knobs applied.
std::unique_ptr<CompactionPolicy> MakeReplayPolicy(const ReplayBudgetArgs& args);

// Runs --compare; `out` and `summary_json` as for the replay (lines carry the policy name).
// Throws CommandFailed on errors.
void RunReplayCompare(const std::string& trace, const ReplayBudgetArgs& args, const std::string& out,
                      const std::string& summary_json, bool quiet);

}  // namespace strata::cli

#endif  // STRATA_APPS_STRATA_REPLAY_BUDGET_H_
