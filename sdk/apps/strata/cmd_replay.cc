// `strata replay TRACE.jsonl`: renders, for each assistant message of a trajectory, the request strata
// would have sent at that point. One pipeline: --budget/--policy compact,
// --tokenizer counts exactly, --db persists the agent, --send sends each request; they combine.
// --compare (replay_budget.cc) replays once per policy and compares them.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "commands.h"
#include "strata/trace.h"
#include "strata/chat_template.h"
#include "strata/context.h"
#include "strata/prefix_cache.h"
#include "strata/tokenize.h"
#include "strata/compact.h"
#include "strata/transport.h"
#include "replay_budget.h"
#include "replay_common.h"
#include "replay_send.h"
#include "replay_store.h"

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

size_t CommonPrefix(const std::string& a, const std::string& b) {
  const size_t n = std::min(a.size(), b.size());
  size_t i = 0;  // memcmp by chunks first: a byte loop over megabytes per turn shows in profiles
  while (i + 4096 <= n && std::memcmp(a.data() + i, b.data() + i, 4096) == 0) i += 4096;
  return i + static_cast<size_t>(std::mismatch(a.begin() + i, a.begin() + n, b.begin() + i).first -
                                 (a.begin() + i));
}

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

void Run(const ReplayArgs& args, const ReplayBudgetArgs& budget_args, const ReplaySendArgs& send_args) {
  StatusOr<std::vector<TraceMessage>> trace = ReadTrace(args.trace);
  if (!trace.ok()) throw CommandFailed{trace.status().message()};

  ExactCounting counting;
  if (!args.tokenizer.empty()) counting = MakeExactCounting(args.tokenizer);
  const std::unique_ptr<Tokenizer>& tokenizer = counting.tokenizer;
  const std::unique_ptr<ChatTemplate>& chat_template = counting.chat_template;
  const std::unique_ptr<RequestTokenCounter>& counter = counting.counter;
  ContextOptions options;
  options.agent.id = args.agent.empty() ? ValidUtf8(TraceAgentId(args.trace)) : args.agent;
  options.tokenizer = tokenizer.get();
  options.request_counter = counter.get();
  options.render.model = args.model;
  options.hygiene = ReplayHygiene(args.max_segment_tokens, args.no_hygiene);
  std::unique_ptr<CompactionPolicy> policy;
  const bool budgeted = budget_args.budget > 0;
  if (budgeted) {
    Budget budget;
    budget.window = static_cast<int64_t>(budget_args.budget);
    budget.reserve_output = budget.reserve_reasoning = budget.reserve_headroom = 0;
    budget.trigger = BudgetLimit::Fraction(budget_args.trigger);
    budget.target = BudgetLimit::Fraction(budget_args.target);
    policy = MakeReplayPolicy(budget_args);
    options.budget = budget;
    options.compaction = policy.get();
    // A tool output may not take more than a quarter of the budget.
    if (!args.no_hygiene && (options.hygiene.max_segment_tokens == 0 ||
                             options.hygiene.max_segment_tokens > budget_args.budget / 4)) {
      options.hygiene.max_segment_tokens = std::max<size_t>(64, budget_args.budget / 4);
    }
  }
  const std::string policy_name = budgeted ? budget_args.policy : "none";
  std::unique_ptr<ReplayPersistence> persisted;
  std::unique_ptr<Context> in_memory;
  if (!args.db.empty()) {
    StatusOr<std::unique_ptr<ReplayPersistence>> opened = ReplayPersistence::Open(
        args.db, options,
        ConfigJson(args, budget_args, send_args, tokenizer ? tokenizer->Name() : std::string("estimate:4")));
    if (!opened.ok()) throw CommandFailed{opened.status().ToString()};
    persisted = std::move(*opened);
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

  // With a tokenizer, reuse is measured in tokens: a prefix-cache model (blocks of 16 tokens) fed
  // with every request sent before.
  PrefixCacheModel cache;
  uint64_t total_tokens = 0, reused_tokens_total = 0;
  std::vector<size_t> request_tokens;
  size_t total_bytes = 0, total_reused = 0, turns = 0, compactions = 0, violations = 0;
  std::string previous;
  std::unique_ptr<IncrementalEncoder> prompt_ids;
  if (tokenizer) prompt_ids = std::make_unique<IncrementalEncoder>(*tokenizer);
  Status status = ReplayTrace(
      *trace, context, [&](const TraceMessage& message, const BuiltRequest& request) -> Status {
        if (persisted) STRATA_RETURN_IF_ERROR(persisted->OnTurn(request));
        if (sender) STRATA_RETURN_IF_ERROR(sender->SendTurn(context));
        const size_t reused = CommonPrefix(previous, request.body);
        ContextStats stats = context.Stats();
        nlohmann::ordered_json j;
        j["messages"] = request.message_count;
        j["request_bytes"] = request.body.size();
        j["reused_bytes"] = reused;
        j["input_tokens"] = request.input_tokens;
        if (chat_template) {
          STRATA_ASSIGN_OR_RETURN(std::string prompt, chat_template->Render(request.body));
          // Ids through an incremental encoder: each turn encodes what changed, not the whole prompt.
          const PromptBlocks blocks =
              tokenizer->IsEstimate() ? HashPrompt(prompt, "", tokenizer.get(), cache.options())
                                      : HashPromptIds(prompt_ids->Encode(prompt), "", cache.options());
          const int64_t reused_tokens = cache.LookupAndInsert(blocks);
          j["reused_tokens"] = reused_tokens;
          total_tokens += static_cast<uint64_t>(blocks.prompt_tokens);
          reused_tokens_total += static_cast<uint64_t>(reused_tokens);
        }
        j["tokens_estimated"] = !request.input_tokens_exact;
        if (budgeted) {
          const bool violation = request.input_tokens > budget_args.budget;
          j["violation"] = violation;
          if (violation) ++violations;
        }
        nlohmann::ordered_json layers;
        for (int i = 0; i < kLayerCount; ++i) {
          layers[std::string(LayerName(static_cast<Layer>(i)))] = request.layers[i].tokens;
        }
        j["layer_tokens"] = layers;
        j["hygiene"] = {{"truncated", stats.truncated},
                        {"deduplicated", stats.deduplicated},
                        {"folded", stats.folded},
                        {"bytes_saved", stats.bytes_saved_by_hygiene}};
        j["lint_warnings"] = request.warnings.size();
        j["trace_line"] = message.line;
        // Every compaction of this turn's build (a build may compact in several rounds).
        const std::vector<CompactionReport>& all_compactions = context.Compactions();
        std::string reports;
        for (size_t k = compactions; k < all_compactions.size(); ++k) {
          reports += (reports.empty() ? "" : ",") + CompactionReportJson(all_compactions[k]);
          // --explain: the candidates each compaction considered and the set it chose.
          if (budget_args.explain) std::fputs(ExplainCompaction(all_compactions[k]).c_str(), stdout);
        }
        compactions = all_compactions.size();
        if (out) {
          // The request body is written verbatim: it is already canonical JSON.
          std::ostream& line = out->stream();
          line << "{\"turn\":" << turns << ",\"request\":" << request.body << ",\"stats\":" << DumpJson(j)
               << ",\"policy\":\"" << policy_name << "\"";
          if (!reports.empty()) line << ",\"compactions\":[" << reports << "]";
          line << "}\n";
          if (!out->good()) return UnavailableError("write to --out file \"" + args.out + "\" failed");
        }
        request_tokens.push_back(request.input_tokens);
        total_bytes += request.body.size();
        total_reused += reused;
        previous = request.body;
        ++turns;
        return Status::Ok();
      });
  if (!status.ok()) throw CommandFailed{status.message()};

  ContextStats stats = context.Stats();
  nlohmann::ordered_json summary;
  summary["trace"] = args.trace;
  summary["turns"] = turns;
  summary["policy"] = policy_name;
  if (budgeted) {
    summary["budget"] = budget_args.budget;
    summary["compactions"] = compactions;
    summary["budget_violations"] = violations;
  }
  summary["tokens_estimated"] = counter == nullptr;
  if (tokenizer) summary["tokenizer"] = tokenizer->Name();
  summary["tokens_per_request"] = {
      {"min", request_tokens.empty() ? 0 : *std::min_element(request_tokens.begin(), request_tokens.end())},
      {"median", Median(request_tokens)},
      {"max", request_tokens.empty() ? 0 : *std::max_element(request_tokens.begin(), request_tokens.end())}};
  summary["request_bytes_total"] = total_bytes;
  summary["reused_bytes_total"] = total_reused;
  summary["reused_share"] = total_bytes ? static_cast<double>(total_reused) / total_bytes : 0.0;
  if (chat_template) {
    summary["input_tokens_total"] = total_tokens;
    summary["reused_tokens_total"] = reused_tokens_total;
    summary["reused_token_share"] = total_tokens ? static_cast<double>(reused_tokens_total) / total_tokens : 0.0;
  }
  summary["hygiene"] = {{"truncated", stats.truncated},
                        {"deduplicated", stats.deduplicated},
                        {"folded", stats.folded},
                        {"bytes_saved", stats.bytes_saved_by_hygiene}};
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
    std::cout << "replayed " << turns << " turns of " << args.trace << "\n"
              << "  tokens per request" << (counter ? " (" + tokenizer->Name() + ", GLM-5 template)" : " (estimated)")
              << ": min " << summary["tokens_per_request"]["min"]
              << ", median " << summary["tokens_per_request"]["median"] << ", max "
              << summary["tokens_per_request"]["max"] << "\n";
    if (budgeted) {
      std::cout << "  budget " << budget_args.budget << " tokens, policy " << policy_name << ": " << compactions
                << " compactions, " << violations << " requests over the budget\n";
    }
    std::cout << "  bytes reused from the previous request: " << total_reused << " of "
              << total_bytes << " (" << static_cast<int>(100.0 * summary["reused_share"].get<double>() + 0.5)
              << "%)\n";
    if (chat_template) {
      std::cout << "  tokens served from the prefix cache (blocks of 16): " << reused_tokens_total << " of "
                << total_tokens << " ("
                << static_cast<int>(100.0 * summary["reused_token_share"].get<double>() + 0.5) << "%)\n";
    }
    std::cout << "  hygiene: " << stats.truncated << " truncated, " << stats.deduplicated
              << " deduplicated, " << stats.folded << " folded, " << stats.bytes_saved_by_hygiene
              << " bytes saved\n";
    if (sender) sender->Print(args.trace);
  }
  FlushStdout();
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
