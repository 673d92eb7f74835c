#include "replay_send.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <iostream>
#include <memory>
#include <vector>

#include "commands.h"
#include "replay_common.h"
#include "strata/chat_template.h"
#include "strata/client.h"
#include "strata/grpc_transport.h"
#include "strata/http_transport.h"
#include "strata/tokenizer_spec.h"
#include "strata/transport.h"

namespace strata::cli {
namespace {

double Median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

constexpr double kMaxTimeoutSeconds = 7 * 24 * 3600.0;

}  // namespace

struct ReplaySender::State {
  std::unique_ptr<Transport> transport;
  std::unique_ptr<OutputFile> records_file;
  std::unique_ptr<JsonLinesRecordSink> sink;
  std::unique_ptr<ChatTemplate> chat_template;
  std::unique_ptr<Tokenizer> tokenizer;
  std::unique_ptr<Client> client;
  int prefix_breaks = 0;
  int64_t input = 0, predicted = 0, reported = 0, output = 0, mismatched = 0;
  bool any_reported = false;
  std::vector<double> ttft, decode, total;
};

void AddReplaySendOptions(CLI::App* cmd, ReplaySendArgs* args) {
  cmd->add_flag("--send", args->send, "Really send each turn's request to --endpoint");
  cmd->add_option("--endpoint", args->endpoint,
                  "With --send: HTTP base URL (e.g. http://127.0.0.1:8000/v1) or, with --grpc, host:port");
  cmd->add_flag("--grpc", args->grpc, "Use SGLang's gRPC service instead of HTTP");
  cmd->add_option("--backend", args->backend, "openai | vllm | sglang | zai (request fields)")
      ->capture_default_str();
  cmd->add_option("--records", args->records, "With --send: write RequestRecords as JSON lines here");
  cmd->add_option("--block-size", args->block_size, "Prefix-cache block size in tokens (the server's)")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  cmd->add_option("--cache-tokenizer", args->tokenizer,
                  "With --send: predict cached tokens in token blocks of this tokenizer (the server's)");
  cmd->add_option("--cache-template", args->chat_template,
                  "With --send: the server's chat template for predictions: glm-5.3, glm-4.7 or generic "
                  "(give strata-sim the same); approx (default): the GLM-5.3 prompt without a template object")
      ->check(CLI::IsMember({"approx", "glm5", "glm-5.3", "glm-4.7", "generic"}));
  cmd->add_flag("--allow-insecure", args->allow_insecure,
                "With --send: allow sending the API key over plain http:// to a host that is not loopback");
  cmd->add_option("--max-output-tokens", args->max_output_tokens, "Output cap sent with each request")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  cmd->add_option("--api-key-env", args->api_key_env, "Environment variable holding the API key")
      ->capture_default_str();
  cmd->add_option("--timeout", args->timeout_s, "Per-request deadline in seconds (0 < T <= 604800)")
      ->capture_default_str();
  cmd->add_option("--max-consecutive-failures", args->max_consecutive_failures,
                  "With --send: stop after this many failed requests in a row (0 = never stop early)")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
}

void ValidateReplaySendArgs(const ReplaySendArgs& args) {
  if (!std::isfinite(args.timeout_s) || args.timeout_s <= 0 || args.timeout_s > kMaxTimeoutSeconds) {
    throw CLI::ValidationError("--timeout", std::to_string(args.timeout_s) +
                                                " is not a number of seconds in (0, 604800] (one week)");
  }
  if (!args.send) {
    if (!args.endpoint.empty() || !args.records.empty()) {
      throw CLI::ValidationError("--send", "--endpoint and --records only apply with --send");
    }
    return;
  }
  if (args.endpoint.empty()) {
    throw CLI::ValidationError("--endpoint", "--send needs --endpoint URL (or host:port with --grpc)");
  }
  if (!args.grpc && args.endpoint.rfind("http://", 0) != 0 && args.endpoint.rfind("https://", 0) != 0) {
    throw CLI::ValidationError("--endpoint", "\"" + args.endpoint +
                                                 "\" has no http:// or https:// scheme (e.g. "
                                                 "http://127.0.0.1:8000/v1; with --grpc give host:port)");
  }
  StatusOr<Backend> backend = ParseBackend(args.backend);
  if (!backend.ok()) throw CLI::ValidationError("--backend", backend.status().message());
}

ReplaySender::ReplaySender(const ReplaySendArgs& args, bool quiet) : args_(args), state_(new State) {
  State& s = *state_;
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
    options.allow_insecure = args.allow_insecure;
    transport = MakeHttpTransport(options);
  }
  if (!transport.ok()) throw CommandFailed{transport.status().message()};
  s.transport = std::move(transport).value();

