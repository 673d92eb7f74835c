// Length pools in front of an endpoint, with an Agent that degrades itself: requests are admitted
// by their exact input tokens into a short or a long pool (the long pool runs one request at a
// time); when the agent's context outgrows every pool, the PoolSet asks the agent (its
// DegradationHandler for the call) to compact its history to the long pool's length. Prints each
// turn's pool decision and the pool metrics.
//
//   strata-sim --port 8000 &
//   ./example_length_pools http://127.0.0.1:8000/v1
#include <iostream>
#include <memory>
#include <string>

#include "strata/agent.h"
#include "strata/pools.h"

namespace {

// A tool output of about `tokens` tokens (distinct per call).
std::string Listing(int call, int tokens) {
  std::string out;
  for (int i = 0; static_cast<int>(out.size()) < tokens * 4; ++i) {
    out += "src/part" + std::to_string(call) + "/file" + std::to_string(i) + ".py\n";
  }
  return out;
}

strata::Status Main(const std::string& base_url) {
  strata::PoolSetConfig config;
  strata::PoolConfig short_pool;
  short_pool.name = "short";
  short_pool.max_input_tokens = 8192;
  short_pool.endpoints = {base_url};
  short_pool.max_concurrency = 8;
  strata::PoolConfig long_pool;
  long_pool.name = "long";
  long_pool.max_input_tokens = 32768;
  long_pool.endpoints = {base_url};
  long_pool.max_concurrency = 1;
  config.pools = {short_pool, long_pool};
  STRATA_ASSIGN_OR_RETURN(std::unique_ptr<strata::PoolSet> pools, strata::PoolSet::Create(config));

  // The agent sends through the pools: its exact prompt tokens are what the pools admit by, its
  // stable-prefix hash picks the replica, and it compacts or forks itself when a pool asks.
  strata::AgentConfig agent_config;
  agent_config.identity.id = "pooled-agent";
  agent_config.endpoint.max_output_tokens = 64;
  strata::AgentServices services;
  services.transport = pools.get();
  STRATA_ASSIGN_OR_RETURN(std::unique_ptr<strata::Agent> agent,
                          strata::Agent::Create(agent_config, services));
  STRATA_RETURN_IF_ERROR(agent->SetSystemPrompt("You are a coding agent."));
  STRATA_RETURN_IF_ERROR(agent->AppendUser("List the repository part by part.").status());
  // Eight listings of ~5,000 tokens: the context grows from the short pool, through the long one,
  // past every pool.
  for (int call = 0; call < 8; ++call) {
    STRATA_ASSIGN_OR_RETURN(strata::Turn turn, agent->Complete());
    const strata::RequestRecord& r = turn.record;
    std::cout << "turn " << call << ": " << r.input_tokens << " tokens -> pool " << r.pool
              << (r.degradation.empty() ? "" : " after " + r.degradation)
              << (r.degradation_notes.empty() ? "" : " (" + r.degradation_notes + ")") << "\n";
    // The model's reply is a plain answer here; append the next listing as the user's message.
    STRATA_RETURN_IF_ERROR(
        agent->AppendUser("Part " + std::to_string(call) + ":\n" + Listing(call, 5000)).status());
  }
  std::cout << pools->PrometheusText();
  return strata::Status::Ok();
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::cerr << "usage: example_length_pools BASE_URL   (e.g. http://127.0.0.1:8000/v1)\n";
    return 2;
  }
  strata::Status status = Main(argv[1]);
  if (!status.ok()) {
    std::cerr << status << "\n";
    return 1;
  }
  return 0;
}
