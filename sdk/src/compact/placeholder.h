// The strata policy's mask placeholder (MaskPlaceholder in strata/builtin_policies.h) made from
// facts already derived from the result's bytes, so that a policy which keeps those facts with
// each segment (compact/segment_facts.h) does not read the bytes again.
#ifndef STRATA_SRC_COMPACT_PLACEHOLDER_H_
#define STRATA_SRC_COMPACT_PLACEHOLDER_H_

#include <cstddef>
#include <string>
#include <string_view>
#include <unordered_set>
#include <vector>

#include "strata/segment.h"

namespace strata::compact_internal {

// What a placeholder reads from a result's content.
struct PlaceholderFacts {
  const std::vector<std::string>& identifiers;  // internal::RankedIdentifiers(content)
  const std::string& exit_status;               // ExitStatusOf(content)
  const std::string& recall_id;                 // the id context_recall gives the original by
};

// The exit status `text` shows ("<returncode>1</returncode>", "exit code 2", ...), or "".
std::string ExitStatusOf(const std::string& text);

// Names a request keeps anyway, viewed where they are held (no name is copied): those of a kept
// set (the history's messages, kept from one plan to the next, not owned; it must outlive this
// object) and those a plan inserts.
class PresentNames {
 public:
  PresentNames() = default;
  explicit PresentNames(const std::unordered_set<std::string_view>* kept) : kept_(kept) {}
  void insert(std::string_view name) {
    if (kept_ == nullptr || kept_->count(name) == 0) added_.insert(name);
  }
  bool contains(std::string_view name) const {
    return (kept_ != nullptr && kept_->count(name) > 0) || added_.count(name) > 0;
  }
  size_t size() const { return (kept_ != nullptr ? kept_->size() : 0) + added_.size(); }

 private:
  const std::unordered_set<std::string_view>* kept_ = nullptr;
  std::unordered_set<std::string_view> added_;  // names not in kept_
};

// MaskPlaceholder(result, call, facts.recall_id, max_identifiers, already_present,
// original_bytes), byte for byte, from `facts` instead of result.content.
std::string MaskPlaceholderFrom(const PlaceholderFacts& facts, const Segment& result,
                                const ToolCall* call, size_t max_identifiers,
                                const PresentNames& already_present, size_t original_bytes);

}  // namespace strata::compact_internal

#endif  // STRATA_SRC_COMPACT_PLACEHOLDER_H_
