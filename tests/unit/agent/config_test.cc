// AgentConfig JSON: round trip, strict refusal of unknown keys and wrong types (with the key path),
// and budgets that fit any window.
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "strata/agent.h"

namespace strata {
namespace {

TEST_CASE("an AgentConfig round-trips through JSON", "[agent][config]") {
  AgentConfig c;
  c.identity = {"a-1", "tenant-x", "repo:rw", "glm-5.3-flash@2", "prompts@7"};
  c.tokenizer = "estimate:3.5";
  c.chat_template = "generic";
  c.budget.window = 8000;
  c.budget.reserve_output = 1000;
  c.budget.trigger = BudgetLimit::Tokens(5000);
  c.budget.target = BudgetLimit::Fraction(0.5);
  c.policy.name = "last-n";
  c.policy.exclude_tools = {"read_spec"};
  c.policy.last_n = 7;
  c.hygiene.max_segment_tokens = 2048;
  c.hygiene.head_share = 0.25;
  c.render.model = "m";
  c.render.system_layout = SystemLayout::kMessagePerSegment;
  c.keep_originals = false;
  c.endpoint.backend = "sglang";
  c.endpoint.base_url = "http://127.0.0.1:9/v1";
  c.endpoint.api_key_env = "MY_KEY";
  c.endpoint.thinking = false;
  c.cache.block_tokens = 512;
  c.recall.protect_turns = 5;
  c.store_path = "agents.db";
  const std::string text = AgentConfigToJson(c);
  CHECK(text.find("MY_KEY") != std::string::npos);
  auto back = AgentConfigFromJson(text);
  REQUIRE(back.ok());
  CHECK(AgentConfigToJson(*back) == text);
  CHECK(back->identity.scope == "repo:rw");
  CHECK(back->budget.reserve_output == 1000);
  CHECK_FALSE(back->budget.reserve_reasoning.has_value());
  CHECK(back->budget.trigger == BudgetLimit::Tokens(5000));
  CHECK(back->render.system_layout == SystemLayout::kMessagePerSegment);
  CHECK(back->endpoint.thinking == std::optional<bool>(false));
  CHECK(back->cache.block_tokens == 512);
}

TEST_CASE("every StrataPolicyOptions knob round-trips through the policy object", "[agent][config]") {
  AgentConfig c;
  c.identity.id = "knobs";
  c.policy.keep_turns = 4;
  c.policy.keep_tool_results = 6;
  c.policy.keep_first_user = false;
  c.policy.ephemeral_tools = {"ls"};
  c.policy.placeholder_identifiers = 12;
  c.policy.tokens_per_identifier = 50;
  c.policy.max_summary_tokens = 700;
  c.policy.cost_model = false;
  c.policy.uncached_price = 3.0;
  c.policy.cached_price = 0.75;
  c.policy.prior_remaining_turns = 9;
  c.policy.prior_weight = 2.5;
  c.policy.below_trigger_margin = 1.5;
  c.policy.use_window_turns = 7;
  c.policy.mask_after_use = false;
  const std::string text = AgentConfigToJson(c);
  const nlohmann::json policy = nlohmann::json::parse(text)["policy"];
  for (const char* key : {"placeholder_identifiers", "tokens_per_identifier", "cost_model",
                          "uncached_price", "cached_price", "prior_remaining_turns", "prior_weight",
                          "below_trigger_margin", "use_window_turns", "mask_after_use"}) {
    CHECK(policy.contains(key));
  }
  auto back = AgentConfigFromJson(text);
  REQUIRE(back.ok());
  CHECK(AgentConfigToJson(*back) == text);
  CHECK(back->policy.placeholder_identifiers == 12);
  CHECK(back->policy.tokens_per_identifier == 50);
  CHECK_FALSE(back->policy.cost_model);
  CHECK(back->policy.uncached_price == 3.0);
  CHECK(back->policy.cached_price == 0.75);
  CHECK(back->policy.prior_remaining_turns == 9);
  CHECK(back->policy.prior_weight == 2.5);
  CHECK(back->policy.below_trigger_margin == 1.5);
  CHECK(back->policy.use_window_turns == 7);
  CHECK_FALSE(back->policy.mask_after_use);

  // The one-key document the issue tried, and the defaults of StrataPolicyOptions.
  auto one = AgentConfigFromJson(R"({"policy":{"mask_after_use":false,"cost_model":false}})");
  REQUIRE(one.ok());
  CHECK_FALSE(one->policy.mask_after_use);
  const StrataPolicyOptions defaults;
  const AgentPolicyConfig ours;
  CHECK(ours.placeholder_identifiers == defaults.placeholder_identifiers);
  CHECK(ours.tokens_per_identifier == defaults.tokens_per_identifier);
  CHECK(ours.cost_model == defaults.cost_model);
  CHECK(ours.uncached_price == defaults.uncached_price);
  CHECK(ours.cached_price == defaults.cached_price);
  CHECK(ours.prior_remaining_turns == defaults.prior_remaining_turns);
  CHECK(ours.prior_weight == defaults.prior_weight);
  CHECK(ours.below_trigger_margin == defaults.below_trigger_margin);
  CHECK(ours.use_window_turns == defaults.use_window_turns);
  CHECK(ours.mask_after_use == defaults.mask_after_use);
  CHECK(ours.max_summary_tokens == defaults.max_summary_tokens);

  auto typo = AgentConfigFromJson(R"({"policy":{"mask_after_uses":false}})");
  REQUIRE_FALSE(typo.ok());
  CHECK(typo.status().message().find("policy.mask_after_uses") != std::string::npos);
  CHECK(typo.status().message().find("mask_after_use, last_n") != std::string::npos);
  auto price = AgentConfigFromJson(R"({"policy":{"cached_price":"cheap"}})");
  REQUIRE_FALSE(price.ok());
  CHECK(price.status().message().find("policy.cached_price") != std::string::npos);
}

TEST_CASE("missing keys take their defaults", "[agent][config]") {
  auto c = AgentConfigFromJson(R"({"identity":{"id":"x"}})");
  REQUIRE(c.ok());
  CHECK(c->identity.id == "x");
  CHECK(c->policy.name == "strata");
  CHECK(c->budget.window == 1048576);
  CHECK(c->chat_template == "glm5");
}

TEST_CASE("unknown keys and wrong types are refused with their key path", "[agent][config]") {
  auto unknown = AgentConfigFromJson(R"({"budget":{"windw":8000}})");
  REQUIRE_FALSE(unknown.ok());
  CHECK(unknown.status().code() == StatusCode::kInvalidArgument);
  CHECK(unknown.status().message().find("budget.windw") != std::string::npos);
  CHECK(unknown.status().message().find("window") != std::string::npos);  // lists the known keys

  auto top = AgentConfigFromJson(R"({"tokeniser":"estimate"})");
  REQUIRE_FALSE(top.ok());
  CHECK(top.status().message().find("\"tokeniser\"") != std::string::npos);

  auto type = AgentConfigFromJson(R"({"budget":{"trigger":{"fraction":"high"}}})");
  REQUIRE_FALSE(type.ok());
  CHECK(type.status().message().find("budget.trigger.fraction") != std::string::npos);
  CHECK(type.status().message().find("a number") != std::string::npos);

  auto list = AgentConfigFromJson(R"({"policy":{"exclude_tools":["a",3]}})");
  REQUIRE_FALSE(list.ok());
  CHECK(list.status().message().find("policy.exclude_tools[1]") != std::string::npos);

  auto negative = AgentConfigFromJson(R"({"hygiene":{"max_segment_tokens":-1}})");
  REQUIRE_FALSE(negative.ok());
  CHECK(negative.status().message().find("hygiene.max_segment_tokens") != std::string::npos);

  CHECK_FALSE(AgentConfigFromJson("[1]").ok());
  CHECK_FALSE(AgentConfigFromJson("{").ok());
  CHECK_FALSE(AgentConfigFromJson(R"({"render":{"system_layout":"sideways"}})").ok());
}

TEST_CASE("unset reserves scale with the window", "[agent][config][budget]") {
  AgentBudgetConfig small;
  small.window = 8000;
  auto budget = ResolveBudget(small);
  REQUIRE(budget.ok());
  CHECK(budget->reserve_output == 1000);
  CHECK(budget->reserve_reasoning == 500);
  CHECK(budget->reserve_headroom == 500);
  CHECK(UsableInputTokens(*budget) == 6000);

  AgentBudgetConfig big;  // 1M: the documented defaults
  auto large = ResolveBudget(big);
  REQUIRE(large.ok());
  CHECK(large->reserve_output == 32768);
  CHECK(large->reserve_reasoning == 16384);
  CHECK(large->reserve_headroom == 16384);
}

TEST_CASE("a set reserve that does not fit is refused naming it and by how much",
          "[agent][config][budget]") {
  AgentBudgetConfig c;
  c.window = 8000;
  c.reserve_output = 32768;
  auto budget = ResolveBudget(c);
  REQUIRE_FALSE(budget.ok());
  const std::string& m = budget.status().message();
  CHECK(m.find("budget.reserve_output") != std::string::npos);
  // 8000 - (32768 + 500 + 500) = -25768 usable; a quarter of the window is 2000: lower by 27768.
  CHECK(m.find("by at least 27768") != std::string::npos);
  CHECK(m.find("to 5000") != std::string::npos);
  c.reserve_output = 5000;
  CHECK(ResolveBudget(c).ok());
}

TEST_CASE("an AgentConfig nested 100k or 1M deep under a key is refused, not a crash",
          "[agent][config]") {
  for (size_t levels : {size_t{100000}, size_t{1000000}}) {
    const std::string nested = std::string(levels, '[') + std::string(levels, ']');
    for (const std::string& doc : {"{\"budget\": {\"window\": " + nested + "}}",
                                   "{\"endpoint\": {\"max_attempts\": " + nested + "}}",
                                   "{\"tokenizer\": " + nested + "}"}) {
      StatusOr<AgentConfig> parsed = AgentConfigFromJson(doc);
      REQUIRE_FALSE(parsed.ok());
      CHECK(parsed.status().code() == StatusCode::kInvalidArgument);
      CHECK_THAT(parsed.status().message(),
                 Catch::StartsWith("agent configuration: JSON nested deeper than 512 levels"));
    }
  }
}

TEST_CASE("every number of an AgentConfig has a range, named with the key and the value",
          "[agent][config]") {
  const std::pair<const char*, const char*> cases[] = {
      {R"({"endpoint": {"max_attempts": 1000000}})",
       "endpoint.max_attempts = 1000000 is out of range: use 1 to 10"},
      {R"({"endpoint": {"max_attempts": -1}})", "endpoint.max_attempts = -1 is out of range"},
      {R"({"endpoint": {"max_attempts": 0}})", "endpoint.max_attempts = 0 is out of range"},
      {R"({"endpoint": {"max_attempts": 4294967297}})",
       "endpoint.max_attempts: 4294967297 does not fit a 32-bit integer"},
      {R"({"endpoint": {"total_timeout_ms": 9223372036854775807}})",
       "endpoint.total_timeout_ms = 9223372036854775807 is out of range: use 1 to 86400000"},
      {R"({"endpoint": {"first_byte_timeout_ms": 9223372036854775807}})",
       "endpoint.first_byte_timeout_ms = 9223372036854775807 is out of range"},
      {R"({"endpoint": {"connect_timeout_ms": 0}})", "endpoint.connect_timeout_ms = 0 is out of"},
      {R"({"endpoint": {"idle_timeout_ms": -5}})", "endpoint.idle_timeout_ms = -5 is out of"},
      {R"({"endpoint": {"deadline_ms": -1}})", "endpoint.deadline_ms = -1 is out of range"},
      {R"({"endpoint": {"max_output_tokens": 9223372036854775807}})",
       "endpoint.max_output_tokens = 9223372036854775807 is out of range: use 0 to 1073741824"},
      {R"({"message_overhead_tokens": 9223372036854775807})",
       "message_overhead_tokens = 9223372036854775807 is out of range: use 0 to 1024"},
      {R"({"budget": {"window": 9223372036854775807}})", "budget.window = 9223372036854775807"},
      {R"({"budget": {"window": 1000, "reserve_output": 1001}})",
       "budget.reserve_output = 1001 is out of range: use 0 to 1000"},
      {R"({"budget": {"window": 1000, "trigger": {"tokens": -1}}})",
       "budget.trigger = -1 is out of range"},
      {R"({"budget": {"trigger": {"fraction": 2.5}}})", "budget.trigger = 2.5 is out of range"},
      {R"({"policy": {"keep_turns": 18446744073709551615}})",
       "policy.keep_turns = 18446744073709551615 is out of range: use 0 to 1000000"},
      {R"({"hygiene": {"head_share": -0.5}})", "hygiene.head_share = -0.5 is out of range"},
      {R"({"cache": {"block_tokens": 0}})", "cache.block_tokens = 0 is out of range: use 1 to"},
      {R"({"recall": {"protect_turns": -3}})", "recall.protect_turns = -3 is out of range"},
      {R"({"recall": {"max_share_of_target": 7}})", "recall.max_share_of_target = 7 is out of"},
  };
  for (const auto& [doc, message] : cases) {
    INFO(doc);
    StatusOr<AgentConfig> parsed = AgentConfigFromJson(doc);
    REQUIRE_FALSE(parsed.ok());
    CHECK(parsed.status().code() == StatusCode::kInvalidArgument);
    CHECK_THAT(parsed.status().message(), Catch::StartsWith(message));
  }
  // The limits themselves are accepted.
  StatusOr<AgentConfig> edge = AgentConfigFromJson(
      R"({"endpoint": {"max_attempts": 10, "total_timeout_ms": 86400000, "deadline_ms": 0},
          "message_overhead_tokens": 1024})");
  REQUIRE(edge.ok());
  CHECK(CheckAgentConfigRanges(AgentConfig()).ok());
  AgentConfig direct;
  direct.endpoint.max_attempts = 11;
  CHECK_THAT(CheckAgentConfigRanges(direct).message(),
             Catch::StartsWith("endpoint.max_attempts = 11 is out of range"));
}

}  // namespace
}  // namespace strata
