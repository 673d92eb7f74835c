// The strata policy's memo of its last plan: an input equal to the one planned last, in everything
// a plan reads, gets the same edit without planning again (nor summarizing again). The Build() that
// follows a prediction (Context::PreviewBuild, or a build of a copy) asks what the prediction
// asked.
//
//   std::string key;
//   if (std::optional<HistoryEdit> kept = memo.Find(in, &key)) return *kept;
//   ... plan ...
//   if (in.prediction || !plan.summaries.empty()) memo.Keep(in, plan, std::move(key));
//
// The key holds every input a plan reads, the segments by their ids, fingerprints and fields: it
// costs a pass over the history. Find() builds it only when the input's counts, turn and size equal
// those of the plan kept (so an agent's turn, whose history grew since, pays a few comparisons),
// and only the plans worth keeping are keyed at all.
//
// Thread safety: PlanMemo is thread-safe.
#ifndef STRATA_SRC_COMPACT_PLAN_MEMO_H_
#define STRATA_SRC_COMPACT_PLAN_MEMO_H_

#include <array>
#include <cstdint>
#include <optional>
#include <string>

#include "core/thread_annotations.h"
#include "strata/compaction_policy.h"

namespace strata::compact_internal {

class PlanMemo {
 public:
  // The edit kept for an input equal to `in`; nullopt when none is. *key is set to `in`'s key when
  // it was built (the counts matched), for Keep(); left empty otherwise.
  std::optional<HistoryEdit> Find(const CompactionInput& in, std::string* key);
  // Keeps `plan` as the edit for `in`, replacing the one kept. `key`: Find()'s for the same input,
  // or empty (built here). An input without fingerprints (not made by a Context) is not kept.
  void Keep(const CompactionInput& in, const HistoryEdit& plan, std::string key);

  // Everything a plan reads from `in`, as one string; "" when the input has no fingerprints.
  static std::string Key(const CompactionInput& in);

 private:
  // The counts every key starts with, compared before a key is built.
  using Counts = std::array<uint64_t, 13>;
  static Counts CountsOf(const CompactionInput& in);

  internal::Mutex mu_;
  bool kept_ STRATA_GUARDED_BY(mu_) = false;
  Counts counts_ STRATA_GUARDED_BY(mu_){};
  std::string key_ STRATA_GUARDED_BY(mu_);
  HistoryEdit plan_ STRATA_GUARDED_BY(mu_);
};

}  // namespace strata::compact_internal

#endif  // STRATA_SRC_COMPACT_PLAN_MEMO_H_
