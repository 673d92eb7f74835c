// strata-sim's `--answer retrieve` mode: a test double for `strata probe` (docs/probe.md), not a
// model. It reads the probe question at the end of the request's last user message (the fixed
// format `Question [strata-probe KIND]: ...` that strata probe emits, its parameters in backticks),
// looks the answer up in the prompt it received with its own plain-text rules, and answers it. An
// optional degradation model (`--degrade`) turns a seeded share of the answers wrong, depending on
// where the answer sits in the prompt and how long the prompt is, so that the harness can be shown
// to detect degradation.
//
//   strata::sim::RetrieveOptions options;
//   options.degrade = strata::sim::ParseDegradeSpec("depth>0.5:p=0.3,length>=128k:p=0.5").value();
//   std::string reply = strata::sim::AnswerRetrieve(request_json, prompt_tokens, options);
//
// Degradation grammar:  SPEC = RULE ("," RULE)* ; RULE = COND ("&" COND)* ":p=" P ;
//   COND = ("depth" | "length") (">" | ">=" | "<" | "<=") NUMBER ["k" | "m"]
// depth is where the answer's line starts in the last user message (0 = its start, 1 = its end);
// length is the prompt's tokens as the simulator counted them (k = 1024, m = 1048576). A request
// is answered wrong with the largest P of the rules all of whose conditions hold, decided by a hash
// of the seed, the question and the prompt length (the same request always gets the same answer,
// whatever the order or concurrency of requests).
//
// Thread safety: the functions are thread-safe.
#ifndef STRATA_APPS_STRATA_SIM_SIM_RETRIEVE_H_
#define STRATA_APPS_STRATA_SIM_SIM_RETRIEVE_H_

#include <cstdint>
#include <string>
#include <vector>

#include "strata/status.h"

namespace strata::sim {

// One condition of a degradation rule: `variable op threshold`.
struct DegradeCondition {
  enum class Variable : int { kDepth = 0, kLength = 1 };
  enum class Op : int { kGreater = 0, kGreaterEqual = 1, kLess = 2, kLessEqual = 3 };
  Variable variable = Variable::kDepth;
  Op op = Op::kGreater;
  double threshold = 0;
};

// A degradation rule: when every condition holds, the answer is wrong with probability p.
struct DegradeRule {
  std::vector<DegradeCondition> conditions;
  double p = 0;
};

// Parses the --degrade grammar above. INVALID_ARGUMENT naming the rule that is malformed and the
// expected form (e.g. "depth>0.5:p=0.3"); "" gives no rules.
StatusOr<std::vector<DegradeRule>> ParseDegradeSpec(const std::string& spec);

// What the retrieve mode answers with.
struct RetrieveOptions {
  std::vector<DegradeRule> degrade;  // none: every answer is the one found
  uint64_t seed = 1;                 // seeds the degradation's choices
};

// What AnswerProbe found.
struct RetrieveResult {
  bool found = false;     // a probe question was parsed and its answer found in the prompt
  std::string kind;       // "constant", "definition", "table", "mrcr", "twohop"; "" none
  std::string answer;     // the answer given (wrong when degraded)
  double depth = 0;       // where the answer's line starts in the last user message, 0..1
  bool degraded = false;  // the degradation model chose a wrong answer
};

// Answers the probe question of `user_message` (the request's last user message), `prompt_tokens`
// long as counted by the simulator. Not found: found = false and an answer that says so.
RetrieveResult AnswerProbe(const std::string& user_message, int64_t prompt_tokens,
                           const RetrieveOptions& options);

// The reply content for a Chat Completions request body (JSON): AnswerProbe on its last user
// message. A body without one gets a reply that says so.
std::string AnswerRetrieve(const std::string& request_json, int64_t prompt_tokens,
                           const RetrieveOptions& options);

}  // namespace strata::sim

#endif  // STRATA_APPS_STRATA_SIM_SIM_RETRIEVE_H_
