// `strata inspect --db FILE [--agent ID]`: lists a store's agents, or shows one agent's layers,
// sizes, compactions and recent requests; with --html OUT, writes the console's agent page
// (console_page.h) as one self-contained file.
#include <algorithm>
#include <ctime>
#include <fstream>
#include <iomanip>
#include <iostream>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>

#include "commands.h"
#include "console_data.h"
#include "console_page.h"
#include "growth_chart.h"
#include "strata/store.h"

namespace strata::cli {
namespace {

struct InspectArgs {
  std::string db;
  std::string agent;
  size_t requests = 10;
  bool json = false;
  std::string html;  // --html OUT
};

// The newest records an --html file holds (its table pages through them; the timeline, growth
// and marks cover every record).
constexpr size_t kHtmlRecords = 1000;

std::string Time(int64_t unix_ms) {
  if (unix_ms <= 0) return "-";
  std::time_t seconds = static_cast<std::time_t>(unix_ms / 1000);
  std::tm tm{};
  gmtime_r(&seconds, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%d %H:%M:%SZ", &tm);
  return buf;
}

template <typename T>
T Check(StatusOr<T> value) {
  if (!value.ok()) throw CommandFailed{value.status().ToString()};
  return std::move(value).value();
}

// The tokens of an agent's stored requests, by purpose ("turn", "compaction": a summarizer's):
// what the agent cost, its summaries included. Counts only the records the store still holds
// (Store::PruneRequests may have deleted older ones).
struct PurposeTotals {
  int64_t requests = 0, input = 0, cached_reported = 0, cached_predicted = 0, output = 0;
};

std::map<std::string, PurposeTotals> TotalsByPurpose(const std::vector<RequestRecord>& records) {
  std::map<std::string, PurposeTotals> totals;
  for (const RequestRecord& r : records) {
    PurposeTotals& t = totals[r.purpose];
    ++t.requests;
    t.input += r.input_tokens;
    t.cached_reported += r.cached_tokens_reported.value_or(0);
    t.cached_predicted += r.cached_tokens_predicted;
    t.output += r.output_tokens;
  }
  return totals;
}

std::vector<RequestRecord> AllRequests(Store& store, const StoredAgent& agent, const std::string& id) {
  return Check(store.RecentRequests(id, static_cast<size_t>(std::max<int64_t>(agent.requests, 0))));
}

void ListAgents(Store& store) {
  std::vector<StoredAgent> agents = Check(store.ListAgents());
  StoreStats stats = Check(store.Stats());
  std::cout << store.path() << ": " << agents.size() << " agent" << (agents.size() == 1 ? "" : "s")
            << ", " << stats.file_bytes << " bytes, schema " << stats.schema_version << "\n";
  if (agents.empty()) return;
  std::cout << std::left << std::setw(40) << "AGENT" << std::right << std::setw(7) << "TURNS"
            << std::setw(10) << "SEGMENTS" << std::setw(10) << "TOKENS" << std::setw(10)
            << "REQUESTS" << std::setw(12) << "COMPACTIONS"
            << "  UPDATED\n";
  for (const StoredAgent& a : agents) {
    std::cout << std::left << std::setw(40) << a.options.agent.id << std::right << std::setw(7)
              << a.turn << std::setw(10) << a.segments << std::setw(10) << a.tokens << std::setw(10)
              << a.requests << std::setw(12) << a.compactions << "  " << Time(a.updated_unix_ms)
              << "\n";
  }
}

// The growth curve in a line (points, last and peak size), and the tokens of the summary requests
// the turns sent while compacting, when they sent any.
void ShowGrowth(const std::vector<GrowthPoint>& growth, const std::string& agent) {
  if (growth.empty()) return;
  int64_t peak = 0, input = 0, cached = 0, output = 0;
  for (const GrowthPoint& p : growth) {
    peak = std::max(peak, p.TotalTokens());
    input += p.summary_input_tokens;
    cached += p.summary_cached_tokens;
    output += p.summary_output_tokens;
  }
  std::cout << "growth: " << growth.size() << " points, last "
            << HumanTokens(static_cast<double>(growth.back().TotalTokens())) << " tokens, peak "
            << HumanTokens(static_cast<double>(peak)) << " (strata growth --db ... --agent "
            << agent << " --svg growth.svg)\n";
  if (input == 0 && output == 0) return;
  std::cout << "  summary requests in the growth curve: input " << input << " tokens (cached "
            << cached << "), output " << output << "\n";
}

void ShowAgent(Store& store, const InspectArgs& args) {
  StoredAgent agent = Check(store.GetAgent(args.agent));
  ContextSnapshot snapshot = Check(store.LoadSnapshot(args.agent));
  const AgentIdentity& id = agent.options.agent;
  std::cout << "agent " << id.id << "\n"
            << "  tenant \"" << id.tenant << "\", scope \"" << id.scope << "\", model version \""
            << id.model_version << "\", template version \"" << id.template_version << "\"\n"
            << "  model " << agent.options.render.model << ", tokenizer " << agent.tokenizer_name
            << "\n"
            << "  created " << Time(agent.created_unix_ms) << ", updated "
            << Time(agent.updated_unix_ms) << ", turn " << agent.turn << "\n\n";

  struct LayerRow {
    int64_t segments = 0, bytes = 0, tokens = 0;
    int64_t by_state[4] = {};
  };
  LayerRow rows[kLayerCount];
  for (const Segment& s : snapshot.segments) {
    LayerRow& row = rows[static_cast<int>(s.layer)];
    ++row.segments;
    int state = static_cast<int>(s.state);
    if (state >= 0 && state < 4) ++row.by_state[state];
    if (s.state == SegmentState::kLive || s.state == SegmentState::kMasked) {
      row.bytes += static_cast<int64_t>(s.content.size() + s.reasoning.size());
      row.tokens += static_cast<int64_t>(s.tokens);
    }
  }
  std::cout << std::left << std::setw(10) << "LAYER" << std::right << std::setw(10) << "SEGMENTS"
            << std::setw(8) << "LIVE" << std::setw(8) << "MASKED" << std::setw(8) << "SUMM."
            << std::setw(8) << "EVICTED" << std::setw(12) << "BYTES" << std::setw(10) << "TOKENS\n";
  int64_t total_tokens = 0, total_bytes = 0;
  for (int i = 0; i < kLayerCount; ++i) {
    const LayerRow& r = rows[i];
    if (r.segments == 0) continue;
    total_tokens += r.tokens;
    total_bytes += r.bytes;
    std::cout << std::left << std::setw(10) << LayerName(static_cast<Layer>(i)) << std::right
              << std::setw(10) << r.segments << std::setw(8) << r.by_state[0] << std::setw(8)
              << r.by_state[1] << std::setw(8) << r.by_state[2] << std::setw(8) << r.by_state[3]
              << std::setw(12) << r.bytes << std::setw(10) << r.tokens << "\n";
  }
  std::cout << std::left << std::setw(50) << "total (rendered)" << std::right << std::setw(12)
            << total_bytes << std::setw(10) << total_tokens << "\n";
  std::cout << "  recall originals kept: " << snapshot.originals.size() << "\n\n";

  std::vector<StoredEvent> events = Check(store.Events(args.agent));
  std::map<std::string, int> by_type;
  for (const StoredEvent& e : events) ++by_type[e.type];
  std::cout << "compactions: " << by_type["compaction"] << "\n";
  for (const StoredEvent& e : events) {
    if (e.type != "compaction") continue;
    std::cout << "  turn " << e.turn << " at " << Time(e.unix_ms) << ": " << e.payload_json << "\n";
  }
  std::cout << "other events:";
  bool any = false;
  for (const auto& [type, count] : by_type) {
    if (type == "compaction") continue;
    std::cout << " " << type << " x" << count;
    any = true;
  }
  std::cout << (any ? "" : " none") << "\n";
  ShowGrowth(Check(store.Growth(args.agent)), args.agent);
  std::cout << "\n";

  const std::map<std::string, PurposeTotals> totals = TotalsByPurpose(AllRequests(store, agent, args.agent));
  for (const auto& [purpose, t] : totals) {
    std::cout << "requests for " << purpose << ": " << t.requests << ", input " << t.input
              << " tokens (cached " << t.cached_reported << " reported, " << t.cached_predicted
              << " predicted), output " << t.output << "\n";
  }
  std::vector<RequestRecord> requests = Check(store.RecentRequests(args.agent, args.requests));
  std::cout << "recent requests: " << agent.requests << " stored"
            << (requests.empty() ? "" : ", newest first") << "\n";
  if (requests.empty()) return;
  std::cout << std::left << std::setw(22) << "STARTED" << std::setw(24) << "REQUEST" << std::right
            << std::setw(9) << "INPUT" << std::setw(9) << "CACHED" << std::setw(9) << "PREDICT"
            << std::setw(8) << "OUTPUT" << std::setw(10) << "TTFT ms" << std::setw(10) << "TOTAL ms"
            << "  OUTCOME\n";
  for (const RequestRecord& r : requests) {
    std::cout << std::left << std::setw(22) << Time(r.started_unix_ms) << std::setw(24)
              << r.request_id.substr(0, 23) << std::right << std::setw(9) << r.input_tokens
              << std::setw(9)
              << (r.cached_tokens_reported ? std::to_string(*r.cached_tokens_reported) : "-")
              << std::setw(9) << r.cached_tokens_predicted << std::setw(8) << r.output_tokens
              << std::setw(10) << std::fixed << std::setprecision(1) << r.ttft_ms << std::setw(10)
              << r.total_ms << "  "
              << (r.code == StatusCode::kOk ? r.finish_reason
                                            : StatusCodeName(r.code) + ": " + r.error)
              << (r.purpose == "turn" ? "" : " (" + r.purpose + ")") << "\n";
  }
}

// --json --agent ID: {"config": <AgentConfig JSON, or null for a bare context>, "agent": {...counts},
// "compactions": [the last reports], "request_tokens": {purpose: {...token totals}}}.
void ShowAgentJson(Store& store, const InspectArgs& args) {
  StoredAgent agent = Check(store.GetAgent(args.agent));
  std::optional<std::string> config = Check(store.GetAgentState(args.agent, "config"));
  nlohmann::ordered_json out;
  out["config"] = config ? nlohmann::ordered_json::parse(*config, nullptr, false) : nlohmann::ordered_json();
  out["agent"] = {{"id", agent.options.agent.id},     {"tokenizer", agent.tokenizer_name},
                  {"turn", agent.turn},               {"segments", agent.segments},
                  {"tokens", agent.tokens},           {"requests", agent.requests},
                  {"compactions", agent.compactions}, {"created_unix_ms", agent.created_unix_ms},
                  {"updated_unix_ms", agent.updated_unix_ms}};
  std::vector<StoredEvent> events = Check(store.Events(args.agent, "compaction"));
  nlohmann::ordered_json compactions = nlohmann::ordered_json::array();
  const size_t first = events.size() > args.requests ? events.size() - args.requests : 0;
  for (size_t i = first; i < events.size(); ++i) {
    nlohmann::ordered_json report = nlohmann::ordered_json::parse(events[i].payload_json, nullptr, false);
    compactions.push_back({{"turn", events[i].turn}, {"unix_ms", events[i].unix_ms}, {"report", report}});
  }
  out["compactions"] = compactions;
  nlohmann::ordered_json by_purpose = nlohmann::ordered_json::object();
  for (const auto& [purpose, t] : TotalsByPurpose(AllRequests(store, agent, args.agent))) {
    by_purpose[purpose] = {{"requests", t.requests},
                           {"input_tokens", t.input},
                           {"cached_tokens_reported", t.cached_reported},
                           {"cached_tokens_predicted", t.cached_predicted},
                           {"output_tokens", t.output}};
  }
  out["request_tokens"] = by_purpose;
  std::cout << out.dump() << "\n";
}

// --html OUT --agent ID: the console's agent page with its data embedded. A sidecar's store keeps
// "<tenant>/<id>": the page shows the tenant and the id apart, as the sidecar's console does.
void WriteHtml(Store& store, const InspectArgs& args) {
  StoredAgent agent = Check(store.GetAgent(args.agent));
  console::AgentView view{args.agent, agent.options.agent.tenant, args.agent};
  const std::string prefix = view.tenant + "/";
  if (!view.tenant.empty() && args.agent.compare(0, prefix.size(), prefix) == 0) {
    view.id = args.agent.substr(prefix.size());
  }
  nlohmann::json page = Check(console::AgentPage(store, view, kHtmlRecords));
  std::ofstream out(args.html, std::ios::binary | std::ios::trunc);
  out << console::ConsolePage(console::FileBoot(std::move(page)));
  out.close();
  if (!out) throw CommandFailed{"cannot write --html " + args.html + ": check the directory"};
  std::cout << "wrote " << args.html << " (agent " << args.agent << ")\n";
}

void Run(const InspectArgs& args) {
  StoreOptions options;
  options.create_if_missing = false;
  options.read_only = true;
  StatusOr<std::unique_ptr<Store>> store = OpenStore(args.db, options);
  if (!store.ok()) throw CommandFailed{store.status().ToString()};
  if (!args.html.empty()) {
    if (args.agent.empty()) throw CLI::ValidationError("--html", "--html needs --agent ID");
    WriteHtml(**store, args);
  } else if (args.json) {
    if (args.agent.empty()) throw CLI::ValidationError("--json", "--json needs --agent ID");
    ShowAgentJson(**store, args);
  } else if (args.agent.empty()) {
    ListAgents(**store);
  } else {
    ShowAgent(**store, args);
  }
}

}  // namespace

void RegisterInspect(CLI::App& app) {
  auto args = std::make_shared<InspectArgs>();
  CLI::App* cmd = app.add_subcommand(
      "inspect", "List a store's agents, or show one agent's layers, compactions and requests");
  cmd->add_option("--db", args->db, "Store file (SQLite) written by strata")
      ->required()
      ->check(CLI::ExistingFile);
  cmd->add_option("--agent", args->agent, "Show this agent in detail");
  cmd->add_option("--requests", args->requests,
                  "How many recent requests (and, with --json, compactions) to show")
      ->capture_default_str();
  cmd->add_flag("--json", args->json,
                "With --agent: one JSON object {\"config\": <AgentConfig>, \"agent\": counts, "
                "\"compactions\": [...]}");
  cmd->add_option("--html", args->html,
                  "With --agent: write the console's agent page (timeline, prefix breaks, "
                  "compactions, growth, layout, records) to this self-contained HTML file");
  cmd->callback([args] { Run(*args); });
}

}  // namespace strata::cli
