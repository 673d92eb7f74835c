// `strata replay --endpoint URL [--grpc] --send`: each turn's request is really sent (through
// strata::Client), the records are written and summarized. Kept apart from cmd_replay.cc, which only
// registers the flags and calls RunReplaySend when --send is given.
#ifndef STRATA_APPS_STRATA_REPLAY_SEND_H_
#define STRATA_APPS_STRATA_REPLAY_SEND_H_

#include <CLI/CLI.hpp>

#include <cstdint>
#include <string>

namespace strata::cli {

struct ReplaySendArgs {
  bool send = false;
  std::string endpoint;  // HTTP base URL (.../v1) or, with --grpc, host:port
  bool grpc = false;
  std::string backend = "sglang";
  std::string records;  // JSON lines of RequestRecords and prefix-break events; "" none
  size_t block_size = 16;
  std::string tokenizer;  // spec for exact token blocks (strata/tokenize.h); "" byte blocks
  std::string chat_template = "approx";  // or "glm5" 
  int64_t max_output_tokens = 4096;
  std::string api_key_env = "STRATA_API_KEY";
  double timeout_s = 600;
};

// What the replay itself was asked for (from cmd_replay.cc's own flags).
struct ReplayBasics {
  std::string trace;
  std::string model;
  size_t max_segment_tokens = 0;
  bool no_hygiene = false;
  std::string summary_json;
  bool quiet = false;
  // --budget N [--policy P] [--tokenizer SPEC]: keep every sent request within N input tokens,
  // compacting with policy P (default strata), counted exactly with SPEC through the GLM-5 template
  // (the 4-bytes-per-token estimate without it).
  size_t budget = 0;
  std::string policy;
  std::string tokenizer;
};

// Adds --endpoint, --grpc, --send, --backend, --records, --block-size, --cache-tokenizer,
// --max-output-tokens,
// --api-key-env, --timeout to `cmd`.
void AddReplaySendOptions(CLI::App* cmd, ReplaySendArgs* args);

// Replays the trace against the endpoint. Throws CommandFailed on a setup error or when any
// request failed (after printing the summary).
void RunReplaySend(const ReplayBasics& basics, const ReplaySendArgs& args);

}  // namespace strata::cli

#endif  // STRATA_APPS_STRATA_REPLAY_SEND_H_
