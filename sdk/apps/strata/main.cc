// strata — command-line tools over the strata SDK. `strata --help` lists the subcommands.
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <iostream>
#include <string>

#include "commands.h"

namespace {

// The subcommand names of `app`, joined by ", ".
std::string CommandList(CLI::App& app) {
  std::string names;
  for (const CLI::App* sub : app.get_subcommands([](CLI::App*) { return true; })) {
    names += (names.empty() ? "" : ", ") + sub->get_name();
  }
  return names;
}

// `strata frobnicate ...`: CLI11 would print the main help for `strata frobnicate --help` and
// exit 0, or complain about an unexpected argument; the first argument that is not an option
// names the command, so an unknown one is refused as such.
bool RefuseUnknownCommand(CLI::App& app, int argc, char** argv) {
  if (argc < 2 || argv[1][0] == '-') return false;
  const std::string name = argv[1];
  if (!app.get_subcommands([&name](CLI::App* sub) { return sub->check_name(name); }).empty()) {
    return false;
  }
  std::cerr << "strata: unknown command \"" << name << "\"; the commands are: " << CommandList(app)
            << " (strata --help describes them)\n";
  return true;
}

int Run(CLI::App& app, int argc, char** argv) {
  if (RefuseUnknownCommand(app, argc, argv)) return strata::cli::kExitUsage;
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

// Every command's output ends here: a summary, a listing or a help text that could not be
// written (a closed pipe, a full disk, /dev/full) is a failure, not a success.
int CheckStdout(int code) {
  if (code != strata::cli::kExitOk) return code;  // the command already said what failed
  const bool failed_before = !std::cout || std::ferror(stdout);
  errno = 0;
  std::cout.flush();
  const bool failed_now = std::fflush(stdout) != 0 || !std::cout;
  if (!failed_before && !failed_now) return code;
  // errno tells why only when the failing write was this flush (most output is buffered to here).
  const std::string why = failed_now && errno != 0 ? std::strerror(errno) : "a write failed";
  std::cerr << "strata: writing to standard output failed (" << why << ")\n";
  return strata::cli::kExitFailure;
}

}  // namespace

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
  return CheckStdout(Run(app, argc, argv));
}
