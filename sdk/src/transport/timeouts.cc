#include "transport/timeouts.h"

#include <algorithm>

namespace strata::transport_internal {

std::chrono::milliseconds FirstByteTimeout(const Timeouts& timeouts, int64_t prompt_tokens) {
  const double scaled = static_cast<double>(std::max<int64_t>(0, prompt_tokens)) / 100000.0 *
                        static_cast<double>(timeouts.prefill_per_100k_tokens.count());
  return std::max(timeouts.first_byte, std::chrono::milliseconds(static_cast<int64_t>(scaled)));
}

}  // namespace strata::transport_internal
