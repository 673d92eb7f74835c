// The JSON of the ContextOptions a store keeps for each agent (private to strata::store).
#ifndef STRATA_SRC_STORE_OPTIONS_CODEC_H_
#define STRATA_SRC_STORE_OPTIONS_CODEC_H_

#include <string>

#include "strata/context.h"
#include "strata/status.h"

namespace strata::store_internal {

// The stored form of `options`: identity, render, hygiene and keep_originals (no pointers).
std::string OptionsToJson(const ContextOptions& options);
// Inverse of OptionsToJson; fields missing from `text` (written by an older strata) keep their
// defaults. DATA_LOSS naming `agent_id` when `text` is not such JSON.
StatusOr<ContextOptions> OptionsFromJson(const std::string& text, const std::string& agent_id);

}  // namespace strata::store_internal

#endif  // STRATA_SRC_STORE_OPTIONS_CODEC_H_
