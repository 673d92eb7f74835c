// AgentConfig parsing (strata/agent.h AgentConfigFromJson): any input is either refused with a
// reason or parsed into a configuration that round-trips: AgentConfigToJson of it parses again to a
// configuration with the same JSON (the parser is documented as the strict inverse of the printer).
// The budget of a parsed configuration is resolved too (ResolveBudget), as Agent::Create does.
#include <string>

#include "fuzz_util.h"
#include "strata/agent.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text = strata::fuzz::AsText(data, size);
  strata::StatusOr<strata::AgentConfig> config = strata::AgentConfigFromJson(text);
  if (!config.ok()) {
    STRATA_FUZZ_CHECK(!config.status().message().empty(), "a configuration refused without a reason");
    return 0;
  }
  const std::string printed = strata::AgentConfigToJson(*config);
  strata::StatusOr<strata::AgentConfig> again = strata::AgentConfigFromJson(printed);
  STRATA_FUZZ_CHECK(again.ok(), "the printed configuration is refused: " + again.status().ToString() +
                                    "\n" + printed);
  STRATA_FUZZ_CHECK(strata::AgentConfigToJson(*again) == printed,
                    "the configuration does not round-trip through its JSON:\n" + printed);
  strata::StatusOr<strata::Budget> budget = strata::ResolveBudget(config->budget);
  STRATA_FUZZ_CHECK(budget.ok() || !budget.status().message().empty(), "a budget refused without a reason");
  return 0;
}
