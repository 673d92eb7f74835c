// `strata replay TRACE.jsonl`: renders, for each assistant message of a trajectory, the request strata
// would have sent at that point. One pipeline: --budget/--policy compact,
// --tokenizer counts exactly, --db persists the agent, --send sends each request; they combine.
// --compare (replay_budget.cc) replays once per policy and compares them.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "commands.h"
#include "core/text_util.h"  // CommonPrefix
#include "replay_budget.h"
#include "replay_common.h"
#include "replay_config.h"
#include "replay_send.h"
#include "replay_store.h"
#include "strata/builtin_policies.h"
#include "strata/chat_template.h"
#include "strata/context.h"
#include "strata/prefix_cache.h"
#include "strata/replay/trace.h"
#include "strata/tokenizer_spec.h"
#include "strata/transport.h"

namespace strata::cli {
namespace {

struct ReplayArgs {
  std::string trace;
  std::string out;
  std::string summary_json;
  std::string model = "glm-5.3-flash";
  size_t max_segment_tokens = HygieneOptions{}.max_segment_tokens;
  bool no_hygiene = false;
  bool quiet = false;
  std::string db;     // --db: persist the replayed agent to this store
  std::string agent;  // --agent: its id (default: the trace file name without .jsonl)
  std::string tokenizer;  // --tokenizer: count tokens exactly (else the 4-bytes-per-token estimate)
};

template <typename T>
T Median(std::vector<T> values) {
  if (values.empty()) return T{};
  std::sort(values.begin(), values.end());
  return values[values.size() / 2];
}

// The replay configuration as a JSON object (stored with the agent by --db).
std::string ConfigJson(const ReplayArgs& args, const ReplayBudgetArgs& budget, const ReplaySendArgs& send,
                       const std::string& counted_with) {
  nlohmann::ordered_json config;
  config["trace"] = args.trace;
  config["model"] = args.model;
  config["tokenizer"] = counted_with;
  config["budget"] = budget.budget;
  if (budget.budget > 0) {
    config["policy"] = budget.policy;
    config["trigger"] = budget.trigger;
    config["target"] = budget.target;
    if (budget.policy == "strata") {
      config["keep_turns"] = budget.keep_turns;
      config["keep_tool_results"] = budget.keep_tool_results;
      config["exclude_tools"] = budget.exclude_tools;
      config["ephemeral_tools"] = budget.ephemeral_tools;
    }
  }
  config["max_segment_tokens"] = args.max_segment_tokens;
  config["no_hygiene"] = args.no_hygiene;
  if (send.send) {
    // Credentials in the URL (scheme://user:password@host) are not stored.
    config["endpoint"] = RedactUrl(send.endpoint);
  }
  return DumpJson(config);
}

// The context options of a replay: hygiene, exact counting when --tokenizer is given, and with
// --budget the budget and the policy (made into *policy, which must outlive the context).
ContextOptions ReplayContextOptions(const ReplayArgs& args, const ReplayBudgetArgs& budget_args,
                                    const ExactCounting& counting,
                                    std::unique_ptr<CompactionPolicy>* policy) {
  ContextOptions options;
  options.agent.id = args.agent.empty() ? ValidUtf8(TraceAgentId(args.trace)) : args.agent;
  options.tokenizer = counting.tokenizer.get();
  options.request_counter = counting.counter.get();
  options.render.model = args.model;
  options.hygiene = ReplayHygiene(args.max_segment_tokens, args.no_hygiene);
  if (budget_args.budget > 0) {
    Budget budget;
    budget.window = static_cast<int64_t>(budget_args.budget);
    budget.reserve_output = budget.reserve_reasoning = budget.reserve_headroom = 0;
    budget.trigger = BudgetLimit::Fraction(budget_args.trigger);
    budget.target = BudgetLimit::Fraction(budget_args.target);
    *policy = MakeReplayPolicy(budget_args);
    options.budget = budget;
    options.compaction = policy->get();
    // A tool output may not take more than a quarter of the budget.
    if (!args.no_hygiene && (options.hygiene.max_segment_tokens == 0 ||
                             options.hygiene.max_segment_tokens > budget_args.budget / 4)) {
      options.hygiene.max_segment_tokens = std::max<size_t>(64, budget_args.budget / 4);
    }
  }
  return options;
}

// What the replay measured over its turns.
struct ReplayTotals {
  uint64_t total_tokens = 0, reused_tokens_total = 0;
  std::vector<size_t> request_tokens;
  size_t total_bytes = 0, total_reused = 0, turns = 0, compactions = 0, violations = 0;
};

// Measures each replayed request (reuse against the previous one, tokens served from a
// prefix-cache model, budget violations, hygiene, compactions) into the totals, and writes the
// --out line.
class TurnMeasurer {
 public:
  TurnMeasurer(const ReplayArgs& args, const ReplayBudgetArgs& budget_args,
               const ExactCounting& counting, const std::string& policy_name, Context& context,
               OutputFile* out)
      : args_(args),
        budget_args_(budget_args),
        counting_(counting),
        policy_name_(policy_name),
        context_(context),
        out_(out) {}

