// client_view.h — what an OpenAI client has seen of an agent's history (reconcile.h says how the
// proxy uses it), stored with the agent.
//
// The view is saved with every proxied turn and loaded at the next, and it grows with the
// conversation; so a view the process saved is kept by its text (process-wide, bounded), and the
// load that reads that text again takes it instead of parsing it.
//
// Thread safety: the functions may be called from any thread (the kept views have their own
// lock); a ClientView is a value.
#ifndef STRATA_APPS_STRATA_SIDECAR_CLIENT_VIEW_H_
#define STRATA_APPS_STRATA_SIDECAR_CLIENT_VIEW_H_

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "strata/agent.h"
#include "strata/status.h"

namespace strata::sidecar {

// The agent-state key of the persisted ClientView.
inline constexpr char kClientViewKey[] = "proxy.client_view";

// What the client has seen of one agent's history.
struct ClientView {
  struct Entry {
    std::string digest;  // the message's digest (chat_message.h)
    std::string role;
    std::string segment_id;  // the history segment the message became
  };
  std::vector<Entry> entries;

  std::string ToJson() const;
  // INVALID_ARGUMENT for a document ToJson() did not write.
  static StatusOr<ClientView> FromJson(std::string_view json);
};

// The view stored with `agent` (an empty view when it has none or no store). With `text`, also
// the view's text as stored (the empty view's ToJson() when there is none). DATA_LOSS for a stored
// text FromJson refuses.
StatusOr<ClientView> LoadClientView(const Agent& agent, std::string* text = nullptr);
// Stores the view with `agent` (nothing without a store).
Status SaveClientView(const Agent& agent, const ClientView& view);
// Stores `text`, a view's ToJson(), with `agent` (nothing without a store).
Status SaveClientViewText(const Agent& agent, const std::string& text);

// Keeps `view`, whose ToJson() is `text`, until a LoadClientView that reads `text` takes it.
void KeepClientView(std::string text, ClientView view);

// The bound of the kept views: their charges (4 bytes per byte of text plus 256 per view), in
// bytes; past it they start over.
inline constexpr size_t kClientViewMemoBytes = 64u << 20;

}  // namespace strata::sidecar

#endif  // STRATA_APPS_STRATA_SIDECAR_CLIENT_VIEW_H_
