// console_data.h — the JSON documents of strata's console (docs/sidecar.md "Console"), read from a
// Store: the agents list, one agent's records, events, growth, layout and request timeline.
//
// strata-sidecar serves them under /ui/api (console_routes.h, each call confined to the caller's
// tenant there) and `strata inspect --html` embeds them in one file (console_page.h); both render
// them with the same page. Every function reads only; none changes the store.
//
//   STRATA_ASSIGN_OR_RETURN(nlohmann::json page, console::AgentPage(store, "alpha/a1", view));
//
// Thread safety: the functions are thread-safe as the Store is.
#ifndef STRATA_APPS_CONSOLE_CONSOLE_DATA_H_
#define STRATA_APPS_CONSOLE_CONSOLE_DATA_H_

#include <cstddef>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "strata/status.h"
#include "strata/store.h"

namespace strata::console {

// How an agent is shown: the stored id, and the tenant and id a reader knows it by (the sidecar
// stores "<tenant>/<id>"; a plain store shows the stored id and the identity's tenant).
struct AgentView {
  std::string stored_id;  // the id in the store
  std::string tenant;     // shown as the agent's tenant
  std::string id;         // shown as the agent's id
};

// A page of a list: items [offset, offset + limit).
struct PageQuery {
  size_t offset = 0;
  size_t limit = 50;  // at most kMaxPageLimit
};
inline constexpr size_t kMaxPageLimit = 1000;

// The agents list's sort keys: id, tenant, turns, tokens, requests, compactions, prefix_breaks,
// cached_share, last_activity.
struct AgentsQuery {
  PageQuery page;
  std::string sort = "last_activity";
  bool descending = true;
};

// The most bars of a timeline and points of a growth curve: longer series are downsampled into
// this many buckets (each bar the mean of the requests it covers, data-first/data-last naming
// them).
inline constexpr size_t kMaxSeriesPoints = 600;
// The records the agents list reads per agent for its cached share (the newest).
inline constexpr size_t kCachedShareRecords = 1000;

// Parses offset/limit (and for agents sort/order) as given in a URL query; INVALID_ARGUMENT naming
// the parameter for a value that is not a number or a sort key that does not exist.
StatusOr<PageQuery> ParsePageQuery(std::string_view offset, std::string_view limit);
StatusOr<AgentsQuery> ParseAgentsQuery(std::string_view offset, std::string_view limit,
                                       std::string_view sort, std::string_view order);

// {"total","offset","limit","sort","order","agents":[{tenant,id,turns,tokens,requests,compactions,
// prefix_breaks,cached_share,last_activity_unix_ms}]}: `agents` sorted and paged. `stored` holds
// the agents as Store::ListAgents returns them and `views` how each is shown (same order).
StatusOr<nlohmann::json> AgentsList(Store& store, const std::vector<StoredAgent>& stored,
                                    const std::vector<AgentView>& views, const AgentsQuery& query);

// {"total","offset","limit","records":[...]}: the agent's request records, newest first (every
// field of strata/record.h RequestRecordJson). With `request_id` non-empty, the page holding that
// request (offset is rounded down to a multiple of limit); NOT_FOUND when no record has it.
StatusOr<nlohmann::json> Records(Store& store, const AgentView& agent, const PageQuery& page,
                                 std::string_view request_id = "");
// {"total","offset","limit","events":[{id,turn,unix_ms,type,payload}]}: in append order.
StatusOr<nlohmann::json> Events(Store& store, const AgentView& agent, const PageQuery& page);
// {"points":[{turn,unix_ms,layers:{system,...},total,compactions,invalidated_tokens,
// summary_input_tokens,summary_cached_tokens,summary_output_tokens}],"downsampled":bool,
// "total_points"}: the growth curve (as `strata growth`), at most kMaxSeriesPoints (the last
// point of each bucket; the counts are the bucket's sums).
StatusOr<nlohmann::json> Growth(Store& store, const AgentView& agent);
// The current request's layout: {"layers":[{layer,segments,tokens,bytes}],"total_tokens",
// "stable_prefix":{"bytes","hash","layers"},"cache_salt":{"sent","tenant","scope","model_version",
// "template_version","secret_configured"}}. Never the salt nor its secret.
StatusOr<nlohmann::json> Layout(Store& store, const AgentView& agent);
// The request timeline: {"total","downsampled","bars":[{first,last,request_id,cached,uncached,
// output,predicted,reported,ttft_ms,failed}],"breaks":[...],"compactions":[...],"replacements":[...]},
// every mark with the index of the request it belongs to ("at") and its causes or details.
StatusOr<nlohmann::json> Timeline(Store& store, const AgentView& agent);
// The agent's summary: {tenant,id,model,tokenizer,turns,segments,tokens,requests,compactions,
// prefix_breaks,cached_share,created_unix_ms,updated_unix_ms}. NOT_FOUND for an unknown agent.
StatusOr<nlohmann::json> Summary(Store& store, const AgentView& agent);

// Everything the agent page shows at once: {"agent":Summary,"layout","timeline","growth",
// "events":Events(all),"records":Records(the first `records` newest)}.
StatusOr<nlohmann::json> AgentPage(Store& store, const AgentView& agent, size_t records = 100);

}  // namespace strata::console

#endif  // STRATA_APPS_CONSOLE_CONSOLE_DATA_H_