  Status Measure(const TraceMessage& message, const BuiltRequest& request) {
    const size_t reused = ReusedBytes(request);
    nlohmann::ordered_json j;
    j["messages"] = request.message_count;
    j["request_bytes"] = request.body.size();
    j["reused_bytes"] = reused;
    j["input_tokens"] = request.input_tokens;
    if (counting_.chat_template) {
      STRATA_ASSIGN_OR_RETURN(int64_t reused_tokens, ReusedTokens(request));
      j["reused_tokens"] = reused_tokens;
    }
    j["tokens_estimated"] = !request.input_tokens_exact;
    if (budget_args_.budget > 0) {
      const bool violation = request.input_tokens > budget_args_.budget;
      j["violation"] = violation;
      if (violation) ++totals_.violations;
    }
    nlohmann::ordered_json layers;
    for (int i = 0; i < kLayerCount; ++i) {
      layers[std::string(LayerName(static_cast<Layer>(i)))] = request.layers[i].tokens;
    }
    j["layer_tokens"] = layers;
    ContextStats stats = context_.Stats();
    j["hygiene"] = {{"truncated", stats.truncated},
                    {"deduplicated", stats.deduplicated},
                    {"folded", stats.folded},
                    {"bytes_saved", stats.bytes_saved_by_hygiene}};
    j["lint_warnings"] = request.warnings.size();
    j["trace_line"] = message.line;
    const std::string reports = NewCompactions();
    if (out_ != nullptr) STRATA_RETURN_IF_ERROR(WriteLine(request, j, reports));
    totals_.request_tokens.push_back(request.input_tokens);
    totals_.total_bytes += request.body.size();
    totals_.total_reused += reused;
    // Only what follows the shared prefix is copied: a growing prompt costs its new bytes.
    previous_.resize(reused);
    previous_.append(request.body, reused, std::string::npos);
    previous_serial_ = request.render_serial;
    ++totals_.turns;
    return Status::Ok();
  }

  const ReplayTotals& totals() const { return totals_; }

 private:
  // The leading bytes the request shares with the one measured before it. The context says how
  // many it kept unchanged since its render before this one; when that render is the request
  // measured last, only the bytes after those are compared.
  size_t ReusedBytes(const BuiltRequest& request) const {
    size_t known = 0;
    if (previous_serial_ != 0 && request.previous_render_serial == previous_serial_) {
      known = std::min({request.unchanged_bytes, previous_.size(), request.body.size()});
    }
    return known + internal::CommonPrefix(std::string_view(previous_).substr(known),
                                          std::string_view(request.body).substr(known));
  }

  // Tokens of the request's prompt the prefix-cache model (blocks of 16 tokens, fed with every
  // request before) already holds.
  StatusOr<int64_t> ReusedTokens(const BuiltRequest& request) {
    // The render the context's count made of this body (handed over, not rendered again), and its
    // block chain continued from the last request's through the ids the count's encoder already
    // holds: each request costs what changed, and its bytes are encoded once.
    std::shared_ptr<const std::string> prompt =
        counting_.counter->TakeRender(request.render_serial);
    if (prompt == nullptr) {
      STRATA_ASSIGN_OR_RETURN(
          prompt, counting_.prompt_tokens->Render(*counting_.chat_template, request.body));
    }
    std::shared_ptr<const PromptBlocks> blocks =
        counting_.prompt_tokens->Hash(*prompt, "", cache_.options());
    const int64_t reused_tokens = cache_.LookupAndInsert(*blocks);
    totals_.total_tokens += static_cast<uint64_t>(blocks->prompt_tokens);
    totals_.reused_tokens_total += static_cast<uint64_t>(reused_tokens);
    return reused_tokens;
  }

