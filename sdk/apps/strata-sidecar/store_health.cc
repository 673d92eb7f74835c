#include "store_health.h"

#include <utility>

namespace strata::sidecar {

StoreHealth::StoreHealth(Store* store, std::function<void(const std::string&)> log)
    : store_(store), log_(std::move(log)) {}

bool StoreHealth::Check() {
  Status files = store_->CheckFiles();
  std::lock_guard<std::mutex> lock(mu_);
  if (files.ok() != healthy_ && log_) {
    log_(files.ok() ? "the store's files are in place again: ready (SERVING)"
                    : "not ready (NOT_SERVING), every write is refused: " + files.message());
  }
  healthy_ = files.ok();
  return healthy_;
}

}  // namespace strata::sidecar
