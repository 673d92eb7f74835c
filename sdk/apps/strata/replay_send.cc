#include "replay_send.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <memory>
#include <vector>

#include "commands.h"
#include "replay_common.h"
#include "strata/chat_template.h"
#include "strata/client.h"
#include "strata/compact.h"
#include "strata/context.h"
#include "strata/grpc_transport.h"
#include "strata/tokenize.h"
#include "strata/trace.h"
#include "strata/transport.h"

namespace strata::cli {
namespace {

double Median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace

void AddReplaySendOptions(CLI::App* cmd, ReplaySendArgs* args) {
  cmd->add_flag("--send", args->send, "Really send each turn's request to --endpoint");
  cmd->add_option("--endpoint", args->endpoint,
                  "With --send: HTTP base URL (e.g. http://127.0.0.1:8000/v1) or, with --grpc, host:port");
  cmd->add_flag("--grpc", args->grpc, "Use SGLang's gRPC service instead of HTTP");
  cmd->add_option("--backend", args->backend, "openai | vllm | sglang | zai (request fields)")
      ->capture_default_str();
  cmd->add_option("--records", args->records, "With --send: write RequestRecords as JSON lines here");
  cmd->add_option("--block-size", args->block_size, "Prefix-cache block size in tokens (the server's)")
      ->capture_default_str();
  cmd->add_option("--cache-tokenizer", args->tokenizer,
                  "With --send: predict cached tokens in token blocks of this tokenizer (the server's)");
  cmd->add_option("--cache-template", args->chat_template,
                  "With --send: prompt text for predictions: approx or glm5 (give strata-sim the same)")
      ->check(CLI::IsMember({"approx", "glm5"}));
  cmd->add_option("--max-output-tokens", args->max_output_tokens, "Output cap sent with each request")
      ->capture_default_str();
  cmd->add_option("--api-key-env", args->api_key_env, "Environment variable holding the API key")
      ->capture_default_str();
  cmd->add_option("--timeout", args->timeout_s, "Per-request deadline in seconds")->capture_default_str();
}

void RunReplaySend(const ReplayBasics& basics, const ReplaySendArgs& args) {
  if (args.endpoint.empty()) throw CommandFailed{"--send needs --endpoint URL (or host:port with --grpc)"};
  StatusOr<Backend> backend = ParseBackend(args.backend);
  if (!backend.ok()) throw CommandFailed{backend.status().message()};
  StatusOr<std::vector<TraceMessage>> trace = ReadTrace(basics.trace);
  if (!trace.ok()) throw CommandFailed{trace.status().message()};

  const auto deadline = std::chrono::milliseconds(static_cast<int64_t>(args.timeout_s * 1000));
  StatusOr<std::unique_ptr<Transport>> transport = Status(StatusCode::kUnknown, "unset");
  if (args.grpc) {
    GrpcTransportOptions options;
    options.target = args.endpoint;
    transport = MakeGrpcTransport(options);
  } else {
    HttpTransportOptions options;
    options.base_url = args.endpoint;
    if (const char* key = std::getenv(args.api_key_env.c_str())) options.api_key = key;
    transport = MakeHttpTransport(options);
  }
  if (!transport.ok()) throw CommandFailed{transport.status().message()};

  std::ofstream records_file;
  std::unique_ptr<JsonLinesRecordSink> sink;
  if (!args.records.empty()) {
    records_file.open(args.records, std::ios::binary | std::ios::trunc);
    if (!records_file) throw CommandFailed{"cannot write --records file \"" + args.records + "\""};
    sink = std::make_unique<JsonLinesRecordSink>(records_file);
  }
  ClientOptions client_options;
  client_options.transport = transport->get();
  client_options.backend = *backend;
  client_options.max_output_tokens = args.max_output_tokens;
  client_options.cache.block_tokens = args.block_size;
  std::unique_ptr<ChatTemplate> chat_template;
  if (args.chat_template == "glm5") {
    chat_template = MakeGlm5ChatTemplate();
    client_options.chat_template = chat_template.get();
  }
  std::unique_ptr<Tokenizer> tokenizer;
  if (!args.tokenizer.empty()) {
    StatusOr<std::unique_ptr<Tokenizer>> made = MakeTokenizer(args.tokenizer);
    if (!made.ok()) throw CommandFailed{made.status().ToString()};
    tokenizer = std::move(made).value();
    client_options.tokenizer = tokenizer.get();
  }
  client_options.record_sink = sink.get();
  client_options.deadline = deadline;
  if (const char* secret = std::getenv("STRATA_CACHE_SECRET")) client_options.deployment_secret = secret;
  int prefix_breaks = 0;
  client_options.on_prefix_break = [&prefix_breaks, &basics](const PrefixBreakEvent& e) {
    ++prefix_breaks;
    if (!basics.quiet) std::cerr << "prefix break: " << e.ToString() << "\n";
  };
  StatusOr<std::unique_ptr<Client>> client = Client::Create(client_options);
  if (!client.ok()) throw CommandFailed{client.status().message()};

  ContextOptions options;
  options.agent.id = TraceAgentId(basics.trace);
  options.render.model = basics.model;
  options.hygiene = ReplayHygiene(basics.max_segment_tokens, basics.no_hygiene);
  std::unique_ptr<CompactionPolicy> policy;
  ExactCounting budget_counting;
  if (basics.budget > 0) {
    Budget budget;
    budget.window = static_cast<int64_t>(basics.budget);
    budget.reserve_output = budget.reserve_reasoning = budget.reserve_headroom = 0;
    budget.trigger = BudgetLimit::Fraction(0.95);
    budget.target = BudgetLimit::Fraction(0.7);
    StatusOr<std::unique_ptr<CompactionPolicy>> made = MakePolicyByName(basics.policy.empty() ? "strata" : basics.policy);
    if (!made.ok()) throw CommandFailed{made.status().message()};
    policy = std::move(made).value();
    options.budget = budget;
    options.compaction = policy.get();
    if (!basics.tokenizer.empty()) {
      budget_counting = MakeExactCounting(basics.tokenizer);
      options.tokenizer = budget_counting.tokenizer.get();
      options.request_counter = budget_counting.counter.get();
    }
    if (options.hygiene.max_segment_tokens > basics.budget / 4) {
      options.hygiene.max_segment_tokens = std::max<size_t>(64, basics.budget / 4);
    }
  }
  StatusOr<std::unique_ptr<Context>> created = Context::Create(options);
  if (!created.ok()) throw CommandFailed{created.status().ToString()};
  Context& context = **created;

  int turns = 0, failures = 0;
  int64_t input = 0, predicted = 0, reported = 0, output = 0;
  bool any_reported = false;
  int64_t mismatched = 0;
  std::vector<double> ttft, decode, total;
  std::string first_error;
  Status status = ReplayTrace(*trace, context, [&](const TraceMessage&, const BuiltRequest&) -> Status {
    ++turns;
    CompleteOptions complete;
    complete.append_reply = false;  // the trajectory's own message is appended by ReplayTrace
    RequestRecord record;
    StatusOr<Completion> done = (*client)->Complete(context, complete, &record);
    if (!done.ok()) {
      ++failures;
      if (first_error.empty()) first_error = "turn " + std::to_string(turns) + ": " + done.status().ToString();
      return Status::Ok();
    }
    input += record.input_tokens;
    predicted += record.cached_tokens_predicted;
    output += record.output_tokens;
    if (record.cached_tokens_reported) {
      any_reported = true;
      reported += *record.cached_tokens_reported;
      if (*record.cached_tokens_reported != record.cached_tokens_predicted) ++mismatched;
    }
    ttft.push_back(record.ttft_ms);
    decode.push_back(record.decode_ms);
    total.push_back(record.total_ms);
    return Status::Ok();
  });
  if (!status.ok()) throw CommandFailed{status.message()};

  nlohmann::ordered_json summary;
  summary["trace"] = basics.trace;
  summary["endpoint"] = args.endpoint;
  summary["protocol"] = args.grpc ? "grpc" : "http";
  summary["turns"] = turns;
  summary["failed"] = failures;
  summary["input_tokens"] = input;
  summary["output_tokens"] = output;
  summary["cached_tokens_predicted"] = predicted;
  summary["cached_tokens_reported"] = any_reported ? nlohmann::ordered_json(reported) : nlohmann::ordered_json(nullptr);
  summary["turns_with_prediction_mismatch"] = mismatched;
  summary["prefix_breaks"] = prefix_breaks;
  summary["ttft_ms_median"] = Median(ttft);
  summary["decode_ms_median"] = Median(decode);
  summary["total_ms_median"] = Median(total);
  if (!basics.summary_json.empty()) {
    std::ofstream file(basics.summary_json, std::ios::binary | std::ios::trunc);
    file << summary.dump(2) << "\n";
    if (!file) throw CommandFailed{"cannot write --summary-json file \"" + basics.summary_json + "\""};
  }
  if (!basics.quiet) {
    auto pct = [](int64_t a, int64_t b) { return b > 0 ? static_cast<int>(100.0 * a / b + 0.5) : 0; };
    std::cout << "sent " << turns << " requests of " << basics.trace << " to " << args.endpoint
              << (args.grpc ? " (gRPC)" : " (HTTP)") << ", " << failures << " failed\n"
              << "  input tokens " << input << ", output tokens " << output << "\n"
              << "  cached tokens: predicted " << predicted << " (" << pct(predicted, input) << "%), reported ";
    if (any_reported) {
      std::cout << reported << " (" << pct(reported, input) << "%); " << mismatched << " turns differ\n";
    } else {
      std::cout << "none (enable --enable-prompt-tokens-details / --enable-cache-report)\n";
    }
    std::cout << "  median TTFT " << Median(ttft) << " ms, decode " << Median(decode) << " ms, total "
              << Median(total) << " ms; prefix breaks " << prefix_breaks << "\n";
  }
  if (failures > 0) throw CommandFailed{std::to_string(failures) + " of " + std::to_string(turns) +
                                        " requests failed; first: " + first_error};
}

}  // namespace strata::cli
