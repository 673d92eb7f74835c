// The first-byte timeout of a call, shared by the HTTP and gRPC transports.
#ifndef STRATA_SRC_TRANSPORT_TIMEOUTS_H_
#define STRATA_SRC_TRANSPORT_TIMEOUTS_H_

#include <chrono>
#include <cstdint>

#include "strata/transport.h"

namespace strata::transport_internal {

// max(first_byte, prompt_tokens / 100000.0 * prefill_per_100k_tokens): the time the server may take
// before the first body byte (first SSE event, first gRPC message) of a prompt that size.
std::chrono::milliseconds FirstByteTimeout(const Timeouts& timeouts, int64_t prompt_tokens);

}  // namespace strata::transport_internal

#endif  // STRATA_SRC_TRANSPORT_TIMEOUTS_H_
