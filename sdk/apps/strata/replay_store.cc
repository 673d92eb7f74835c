#include "replay_store.h"

#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <nlohmann/json.hpp>
#include <utility>

namespace strata::cli {
namespace {

std::string HostName() {
  char name[256] = {};
  if (::gethostname(name, sizeof name - 1) != 0) return "";
  return name;
}

// OK when no live process holds the temporary agent `temp_id`: it is discarded when the process
// recorded in its "replay" event is gone (same host, no such pid). FAILED_PRECONDITION otherwise.
Status ReclaimStaleTemporary(Store& store, const std::string& temp_id, const std::string& agent_id) {
  StatusOr<std::vector<StoredEvent>> events = store.Events(temp_id, "replay");
  if (!events.ok()) {
    if (events.status().code() == StatusCode::kNotFound) return Status::Ok();  // finished meanwhile
    return events.status();
  }
  std::string holder = "another process (it has not recorded its pid yet)";
  if (!events->empty()) {
    nlohmann::json lock = nlohmann::json::parse(events->front().payload_json, nullptr, false);
    const int64_t pid = lock.is_object() ? lock.value("pid", int64_t{0}) : 0;
    const std::string host = lock.is_object() ? lock.value("host", std::string()) : std::string();
    const bool dead = pid > 0 && host == HostName() && ::kill(static_cast<pid_t>(pid), 0) != 0 && errno == ESRCH;
    if (dead) {
      Status deleted = store.DeleteAgent(temp_id);
      if (deleted.ok() || deleted.code() == StatusCode::kNotFound) return Status::Ok();
      return deleted;
    }
    holder = "process " + std::to_string(pid) + (host.empty() ? "" : " on " + host);
  }
  return FailedPreconditionError("agent \"" + agent_id + "\" in " + store.path() + " is being replayed by " +
                                 holder + " (temporary agent \"" + temp_id +
                                 "\"); wait for it, choose another --agent, or, if that replay is no longer "
                                 "running, delete \"" + temp_id + "\"");
}

}  // namespace

StatusOr<std::unique_ptr<ReplayPersistence>> ReplayPersistence::Open(const std::string& db_path,
                                                                     ContextOptions options,
                                                                     const std::string& config_json) {
  STRATA_ASSIGN_OR_RETURN(std::unique_ptr<Store> store, OpenStore(db_path));
  const std::string agent_id = options.agent.id;
  const std::string temp_id = TemporaryId(agent_id);
  options.agent.id = temp_id;
  StatusOr<std::unique_ptr<Context>> context = CreateContext(*store, options);
  if (context.status().code() == StatusCode::kAlreadyExists) {
    STRATA_RETURN_IF_ERROR(ReclaimStaleTemporary(*store, temp_id, agent_id));
    context = CreateContext(*store, options);
    if (context.status().code() == StatusCode::kAlreadyExists) {
      STRATA_RETURN_IF_ERROR(ReclaimStaleTemporary(*store, temp_id, agent_id));
    }
  }
  if (!context.ok()) return context.status();
  auto persistence = std::unique_ptr<ReplayPersistence>(
      new ReplayPersistence(std::move(store), std::move(context).value(), agent_id));
  nlohmann::json payload = nlohmann::json::parse(config_json, nullptr, false);
  if (!payload.is_object()) payload = nlohmann::json::object();
  payload["pid"] = static_cast<int64_t>(::getpid());
  payload["host"] = HostName();
  StoredEvent event;
  event.agent_id = temp_id;
  event.type = "replay";
  event.payload_json = payload.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  STRATA_RETURN_IF_ERROR(persistence->store_->AppendEvent(event).status());
  return persistence;
}

ReplayPersistence::~ReplayPersistence() {
  if (committed_) return;
  context_.reset();
  // Best effort: a temporary agent left behind is reclaimed by the next replay of this id.
  (void)store_->DeleteAgent(TemporaryId(agent_id_));
}

Status ReplayPersistence::Commit() {
  STRATA_RETURN_IF_ERROR(store_->ReplaceAgent(TemporaryId(agent_id_), agent_id_));
  committed_ = true;
  return Status::Ok();
}

Status ReplayPersistence::StoreAgentConfig(const std::string& agent_config_json,
                                           const std::string& tokenizer_name) {
  // The keys strata::Agent keeps its configuration and tokenizer under (sdk/src/agent/agent_impl.h).
  const std::string temp_id = TemporaryId(agent_id_);
  STRATA_RETURN_IF_ERROR(store_->PutAgentState(temp_id, "config", agent_config_json));
  return store_->PutAgentState(temp_id, "tokenizer_name", tokenizer_name);
}

Status ReplayPersistence::OnTurn(const BuiltRequest& request) {
  const std::string& body = request.body;
  const ContextStats stats = context_->Stats();
  const std::string& stored_id = context_->options().agent.id;
  if (!previous_history_.empty() &&
      body.compare(0, previous_history_.size(), previous_history_) != 0) {
    size_t n = std::min(previous_history_.size(), body.size());
    size_t reused = static_cast<size_t>(
        std::mismatch(body.begin(), body.begin() + n, previous_history_.begin()).first -
        body.begin());
    StoredEvent event;
    event.agent_id = stored_id;
    event.turn = static_cast<int64_t>(stats.turns);
    event.type = "prefix_break";
    nlohmann::ordered_json payload;
    payload["reused_bytes"] = reused;
    payload["previous_history_bytes"] = previous_history_.size();
    payload["request_bytes"] = body.size();
    event.payload_json = payload.dump();
    STRATA_RETURN_IF_ERROR(store_->AppendEvent(event).status());
  }
  previous_history_.assign(body, 0, std::min(request.history_end_bytes, body.size()));
  return store_->RecordGrowth(GrowthPointOf(*context_));
}

}  // namespace strata::cli
