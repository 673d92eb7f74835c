// Persistence for `strata replay --db FILE [--agent ID]`: the replayed agent is written to a store
// as it goes (each appended message is durable before the next one), with its growth curve and
// prefix breaks, so `strata inspect` and `strata growth` can read it afterwards.
//
//   auto persisted = ReplayPersistence::Open(db_path, options).value();  // replaces the agent
//   ReplayTrace(trace, persisted->context(), [&](const TraceMessage&, const BuiltRequest& r) {
//     return persisted->OnTurn(r);
//   });
//
// Thread safety: not thread-safe (one replay, one thread).
#ifndef STRATA_APPS_STRATA_REPLAY_STORE_H_
#define STRATA_APPS_STRATA_REPLAY_STORE_H_

#include <memory>
#include <string>

#include "strata/context.h"
#include "strata/store.h"

namespace strata::cli {

class ReplayPersistence {
 public:
  // Opens (creating) the store at `db_path` and attaches a new context for options.agent.id. A
  // stored agent of that id is replaced (replaying a trace again starts it over).
  static StatusOr<std::unique_ptr<ReplayPersistence>> Open(const std::string& db_path,
                                                           ContextOptions options);

  Context& context() { return *context_; }
  Store& store() { return *store_; }

  // Call before each assistant message with the request rendered there (the ReplayTrace
  // callback): records the turn's growth point and, when the request does not start with the
  // previous request's history, a "prefix_break" event.
  Status OnTurn(const BuiltRequest& request);

 private:
  ReplayPersistence(std::unique_ptr<Store> store, std::unique_ptr<Context> context)
      : store_(std::move(store)), context_(std::move(context)) {}

  std::unique_ptr<Store> store_;
  std::unique_ptr<Context> context_;  // attached to store_; destroyed first
  std::string previous_history_;      // previous request's bytes up to its last history message
};

}  // namespace strata::cli

#endif  // STRATA_APPS_STRATA_REPLAY_STORE_H_
