// What strata-sidecar checks and sets before it serves: the settings every agent would otherwise
// fail on (so that the operator sees the error at startup, naming the flag, and tenants never do)
// and the process's core dumps.
#ifndef STRATA_APPS_STRATA_SIDECAR_STARTUP_H_
#define STRATA_APPS_STRATA_SIDECAR_STARTUP_H_

#include <functional>

#include "sidecar_config.h"
#include "strata/status.h"

namespace strata::sidecar {

// Reads an environment variable (nullptr: unset); std::getenv by default, injected in tests.
using GetEnv = std::function<const char*(const char* name)>;

// INVALID_ARGUMENT naming the flag and its configuration key for: an unknown --backend or
// --template; a --tokenizer or "tokenizers" entry that does not load (TokenizerAllowList);
// an --upstream that is not an http:// or https:// URL; an --upstream-api-key-env naming an unset
// or empty variable, or whose value holds a control character (CR, LF: it would end the
// Authorization header); a key sent over plain http to a host that is not loopback. The key's value
// is never part of a message.
Status CheckServingSettings(const SidecarConfig& config, const GetEnv& getenv = {});

// Makes the process leave no core dump and refuses ptrace by other processes of its user
// (RLIMIT_CORE 0, prctl PR_SET_DUMPABLE 0): a core would hold the upstream key and every bearer
// token presented. The sidecar calls it at startup unless allow_core_dumps (--allow-core-dumps).
Status DisableCoreDumps();

}  // namespace strata::sidecar

#endif  // STRATA_APPS_STRATA_SIDECAR_STARTUP_H_
