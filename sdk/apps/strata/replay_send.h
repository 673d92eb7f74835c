// `strata replay --send --endpoint URL [--grpc]`: each turn's request is really sent (through
// strata::Client) and the records are written and summarized. cmd_replay.cc registers the flags and
// calls the ReplaySender from its one pipeline, so --send combines with --budget, --db and
// --tokenizer.
#ifndef STRATA_APPS_STRATA_REPLAY_SEND_H_
#define STRATA_APPS_STRATA_REPLAY_SEND_H_

#include <CLI/CLI.hpp>

#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "strata/context.h"

namespace strata::cli {

struct ReplaySendArgs {
  bool send = false;
  std::string endpoint;  // HTTP base URL (.../v1) or, with --grpc, host:port
  bool grpc = false;
  std::string backend = "sglang";
  std::string records;  // JSON lines of RequestRecords and prefix-break events; "" none
  size_t block_size = 16;
  std::string tokenizer;  // spec for exact token blocks (strata/tokenizer_spec.h); "" byte blocks
  std::string chat_template = "approx";  // or a MakeChatTemplate name (strata/chat_template.h)
  bool allow_insecure = false;  // HttpTransportOptions::allow_insecure
  int64_t max_output_tokens = 4096;
  std::string api_key_env = "STRATA_API_KEY";
  double timeout_s = 600;
  // Stop after this many failed requests in a row (0: never stop early).
  size_t max_consecutive_failures = 3;
};

// Adds --send, --endpoint, --grpc, --backend, --records, --block-size, --cache-tokenizer,
// --cache-template, --allow-insecure, --max-output-tokens, --api-key-env, --timeout and --max-consecutive-failures.
void AddReplaySendOptions(CLI::App* cmd, ReplaySendArgs* args);

// Usage checks that need no network: throws CLI::ValidationError (exit 2) for --send without
// --endpoint, an HTTP endpoint without http:// or https://, an unknown --backend, a --timeout that
// is not a positive finite number of seconds up to a week, and send-only options without --send.
void ValidateReplaySendArgs(const ReplaySendArgs& args);

class ReplaySender {
 public:
  // Creates the transport, the client and the --records file. Throws CommandFailed on errors.
  ReplaySender(const ReplaySendArgs& args, bool quiet);
  ~ReplaySender();

  // Sends the context's current request (the reply is not appended: the trace's own message is).
  // A failed request is counted, not an error, until max_consecutive_failures fail in a row; then
  // the returned Status stops the replay.
  Status SendTurn(Context& context);

  int turns() const { return turns_; }
  int failures() const { return failures_; }
  const std::string& first_error() const { return first_error_; }
  // Summary fields (endpoint, protocol, failed, token and latency figures).
  void AddSummary(nlohmann::ordered_json& summary) const;
  void Print(const std::string& trace) const;
  // Renames the --records file into place (call when the replay is complete).
  void CommitRecords();

 private:
  struct State;
  const ReplaySendArgs& args_;
  std::unique_ptr<State> state_;
  int turns_ = 0, failures_ = 0, consecutive_failures_ = 0;
  std::string first_error_;
};

}  // namespace strata::cli

#endif  // STRATA_APPS_STRATA_REPLAY_SEND_H_
