// A Store that forwards every call to another one and can be told to refuse some (tests of what
// a caller does when the store refuses a write). Not thread-safe beyond the inner store's calls.
//
//   auto inner = strata::OpenSqliteStore(path).value();
//   strata::testing::ForwardingStore store(*inner);
//   store.refuse_commits = true;  // CommitTurn now fails with UNAVAILABLE, writing nothing
#ifndef STRATA_TESTS_TESTING_FORWARDING_STORE_H_
#define STRATA_TESTS_TESTING_FORWARDING_STORE_H_

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "strata/store.h"

namespace strata::testing {

class ForwardingStore final : public Store {
 public:
  explicit ForwardingStore(Store& inner) : inner_(inner) {}

  bool default_commit = false;   // CommitTurn runs Store's default (one call per write)
  bool refuse_commits = false;   // CommitTurn fails with UNAVAILABLE and writes nothing
  bool refuse_records = false;   // AppendRequest fails with UNAVAILABLE
  int mutations = 0;             // single mutations forwarded (ApplyChange, PutAgentState, ...)
  int commits = 0;               // CommitTurn calls that succeeded

  const std::string& path() const override { return inner_.path(); }
  Status CreateAgent(const ContextOptions& o) override { return inner_.CreateAgent(o); }
  StatusOr<StoredAgent> GetAgent(std::string_view id) override { return inner_.GetAgent(id); }
  StatusOr<std::vector<StoredAgent>> ListAgents() override { return inner_.ListAgents(); }
  Status DeleteAgent(std::string_view id) override { return inner_.DeleteAgent(id); }
  Status ReplaceAgent(std::string_view from, std::string_view to) override {
    return inner_.ReplaceAgent(from, to);
  }
  Status ApplyChange(std::string_view id, const ContextChange& change) override {
    ++mutations;
    return inner_.ApplyChange(id, change);
  }
  StatusOr<ContextSnapshot> LoadSnapshot(std::string_view id) override {
    return inner_.LoadSnapshot(id);
  }
  StatusOr<std::string> LoadOriginal(std::string_view id, std::string_view recall_id) override {
    return inner_.LoadOriginal(id, recall_id);
  }
  // The inner store's journal: context changes outside a turn go to the inner store directly.
  ContextJournal* Journal(std::string_view id) override { return inner_.Journal(id); }
  Status AppendRequest(const RequestRecord& record) override {
    if (refuse_records) return UnavailableError("the test store refuses records");
    ++mutations;
    return inner_.AppendRequest(record);
  }
  StatusOr<std::vector<RequestRecord>> RecentRequests(std::string_view id, size_t limit) override {
    return inner_.RecentRequests(id, limit);
  }
  StatusOr<int64_t> AppendEvent(const StoredEvent& event) override {
    ++mutations;
    return inner_.AppendEvent(event);
  }
  StatusOr<std::vector<StoredEvent>> Events(std::string_view id, std::string_view type) override {
    return inner_.Events(id, type);
  }
  Status PutAgentState(std::string_view id, std::string_view key, std::string_view value) override {
    ++mutations;
    return inner_.PutAgentState(id, key, value);
  }
  StatusOr<std::optional<std::string>> GetAgentState(std::string_view id,
                                                     std::string_view key) override {
    return inner_.GetAgentState(id, key);
  }
  Status RecordGrowth(const GrowthPoint& point) override {
    ++mutations;
    return inner_.RecordGrowth(point);
  }
  StatusOr<std::vector<GrowthPoint>> Growth(std::string_view id) override {
    return inner_.Growth(id);
  }
  StatusOr<int64_t> PruneRequests(const RetentionPolicy& policy, int64_t now) override {
    return inner_.PruneRequests(policy, now);
  }
  Status CommitTurn(const TurnWrites& writes) override {
    if (refuse_commits) return UnavailableError("the test store refuses the turn's commit");
    Status committed = default_commit ? Store::CommitTurn(writes) : inner_.CommitTurn(writes);
    if (committed.ok()) ++commits;
    return committed;
  }
  StatusOr<StoreStats> Stats() override { return inner_.Stats(); }
  Status Backup(const std::string& destination) override { return inner_.Backup(destination); }

 private:
  Store& inner_;
};

}  // namespace strata::testing

#endif  // STRATA_TESTS_TESTING_FORWARDING_STORE_H_
