// The tool calls of a segment as the store keeps them: length-prefixed bytes, so that arguments are
// kept byte for byte, whatever they hold (private to strata::store).
#ifndef STRATA_SRC_STORE_TOOL_CALLS_CODEC_H_
#define STRATA_SRC_STORE_TOOL_CALLS_CODEC_H_

#include <string>
#include <string_view>
#include <vector>

#include "strata/segment.h"

namespace strata::store_internal {

// `calls` as bytes ("" for none).
std::string EncodeToolCalls(const std::vector<ToolCall>& calls);
// Inverse of EncodeToolCalls; false when `in` is damaged (`calls` is then unspecified).
bool DecodeToolCalls(std::string_view in, std::vector<ToolCall>& calls);

}  // namespace strata::store_internal

#endif  // STRATA_SRC_STORE_TOOL_CALLS_CODEC_H_
