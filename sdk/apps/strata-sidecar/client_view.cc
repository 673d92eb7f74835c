// An OpenAI client's view of an agent's history, as stored with the agent (client_view.h).
#include "client_view.h"

#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <unordered_map>
#include <utility>

#include "core/json_text.h"
#include "strata/store.h"

namespace strata::sidecar {

using json = nlohmann::json;

// The view grows with the conversation and is saved and loaded on every turn, so it is written
// and read without building a json document: ToJson writes the bytes nlohmann's dump of
// {"entries": [[digest, role, segment_id], ...], "version": 1} gives, and FromJson reads that
// shape through a SAX handler, leaving any other document to the json parse (and its errors).
std::string ClientView::ToJson() const {
  size_t size = 32;
  for (const Entry& e : entries) {
    size += internal::JsonStringSize(e.digest) + internal::JsonStringSize(e.role) +
            internal::JsonStringSize(e.segment_id) + 5;
  }
  std::string out;
  out.reserve(size);
  out += "{\"entries\":[";
  for (size_t i = 0; i < entries.size(); ++i) {
    if (i > 0) out.push_back(',');
    out.push_back('[');
    internal::AppendJsonString(out, entries[i].digest);
    out.push_back(',');
    internal::AppendJsonString(out, entries[i].role);
    out.push_back(',');
    internal::AppendJsonString(out, entries[i].segment_id);
    out.push_back(']');
  }
  out += "],\"version\":1}";
  return out;
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
      view_->entries.push_back(std::move(entry_));
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
    view.entries.push_back(
        {e[0].get<std::string>(), e[1].get<std::string>(), e[2].get<std::string>()});
  }
  return view;
}

namespace {

// Views kept by their stored text, process-wide, each until the load that takes it: the next turn
// of the conversation. Each is charged its text, about three times that for the view's strings,
// and the map's node; past kClientViewMemoBytes the cache starts over.
class KeptViews {
 public:
  static KeptViews& Get() {
    static auto* views = new KeptViews;
    return *views;  // never destroyed: used until exit
  }

  std::optional<ClientView> Take(const std::string& text) {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = views_.find(text);
    if (it == views_.end()) return std::nullopt;
    ClientView view = std::move(it->second);
    bytes_ -= Charge(it->first.size());
    views_.erase(it);
    return view;
  }

  void Put(std::string text, ClientView view) {
    const size_t charge = Charge(text.size());
    if (charge > kClientViewMemoBytes / 4) return;
    std::lock_guard<std::mutex> lock(mu_);
    if (bytes_ + charge > kClientViewMemoBytes) {
      views_.clear();
      bytes_ = 0;
    }
    if (views_.emplace(std::move(text), std::move(view)).second) bytes_ += charge;
  }

 private:
  static size_t Charge(size_t text_bytes) { return 4 * text_bytes + 256; }

  std::mutex mu_;
  std::unordered_map<std::string, ClientView> views_;  // guarded by mu_
  size_t bytes_ = 0;                                   // guarded by mu_
};

}  // namespace

StatusOr<ClientView> LoadClientView(const Agent& agent, std::string* text) {
  if (text != nullptr) *text = ClientView().ToJson();
  Store* store = agent.store();
  if (store == nullptr) return ClientView();
  STRATA_ASSIGN_OR_RETURN(std::optional<std::string> stored,
                          store->GetAgentState(agent.id(), kClientViewKey));
  if (!stored) return ClientView();
  if (std::optional<ClientView> kept = KeptViews::Get().Take(*stored)) {
    if (text != nullptr) *text = std::move(*stored);
    return std::move(*kept);
  }
  StatusOr<ClientView> view = ClientView::FromJson(*stored);
  if (!view.ok()) {
    return DataLossError("agent \"" + agent.id() + "\": " + view.status().message());
  }
  if (text != nullptr) *text = std::move(*stored);
  return view;
}

Status SaveClientView(const Agent& agent, const ClientView& view) {
  return SaveClientViewText(agent, view.ToJson());
}

Status SaveClientViewText(const Agent& agent, const std::string& text) {
  Store* store = agent.store();
  if (store == nullptr) return Status::Ok();
  return store->PutAgentState(agent.id(), kClientViewKey, text);
}

void KeepClientView(std::string text, ClientView view) {
  KeptViews::Get().Put(std::move(text), std::move(view));
}

}  // namespace strata::sidecar
