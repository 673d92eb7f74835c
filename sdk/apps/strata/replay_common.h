// Pieces shared by the replay modes (plain, --budget, --send).
#ifndef STRATA_APPS_STRATA_REPLAY_COMMON_H_
#define STRATA_APPS_STRATA_REPLAY_COMMON_H_

#include <cstddef>
#include <memory>
#include <string>

#include "strata/chat_template.h"
#include "strata/context.h"
#include "strata/tokenizer.h"

namespace strata::cli {

// The hygiene options of replay's --max-segment-tokens and --no-hygiene flags.
HygieneOptions ReplayHygiene(size_t max_segment_tokens, bool no_hygiene);

// Exact counting for --tokenizer SPEC: the tokenizer, the GLM-5 template and a request counter over
// both (the counter refers to the other two, so they live together).
struct ExactCounting {
  std::unique_ptr<Tokenizer> tokenizer;
  std::unique_ptr<ChatTemplate> chat_template;
  std::unique_ptr<RequestTokenCounter> counter;
};

// Throws CommandFailed for a spec MakeTokenizer refuses.
ExactCounting MakeExactCounting(const std::string& spec);

}  // namespace strata::cli

#endif  // STRATA_APPS_STRATA_REPLAY_COMMON_H_
