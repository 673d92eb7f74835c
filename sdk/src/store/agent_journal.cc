#include "store/agent_journal.h"

#include <utility>

namespace strata::store_internal {
namespace {

class AgentJournal final : public ContextJournal {
 public:
  AgentJournal(Store* store, std::string agent_id)
      : store_(store), agent_id_(std::move(agent_id)) {}
  Status Record(const ContextChange& change) override {
    return store_->ApplyChange(agent_id_, change);
  }

 private:
  Store* const store_;
  const std::string agent_id_;
};

}  // namespace

ContextJournal* AgentJournals::For(std::string_view agent_id) {
  internal::MutexLock lock(mu_);
  auto it = journals_.find(agent_id);
  if (it == journals_.end()) {
    it = journals_
             .emplace(std::string(agent_id),
                      std::make_unique<AgentJournal>(store_, std::string(agent_id)))
             .first;
  }
  return it->second.get();
}

}  // namespace strata::store_internal
