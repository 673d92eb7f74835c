// An OpenAI client's view of an agent's history, as stored with the agent (client_view.h).
#include "client_view.h"

#include <atomic>
#include <cstdint>
#include <cstdio>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <random>
#include <unordered_map>
#include <utility>

#include "core/json_text.h"
#include "strata/store.h"

namespace strata::sidecar {

using json = nlohmann::json;

namespace {

// Entries [begin, end) as they are inside the document's array ([digest, role, segment_id] each,
// separated by commas), appended to *out; `first` when none precede them there.
void AppendEntries(const std::vector<ClientView::Entry>& entries, size_t begin, size_t end,
                   bool first, std::string* out) {
  size_t size = out->size();
  for (size_t i = begin; i < end; ++i) {
    const ClientView::Entry& e = entries[i];
    size += internal::JsonStringSize(e.digest) + internal::JsonStringSize(e.role) +
            internal::JsonStringSize(e.segment_id) + 5;
  }
  out->reserve(size);
  for (size_t i = begin; i < end; ++i) {
    if (i > begin || !first) out->push_back(',');
    out->push_back('[');
    internal::AppendJsonString(*out, entries[i].digest);
    out->push_back(',');
    internal::AppendJsonString(*out, entries[i].role);
    out->push_back(',');
    internal::AppendJsonString(*out, entries[i].segment_id);
    out->push_back(']');
  }
}

// The document of entries whose array holds `inside`: the bytes nlohmann's dump of
// {"entries": [[digest, role, segment_id], ...], "version": 1} gives, written without building a
// json document (FromJson reads that shape through a SAX handler, leaving any other document to
// the json parse and its errors).
std::string EntriesDocument(std::string_view inside) {
  constexpr std::string_view kHead = "{\"entries\":[";
  constexpr std::string_view kTail = "],\"version\":1}";
  std::string out;
  out.reserve(kHead.size() + inside.size() + kTail.size());
  out.append(kHead).append(inside).append(kTail);
  return out;
}

}  // namespace

std::string ClientView::ToJson() const {
  std::string inside;
  AppendEntries(entries_, 0, entries_.size(), /*first=*/true, &inside);
  return EntriesDocument(inside);
}

std::string ClientView::ChunkJson(size_t chunk, size_t unchanged) {
  const size_t begin = chunk * kClientViewChunk;
  const size_t end = std::min(entries_.size(), begin + kClientViewChunk);
  // The entries the store holds unchanged are not encoded again.
  return EntriesDocument(last_chunk_.Write(
      chunk, begin, end, unchanged, [this](size_t from, size_t to, bool first, std::string* out) {
        AppendEntries(entries_, from, to, first, out);
      }));
}

namespace {

// Reads exactly {"entries": [[s, s, s], ...], "version": 1} (keys in either order, each once);
// anything else stops it, and the caller reads the document as json.
class ViewReader {
 public:
  explicit ViewReader(ClientView* view) : view_(view) {}
  bool complete() const { return entries_seen_ && version_seen_ && depth_ == 0; }

  bool null() { return false; }
  bool boolean(bool) { return false; }
  bool number_integer(json::number_integer_t v) { return Version(v == 1); }
  bool number_unsigned(json::number_unsigned_t v) { return Version(v == 1); }
  bool number_float(json::number_float_t, const json::string_t&) { return false; }
  bool binary(json::binary_t&) { return false; }
  bool string(json::string_t& s) {
    if (depth_ != 3 || fields_ == 3) return false;
    std::string* field[] = {&entry_.digest, &entry_.role, &entry_.segment_id};
    *field[fields_++] = std::move(s);
    return true;
  }
  bool start_object(std::size_t) { return depth_++ == 0; }
  bool key(json::string_t& k) {
    if (depth_ != 1) return false;
    key_ = k;
    if (key_ == "entries") return !std::exchange(entries_seen_, true);
    if (key_ == "version") return !version_seen_;
    return false;
  }
  bool end_object() { return --depth_ == 0; }
  bool start_array(std::size_t) {
    if (depth_ == 1 && key_ == "entries") {
      depth_ = 2;
      return true;
    }
    if (depth_ != 2) return false;
    depth_ = 3;
    fields_ = 0;
    return true;
  }
  bool end_array() {
    if (depth_ == 3) {
      if (fields_ != 3) return false;
      view_->Append(std::move(entry_));
      entry_ = ClientView::Entry();
    }
    --depth_;
    return true;
  }
  bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception&) {
    return false;
  }

