#include "replay_common.h"

#include "commands.h"
#include "strata/tokenize.h"

namespace strata::cli {

HygieneOptions ReplayHygiene(size_t max_segment_tokens, bool no_hygiene) {
  HygieneOptions hygiene;
  hygiene.max_segment_tokens = max_segment_tokens;
  if (no_hygiene) {
    hygiene.max_segment_tokens = 0;
    hygiene.deduplicate = false;
    hygiene.fold_error_logs = false;
  }
  return hygiene;
}

ExactCounting MakeExactCounting(const std::string& spec) {
  StatusOr<std::unique_ptr<Tokenizer>> made = MakeTokenizer(spec);
  if (!made.ok()) throw CommandFailed{made.status().ToString()};
  ExactCounting counting;
  counting.tokenizer = std::move(made).value();
  counting.chat_template = MakeGlm5ChatTemplate();
  counting.counter = MakeRequestTokenCounter(*counting.chat_template, *counting.tokenizer);
  return counting;
}

}  // namespace strata::cli