  // Every compaction of this turn's build (a build may compact in several rounds) as JSON
  // objects joined by commas; with --explain, printed.
  std::string NewCompactions() {
    const std::vector<CompactionReport>& all_compactions = context_.Compactions();
    std::string reports;
    for (size_t k = totals_.compactions; k < all_compactions.size(); ++k) {
      reports += (reports.empty() ? "" : ",") + CompactionReportJson(all_compactions[k]);
      // --explain: the candidates each compaction considered and the set it chose.
      if (budget_args_.explain) std::fputs(ExplainCompaction(all_compactions[k]).c_str(), stdout);
    }
    totals_.compactions = all_compactions.size();
    return reports;
  }

  Status WriteLine(const BuiltRequest& request, const nlohmann::ordered_json& stats,
                   const std::string& reports) {
    // The request body is written verbatim: it is already canonical JSON.
    std::ostream& line = out_->stream();
    line << "{\"turn\":" << totals_.turns << ",\"request\":" << request.body
         << ",\"stats\":" << DumpJson(stats) << ",\"policy\":\"" << policy_name_ << "\"";
    if (!reports.empty()) line << ",\"compactions\":[" << reports << "]";
    line << "}\n";
    if (!out_->good()) return UnavailableError("write to --out file \"" + args_.out + "\" failed");
    return Status::Ok();
  }

