// A program that uses only strata::agent from an installed strata: an Agent, made in memory and
// never sent anything, prints its configuration.
#include <iostream>
#include <memory>

#include "strata/agent.h"

int main() {
  strata::AgentConfig config;
  config.identity.id = "package-consumer";
  config.endpoint.base_url = "http://127.0.0.1:9/v1";  // never contacted
  strata::StatusOr<std::unique_ptr<strata::Agent>> agent = strata::Agent::Create(config);
  if (!agent.ok()) {
    std::cerr << agent.status() << "\n";
    return 1;
  }
  strata::Status prompt = (*agent)->SetSystemPrompt("You are a test.");
  if (!prompt.ok()) {
    std::cerr << prompt << "\n";
    return 1;
  }
  // A broken document falls back to the default configuration.
  strata::AgentConfig fallback = strata::AgentConfigFromJson("{").value_or(strata::AgentConfig{});
  std::cout << "agent " << config.identity.id << " created, fallback tokenizer "
            << fallback.tokenizer << "\n";
  return 0;
}
