// The console's JSON documents from a Store (console_data.h).
#include "console_data.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <map>
#include <memory>
#include <optional>
#include <utility>

#include "strata/context.h"
#include "strata/record.h"

namespace strata::console {
namespace {

using json = nlohmann::json;

constexpr const char* kSortKeys[] = {"id",           "tenant",      "turns",         "tokens",
                                     "requests",     "compactions", "prefix_breaks", "cached_share",
                                     "last_activity"};

StatusOr<size_t> ParseCount(std::string_view text, std::string_view name, size_t fallback) {
  if (text.empty()) return fallback;
  size_t value = 0;
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (error != std::errc() || end != text.data() + text.size()) {
    return InvalidArgumentError(std::string(name) + "=\"" + std::string(text.substr(0, 40)) +
                                "\" is not a non-negative integer");
  }
  return value;
}

json Parse(const std::string& text) {
  json parsed = json::parse(text, nullptr, false);
  return parsed.is_discarded() ? json::object() : parsed;
}

// The agent's records, oldest first.
StatusOr<std::vector<RequestRecord>> AllRecords(Store& store, const AgentView& agent) {
  STRATA_ASSIGN_OR_RETURN(StoredAgent stored, store.GetAgent(agent.stored_id));
  const size_t count = static_cast<size_t>(std::max<int64_t>(stored.requests, 0));
  STRATA_ASSIGN_OR_RETURN(std::vector<RequestRecord> records,
                          store.RecentRequests(agent.stored_id, std::max<size_t>(count, 1)));
  std::reverse(records.begin(), records.end());
  return records;
}

// The cached tokens a record's bar shows: the server's count, else strata's prediction.
int64_t CachedOf(const RequestRecord& r) {
  return r.cached_tokens_reported ? *r.cached_tokens_reported : r.cached_tokens_predicted;
}

json RecordJson(const RequestRecord& r) { return Parse(RequestRecordJson(r)); }

// The cached share of the agent's newest kCachedShareRecords records; null without input.
json CachedShare(Store& store, const std::string& stored_id) {
  StatusOr<std::vector<RequestRecord>> records =
      store.RecentRequests(stored_id, kCachedShareRecords);
  if (!records.ok()) return nullptr;
  int64_t input = 0, cached = 0;
  for (const RequestRecord& r : *records) {
    if (r.code != StatusCode::kOk) continue;
    input += r.input_tokens;
    cached += std::min(CachedOf(r), r.input_tokens);
  }
  if (input <= 0) return nullptr;
  return std::round(1e4 * static_cast<double>(cached) / static_cast<double>(input)) / 1e4;
}

int64_t PrefixBreaks(Store& store, const std::string& stored_id) {
  StatusOr<std::vector<StoredEvent>> events = store.Events(stored_id, "prefix_break");
  return events.ok() ? static_cast<int64_t>(events->size()) : 0;
}

json AgentRow(const StoredAgent& a, const AgentView& view) {
  return {{"tenant", view.tenant},
          {"id", view.id},
          {"turns", a.turn},
          {"tokens", a.tokens},
          {"requests", a.requests},
          {"compactions", a.compactions},
          {"last_activity_unix_ms", a.updated_unix_ms}};
}

// Fills prefix_breaks and cached_share, which need the agent's events and records.
void AddActivity(Store& store, const std::string& stored_id, json& row) {
  row["prefix_breaks"] = PrefixBreaks(store, stored_id);
  row["cached_share"] = CachedShare(store, stored_id);
}

bool SortsOnActivity(const std::string& key) {
  return key == "prefix_breaks" || key == "cached_share";
}

// Orders rows by `key` (ties by tenant and id, always ascending).
void SortRows(std::vector<std::pair<json, std::string>>& rows, const AgentsQuery& query) {
  const std::string key = query.sort == "last_activity" ? "last_activity_unix_ms" : query.sort;
  auto tie = [](const json& a, const json& b) {
    return std::make_pair(a["tenant"].get<std::string>(), a["id"].get<std::string>()) <
           std::make_pair(b["tenant"].get<std::string>(), b["id"].get<std::string>());
  };
  std::stable_sort(rows.begin(), rows.end(), [&](const auto& x, const auto& y) {
    const json& a = x.first;
    const json& b = y.first;
    const json& va = a[key];
    const json& vb = b[key];
    if (va != vb) {
      if (va.is_null()) return false;  // unknown values last in either order
      if (vb.is_null()) return true;
      return query.descending ? vb < va : va < vb;
    }
    return tie(a, b);
  });
}

json EventJson(const StoredEvent& e) {
  return {{"id", e.id},
          {"turn", e.turn},
          {"unix_ms", e.unix_ms},
          {"type", e.type},
          {"payload", Parse(e.payload_json)}};
}

// The index of the last record started at or before `unix_ms` (0 when none).
size_t RecordAtOrBefore(const std::vector<RequestRecord>& records, int64_t unix_ms) {
  size_t at = 0;
  for (size_t i = 0; i < records.size(); ++i) {
    if (records[i].started_unix_ms <= unix_ms) at = i;
  }
  return at;
}

// The index of the first record started at or after `unix_ms` (the last one when none).
size_t RecordAtOrAfter(const std::vector<RequestRecord>& records, int64_t unix_ms) {
  for (size_t i = 0; i < records.size(); ++i) {
    if (records[i].started_unix_ms >= unix_ms) return i;
  }
  return records.empty() ? 0 : records.size() - 1;
}

double Mean(double sum, size_t n) {
  return n == 0 ? 0 : std::round(10 * sum / static_cast<double>(n)) / 10;
}

// One bar: the mean of records [first, last].
json Bar(const std::vector<RequestRecord>& records, size_t first, size_t last) {
  double cached = 0, uncached = 0, output = 0, predicted = 0, ttft = 0;
  bool reported = true, failed = false;
  for (size_t i = first; i <= last; ++i) {
    const RequestRecord& r = records[i];
    const int64_t c = std::min(CachedOf(r), r.input_tokens);
    cached += static_cast<double>(c);
    uncached += static_cast<double>(r.input_tokens - c);
    output += static_cast<double>(r.output_tokens);
    predicted += static_cast<double>(r.cached_tokens_predicted);
    ttft += r.ttft_ms;
    reported = reported && r.cached_tokens_reported.has_value();
    failed = failed || r.code != StatusCode::kOk;
  }
  const size_t n = last - first + 1;
  return {{"first", first},
          {"last", last},
          {"request_id", records[first].request_id},
          {"started_unix_ms", records[first].started_unix_ms},
          {"cached", Mean(cached, n)},
          {"uncached", Mean(uncached, n)},
          {"output", Mean(output, n)},
          {"predicted", Mean(predicted, n)},
          {"reported", reported},
          {"ttft_ms", Mean(ttft, n)},
          {"failed", failed}};
}

std::map<std::string, size_t> IndexByRequestId(const std::vector<RequestRecord>& records) {
  std::map<std::string, size_t> out;
  for (size_t i = 0; i < records.size(); ++i) out.emplace(records[i].request_id, i);
  return out;
}

// The cached tokens a prefix break cost: what the previous request had cached beyond what this
// one could reuse (a shortfall: predicted minus reported).
int64_t InvalidatedByBreak(const json& p) {
  const int64_t predicted = p.value("predicted_cached_tokens", int64_t{0});
  if (p.value("kind", "") == "server_shortfall") {
    const json& reported =
        p.contains("reported_cached_tokens") ? p["reported_cached_tokens"] : json(nullptr);
    return reported.is_number() ? std::max<int64_t>(0, predicted - reported.get<int64_t>()) : 0;
  }
  return std::max<int64_t>(0, p.value("previous_prompt_tokens", int64_t{0}) - predicted);
}

json Marks(const std::vector<RequestRecord>& records, const std::vector<StoredEvent>& events) {
  const std::map<std::string, size_t> by_id = IndexByRequestId(records);
  json breaks = json::array(), compactions = json::array(), replacements = json::array();
  std::map<size_t, std::string> replaced_at;
  for (const StoredEvent& e : events) {
    if (e.type != "history_replaced") continue;
    const json p = Parse(e.payload_json);
    const size_t at = RecordAtOrAfter(records, e.unix_ms);
    std::string cause =
        "client history replaced from message " + std::to_string(p.value("first_difference", 0));
    const std::string why = p.value("reason", "");
    if (!why.empty()) cause += ": " + why;
    replaced_at[at] = cause;
    replacements.push_back({{"at", at}, {"turn", e.turn}, {"cause", cause}, {"payload", p}});
  }
  for (const StoredEvent& e : events) {
    const json p = Parse(e.payload_json);
    if (e.type == "prefix_break") {
      auto it = by_id.find(p.value("request_id", ""));
      const size_t at = it != by_id.end() ? it->second : RecordAtOrBefore(records, e.unix_ms);
      json causes = json::array({p.value("reason", "unknown")});
      if (auto r = replaced_at.find(at); r != replaced_at.end()) causes.push_back(r->second);
      breaks.push_back({{"at", at},
                        {"request_id", p.value("request_id", "")},
                        {"turn", e.turn},
                        {"kind", p.value("kind", "")},
                        {"causes", causes},
                        {"invalidated_tokens", InvalidatedByBreak(p)},
                        {"payload", p}});
    } else if (e.type == "compaction") {
      compactions.push_back({{"at", RecordAtOrBefore(records, e.unix_ms)},
                             {"turn", e.turn},
                             {"unix_ms", e.unix_ms},
                             {"report", p}});
    }
  }
  return {{"breaks", breaks}, {"compactions", compactions}, {"replacements", replacements}};
}

json LayerTokens(const std::array<int64_t, kLayerCount>& tokens) {
  json out = json::object();
  for (int i = 0; i < kLayerCount; ++i) out[LayerName(static_cast<Layer>(i))] = tokens[i];
  return out;
}

// The stable prefix as the next request renders it: its bytes and SHA-256 (the agent's own
// rendering of its stored segments, without sending anything).
json StablePrefix(const StoredAgent& stored, ContextSnapshot snapshot) {
  ContextOptions options = stored.options;
  options.journal = nullptr;
  StatusOr<std::unique_ptr<Context>> context = Context::Restore(options, std::move(snapshot));
  if (!context.ok()) return {{"error", context.status().message()}};
  StatusOr<BuiltRequest> built = (*context)->Preview();
  if (!built.ok()) return {{"error", built.status().message()}};
  return {{"bytes", built->stable_prefix_bytes},
          {"hash", built->stable_prefix_hash},
          {"layers", {"tools", "system", "index", "docs"}},
          {"input_tokens", built->input_tokens}};
}

json CacheSaltScope(Store& store, const std::string& stored_id, const StoredAgent& stored) {
  const AgentIdentity& id = stored.options.agent;
  json scope = {{"tenant", id.tenant},
                {"scope", id.scope},
                {"model_version", id.model_version},
                {"template_version", id.template_version},
                {"sent", nullptr},
                {"secret_configured", nullptr}};
  StatusOr<std::optional<std::string>> config = store.GetAgentState(stored_id, "config");
  if (config.ok() && config->has_value()) {
    const json c = Parse(**config);
    if (c.contains("endpoint") && c["endpoint"].is_object()) {
      scope["sent"] = c["endpoint"].value("send_cache_salt", true);
      scope["secret_configured"] = !c["endpoint"].value("deployment_secret_env", "").empty();
    }
  }
  return scope;
}

}  // namespace

StatusOr<PageQuery> ParsePageQuery(std::string_view offset, std::string_view limit) {
  PageQuery page;
  STRATA_ASSIGN_OR_RETURN(page.offset, ParseCount(offset, "offset", 0));
  STRATA_ASSIGN_OR_RETURN(page.limit, ParseCount(limit, "limit", 50));
  if (page.limit == 0 || page.limit > kMaxPageLimit) {
    return InvalidArgumentError("limit=" + std::to_string(page.limit) + " is out of range: 1 to " +
                                std::to_string(kMaxPageLimit));
  }
  return page;
}

StatusOr<AgentsQuery> ParseAgentsQuery(std::string_view offset, std::string_view limit,
                                       std::string_view sort, std::string_view order) {
  AgentsQuery query;
  STRATA_ASSIGN_OR_RETURN(query.page, ParsePageQuery(offset, limit));
  if (!sort.empty()) {
    if (std::find(std::begin(kSortKeys), std::end(kSortKeys), sort) == std::end(kSortKeys)) {
      std::string known;
      for (const char* k : kSortKeys) known += std::string(known.empty() ? "" : ", ") + k;
      return InvalidArgumentError("sort=\"" + std::string(sort.substr(0, 40)) +
                                  "\" is not a column (one of " + known + ")");
    }
    query.sort = std::string(sort);
  }
  if (order == "asc") {
    query.descending = false;
  } else if (!order.empty() && order != "desc") {
    return InvalidArgumentError("order=\"" + std::string(order.substr(0, 40)) +
                                "\" is neither asc nor desc");
  }
  return query;
}

StatusOr<nlohmann::json> AgentsList(Store& store, const std::vector<StoredAgent>& stored,
                                    const std::vector<AgentView>& views, const AgentsQuery& query) {
  std::vector<std::pair<json, std::string>> rows;
  rows.reserve(stored.size());
  const bool activity_first = SortsOnActivity(query.sort);
  for (size_t i = 0; i < stored.size() && i < views.size(); ++i) {
    rows.emplace_back(AgentRow(stored[i], views[i]), views[i].stored_id);
    if (activity_first) AddActivity(store, views[i].stored_id, rows.back().first);
  }
  SortRows(rows, query);
  json agents = json::array();
  for (size_t i = query.page.offset; i < rows.size() && agents.size() < query.page.limit; ++i) {
    if (!activity_first) AddActivity(store, rows[i].second, rows[i].first);
    agents.push_back(std::move(rows[i].first));
  }
  return json{{"total", rows.size()},
              {"offset", query.page.offset},
              {"limit", query.page.limit},
              {"sort", query.sort},
              {"order", query.descending ? "desc" : "asc"},
              {"agents", std::move(agents)}};
}

StatusOr<nlohmann::json> Records(Store& store, const AgentView& agent, const PageQuery& page,
                                 std::string_view request_id) {
  STRATA_ASSIGN_OR_RETURN(std::vector<RequestRecord> records, AllRecords(store, agent));
  std::reverse(records.begin(), records.end());  // newest first
  size_t offset = page.offset;
  if (!request_id.empty()) {
    auto it = std::find_if(records.begin(), records.end(),
                           [&](const RequestRecord& r) { return r.request_id == request_id; });
    if (it == records.end()) {
      return NotFoundError("agent \"" + agent.id + "\" has no request \"" +
                           std::string(request_id.substr(0, 80)) + "\"");
    }
    offset = static_cast<size_t>(it - records.begin()) / page.limit * page.limit;
  }
  json out = json::array();
  for (size_t i = offset; i < records.size() && out.size() < page.limit; ++i) {
    out.push_back(RecordJson(records[i]));
  }
  return json{{"total", records.size()},
              {"offset", offset},
              {"limit", page.limit},
              {"records", std::move(out)}};
}

StatusOr<nlohmann::json> Events(Store& store, const AgentView& agent, const PageQuery& page) {
  STRATA_RETURN_IF_ERROR(store.GetAgent(agent.stored_id).status());
  STRATA_ASSIGN_OR_RETURN(std::vector<StoredEvent> events, store.Events(agent.stored_id));
  json out = json::array();
  for (size_t i = page.offset; i < events.size() && out.size() < page.limit; ++i) {
    out.push_back(EventJson(events[i]));
  }
  return json{{"total", events.size()},
              {"offset", page.offset},
              {"limit", page.limit},
              {"events", std::move(out)}};
}

StatusOr<nlohmann::json> Growth(Store& store, const AgentView& agent) {
  STRATA_RETURN_IF_ERROR(store.GetAgent(agent.stored_id).status());
  STRATA_ASSIGN_OR_RETURN(std::vector<GrowthPoint> points, store.Growth(agent.stored_id));
  const size_t bucket =
      std::max<size_t>(1, (points.size() + kMaxSeriesPoints - 1) / kMaxSeriesPoints);
  json out = json::array();
  for (size_t first = 0; first < points.size(); first += bucket) {
    const size_t last = std::min(points.size(), first + bucket) - 1;
    int64_t compactions = 0, invalidated = 0, summary_in = 0, summary_cached = 0, summary_out = 0;
    for (size_t i = first; i <= last; ++i) {
      compactions += points[i].compactions;
      invalidated += points[i].invalidated_tokens;
      summary_in += points[i].summary_input_tokens;
      summary_cached += points[i].summary_cached_tokens;
      summary_out += points[i].summary_output_tokens;
    }
    const GrowthPoint& p = points[last];
    out.push_back({{"turn", p.turn},
                   {"unix_ms", p.unix_ms},
                   {"layers", LayerTokens(p.layer_tokens)},
                   {"total", p.TotalTokens()},
                   {"compactions", compactions},
                   {"invalidated_tokens", invalidated},
                   {"summary_input_tokens", summary_in},
                   {"summary_cached_tokens", summary_cached},
                   {"summary_output_tokens", summary_out}});
  }
  return json{
      {"points", std::move(out)}, {"downsampled", bucket > 1}, {"total_points", points.size()}};
}

StatusOr<nlohmann::json> Layout(Store& store, const AgentView& agent) {
  STRATA_ASSIGN_OR_RETURN(StoredAgent stored, store.GetAgent(agent.stored_id));
  STRATA_ASSIGN_OR_RETURN(ContextSnapshot snapshot, store.LoadSnapshot(agent.stored_id));
  int64_t segments[kLayerCount] = {}, tokens[kLayerCount] = {}, bytes[kLayerCount] = {};
  int64_t total = 0;
  for (const Segment& s : snapshot.segments) {
    if (s.state != SegmentState::kLive && s.state != SegmentState::kMasked) continue;
    const int layer = static_cast<int>(s.layer);
    if (layer < 0 || layer >= kLayerCount) continue;
    ++segments[layer];
    tokens[layer] += static_cast<int64_t>(s.tokens);
    bytes[layer] += static_cast<int64_t>(s.content.size() + s.reasoning.size());
    total += static_cast<int64_t>(s.tokens);
  }
  json layers = json::array();
  for (int i = 0; i < kLayerCount; ++i) {
    layers.push_back({{"layer", LayerName(static_cast<Layer>(i))},
                      {"segments", segments[i]},
                      {"tokens", tokens[i]},
                      {"bytes", bytes[i]}});
  }
  return json{{"layers", std::move(layers)},
              {"total_tokens", total},
              {"stable_prefix", StablePrefix(stored, std::move(snapshot))},
              {"cache_salt", CacheSaltScope(store, agent.stored_id, stored)}};
}

StatusOr<nlohmann::json> Timeline(Store& store, const AgentView& agent) {
  STRATA_ASSIGN_OR_RETURN(std::vector<RequestRecord> records, AllRecords(store, agent));
  STRATA_ASSIGN_OR_RETURN(std::vector<StoredEvent> events, store.Events(agent.stored_id));
  const size_t bucket =
      std::max<size_t>(1, (records.size() + kMaxSeriesPoints - 1) / kMaxSeriesPoints);
  json bars = json::array();
  for (size_t first = 0; first < records.size(); first += bucket) {
    bars.push_back(Bar(records, first, std::min(records.size(), first + bucket) - 1));
  }
  json out = Marks(records, events);
  out["total"] = records.size();
  out["bucket"] = bucket;
  out["downsampled"] = bucket > 1;
  out["bars"] = std::move(bars);
  return out;
}

StatusOr<nlohmann::json> Summary(Store& store, const AgentView& agent) {
  STRATA_ASSIGN_OR_RETURN(StoredAgent a, store.GetAgent(agent.stored_id));
  json row = AgentRow(a, agent);
  AddActivity(store, agent.stored_id, row);
  row["model"] = a.options.render.model;
  row["tokenizer"] = a.tokenizer_name;
  row["segments"] = a.segments;
  row["created_unix_ms"] = a.created_unix_ms;
  row["updated_unix_ms"] = a.updated_unix_ms;
  return row;
}

StatusOr<nlohmann::json> AgentPage(Store& store, const AgentView& agent, size_t records) {
  json page;
  STRATA_ASSIGN_OR_RETURN(page["agent"], Summary(store, agent));
  STRATA_ASSIGN_OR_RETURN(page["layout"], Layout(store, agent));
  STRATA_ASSIGN_OR_RETURN(page["timeline"], Timeline(store, agent));
  STRATA_ASSIGN_OR_RETURN(page["growth"], Growth(store, agent));
  STRATA_ASSIGN_OR_RETURN(page["events"],
                          Events(store, agent, PageQuery{0, static_cast<size_t>(-1)}));
  STRATA_ASSIGN_OR_RETURN(page["records"],
                          Records(store, agent, PageQuery{0, std::max<size_t>(records, 1)}));
  return page;
}

}  // namespace strata::console