  if (!args.records.empty()) {
    s.records_file = std::make_unique<OutputFile>(args.records, "--records");
    s.sink = std::make_unique<JsonLinesRecordSink>(s.records_file->stream());
  }
  ClientOptions client_options;
  client_options.transport = s.transport.get();
  client_options.backend = ParseBackend(args.backend).value();
  client_options.max_output_tokens = args.max_output_tokens;
  client_options.cache.block_tokens = args.block_size;
  if (args.chat_template != "approx") {
    StatusOr<std::unique_ptr<ChatTemplate>> made = MakeChatTemplate(args.chat_template);
    if (!made.ok()) throw CommandFailed{made.status().message()};
    s.chat_template = std::move(made).value();
    client_options.chat_template = s.chat_template.get();
  }
  if (!args.tokenizer.empty()) {
    s.tokenizer = MakeTokenizerOrThrow(args.tokenizer, "--cache-tokenizer");
    client_options.tokenizer = s.tokenizer.get();
  }
  client_options.record_sink = s.sink.get();
  client_options.deadline = deadline;
  if (const char* secret = std::getenv("STRATA_CACHE_SECRET")) client_options.deployment_secret = secret;
  client_options.on_prefix_break = [state = state_.get(), quiet](const PrefixBreakEvent& e) {
    ++state->prefix_breaks;
    if (!quiet) std::cerr << "prefix break: " << e.ToString() << "\n";
  };
  StatusOr<std::unique_ptr<Client>> client = Client::Create(client_options);
  if (!client.ok()) throw CommandFailed{client.status().message()};
  s.client = std::move(client).value();
}

ReplaySender::~ReplaySender() = default;

Status ReplaySender::SendTurn(Context& context) {
  State& s = *state_;
  ++turns_;
  CompleteOptions complete;
  complete.append_reply = false;  // the trajectory's own message is appended by ReplayTrace
  StatusOr<Completion> done = s.client->Complete(context, complete);
  if (!done.ok()) {
    ++failures_;
    ++consecutive_failures_;
    if (first_error_.empty()) first_error_ = "turn " + std::to_string(turns_) + ": " + done.status().ToString();
    if (args_.max_consecutive_failures > 0 && consecutive_failures_ >= static_cast<int>(args_.max_consecutive_failures)) {
      return UnavailableError("stopped after " + std::to_string(consecutive_failures_) +
                              " consecutive failed requests (--max-consecutive-failures " +
                              std::to_string(args_.max_consecutive_failures) + "); first error: " + first_error_);
    }
    return Status::Ok();
  }
  consecutive_failures_ = 0;
  const RequestRecord& record = done->record;
  s.input += record.input_tokens;
  s.predicted += record.cached_tokens_predicted;
  s.output += record.output_tokens;
  if (record.cached_tokens_reported) {
    s.any_reported = true;
    s.reported += *record.cached_tokens_reported;
    if (*record.cached_tokens_reported != record.cached_tokens_predicted) ++s.mismatched;
  }
  s.ttft.push_back(record.ttft_ms);
  s.decode.push_back(record.decode_ms);
  s.total.push_back(record.total_ms);
  if (s.records_file && !s.records_file->good()) {
    return UnavailableError("writing --records file \"" + args_.records + "\" failed");
  }
  return Status::Ok();
}

void ReplaySender::AddSummary(nlohmann::ordered_json& summary) const {
  const State& s = *state_;
  summary["endpoint"] = RedactUrl(args_.endpoint);
  summary["protocol"] = args_.grpc ? "grpc" : "http";
  summary["sent"] = turns_;
  summary["failed"] = failures_;
  summary["input_tokens"] = s.input;
  summary["output_tokens"] = s.output;
  summary["cached_tokens_predicted"] = s.predicted;
  summary["cached_tokens_reported"] =
      s.any_reported ? nlohmann::ordered_json(s.reported) : nlohmann::ordered_json(nullptr);
  summary["turns_with_prediction_mismatch"] = s.mismatched;
  summary["prefix_breaks"] = s.prefix_breaks;
  summary["ttft_ms_median"] = Median(s.ttft);
  summary["decode_ms_median"] = Median(s.decode);
  summary["total_ms_median"] = Median(s.total);
}

void ReplaySender::Print(const std::string& trace) const {
  const State& s = *state_;
  auto pct = [](int64_t a, int64_t b) { return b > 0 ? static_cast<int>(100.0 * a / b + 0.5) : 0; };
  std::cout << "sent " << turns_ << " requests of " << trace << " to " << RedactUrl(args_.endpoint)
            << (args_.grpc ? " (gRPC)" : " (HTTP)") << ", " << failures_ << " failed\n"
            << "  input tokens " << s.input << ", output tokens " << s.output << "\n"
            << "  cached tokens: predicted " << s.predicted << " (" << pct(s.predicted, s.input) << "%), reported ";
  if (s.any_reported) {
    std::cout << s.reported << " (" << pct(s.reported, s.input) << "%); " << s.mismatched << " turns differ\n";
  } else {
    std::cout << "none (enable --enable-prompt-tokens-details / --enable-cache-report)\n";
  }
  std::cout << "  median TTFT " << Median(s.ttft) << " ms, decode " << Median(s.decode) << " ms, total "
            << Median(s.total) << " ms; prefix breaks " << s.prefix_breaks << "\n";
}

void ReplaySender::CommitRecords() {
  if (state_->records_file) state_->records_file->Commit();
}

}  // namespace strata::cli
