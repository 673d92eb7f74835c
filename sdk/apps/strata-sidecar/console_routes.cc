// strata-sidecar's console routes (console_routes.h).
#include "console_routes.h"

#include <utility>
#include <vector>

#include "console_data.h"
#include "console_page.h"

namespace strata::sidecar {
namespace {

using json = nlohmann::json;

// Samples of the pools kept (at most one a second: an hour at the page's 5 s refresh).
constexpr size_t kMaxPoolSamples = 720;
constexpr int64_t kPoolSampleEveryMs = 1000;

// What every console answer carries: never cached, never framed, no referrer, and (the page) no
// script, style, image or connection from anywhere but itself and this server.
void Harden(HttpReply& reply, bool page) {
  reply.headers.emplace_back("Cache-Control", "no-store");
  reply.headers.emplace_back("X-Content-Type-Options", "nosniff");
  reply.headers.emplace_back("X-Frame-Options", "DENY");
  reply.headers.emplace_back("Referrer-Policy", "no-referrer");
  if (page) {
    reply.headers.emplace_back("Content-Security-Policy",
                               "default-src 'none'; script-src 'unsafe-inline'; style-src "
                               "'unsafe-inline'; img-src data:; connect-src 'self'; "
                               "frame-ancestors 'none'; base-uri 'none'; form-action 'none'");
  }
}

HttpReply JsonReply(const StatusOr<json>& value) {
  HttpReply reply = value.ok() ? HttpReply{} : ErrorReply(value.status());
  if (value.ok()) {
    reply.body = value->dump(-1, ' ', false, json::error_handler_t::replace);
  }
  Harden(reply, false);
  return reply;
}

std::string Param(const HttpGetRequest& request, const std::string& name) {
  auto it = request.params.find(name);
  return it == request.params.end() ? "" : it->second;
}

// "a/b/c" -> {"a","b","c"}.
std::vector<std::string> Split(std::string_view path) {
  std::vector<std::string> out;
  size_t start = 0;
  while (start <= path.size()) {
    const size_t slash = path.find('/', start);
    const size_t end = slash == std::string_view::npos ? path.size() : slash;
    out.emplace_back(path.substr(start, end - start));
    if (slash == std::string_view::npos) break;
    start = slash + 1;
  }
  return out;
}

Status NoSuchAgent(std::string_view tenant, std::string_view id) {
  return NotFoundError("no agent \"" + std::string(id) + "\" in tenant \"" + std::string(tenant) +
                       "\" (or not one this token may read)");
}

json PoolJson(const PoolMetrics& p) {
  return {{"name", p.name},
          {"max_input_tokens", p.max_input_tokens},
          {"admitted", p.admitted_total},
          {"queued", p.queued},
          {"degraded", p.compacted_total + p.forked_total},
          {"compacted", p.compacted_total},
          {"forked", p.forked_total},
          {"refused", p.refused_total},
          {"waited", p.waited_total},
          {"queue_timeouts", p.queue_timeouts_total},
          {"in_flight", p.in_flight},
          {"max_concurrency", p.max_concurrency},
          {"effective_concurrency", p.effective_concurrency},
          {"healthy_replicas", p.healthy_replicas},
          {"replicas", p.replicas}};
}

}  // namespace

ConsoleRoutes::ConsoleRoutes(AgentRegistry* registry, const Authenticator* authenticator,
                             const PoolSet* pools, Clock* clock)
    : registry_(registry),
      authenticator_(authenticator),
      pools_(pools),
      clock_(clock != nullptr ? clock : SystemClock()) {}

HttpGetRoute ConsoleRoutes::Route() {
  return HttpGetRoute{kConsolePrefix, [this](const HttpGetRequest& r) { return Handle(r); }};
}

StatusOr<ConsoleRoutes::Caller> ConsoleRoutes::Identify(std::string_view authorization) const {
  if (authenticator_->AuthorizeMetrics(authorization).ok()) return Caller{true, nullptr};
  STRATA_ASSIGN_OR_RETURN(const TenantConfig* tenant, authenticator_->Authenticate(authorization));
  return Caller{false, tenant};
}

HttpReply ConsoleRoutes::Handle(const HttpGetRequest& request) {
  const std::string& path = request.path;
  if (path == "/ui" || path == "/ui/" || path == "/ui/index.html") {
    HttpReply reply;
    reply.content_type = "text/html; charset=utf-8";
    reply.body = console::ConsolePage(console::SidecarBoot());
    Harden(reply, true);
    return reply;
  }
  const std::string api = "/ui/api/";
  if (path.compare(0, api.size(), api) != 0) {
    return JsonReply(NotFoundError("no console route " + path.substr(0, 200) +
                                   " (the page is /ui, its data under /ui/api/)"));
  }
  StatusOr<Caller> caller = Identify(request.authorization);
  if (!caller.ok()) return JsonReply(caller.status());
  const std::string rest = path.substr(api.size());
  if (rest == "agents") return JsonReply(Agents(*caller, request));
  if (rest.compare(0, 7, "agents/") == 0) return JsonReply(Agent(*caller, rest.substr(7), request));
  if (rest == "pools") return JsonReply(Pools(*caller));
  return JsonReply(NotFoundError("no console route " + path.substr(0, 200) +
                                 " (agents, agents/TENANT/ID[/records|events|growth|layout|"
                                 "timeline], pools)"));
}

StatusOr<json> ConsoleRoutes::Agents(const Caller& caller, const HttpGetRequest& request) {
  STRATA_ASSIGN_OR_RETURN(
      console::AgentsQuery query,
      console::ParseAgentsQuery(Param(request, "offset"), Param(request, "limit"),
                                Param(request, "sort"), Param(request, "order")));
  std::vector<StoredAgent> stored;
  std::vector<console::AgentView> views;
  if (caller.all) {
    STRATA_ASSIGN_OR_RETURN(stored, registry_->store().ListAgents());
    for (const StoredAgent& a : stored) {
      const std::string& full = a.options.agent.id;
      const size_t slash = full.find('/');
      views.push_back({full, slash == std::string::npos ? "" : full.substr(0, slash),
                       slash == std::string::npos ? full : full.substr(slash + 1)});
    }
  } else {
    STRATA_ASSIGN_OR_RETURN(stored, registry_->List(*caller.tenant));
    for (const StoredAgent& a : stored) {
      views.push_back({AgentRegistry::StoredId(*caller.tenant, a.options.agent.id),
                       caller.tenant->name, a.options.agent.id});
    }
  }
  return console::AgentsList(registry_->store(), stored, views, query);
}

StatusOr<json> ConsoleRoutes::Agent(const Caller& caller, std::string_view rest,
                                    const HttpGetRequest& request) {
  const std::vector<std::string> parts = Split(rest);
  if (parts.size() < 2 || parts.size() > 3 || parts[0].empty()) {
    return NotFoundError(
        "an agent's console route is /ui/api/agents/TENANT/ID[/records|events|"
        "growth|layout|timeline]");
  }
  const std::string& tenant = parts[0];
  const std::string& id = parts[1];
  STRATA_RETURN_IF_ERROR(CheckAgentId(id, "agent id"));
  // Another tenant's agent is answered exactly as one that does not exist.
  if (!caller.all && tenant != caller.tenant->name) return NoSuchAgent(tenant, id);
  const console::AgentView view{tenant + "/" + id, tenant, id};
  Store& store = registry_->store();
  if (!store.GetAgent(view.stored_id).ok()) return NoSuchAgent(tenant, id);
  const std::string what = parts.size() == 3 ? parts[2] : "";
  StatusOr<json> out = NotFoundError("no console route for an agent's \"" + what.substr(0, 40) +
                                     "\" (records, events, growth, layout, timeline)");
  if (what.empty()) {
    out = console::AgentPage(store, view, 50);
  } else if (what == "records" || what == "events") {
    STRATA_ASSIGN_OR_RETURN(
        console::PageQuery page,
        console::ParsePageQuery(Param(request, "offset"), Param(request, "limit")));
    out = what == "records" ? console::Records(store, view, page, Param(request, "request_id"))
                            : console::Events(store, view, page);
  } else if (what == "growth") {
    out = console::Growth(store, view);
  } else if (what == "layout") {
    out = console::Layout(store, view);
  } else if (what == "timeline") {
    out = console::Timeline(store, view);
  }
  // Deleted meanwhile: the store's NOT_FOUND lists other ids, which this caller may not see.
  if (!out.ok() && out.status().code() == StatusCode::kNotFound && what != "records") {
    return NoSuchAgent(tenant, id);
  }
  return out;
}

StatusOr<json> ConsoleRoutes::Pools(const Caller& caller) {
  if (!caller.all) {
    return PermissionDeniedError(
        "the pools page holds every tenant's traffic: read it with a metrics token "
        "(metrics_token_sha256), not tenant \"" +
        caller.tenant->name + "\"'s");
  }
  if (pools_ == nullptr) return json{{"configured", false}};
  const PoolSetMetrics m = pools_->Metrics();
  json now = {{"kv_in_flight_tokens", m.kv_in_flight_tokens},
              {"kv_capacity_tokens", m.kv_capacity_tokens},
              {"kv_usage", m.kv_usage},
              {"kv_alert", m.kv_alert},
              {"long_share", m.long_share},
              {"long_share_alert", m.long_share_alert},
              {"pools", json::array()}};
  for (const PoolMetrics& p : m.pools) now["pools"].push_back(PoolJson(p));
  const int64_t unix_ms = clock_->UnixMillis();
  std::lock_guard<std::mutex> lock(samples_mu_);
  if (samples_.empty() ||
      unix_ms - samples_.back()["unix_ms"].get<int64_t>() >= kPoolSampleEveryMs) {
    json sample = {{"unix_ms", unix_ms}, {"kv_usage", m.kv_usage}, {"pools", json::object()}};
    for (const PoolMetrics& p : m.pools) {
      sample["pools"][p.name] = {{"admitted", p.admitted_total},
                                 {"queued", p.queued},
                                 {"degraded", p.compacted_total + p.forked_total},
                                 {"refused", p.refused_total}};
    }
    samples_.push_back(std::move(sample));
    if (samples_.size() > kMaxPoolSamples) samples_.pop_front();
  }
  return json{{"configured", true},
              {"now", std::move(now)},
              {"history", json(std::vector<json>(samples_.begin(), samples_.end()))}};
}

}  // namespace strata::sidecar
