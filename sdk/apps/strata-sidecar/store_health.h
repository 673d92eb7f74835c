// store_health.h — whether strata-sidecar's store can still be written, for /readyz and the gRPC
// health service.
//
// The store refuses every write once its files were removed, replaced or made immutable while it
// was open (Store::CheckFiles, docs/persistence.md); the sidecar then stops reporting itself ready
// so that a load balancer or an orchestrator sends no more work to it, and logs what happened once.
//
//   StoreHealth health(&registry->store(), [](const std::string& m) { Log(m); });
//   http_options.ready = [&health] { return health.Check(); };  // /readyz 503 while false
//
// Thread safety: Check may be called from any thread.
#ifndef STRATA_APPS_STRATA_SIDECAR_STORE_HEALTH_H_
#define STRATA_APPS_STRATA_SIDECAR_STORE_HEALTH_H_

#include <functional>
#include <mutex>
#include <string>

#include "strata/store.h"

namespace strata::sidecar {

class StoreHealth {
 public:
  // `store` must outlive this; `log` receives one line per change of health.
  StoreHealth(Store* store, std::function<void(const std::string&)> log);

  // Checks the store's files now (a few stat calls): true while the store can write. Logs the
  // store's message when this turns false and a line when it turns true again.
  bool Check();

 private:
  Store* const store_;
  const std::function<void(const std::string&)> log_;
  std::mutex mu_;
  bool healthy_ = true;  // guarded by mu_: the result of the last Check
};

}  // namespace strata::sidecar

#endif  // STRATA_APPS_STRATA_SIDECAR_STORE_HEALTH_H_
