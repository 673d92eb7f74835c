// strata — command-line tools over the strata SDK. `strata --help` lists the subcommands.
#include <iostream>

#include "commands.h"

int main(int argc, char** argv) {
  CLI::App app{"strata: context manager for LLM agents"};
  app.require_subcommand(1);
  strata::cli::RegisterReplay(app);
  strata::cli::RegisterTokens(app);
  strata::cli::RegisterInspect(app);
  strata::cli::RegisterGrowth(app);
  strata::cli::RegisterPrompt(app);
  strata::cli::RegisterRun(app);
  strata::cli::RegisterPlan(app);
  strata::cli::RegisterBench(app);
  strata::cli::RegisterProbe(app);
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    app.exit(e);
    return strata::cli::kExitUsage;
  } catch (const strata::cli::CommandFailed& e) {
    std::cerr << "strata: " << e.message << "\n";
    return strata::cli::kExitFailure;
  }
  return strata::cli::kExitOk;
}
