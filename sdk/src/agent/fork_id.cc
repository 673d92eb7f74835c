#include "agent/fork_id.h"

namespace strata::agent_internal {

StatusOr<std::string> ForkChildId(std::string_view parent_id, const ForkOptions& options, int n) {
  const size_t max = options.max_id_length;
  if (!options.id.empty()) {
    if (max > 0 && options.id.size() > max) {
      return InvalidArgumentError("fork id \"" + options.id + "\" has " +
                                  std::to_string(options.id.size()) +
                                  " bytes, over ForkOptions::max_id_length (" +
                                  std::to_string(max) + "): give a shorter id");
    }
    return options.id;
  }
  const std::string suffix = ".fork-" + std::to_string(n);
  if (max == 0 || parent_id.size() + suffix.size() <= max) {
    return std::string(parent_id) + suffix;
  }
  if (max <= suffix.size()) {
    return InvalidArgumentError("ForkOptions::max_id_length " + std::to_string(max) +
                                " leaves no room for the parent's id before \"" + suffix +
                                "\": raise it, or give the fork an id (ForkOptions::id)");
  }
  // Cut before a UTF-8 continuation byte, never inside a character. Two parents that share the
  // kept prefix get the same candidate: the store refuses the second (ALREADY_EXISTS) and Fork
  // takes the next number.
  size_t keep = max - suffix.size();
  while (keep > 0 && (static_cast<unsigned char>(parent_id[keep]) & 0xC0) == 0x80) --keep;
  if (keep == 0) {
    return InvalidArgumentError("ForkOptions::max_id_length " + std::to_string(max) +
                                " leaves no whole character of the parent's id before \"" + suffix +
                                "\": raise it, or give the fork an id (ForkOptions::id)");
  }
  return std::string(parent_id.substr(0, keep)) + suffix;
}

}  // namespace strata::agent_internal
