// Subcommands of the `strata` CLI. Each lives in its own cmd_<name>.cc and registers itself here.
#ifndef STRATA_APPS_STRATA_COMMANDS_H_
#define STRATA_APPS_STRATA_COMMANDS_H_

#include <CLI/CLI.hpp>

namespace strata::cli {

// Exit statuses shared by every subcommand.
inline constexpr int kExitOk = 0;
inline constexpr int kExitFailure = 1;
inline constexpr int kExitUsage = 2;

// Each Register function adds one subcommand to `app` and sets its callback. A callback reports
// failure by throwing CommandFailed (exit 1) or CLI::ValidationError (exit 2).
struct CommandFailed {
  std::string message;
};

void RegisterReplay(CLI::App& app);
void RegisterTokens(CLI::App& app);
void RegisterInspect(CLI::App& app);
void RegisterGrowth(CLI::App& app);
void RegisterPrompt(CLI::App& app);
void RegisterRun(CLI::App& app);
void RegisterPlan(CLI::App& app);
void RegisterBench(CLI::App& app);
void RegisterProbe(CLI::App& app);

}  // namespace strata::cli

#endif  // STRATA_APPS_STRATA_COMMANDS_H_