 private:
  bool Version(bool one) {
    if (depth_ != 1 || key_ != "version" || !one) return false;
    version_seen_ = true;
    return true;
  }

  ClientView* view_;
  int depth_ = 0;  // 1: the document, 2: the entries, 3: one entry
  std::string key_;
  bool entries_seen_ = false;
  bool version_seen_ = false;
  ClientView::Entry entry_;
  int fields_ = 0;
};

}  // namespace

StatusOr<ClientView> ClientView::FromJson(std::string_view text) {
  {
    ClientView view;
    ViewReader reader(&view);
    if (json::sax_parse(text, &reader) && reader.complete()) return view;
  }
  json doc = json::parse(text, nullptr, false);
  // (No doc.value("version", 0): it throws when a damaged row has a version of another type.)
  if (!doc.is_object() || !doc.contains("version") || doc["version"] != 1 ||
      !doc.contains("entries") || !doc["entries"].is_array()) {
    return InvalidArgumentError("stored client view is not a version 1 view document");
  }
  ClientView view;
  for (const json& e : doc["entries"]) {
    if (!e.is_array() || e.size() != 3 || !e[0].is_string() || !e[1].is_string() ||
        !e[2].is_string()) {
      return InvalidArgumentError("stored client view has a malformed entry: " + e.dump());
    }
    view.Append({e[0].get<std::string>(), e[1].get<std::string>(), e[2].get<std::string>()});
  }
  return view;
}

namespace {

// Views kept for their agent and stored header, process-wide, each until the load that takes it:
// the next turn of the conversation. Each is charged 128 bytes per entry and 256 more; past
// kClientViewMemoBytes the cache starts over.
class KeptViews {
 public:
  static KeptViews& Get() {
    static auto* views = new KeptViews;
    return *views;  // never destroyed: used until exit
  }

  std::optional<ClientView> Take(const std::string& key) {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = views_.find(key);
    if (it == views_.end()) return std::nullopt;
    ClientView view = std::move(it->second);
    bytes_ -= Charge(view);
    views_.erase(it);
    return view;
  }

  void Put(std::string key, ClientView view) {
    const size_t charge = Charge(view);
    if (charge > kClientViewMemoBytes / 4) return;
    std::lock_guard<std::mutex> lock(mu_);
    if (bytes_ + charge > kClientViewMemoBytes) {
      views_.clear();
      bytes_ = 0;
    }
    auto it = views_.find(key);
    if (it != views_.end()) {
      bytes_ -= Charge(it->second);
      views_.erase(it);
    }
    views_.emplace(std::move(key), std::move(view));
    bytes_ += charge;
  }

 private:
  static size_t Charge(const ClientView& view) {
    return 128 * view.entries().size() + 256 + view.kept_text_bytes();
  }

  std::mutex mu_;
  std::unordered_map<std::string, ClientView> views_;  // guarded by mu_
  size_t bytes_ = 0;                                   // guarded by mu_
};

std::string KeptKey(const std::string& agent_id, const std::string& header) {
  return agent_id + '\n' + header;
}

// A new generation for a header: this process's random prefix and a counter.
std::string NextGeneration() {
  static const uint64_t process = [] {
    std::random_device device;
    return (static_cast<uint64_t>(device()) << 32) ^ device();
  }();
  static std::atomic<uint64_t> counter{0};
  char text[40];
  std::snprintf(text, sizeof(text), "%016llx-%llu", static_cast<unsigned long long>(process),
                static_cast<unsigned long long>(++counter));
  return text;
}

}  // namespace

std::string ClientViewChunkKey(size_t index) {
  return std::string(kClientViewKey) + "." + std::to_string(index);
}