  const ReplayArgs& args_;
  const ReplayBudgetArgs& budget_args_;
  const ExactCounting& counting_;
  const std::string& policy_name_;
  Context& context_;
  OutputFile* out_;
  PrefixCacheModel cache_;
  std::string previous_;          // the request measured last
  uint64_t previous_serial_ = 0;  // its render serial
  ReplayTotals totals_;
};

// The --summary-json document.
nlohmann::ordered_json ReplaySummary(const ReplayArgs& args, const ReplayBudgetArgs& budget_args,
                                     const ExactCounting& counting, const std::string& policy_name,
                                     const ReplayTotals& t, const ContextStats& stats) {
  nlohmann::ordered_json summary;
  summary["trace"] = args.trace;
  summary["turns"] = t.turns;
  summary["policy"] = policy_name;
  if (budget_args.budget > 0) {
    summary["budget"] = budget_args.budget;
    summary["compactions"] = t.compactions;
    summary["budget_violations"] = t.violations;
  }
  summary["tokens_estimated"] = counting.counter == nullptr;
  if (counting.tokenizer) summary["tokenizer"] = counting.tokenizer->Name();
  const std::vector<size_t>& request_tokens = t.request_tokens;
  summary["tokens_per_request"] = {
      {"min", request_tokens.empty()
                  ? 0
                  : *std::min_element(request_tokens.begin(), request_tokens.end())},
      {"median", Median(request_tokens)},
      {"max", request_tokens.empty()
                  ? 0
                  : *std::max_element(request_tokens.begin(), request_tokens.end())}};
  summary["request_bytes_total"] = t.total_bytes;
  summary["reused_bytes_total"] = t.total_reused;
  summary["reused_share"] =
      t.total_bytes ? static_cast<double>(t.total_reused) / t.total_bytes : 0.0;
  if (counting.chat_template) {
    summary["input_tokens_total"] = t.total_tokens;
    summary["reused_tokens_total"] = t.reused_tokens_total;
    summary["reused_token_share"] =
        t.total_tokens ? static_cast<double>(t.reused_tokens_total) / t.total_tokens : 0.0;
  }
  summary["hygiene"] = {{"truncated", stats.truncated},
                        {"deduplicated", stats.deduplicated},
                        {"folded", stats.folded},
                        {"bytes_saved", stats.bytes_saved_by_hygiene}};
  return summary;
}

// The human-readable summary on stdout.
void PrintReplaySummary(const ReplayArgs& args, const ReplayBudgetArgs& budget_args,
                        const ExactCounting& counting, const std::string& policy_name,
                        const ReplayTotals& t, const ContextStats& stats,
                        const nlohmann::ordered_json& summary) {
  std::cout << "replayed " << t.turns << " turns of " << args.trace << "\n"
            << "  tokens per request"
            << (counting.counter ? " (" + counting.tokenizer->Name() + ", GLM-5 template)"
                                 : " (estimated)")
            << ": min " << summary["tokens_per_request"]["min"] << ", median "
            << summary["tokens_per_request"]["median"] << ", max "
            << summary["tokens_per_request"]["max"] << "\n";
  if (budget_args.budget > 0) {
    std::cout << "  budget " << budget_args.budget << " tokens, policy " << policy_name << ": "
              << t.compactions << " compactions, " << t.violations << " requests over the budget\n";
  }
  std::cout << "  bytes reused from the previous request: " << t.total_reused << " of "
            << t.total_bytes << " ("
            << static_cast<int>(100.0 * summary["reused_share"].get<double>() + 0.5) << "%)\n";
  if (counting.chat_template) {
    std::cout << "  tokens served from the prefix cache (blocks of 16): " << t.reused_tokens_total
              << " of " << t.total_tokens << " ("
              << static_cast<int>(100.0 * summary["reused_token_share"].get<double>() + 0.5)
              << "%)\n";
  }
  std::cout << "  hygiene: " << stats.truncated << " truncated, " << stats.deduplicated
            << " deduplicated, " << stats.folded << " folded, " << stats.bytes_saved_by_hygiene
            << " bytes saved\n";
}

void Run(const ReplayArgs& args, const ReplayBudgetArgs& budget_args,
         const ReplaySendArgs& send_args) {
  StatusOr<std::vector<TraceMessage>> trace = ReadTrace(args.trace);
  if (!trace.ok()) throw CommandFailed{trace.status().message()};

  ExactCounting counting;
  if (!args.tokenizer.empty()) counting = MakeExactCounting(args.tokenizer);
  std::unique_ptr<CompactionPolicy> policy;
  const ContextOptions options = ReplayContextOptions(args, budget_args, counting, &policy);
  const std::string policy_name = budget_args.budget > 0 ? budget_args.policy : "none";
  std::unique_ptr<ReplayPersistence> persisted;
  std::unique_ptr<Context> in_memory;
  if (!args.db.empty()) {
    StatusOr<std::unique_ptr<ReplayPersistence>> opened = ReplayPersistence::Open(
        args.db, options,
        ConfigJson(args, budget_args, send_args,
                   counting.tokenizer ? counting.tokenizer->Name() : std::string("estimate:4")));
    if (!opened.ok()) throw CommandFailed{opened.status().ToString()};
    persisted = std::move(*opened);
    // The configuration an Agent continues the replayed agent with (replay_config.h).
    if (std::optional<AgentConfig> config =
            ReplayAgentConfig(options, budget_args, args.tokenizer, args.db, send_args)) {
      const std::string counted_by = counting.tokenizer ? counting.tokenizer->Name()
                                                        : MakeEstimateTokenizer(4.0)->Name();
      Status stored = persisted->StoreAgentConfig(AgentConfigToJson(*config), counted_by);
      if (!stored.ok()) throw CommandFailed{stored.ToString()};
    }
  } else {
    StatusOr<std::unique_ptr<Context>> created = Context::Create(options);
    if (!created.ok()) throw CommandFailed{created.status().ToString()};
    in_memory = std::move(*created);
  }
  Context& context = persisted ? persisted->context() : *in_memory;
  std::unique_ptr<ReplaySender> sender;
  if (send_args.send) sender = std::make_unique<ReplaySender>(send_args, args.quiet);

  std::unique_ptr<OutputFile> out;
  if (!args.out.empty()) out = std::make_unique<OutputFile>(args.out, "--out");

  TurnMeasurer measurer(args, budget_args, counting, policy_name, context, out.get());
  Status status = ReplayTrace(
      *trace, context, [&](const TraceMessage& message, const BuiltRequest& request) -> Status {
        if (persisted) STRATA_RETURN_IF_ERROR(persisted->OnTurn(request));
        if (sender) STRATA_RETURN_IF_ERROR(sender->SendTurn(context));
        return measurer.Measure(message, request);
      });
  if (!status.ok()) throw CommandFailed{status.message()};

  const ContextStats stats = context.Stats();
  const ReplayTotals& totals = measurer.totals();
  nlohmann::ordered_json summary =
      ReplaySummary(args, budget_args, counting, policy_name, totals, stats);
  if (sender) sender->AddSummary(summary);
  if (persisted) summary["db"] = {{"path", args.db}, {"agent", persisted->agent_id()}};

  // Outputs are renamed into place, and the agent swapped in, only when the replay is complete.
  if (out) out->Commit();
  if (sender) sender->CommitRecords();
  if (!args.summary_json.empty()) {
    OutputFile file(args.summary_json, "--summary-json");
    file.stream() << DumpJson(summary, 2) << "\n";
    file.Commit();
  }
  if (persisted) {
    Status committed = persisted->Commit();
    if (!committed.ok()) throw CommandFailed{committed.ToString()};
  }
  if (!args.quiet) {
    PrintReplaySummary(args, budget_args, counting, policy_name, totals, stats, summary);
    if (sender) sender->Print(args.trace);
  }
  if (sender && sender->failures() > 0) {
    throw CommandFailed{std::to_string(sender->failures()) + " of " + std::to_string(sender->turns()) +
                        " requests failed; first: " + sender->first_error()};
  }
}

}  // namespace

void RegisterReplay(CLI::App& app) {
  auto args = std::make_shared<ReplayArgs>();
  CLI::App* cmd = app.add_subcommand(
      "replay", "Render the request strata would send before each assistant message of a trace");
  cmd->add_option("trace", args->trace, "Trajectory file (JSON lines, OpenAI chat messages)")
      ->required()
      ->check(CLI::ExistingFile);
  cmd->add_option("--out", args->out,
                  "Write one line per turn: {\"turn\": n, \"request\": {...}, \"stats\": {...}}");
  cmd->add_option("--summary-json", args->summary_json, "Write the summary as JSON to this file");
  cmd->add_option("--model", args->model, "The request's model field")->capture_default_str();
  cmd->add_option("--max-segment-tokens", args->max_segment_tokens,
                  "Tool outputs above this many tokens keep head and tail (0 = off)")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  cmd->add_flag("--no-hygiene", args->no_hygiene,
                "Turn off append-time truncation, deduplication and error-log folding");
  cmd->add_option("--db", args->db,
                  "Persist the replayed agent to this store (SQLite; created if missing); it replaces a stored "
                  "agent of the same id only when the replay is complete");
  cmd->add_option("--agent", args->agent, "Agent id in the store (default: trace file name without .jsonl)");
  cmd->add_flag("-q,--quiet", args->quiet, "Print no summary");
  auto send = std::make_shared<ReplaySendArgs>();
  AddReplaySendOptions(cmd, send.get());  // --send --endpoint URL [--grpc] ... (replay_send.cc)
  auto budget = std::make_shared<ReplayBudgetArgs>();
  AddReplayBudgetOptions(cmd, budget.get());  // --budget N --policy P --compare ... --tokenizer (replay_budget.cc)
  cmd->callback([args, send, budget] {
    ValidateReplayBudgetArgs(*budget);
    ValidateReplaySendArgs(*send);
    if (!budget->compare.empty()) {
      if (!args->db.empty() || send->send) {
        throw CLI::ValidationError("--compare", "--compare replays once per policy and keeps nothing; it does not "
                                                "combine with --db or --send (use --policy P for one persisted "
                                                "or sent run)");
      }
      RunReplayCompare(args->trace, *budget, args->out, args->summary_json, args->quiet);
      return;
    }
    args->tokenizer = budget->tokenizer;
    Run(*args, *budget, *send);
  });
}

}  // namespace strata::cli
