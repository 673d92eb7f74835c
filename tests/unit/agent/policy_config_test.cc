// The policy an AgentPolicyConfig names: every knob reaches StrataPolicyOptions, knobs out of range
// are refused naming the field, and the configured prices reach the compactions an agent makes.
#include "agent/policy_config.h"

#include <catch2/catch.hpp>
#include <memory>
#include <string>

#include "strata/agent.h"
#include "strata/builtin_policies.h"
#include "testing/scripted_transport.h"
#include "testing/status_testing.h"

namespace strata {
namespace {

using testing::Must;
using testing::MustOk;

TEST_CASE("StrataOptionsOf copies every knob of the policy configuration", "[agent][policy]") {
  AgentPolicyConfig p;
  p.keep_turns = 4;
  p.keep_tool_results = 6;
  p.keep_first_user = false;
  p.exclude_tools = {"spec"};
  p.ephemeral_tools = {"ls", "pwd"};
  p.placeholder_identifiers = 12;
  p.tokens_per_identifier = 50;
  p.max_summary_tokens = 700;
  p.cost_model = false;
  p.uncached_price = 3.0;
  p.cached_price = 0.75;
  p.prior_remaining_turns = 9;
  p.prior_weight = 2.5;
  p.below_trigger_margin = 1.5;
  p.use_window_turns = 7;
  p.mask_after_use = false;
  std::unique_ptr<Summarizer> summarizer = MakeExtractiveSummarizer();
  StrataPolicyOptions o = agent_internal::StrataOptionsOf(p, summarizer.get());
  CHECK(o.keep_turns == 4);
  CHECK(o.keep_tool_results == 6);
  CHECK_FALSE(o.keep_first_user);
  CHECK(o.exclude_tools == std::set<std::string>{"spec"});
  CHECK(o.ephemeral_tools == std::set<std::string>{"ls", "pwd"});
  CHECK(o.placeholder_identifiers == 12);
  CHECK(o.tokens_per_identifier == 50);
  CHECK(o.max_summary_tokens == 700);
  CHECK(o.summarizer == summarizer.get());
  CHECK_FALSE(o.cost_model);
  CHECK(o.uncached_price == 3.0);
  CHECK(o.cached_price == 0.75);
  CHECK(o.prior_remaining_turns == 9);
  CHECK(o.prior_weight == 2.5);
  CHECK(o.below_trigger_margin == 1.5);
  CHECK(o.use_window_turns == 7);
  CHECK_FALSE(o.mask_after_use);
}

TEST_CASE("policy knobs out of range are refused naming the field and its value",
          "[agent][policy]") {
  AgentConfig c;
  c.identity.id = "bad-knobs";
  c.policy.uncached_price = 0;
  Status zero = Agent::Create(c).status();
  CHECK(zero.code() == StatusCode::kInvalidArgument);
  CHECK(zero.message() == "policy.uncached_price is 0; it must be a finite number > 0");
  c.policy.uncached_price = 1;
  c.policy.cached_price = -0.5;
  CHECK(Agent::Create(c).status().message() ==
        "policy.cached_price is -0.5; it must be a finite number >= 0");
  c.policy.cached_price = 0.1;
  c.policy.tokens_per_identifier = 0;
  CHECK(Agent::Create(c).status().message().find("policy.tokens_per_identifier (0)") !=
        std::string::npos);
  c.policy.tokens_per_identifier = 32;
  c.policy.name = "smart";
  CHECK(Agent::Create(c).status().message().find(
            "strata, none, sliding, last-n, clear-tool-uses, observation-masking") !=
        std::string::npos);
  c.policy.name = "strata";
  CHECK(Agent::Create(c).ok());
}

TEST_CASE("the configured prices reach the agent's compactions", "[agent][policy]") {
  testing::ScriptedTransport transport;
  AgentConfig c;
  c.identity.id = "priced";
  c.tokenizer = "estimate";
  c.budget.window = 4000;
  c.budget.reserve_output = 0;
  c.budget.reserve_reasoning = 0;
  c.budget.reserve_headroom = 0;
  c.budget.trigger = BudgetLimit::Fraction(0.7);
  c.budget.target = BudgetLimit::Fraction(0.4);
  c.policy.keep_tool_results = 1;
  c.policy.keep_turns = 1;
  c.policy.uncached_price = 3;
  c.policy.cached_price = 0.75;
  AgentServices services;
  services.transport = &transport;
  auto agent = Must(Agent::Create(c, services));
  MustOk(agent->AppendUser("Read the files.").status());
  std::optional<CompactionReport> report;
  for (int i = 0; i < 30 && !report; ++i) {
    const std::string id = "call_" + std::to_string(i);
    Response r;
    r.tool_calls.push_back(ToolCall{id, "read_file", "{}"});
    transport.Respond(r);
    Turn turn = Must(agent->Complete());
    if (!turn.compactions.empty()) report = turn.compactions.front();
    std::string output;
    for (int line = 0; line < 40; ++line)
      output += "line " + std::to_string(line) + " of file " + std::to_string(i) + "\n";
    MustOk(agent->AppendToolResult({id, output, false}).status());
  }
  REQUIRE(report.has_value());
  CHECK(ExplainCompaction(*report).find("prices 3/0.75") != std::string::npos);
}

}  // namespace
}  // namespace strata

namespace strata {
namespace {

TEST_CASE("the baselines users run elsewhere are Agent policies with their defaults",
          "[agent][policy]") {
  for (const std::string name : {"clear-tool-uses", "observation-masking"}) {
    AgentPolicyConfig p;
    p.name = name;
    std::unique_ptr<CompactionPolicy> policy = Must(agent_internal::MakeConfiguredPolicy(p, nullptr));
    CHECK(policy->Name() == Must(MakePolicyByName(name))->Name());
  }
  // observation-masking masks every tool result but the last 10 on each request, far below the
  // budget as well.
  AgentConfig c;
  c.identity.id = "masking";
  c.tokenizer = "estimate";
  c.budget.window = 100000;
  c.policy.name = "observation-masking";
  auto agent = Must(Agent::Create(c));
  MustOk(agent->AppendUser("List the files.").status());
  for (int i = 0; i < 12; ++i) {
    AssistantMessage call;
    call.tool_calls.push_back(ToolCall{"c" + std::to_string(i), "ls", "{}"});
    MustOk(agent->context().AppendAssistant(std::move(call)).status());
    std::string output = "output number " + std::to_string(i) + "\n";
    for (int line = 0; line < 40; ++line) output += "file_" + std::to_string(line) + ".txt\n";
    MustOk(agent->AppendToolResult({"c" + std::to_string(i), output}).status());
  }
  const RequestPreview preview = Must(agent->PreviewRequest());
  CHECK(preview.body.find("output number 0") == std::string::npos);
  CHECK(preview.body.find("output number 1\\n") == std::string::npos);
  for (int i = 2; i < 12; ++i) {
    CHECK(preview.body.find("output number " + std::to_string(i)) != std::string::npos);
  }
  CHECK(preview.body.find("Old environment output") != std::string::npos);
}

}  // namespace
}  // namespace strata
