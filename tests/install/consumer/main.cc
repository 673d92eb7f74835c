// A program outside the strata tree that uses an installed strata.
#include <iostream>

#include "strata/builtin_policies.h"
#include "strata/context.h"
#include "strata/tokenizer_spec.h"

int main() {
  // Use more than the core: a tokenizer and a compaction policy from other components.
  auto tokenizer = strata::MakeTokenizer("estimate:3.5");
  if (!tokenizer.ok()) return 1;
  auto policy = strata::MakeStrataPolicy();
  strata::ContextOptions options;
  options.agent.id = "consumer";
  options.tokenizer = tokenizer->get();
  strata::Budget budget;
  options.budget = budget;
  options.compaction = policy.get();
  options.render.model = "consumer-model";
  auto context = strata::Context::Create(options);
  if (!context.ok()) return 1;
  if (!(*context)->SetSystemPrompt("You are a test.").ok()) return 1;
  if (!(*context)->AppendUser("hello").ok()) return 1;
  auto request = (*context)->Build();
  if (!request.ok()) {
    std::cerr << request.status() << "\n";
    return 1;
  }
  std::cout << request->body << "\n";
  return 0;
}
