// strata-sim's flags of the --answer retrieve mode (sim_retrieve.h): --answer, --degrade and
// --degrade-seed, and what they set in SimOptions. Used by main.cc only.
#ifndef STRATA_APPS_STRATA_SIM_RETRIEVE_FLAGS_H_
#define STRATA_APPS_STRATA_SIM_RETRIEVE_FLAGS_H_

#include <CLI/CLI.hpp>

#include <string>

#include "sim_retrieve.h"
#include "sim_server.h"

namespace strata::sim {

struct RetrieveFlags {
  std::string mode = "reply";  // reply | retrieve
  std::string degrade;         // --degrade SPEC
  uint64_t seed = 1;           // --degrade-seed
};

inline void AddRetrieveFlags(CLI::App& app, RetrieveFlags* flags) {
  app.add_option("--answer", flags->mode,
                 "reply: the trajectory's or generated replies; retrieve: answer strata probe's "
                 "questions from the prompt (a test double, not a model; sim_retrieve.h)")
      ->check(CLI::IsMember({"reply", "retrieve"}))->capture_default_str();
  app.add_option("--degrade", flags->degrade,
                 "with --answer retrieve: chances of a wrong answer, e.g. depth>0.5:p=0.3,length>=128k:p=0.5");
  app.add_option("--degrade-seed", flags->seed, "seed of --degrade's choices")->capture_default_str();
}

// Sets options->answer for --answer retrieve. INVALID_ARGUMENT for a malformed --degrade, or one
// given without --answer retrieve.
inline Status ApplyRetrieveFlags(const RetrieveFlags& flags, SimOptions* options) {
  StatusOr<std::vector<DegradeRule>> rules = ParseDegradeSpec(flags.degrade);
  if (!rules.ok()) return rules.status();
  if (!flags.degrade.empty() && flags.mode != "retrieve") {
    return InvalidArgumentError("--degrade \"" + flags.degrade + "\" needs --answer retrieve");
  }
  if (flags.mode != "retrieve") return Status::Ok();
  RetrieveOptions retrieve;
  retrieve.degrade = std::move(rules).value();
  retrieve.seed = flags.seed;
  options->answer = [retrieve](const std::string& request, int64_t prompt_tokens) {
    return AnswerRetrieve(request, prompt_tokens, retrieve);
  };
  return Status::Ok();
}

}  // namespace strata::sim

#endif  // STRATA_APPS_STRATA_SIM_RETRIEVE_FLAGS_H_