std::vector<std::pair<std::string, std::string>> ClientView::Writes(bool whole) {
  const size_t n = entries_.size();
  const size_t chunks = (n + kClientViewChunk - 1) / kClientViewChunk;
  // As nlohmann::json prints it (keys in order).
  pending_header_ = "{\"chunks\":" + std::to_string(chunks) + ",\"entries\":" + std::to_string(n) +
                    ",\"generation\":\"" + NextGeneration() + "\",\"version\":2}";
  std::vector<std::pair<std::string, std::string>> writes;
  writes.emplace_back(kClientViewKey, pending_header_);
  // A chunk holding entries past the header's count (the view was cut) is left as it is: they
  // are not read.
  const size_t from = whole ? 0 : stored_;
  last_chunk_.Begin();
  for (size_t k = from / kClientViewChunk; from < n && k < chunks; ++k) {
    writes.emplace_back(ClientViewChunkKey(k), ChunkJson(k, from));
  }
  return writes;
}

void ClientView::Stored() {
  stored_ = entries_.size();
  header_ = pending_header_;
  last_chunk_.Stored();
}

StatusOr<ClientView> LoadClientView(const Agent& agent) {
  Store* store = agent.store();
  if (store == nullptr) return ClientView();
  return LoadClientView(*store, agent.id());
}

StatusOr<ClientView> LoadClientView(Store& store, const std::string& agent_id) {
  STRATA_ASSIGN_OR_RETURN(std::optional<std::string> header,
                          store.GetAgentState(agent_id, kClientViewKey));
  if (!header) return ClientView();
  if (std::optional<ClientView> kept = KeptViews::Get().Take(KeptKey(agent_id, *header))) {
    return std::move(*kept);
  }
  auto lost = [&agent_id](const std::string& what) {
    return DataLossError("agent \"" + agent_id + "\": " + what);
  };
  const json doc = json::parse(*header, nullptr, false);
  const bool chunked = doc.is_object() && doc.contains("version") && doc["version"] == 2;
  if (!chunked) {
    // Stored whole, before chunks: the next write stores every chunk.
    StatusOr<ClientView> whole = ClientView::FromJson(*header);
    if (!whole.ok()) return lost(whole.status().message());
    return whole;
  }
  if (!doc.contains("chunks") || !doc["chunks"].is_number_unsigned() || !doc.contains("entries") ||
      !doc["entries"].is_number_unsigned()) {
    return lost("stored client view header is malformed: " + *header);
  }
  const size_t chunks = doc["chunks"].get<size_t>();
  const size_t entries = doc["entries"].get<size_t>();
  ClientView view;
  for (size_t k = 0; k < chunks; ++k) {
    STRATA_ASSIGN_OR_RETURN(std::optional<std::string> text,
                            store.GetAgentState(agent_id, ClientViewChunkKey(k)));
    if (!text) return lost("chunk " + std::to_string(k) + " of the stored client view is missing");
    StatusOr<ClientView> chunk = ClientView::FromJson(*text);
    if (!chunk.ok()) {
      return lost("chunk " + std::to_string(k) +
                  " of the stored client view: " + chunk.status().message());
    }
    // Entries past the header's count are left from a longer view.
    for (const ClientView::Entry& e : chunk->entries()) {
      if (view.entries().size() == entries) break;
      view.Append(e);
    }
  }
  if (view.entries().size() != entries) {
    return lost("the stored client view holds " + std::to_string(view.entries().size()) +
                " entries in its chunks, its header says " + std::to_string(entries));
  }
  view.stored_ = entries;
  view.header_ = *header;
  return view;
}

Status SaveClientView(const Agent& agent, ClientView view) {
  Store* store = agent.store();
  if (store == nullptr) return Status::Ok();
  TurnWrites writes;
  writes.agent_id = agent.id();
  writes.state = view.Writes(/*whole=*/true);
  return store->CommitTurn(writes);
}

void KeepClientView(const std::string& agent_id, ClientView view) {
  if (view.header().empty()) return;  // never stored
  std::string key = KeptKey(agent_id, view.header());
  KeptViews::Get().Put(std::move(key), std::move(view));
}

}  // namespace strata::sidecar
