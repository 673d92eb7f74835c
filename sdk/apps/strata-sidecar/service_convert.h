// service_convert.h — strata's values as the messages of strata.v1.ContextService (service.h),
// and the conversation read back by GetMessages.
//
// Thread safety: pure functions over their arguments.
#ifndef STRATA_APPS_STRATA_SIDECAR_SERVICE_CONVERT_H_
#define STRATA_APPS_STRATA_SIDECAR_SERVICE_CONVERT_H_

#include <string>

#include "strata/agent.h"
#include "strata/v1/context_service.pb.h"

namespace strata::sidecar {

namespace v1 = ::strata::v1;

// A stored agent id ("<tenant>/<id>") as its tenant knows it ("<id>").
std::string LocalOf(const std::string& stored_id);

void FillLayer(Layer layer, const LayerUsage& usage, v1::LayerTokens* out);
void FillReport(const CompactionReport& r, v1::CompactionReport* out);
// Text fields pass through ToValidUtf8 (a proto string must be valid UTF-8); the endpoint shows
// as "upstream" (tenants do not see which upstream served them).
void FillRecord(const RequestRecord& r, v1::RequestRecord* out);
void FillGrowth(const GrowthPoint& g, v1::GrowthPoint* out);
// One delta of the answer as a stream event of Complete.
v1::CompleteEvent DeltaEvent(const StreamDelta& d);
void FillPrefixBreak(const PrefixBreakEvent& e, v1::PrefixBreak* out);
// `user_segment`: the id of the user message Complete appended ("" when it appended none).
void FillTurn(const Turn& turn, const std::string& user_segment, v1::Turn* out);

// OK when `agent` has something for Complete to send: its last history message is a user message
// or a tool result (or `user_message` is about to be appended). FAILED_PRECONDITION, saying what
// to do, when it has no history or its last message is an assistant reply.
Status CheckSomethingToSend(const Agent& agent, bool user_message);

// The page of GetMessages starting at message `offset` (system prompts first, then the history
// as a client would send it: originals, no summaries, nothing a client's edit replaced), at most
// `page_size` messages; sets next_page_token when more follow.
Status FillMessages(const Agent& agent, int64_t offset, int64_t page_size,
                    v1::GetMessagesResponse* out);

}  // namespace strata::sidecar

#endif  // STRATA_APPS_STRATA_SIDECAR_SERVICE_CONVERT_H_
