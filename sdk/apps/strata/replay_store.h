// Persistence for `strata replay --db FILE [--agent ID]`: the replayed agent is written to a store
// as it goes (each appended message is durable before the next one), with its growth curve and
// prefix breaks, so `strata inspect` and `strata growth` can read it afterwards.
//
// The agent is built under a temporary id (ID.replaying) and swapped in with Store::ReplaceAgent
// by Commit(), in one transaction: a replay that fails, or is killed, never leaves ID as a partial
// copy, and an agent stored under ID stays as it was until the new one is complete. The temporary
// agent is also the lock: a second replay of the same id is refused while the first one's process
// is alive (its pid and host are in the agent's "replay" event); a temporary agent left by a
// process that died is discarded.
//
//   auto persisted = ReplayPersistence::Open(db_path, options, config_json).value();
//   ReplayTrace(trace, persisted->context(), [&](const TraceMessage&, const BuiltRequest& r) {
//     return persisted->OnTurn(r);
//   });
//   persisted->Commit();  // or destroy it to discard the new agent
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
  // Opens (creating) the store at `db_path` and attaches a new context for the temporary agent of
  // options.agent.id. `config_json` (a JSON object: how the replay was configured) is stored as the
  // agent's "replay" event, with this process's pid and host. FAILED_PRECONDITION when another live
  // process is replaying the same id.
  static StatusOr<std::unique_ptr<ReplayPersistence>> Open(const std::string& db_path, ContextOptions options,
                                                           const std::string& config_json);
  // Discards the temporary agent unless Commit() succeeded.
  ~ReplayPersistence();

  Context& context() { return *context_; }
  Store& store() { return *store_; }
  const std::string& agent_id() const { return agent_id_; }

  // Stores `agent_config_json` (AgentConfigToJson) as the agent's configuration and
  // `tokenizer_name` (Tokenizer::Name() of what counted its segments) beside it, as Agent::Create
  // does, so that Agent::Open continues the replayed agent. Replaced with the agent by Commit().
  Status StoreAgentConfig(const std::string& agent_config_json, const std::string& tokenizer_name);

  // Call before each assistant message with the request rendered there (the ReplayTrace
  // callback): records the turn's growth point and, when the request does not start with the
  // previous request's history, a "prefix_break" event.
  Status OnTurn(const BuiltRequest& request);

  // Replaces the stored agent of the final id with the replayed one (one transaction).
  Status Commit();

  // The temporary id the agent is built under.
  static std::string TemporaryId(const std::string& agent_id) { return agent_id + ".replaying"; }

 private:
  ReplayPersistence(std::unique_ptr<Store> store, std::unique_ptr<Context> context, std::string agent_id)
      : store_(std::move(store)), context_(std::move(context)), agent_id_(std::move(agent_id)) {}

  std::unique_ptr<Store> store_;
  std::unique_ptr<Context> context_;  // attached to store_; destroyed first
  std::string agent_id_;              // the final id
  std::string previous_history_;      // previous request's bytes up to its last history message
  bool committed_ = false;
};

}  // namespace strata::cli

#endif  // STRATA_APPS_STRATA_REPLAY_STORE_H_
