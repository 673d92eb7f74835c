// strata-sidecar's configuration file (sidecar_config.h ParseSidecarConfig) and its tokenizer
// allow-list (tokenizer_allowlist.h): any document is refused with a reason or parsed into typed
// values inside their documented ranges, never a crash (a value nested 100k levels deep under a
// typed key used to overflow the stack). For a parsed document, the allow-list it names either is
// refused with a reason or resolves each name to its spec, refuses every file spec it does not
// list with the one message that reveals nothing, and shows tenants names, never listed paths.
// No file is read: ValidateSidecarConfig (TLS files) and TokenizerAllowList::CheckAll are not run.
#include <string>

#include "fuzz_util.h"
#include "sidecar_config.h"
#include "strata/agent.h"
#include "tokenizer_allowlist.h"

namespace {

namespace sc = strata::sidecar;

void CheckLimits(const sc::TenantLimits& l, const std::string& where) {
  STRATA_FUZZ_CHECK(l.max_agents >= 0 && l.max_agents <= sc::kMaxAgentsLimit,
                    where + ".max_agents out of range: " + std::to_string(l.max_agents));
  STRATA_FUZZ_CHECK(
      l.max_concurrent_completions >= 0 && l.max_concurrent_completions <= sc::kMaxCompletionsLimit,
      where + ".max_concurrent_completions out of range");
  STRATA_FUZZ_CHECK(l.max_request_bytes >= 1 && l.max_request_bytes <= sc::kMaxRequestBytesLimit,
                    where + ".max_request_bytes out of range");
}

void CheckRanges(const sc::SidecarConfig& c) {
  STRATA_FUZZ_CHECK(c.budget >= 0 && c.budget <= strata::kMaxAgentWindowTokens,
                    "budget out of range: " + std::to_string(c.budget));
  STRATA_FUZZ_CHECK(c.drain_timeout_ms >= 0 && c.drain_timeout_ms <= sc::kMaxDrainTimeoutMs,
                    "drain_timeout_ms out of range");
  STRATA_FUZZ_CHECK(c.max_threads >= 2 && c.max_threads <= sc::kMaxThreadsLimit,
                    "max_threads out of range");
  STRATA_FUZZ_CHECK(c.max_open_agents >= 0 && c.max_open_agents <= sc::kMaxAgentsLimit,
                    "max_open_agents out of range");
  CheckLimits(c.default_limits, "default_limits");
  for (const sc::TenantConfig& t : c.tenants) CheckLimits(t.limits, "tenants[].limits");
}

void CheckAllowList(const sc::SidecarConfig& c) {
  strata::StatusOr<sc::TokenizerAllowList> list = sc::TokenizerAllowList::Make(c.tokenizers, c.tokenizer);
  if (!list.ok()) {
    STRATA_FUZZ_CHECK(!list.status().message().empty(), "an allow-list refused without a reason");
    return;
  }
  for (const auto& [name, spec] : list->named()) {
    strata::StatusOr<std::string> resolved = list->Resolve(name);
    STRATA_FUZZ_CHECK(resolved.ok() && *resolved == spec, "the name " + name + " does not resolve");
    if (sc::TokenizerAllowList::ReadsFile(spec)) {
      const std::string shown = list->Shown(spec);
      STRATA_FUZZ_CHECK(list->named().count(shown) == 1 && list->named().at(shown) == spec,
                        "a listed file is shown to tenants as " + shown);
    }
  }
  // A file the list does not name: refused, and the message is the same whatever the file.
  for (const char* file : {"hf:/etc/passwd", "spm:/proc/self/environ"}) {
    const std::string requested = file;
    if (list->named().count(requested) != 0) continue;
    strata::StatusOr<std::string> resolved = list->Resolve(requested);
    STRATA_FUZZ_CHECK(!resolved.ok(), "an unlisted file is allowed: " + requested);
    std::string message = resolved.status().message();
    STRATA_FUZZ_CHECK(message.rfind("tokenizer \"" + requested + "\" is not one of the allowed", 0) == 0,
                      "an unexpected refusal: " + message);
  }
  STRATA_FUZZ_CHECK(!list->default_spec().empty() || c.tokenizer.empty(), "the default was lost");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text = strata::fuzz::AsText(data, size);
  strata::StatusOr<sc::SidecarConfig> config = sc::ParseSidecarConfig(text);
  if (!config.ok()) {
    STRATA_FUZZ_CHECK(!config.status().message().empty(), "a configuration refused without a reason");
    return 0;
  }
  CheckRanges(*config);
  CheckAllowList(*config);
  // Parsing is deterministic.
  strata::StatusOr<sc::SidecarConfig> again = sc::ParseSidecarConfig(text);
  STRATA_FUZZ_CHECK(again.ok() && again->tokenizers == config->tokenizers &&
                        again->tenants.size() == config->tenants.size(),
                    "the same document parsed twice differs");
  return 0;
}
