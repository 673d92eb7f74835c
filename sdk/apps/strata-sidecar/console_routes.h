// console_routes.h — strata-sidecar's console on its HTTP listener (docs/sidecar.md "Console").
//
// Routes (GET only):
//   /ui                                         the page (console_page.h); holds no data
//   /ui/api/agents?offset&limit&sort&order      the agents list (console_data.h AgentsList)
//   /ui/api/agents/TENANT/ID                    everything the agent page shows (AgentPage)
//   /ui/api/agents/TENANT/ID/records?offset&limit&request_id
//   /ui/api/agents/TENANT/ID/events?offset&limit
//   /ui/api/agents/TENANT/ID/growth | /layout | /timeline
//   /ui/api/pools                               the length pools now and sampled over time
// Every /ui/api route needs "Authorization: Bearer <token>" as the API does: a metrics token
// (Authenticator::AuthorizeMetrics) sees every tenant's agents and the pools; a tenant's token sees
// its own agents only: another tenant's agent is NOT_FOUND with the message an agent that does not
// exist gets, and /ui/api/pools (every tenant's traffic) is PERMISSION_DENIED. The page itself is
// the same static document for everyone; it asks the reader for the token and keeps it for the
// tab (sessionStorage), or takes it from the address fragment (#token=...), which never reaches
// the server.
//
// Thread safety: Handle may be called from any thread; the registry, authenticator and pools must
// outlive the ConsoleRoutes.
#ifndef STRATA_APPS_STRATA_SIDECAR_CONSOLE_ROUTES_H_
#define STRATA_APPS_STRATA_SIDECAR_CONSOLE_ROUTES_H_

#include <cstdint>
#include <deque>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "http_server.h"
#include "proxy.h"
#include "registry.h"
#include "strata/clock.h"
#include "strata/pools.h"
#include "tenants.h"

namespace strata::sidecar {

// The path prefix of the console's routes.
inline constexpr char kConsolePrefix[] = "/ui";

class ConsoleRoutes {
 public:
  // `pools` may be null (no length pools); `clock` null: SystemClock() (the pools' sample times).
  ConsoleRoutes(AgentRegistry* registry, const Authenticator* authenticator,
                const PoolSet* pools = nullptr, Clock* clock = nullptr);

  // Answers one GET under kConsolePrefix: the page, or a JSON document (errors in OpenAI's
  // shape, as every route of the listener).
  HttpReply Handle(const HttpGetRequest& request);
  // The route for HttpServerOptions::get_routes.
  HttpGetRoute Route();

 private:
  // Who is asking: every tenant (a metrics token) or one.
  struct Caller {
    bool all = false;
    const TenantConfig* tenant = nullptr;
  };
  StatusOr<Caller> Identify(std::string_view authorization) const;
  StatusOr<nlohmann::json> Agents(const Caller& caller, const HttpGetRequest& request);
  StatusOr<nlohmann::json> Agent(const Caller& caller, std::string_view rest,
                                 const HttpGetRequest& request);
  StatusOr<nlohmann::json> Pools(const Caller& caller);

  AgentRegistry* registry_;
  const Authenticator* authenticator_;
  const PoolSet* pools_;
  Clock* clock_;
  std::mutex samples_mu_;
  std::deque<nlohmann::json> samples_;  // guarded by samples_mu_: the pools over time, oldest first
};

}  // namespace strata::sidecar

#endif  // STRATA_APPS_STRATA_SIDECAR_CONSOLE_ROUTES_H_
