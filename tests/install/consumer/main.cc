// A program outside the strata tree that uses an installed strata.
#include <iostream>

#include "strata/context.h"

int main() {
  strata::ContextOptions options;
  options.agent.id = "consumer";
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
