// The ContextJournal a store hands out for one agent (Store::Journal), shared by the store
// backends (private to strata::store): it persists each change through Store::ApplyChange.
#ifndef STRATA_SRC_STORE_AGENT_JOURNAL_H_
#define STRATA_SRC_STORE_AGENT_JOURNAL_H_

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <string_view>

#include "core/thread_annotations.h"
#include "strata/context.h"
#include "strata/store.h"

namespace strata::store_internal {

// The journals of one store, one per agent id, made on first use and kept for the store's life
// (a context holds its journal's pointer). Thread-safe.
class AgentJournals {
 public:
  explicit AgentJournals(Store* store) : store_(store) {}

  // The journal of `agent_id`: the same one on every call.
  ContextJournal* For(std::string_view agent_id);

 private:
  Store* const store_;
  internal::Mutex mu_;
  std::map<std::string, std::unique_ptr<ContextJournal>, std::less<>> journals_
      STRATA_GUARDED_BY(mu_);
};

}  // namespace strata::store_internal

#endif  // STRATA_SRC_STORE_AGENT_JOURNAL_H_
