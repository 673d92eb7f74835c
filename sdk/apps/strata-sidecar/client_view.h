// client_view.h — what an OpenAI client has seen of an agent's history (reconcile.h says how the
// proxy uses it), stored with the agent.
//
// The view grows with the conversation and is stored with every proxied turn, so it is stored in
// chunks: under kClientViewKey a header (how many entries and chunks, and a generation that
// changes with every write), and each chunk of kClientViewChunk entries under its own key
// (ClientViewChunkKey). A turn writes the header and the chunks from the first entry that changed
// since the view was loaded; a view cut short writes its header only (the entries of its chunks
// past the header's count are not read). The view a turn of this process stored is kept for the
// agent with its header, and the next LoadClientView that reads the same header takes it: no chunk
// is read. A view stored whole, as before chunks, is still read.
//
// Thread safety: the functions may be called from any thread (the kept views have their own
// lock); a ClientView is a value.
#ifndef STRATA_APPS_STRATA_SIDECAR_CLIENT_VIEW_H_
#define STRATA_APPS_STRATA_SIDECAR_CLIENT_VIEW_H_

#include <algorithm>
#include <cstddef>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/chunk_text.h"
#include "strata/agent.h"
#include "strata/status.h"
#include "strata/store.h"

namespace strata::sidecar {

// The agent-state key of the persisted ClientView's header.
inline constexpr char kClientViewKey[] = "proxy.client_view";
// Entries per stored chunk.
inline constexpr size_t kClientViewChunk = 256;
// The key of chunk `index`: "proxy.client_view.<index>".
std::string ClientViewChunkKey(size_t index);

// What the client has seen of one agent's history.
class ClientView {
 public:
  struct Entry {
    std::string digest;  // the message's digest (chat_message.h)
    std::string role;
    std::string segment_id;  // the history segment the message became
  };

  const std::vector<Entry>& entries() const { return entries_; }
  void Append(Entry entry) { entries_.push_back(std::move(entry)); }
  // Keeps the first `n` entries.
  void Truncate(size_t n) {
    if (n < entries_.size()) entries_.resize(n);
    stored_ = std::min(stored_, n);
  }

  // The (key, value) agent-state writes that store the view: the header, with a new generation,
  // and each chunk from the first entry that changed since the view was loaded or Stored() (all
  // of them with `whole`).
  std::vector<std::pair<std::string, std::string>> Writes(bool whole = false);
  // The last Writes() were committed: the store holds the view as it is now.
  void Stored();
  // The header as stored ("" for a view never stored).
  const std::string& header() const { return header_; }
  // The text of its last stored chunk a view keeps, so that the next Writes() write only the
  // entries appended since; in bytes.
  size_t kept_text_bytes() const { return last_chunk_.kept_bytes(); }
  // How many entries its Writes() have encoded (for tests).
  size_t entries_encoded() const { return last_chunk_.encoded(); }

  // One document {"entries": [[digest, role, segment_id], ...], "version": 1}: a chunk's value,
  // and the whole view as stored before chunks.
  std::string ToJson() const;
  // INVALID_ARGUMENT for a document ToJson() did not write.
  static StatusOr<ClientView> FromJson(std::string_view json);

 private:
  friend StatusOr<ClientView> LoadClientView(Store& store, const std::string& agent_id);
  // Chunk `chunk`'s value; the first `unchanged` entries are as stored.
  std::string ChunkJson(size_t chunk, size_t unchanged);

  std::vector<Entry> entries_;
  size_t stored_ = 0;           // the leading entries the store holds as they are here
  std::string header_;          // as stored
  std::string pending_header_;  // the last Writes()' header
  internal::ChunkText last_chunk_;  // the last chunk's entries as stored
};

// The view stored with `agent` (an empty view when it has none or no store); the view kept by
// KeepClientView when the stored header is the one it was kept with. DATA_LOSS for a stored header
// or chunk that does not parse, or a chunk missing.
StatusOr<ClientView> LoadClientView(const Agent& agent);
// The same for agent `agent_id` of `store`.
StatusOr<ClientView> LoadClientView(Store& store, const std::string& agent_id);
// Stores the whole view with `agent`, in one transaction (nothing without a store).
Status SaveClientView(const Agent& agent, ClientView view);

// Keeps `view` (stored, its header()) for `agent_id` until a LoadClientView of that agent that
// reads the same header takes it.
void KeepClientView(const std::string& agent_id, ClientView view);

// The bound of the kept views: their charges (128 bytes per entry plus 256 per view), in bytes;
// past it they start over.
inline constexpr size_t kClientViewMemoBytes = 64u << 20;

}  // namespace strata::sidecar

#endif  // STRATA_APPS_STRATA_SIDECAR_CLIENT_VIEW_H_
