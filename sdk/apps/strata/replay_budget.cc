#include "replay_budget.h"

#include <cmath>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "commands.h"
#include "replay_common.h"
#include "strata/replay/eval.h"
#include "strata/tokenizer_spec.h"

namespace strata::cli {
namespace {

std::vector<std::string> SplitList(const std::string& text) {
  std::vector<std::string> out;
  std::stringstream in(text);
  for (std::string item; std::getline(in, item, ',');) {
    if (!item.empty()) out.push_back(item);
  }
  return out;
}

nlohmann::ordered_json SummaryJson(const EvalSummary& s) {
  return {{"requests", s.requests},
          {"budget_violations", s.violations},
          {"pairing_errors", s.pairing_errors},
          {"failed_builds", s.failed_builds},
          {"peak_tokens", s.peak_tokens},
          {"mean_tokens", s.mean_tokens},
          {"input_tokens", s.input_tokens},
          {"reused_tokens", s.reused_tokens},
          {"uncached_tokens", s.uncached_tokens},
          {"prefix_reuse_share", s.reuse_share},
          {"cost", s.cost},
          {"compactions", s.compactions},
          {"invalidated_tokens", s.invalidated_tokens},
          {"old_identifiers", s.old_identifiers},
          {"old_identifiers_kept", s.old_identifiers_kept},
          {"retention", s.retention}};
}

}  // namespace

void AddReplayBudgetOptions(CLI::App* cmd, ReplayBudgetArgs* args) {
  cmd->add_option("--budget", args->budget,
                  "Input tokens a request may hold (counted with --tokenizer through the GLM-5 template)")
      ->check(CLI::NonNegativeNumber);
  cmd->add_option_function<std::string>(
         "--policy",
         [args](const std::string& policy) {
           args->policy = policy;
           args->policy_given = true;
         },
         "With --budget: the compaction policy: strata (default), none, sliding, last-n, "
         "clear-tool-uses or observation-masking")
      ->type_name("POLICY");
  cmd->add_option("--compare", args->compare,
                  "With --budget and --tokenizer: replay once per policy and compare them, e.g. "
                  "strata,none,sliding,last-n,clear-tool-uses,observation-masking");
  cmd->add_option("--tokenizer", args->tokenizer,
                  "Tokenizer spec: hf:PATH/tokenizer.json, spm:PATH/model.model or estimate[:BYTES_PER_TOKEN]");
  cmd->add_option("--block-tokens", args->block_tokens, "Prefix-cache block size in tokens")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  cmd->add_option("--trigger", args->trigger, "strata policy: compact above this fraction of the budget (0 < f <= 1)")
      ->capture_default_str();
  cmd->add_option("--target", args->target, "strata policy: compact down to this fraction of the budget (0 < f <= 1)")
      ->capture_default_str();
  cmd->add_option("--keep-turns", args->keep_turns, "strata policy: the last turns never altered")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  cmd->add_option("--keep-tool-results", args->keep_tool_results,
                  "strata policy: the last tool results never masked")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  cmd->add_option("--exclude-tools", args->exclude_tools, "strata policy: tools whose results are never altered");
  cmd->add_option("--ephemeral-tools", args->ephemeral_tools, "strata policy: tools whose results are masked first");
  cmd->add_flag("--explain", args->explain,
                "strata policy: print each compaction's candidates, expected saving, invalidation cost and chosen set");
}

void ValidateReplayBudgetArgs(const ReplayBudgetArgs& args) {
  if (args.policy_given && args.budget == 0) {
    throw CLI::ValidationError("--policy", "--policy needs --budget N (without a budget nothing is compacted)");
  }
  if (args.policy.find(',') != std::string::npos) {
    throw CLI::ValidationError("--policy", "--policy takes one policy; compare several with --compare " +
                                               args.policy);
  }
  for (const std::string& policy : SplitList(args.compare.empty() ? args.policy : args.compare)) {
    if (policy != "strata" && !MakePolicyByName(policy).ok()) {
      throw CLI::ValidationError("--policy", "unknown policy \"" + policy +
                                                 "\" (strata, none, sliding, last-n, clear-tool-uses, "
                                                 "observation-masking)");
    }
  }
  if (!args.compare.empty() && args.budget == 0) {
    throw CLI::ValidationError("--compare", "--compare needs --budget N");
  }
  for (const auto& [name, value] : {std::pair{"--trigger", args.trigger}, std::pair{"--target", args.target}}) {
    if (!std::isfinite(value) || value <= 0 || value > 1) {
      throw CLI::ValidationError(name, std::to_string(value) + " is not a fraction of the budget in (0, 1]");
    }
  }
  if (args.target > args.trigger) {
    throw CLI::ValidationError("--target", "the target (" + std::to_string(args.target) +
                                               ") must not exceed the trigger (" + std::to_string(args.trigger) + ")");
  }
}

std::unique_ptr<CompactionPolicy> MakeReplayPolicy(const ReplayBudgetArgs& args) {
  if (args.policy == "strata") {
    StrataPolicyOptions options;
    options.keep_turns = args.keep_turns;
    options.keep_tool_results = args.keep_tool_results;
    for (const std::string& tool : SplitList(args.exclude_tools)) options.exclude_tools.insert(tool);
    for (const std::string& tool : SplitList(args.ephemeral_tools)) options.ephemeral_tools.insert(tool);
    return MakeStrataPolicy(options);
  }
  StatusOr<std::unique_ptr<CompactionPolicy>> made = MakePolicyByName(args.policy);
  if (!made.ok()) throw CommandFailed{made.status().message()};
  return std::move(made).value();
}

void RunReplayCompare(const std::string& trace_path, const ReplayBudgetArgs& args, const std::string& out_path,
                      const std::string& summary_json, bool quiet) {
  if (args.tokenizer.empty()) {
    throw CLI::ValidationError("--tokenizer", "--compare needs --tokenizer SPEC to count tokens "
                                              "(e.g. hf:PATH/tokenizer.json, or estimate)");
  }
  std::unique_ptr<Tokenizer> tokenizer = MakeTokenizerOrThrow(args.tokenizer, "--tokenizer");
  StatusOr<std::vector<TraceMessage>> trace = ReadTrace(trace_path);
  if (!trace.ok()) throw CommandFailed{trace.status().message()};
  std::vector<std::string> policies = SplitList(args.compare);

  std::unique_ptr<OutputFile> out;
  if (!out_path.empty()) out = std::make_unique<OutputFile>(out_path, "--out");
  nlohmann::ordered_json summaries;
  std::vector<std::pair<std::string, EvalSummary>> rows;
  for (const std::string& policy : policies) {
    EvalOptions options;
    options.policy = policy;
    options.budget_tokens = args.budget;
    options.tokenizer = tokenizer.get();
    options.block_tokens = args.block_tokens;
    options.trigger = args.trigger;
    options.target = args.target;
    options.strata.keep_turns = args.keep_turns;
    options.strata.keep_tool_results = args.keep_tool_results;
    for (const std::string& tool : SplitList(args.exclude_tools)) options.strata.exclude_tools.insert(tool);
    for (const std::string& tool : SplitList(args.ephemeral_tools)) options.strata.ephemeral_tools.insert(tool);
    if (out) {
      options.on_turn = [&](const EvalTurn& turn, const std::string& body) {
        nlohmann::ordered_json stats = {{"policy", policy},
                                        {"input_tokens", turn.input_tokens},
                                        {"reused_tokens", turn.reused_tokens},
                                        {"violation", turn.violation}};
        std::string compactions;
        if (turn.compaction) compactions = ",\"compactions\":[" + CompactionReportJson(*turn.compaction) + "]";
        out->stream() << "{\"turn\":" << turn.turn << ",\"request\":" << body << ",\"stats\":" << DumpJson(stats)
                      << ",\"policy\":\"" << policy << "\"" << compactions << "}\n";
      };
    }
    StatusOr<EvalResult> result = EvaluateTrace(*trace, options);
    if (!result.ok()) throw CommandFailed{trace_path + ": " + result.status().message()};
    for (const EvalTurn& turn : result->turns) {
      if (args.explain && turn.compaction) std::fputs(ExplainCompaction(*turn.compaction).c_str(), stdout);
    }
    summaries[policy] = SummaryJson(result->summary);
    rows.emplace_back(policy, result->summary);
  }
  for (const auto& [policy, s] : rows) {
    if (s.pairing_errors > 0) throw CommandFailed{"policy " + policy + " produced tool-call pairing errors"};
  }
  if (out) out->Commit();
  if (!summary_json.empty()) {
    nlohmann::ordered_json doc = {{"trace", trace_path},
                                  {"budget", args.budget},
                                  {"tokenizer", args.tokenizer},
                                  {"block_tokens", args.block_tokens},
                                  {"policies", summaries}};
    OutputFile file(summary_json, "--summary-json");
    file.stream() << DumpJson(doc, 2) << "\n";
    file.Commit();
  }
  if (!quiet) {
    std::printf("replayed %s with a budget of %zu tokens (%s, blocks of %zu tokens)\n", trace_path.c_str(),
                args.budget, args.tokenizer.c_str(), args.block_tokens);
    std::printf("%-19s %9s %10s %7s %7s %7s %10s %12s %10s %11s\n", "policy", "requests", "violations", "peak",
                "mean", "reuse", "uncached", "cost", "retention", "compactions");
    for (const auto& [policy, s] : rows) {
      std::printf("%-19s %9zu %10zu %7zu %7.0f %7.3f %10llu %12.0f %10.3f %11zu\n", policy.c_str(), s.requests,
                  s.violations, s.peak_tokens, s.mean_tokens, s.reuse_share,
                  static_cast<unsigned long long>(s.uncached_tokens), s.cost, s.retention, s.compactions);
    }
  }
}

}  // namespace strata::cli
