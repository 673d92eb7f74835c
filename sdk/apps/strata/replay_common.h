// Pieces shared by the replay modes (one pipeline, and the --compare policy comparison).
#ifndef STRATA_APPS_STRATA_REPLAY_COMMON_H_
#define STRATA_APPS_STRATA_REPLAY_COMMON_H_

#include <cstddef>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "agent/prompt_tokens.h"
#include "strata/chat_template.h"
#include "strata/context.h"
#include "strata/tokenizer.h"

namespace strata::cli {

// The hygiene options of replay's --max-segment-tokens and --no-hygiene flags.
HygieneOptions ReplayHygiene(size_t max_segment_tokens, bool no_hygiene);

// Exact counting for --tokenizer SPEC: the tokenizer, the GLM-5 template, the prompts' token ids
// and block hashes continued from request to request (the Agent's PromptTokens), and the request
// counter over them (the counter refers to the others, so they live together). The context's
// count and the replay's prefix-cache blocks share one render and one encoding per request.
struct ExactCounting {
  std::unique_ptr<Tokenizer> tokenizer;
  std::unique_ptr<ChatTemplate> chat_template;
  std::unique_ptr<agent_internal::PromptTokens> prompt_tokens;
  std::unique_ptr<agent_internal::IncrementalRequestCounter> counter;
};

// Throws CLI::ValidationError (exit 2) for a spec that is not a tokenizer spec at all, CommandFailed
// (exit 1) when a named file cannot be read or is refused.
ExactCounting MakeExactCounting(const std::string& spec);
std::unique_ptr<Tokenizer> MakeTokenizerOrThrow(const std::string& spec, const std::string& option);

// A JSON value as text; invalid UTF-8 (e.g. in a file name) is replaced by U+FFFD instead of
// throwing.
std::string DumpJson(const nlohmann::ordered_json& value, int indent = -1);

// `text` with each byte that is not part of a valid UTF-8 sequence replaced by U+FFFD (agent ids
// derived from file names must be UTF-8).
std::string ValidUtf8(std::string_view text);

// An output file (--out, --summary-json, --records) written under a temporary name next to `path`
// and renamed over it by Commit(): a replay that fails leaves an existing file as it was. A path
// that exists and is not a regular file (a device such as /dev/stdout, a FIFO) is written directly.
// Write errors (a full disk, /dev/full) are reported by Commit().
class OutputFile {
 public:
  // Throws CommandFailed when the file cannot be created. `option` names the flag in messages.
  OutputFile(std::string path, std::string option);
  ~OutputFile();  // removes the temporary file unless committed
  OutputFile(const OutputFile&) = delete;
  OutputFile& operator=(const OutputFile&) = delete;

  std::ostream& stream() { return out_; }
  // False after a write error.
  bool good() const { return static_cast<bool>(out_); }
  // Flushes, closes and renames. Throws CommandFailed on any error (the temporary file is removed).
  void Commit();

 private:
  std::string path_;
  std::string option_;
  std::string temp_path_;  // empty when writing `path_` directly
  std::ofstream out_;
  bool done_ = false;
};

}  // namespace strata::cli

#endif  // STRATA_APPS_STRATA_REPLAY_COMMON_H_
