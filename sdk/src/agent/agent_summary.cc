// What a cache-keeping summary continues (agent_impl.h): the request this agent's own turn sent
// last, handed to the policy's summarizer with each turn's build (SummaryRequestContext), or, for
// a summary outside a turn, the request it would send now; and the sink that takes the summary
// request's record into the turn's writes.
#include "agent/agent_impl.h"
#include "strata/transport.h"

namespace strata {

Status Agent::Impl::CompactionRecords::Write(const RequestRecord& record) {
  turn_->compaction_requests.push_back(record);
  if (batch_ != nullptr && batch_->active()) batch_->writes().records.push_back(record);
  return Status::Ok();
}

SummaryRequestContext Agent::Impl::PreviousRequest(const std::string& turn_request_id,
                                                   RecordSink* records) const {
  SummaryRequestContext previous;
  previous.body = last_request_.body.view();
  const Transport* transport = shared_.transport;  // null: an agent without an upstream
  if (transport != nullptr) previous.endpoint = transport->Endpoint();
  if (transport != nullptr && transport->Name() == "pools" && !last_request_.prefix_hash.empty()) {
    previous.headers.emplace_back(kPrefixHashHeader, last_request_.prefix_hash);
  }
  previous.agent_id = config_.identity.id;
  previous.request_id = turn_request_id + "-compaction";
  previous.cached_tokens_predicted = last_request_.cached_tokens;
  previous.records = records;
  return previous;
}

SummaryRequestContext Agent::Impl::CurrentRequest(const std::string& request_id,
                                                  RecordSink* records,
                                                  BuiltRequest* current) const {
  SummaryRequestContext context = PreviousRequest(request_id, records);
  StatusOr<BuiltRequest> built = context_->Preview(Fields(request_id));
  if (!built.ok()) {
    context.body = {};
    return context;
  }
  *current = std::move(built).value();
  context.body = current->body;
  context.headers.clear();
  if (shared_.transport != nullptr && shared_.transport->Name() == "pools") {
    context.headers.emplace_back(kPrefixHashHeader, current->stable_prefix_hash);
  }
  return context;
}

void Agent::Impl::KeepLastRequest(const turn_internal::TurnRun& run, const std::string& body) {
  const BuiltRequest& built = run.built();
  // The next request usually continues this one: only what its build changed is copied.
  const size_t unchanged = built.unchanged_bytes;
  if (last_request_.render_serial != 0 &&
      built.previous_render_serial == last_request_.render_serial &&
      unchanged <= last_request_.body.size() && unchanged <= body.size()) {
    last_request_.body.truncate(unchanged);
    last_request_.body.append(std::string_view(body).substr(unchanged));
  } else {
    last_request_.body.clear();
    last_request_.body.append(body);  // the next turns append to it
  }
  last_request_.render_serial = built.render_serial;
  last_request_.prefix_hash = run.built().stable_prefix_hash;
  const PromptBlocks& blocks = run.blocks();
  last_request_.cached_tokens = static_cast<int64_t>(blocks.cacheable_blocks * blocks.block_tokens);
}

}  // namespace strata
