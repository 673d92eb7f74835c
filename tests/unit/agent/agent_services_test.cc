// What AgentServices injects besides the transport, store and summarizer: a CompactionPolicy used
// instead of the configured one (its name recorded on reports, events and segments), a shared
// Tokenizer checked against the configured spec and shared with forks, and the Clock the agent
// reads time and randomness from.
#include "agent/agent_services.h"

#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <string>

#include "strata/agent.h"
#include "strata/builtin_policies.h"
#include "strata/tokenizer_spec.h"
#include "testing/fake_clock.h"
#include "testing/scripted_transport.h"
#include "testing/status_testing.h"

namespace strata {
namespace {

using testing::Must;
using testing::MustOk;

std::string TempPath(const std::string& name) {
  std::string path = "/tmp/strata-services-test-" + std::to_string(::getpid()) + "-" + name;
  for (const char* suffix : {"", "-wal", "-shm"}) std::remove((path + suffix).c_str());
  return path;
}

std::string SpmSpec() {
  return std::string("spm:") + STRATA_TEST_DATA_DIR + "/strata-test-spm.model";
}

// The strata policy under another name, counting the plans it made.
class NamedPolicy final : public CompactionPolicy {
 public:
  std::string Name() const override { return "team-policy@7"; }
  bool ShouldCompact(const CompactionInput& input) const override {
    return inner_->ShouldCompact(input);
  }
  StatusOr<HistoryEdit> Plan(const CompactionInput& input) override {
    ++plans;
    return inner_->Plan(input);
  }
  int plans = 0;

 private:
  std::unique_ptr<CompactionPolicy> inner_ = MakeStrataPolicy();
};

AgentConfig SmallWindow(const std::string& id) {
  AgentConfig c;
  c.identity.id = id;
  c.tokenizer = "estimate";
  c.budget.window = 4000;
  c.budget.reserve_output = 0;
  c.budget.reserve_reasoning = 0;
  c.budget.reserve_headroom = 0;
  c.budget.trigger = BudgetLimit::Fraction(0.7);
  c.budget.target = BudgetLimit::Fraction(0.4);
  c.policy.name = "none";  // what the injected policy replaces
  return c;
}

TEST_CASE("an injected CompactionPolicy is used instead of the configured one, by its name",
          "[agent][services]") {
  const std::string path = TempPath("policy.db");
  testing::ScriptedTransport transport;
  NamedPolicy policy;
  AgentConfig c = SmallWindow("policed");
  c.store_path = path;
  AgentServices services;
  services.transport = &transport;
  services.policy = &policy;
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
  REQUIRE(report.has_value());  // the configured "none" would never have compacted
  CHECK(policy.plans > 0);
  CHECK(report->policy == "team-policy@7");
  bool altered = false;
  for (const Segment& s : agent->context().Segments()) altered |= s.policy == "team-policy@7";
  CHECK(altered);
  auto events = Must(agent->store()->Events("policed", "compaction"));
  REQUIRE_FALSE(events.empty());
  CHECK(events.back().payload_json.find("team-policy@7") != std::string::npos);
  CHECK(agent->config().policy.name == "none");  // the configuration is kept as given
  // The prediction knows an injected policy may compact at any build.
  CHECK(Must(agent->PredictCachedTokens()).input_tokens > 0);
}

TEST_CASE("a shared tokenizer is used by every agent given it, and by their forks",
          "[agent][services][tokenizer]") {
  std::unique_ptr<Tokenizer> shared = Must(MakeTokenizer(SpmSpec()));
  AgentConfig c;
  c.identity.id = "one";
  c.tokenizer = SpmSpec();
  AgentServices services;
  services.tokenizer = shared.get();
  auto one = Must(Agent::Create(c, services));
  c.identity.id = "two";
  auto two = Must(Agent::Create(c, services));
  CHECK(one->context().options().tokenizer == shared.get());
  CHECK(two->context().options().tokenizer == shared.get());
  MustOk(one->AppendUser("A task to split.").status());
  auto child = Must(one->Fork("A subtask."));
  CHECK(child->context().options().tokenizer == shared.get());

  // A fork of an agent that loaded its own tokenizer shares it too (no second load).
  c.identity.id = "loader";
  auto loader = Must(Agent::Create(c));
  auto loader_child = Must(loader->Fork("Another subtask."));
  CHECK(loader_child->context().options().tokenizer == loader->context().options().tokenizer);
}

TEST_CASE("a shared tokenizer that is not the configured one is refused naming both",
          "[agent][services][tokenizer]") {
  std::unique_ptr<Tokenizer> estimator = Must(MakeTokenizer("estimate:3"));
  AgentConfig c;
  c.identity.id = "mismatch";
  c.tokenizer = SpmSpec();
  AgentServices services;
  services.tokenizer = estimator.get();
  Status refused = Agent::Create(c, services).status();
  CHECK(refused.code() == StatusCode::kFailedPrecondition);
  CHECK(refused.message().find("AgentServices::tokenizer is estimate:3") != std::string::npos);
  CHECK(refused.message().find("\"" + SpmSpec() + "\" is spm:") != std::string::npos);
  c.tokenizer = "estimate:3";
  CHECK(Agent::Create(c, services).ok());
  c.tokenizer = "spm:/no/such/model";
  CHECK(Agent::Create(c, services).status().code() == StatusCode::kNotFound);
}

TEST_CASE("TokenizerNameOf gives the name MakeTokenizer's tokenizer has, without building it",
          "[agent][services][tokenizer]") {
  for (const std::string& spec : {SpmSpec(), std::string("estimate"), std::string("estimate:glm"),
                                  std::string("estimate:3.5")}) {
    CHECK(Must(agent_internal::TokenizerNameOf(spec)) == Must(MakeTokenizer(spec))->Name());
  }
  // A Hugging Face tokenizer.json (the 256 byte symbols of GPT-2's byte map, no merges): named
  // after its bytes, as MakeTokenizer names it.
  const std::string hf = TempPath("tokenizer.json");
  {
    auto utf8 = [](int cp) {
      std::string out;
      if (cp < 0x80) {
        out += static_cast<char>(cp);
      } else {
        out += static_cast<char>(0xC0 | (cp >> 6));
        out += static_cast<char>(0x80 | (cp & 0x3F));
      }
      return out;
    };
    nlohmann::json vocab = nlohmann::json::object();
    int extra = 0;
    for (int b = 0; b < 256; ++b) {
      const bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE;
      vocab[utf8(printable ? b : 256 + extra++)] = b;
    }
    const std::string json =
        nlohmann::json{
            {"version", "1.0"},
            {"added_tokens", nlohmann::json::array()},
            {"normalizer", nullptr},
            {"pre_tokenizer",
             {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"use_regex", true}}},
            {"model", {{"type", "BPE"}, {"vocab", vocab}, {"merges", nlohmann::json::array()}}}}
            .dump();
    std::FILE* f = std::fopen(hf.c_str(), "w");
    REQUIRE(f != nullptr);
    std::fputs(json.c_str(), f);
    std::fclose(f);
  }
  StatusOr<std::unique_ptr<Tokenizer>> made = MakeTokenizer("hf:" + hf);
  INFO(made.status().ToString());
  REQUIRE(made.ok());
  CHECK(Must(agent_internal::TokenizerNameOf("hf:" + hf)) == (*made)->Name());
}

TEST_CASE("an injected Clock gives the agent's records their times and request ids",
          "[agent][services]") {
  // Two agents on two fake clocks with the same seed: the same request ids, the fake's wall time
  // and durations (the scripted transport answers without the fake time moving).
  std::string request_ids[2];
  for (std::string& request_id : request_ids) {
    testing::ScriptedTransport transport;
    testing::FakeClock clock;
    clock.set_seed(27);
    AgentServices services;
    services.transport = &transport;
    services.clock = &clock;
    auto agent = Must(Agent::Create(SmallWindow("timed"), services));
    MustOk(agent->AppendUser("What time is it?").status());
    transport.Reply("Now.");
    Turn turn = Must(agent->Complete());
    CHECK(turn.record.started_unix_ms == testing::FakeClock::kStartUnixMillis);
    CHECK(turn.record.total_ms == 0);
    request_id = turn.record.request_id;
  }
  CHECK(request_ids[0] == request_ids[1]);
  // A third agent on the system clock draws another tag.
  testing::ScriptedTransport transport;
  AgentServices services;
  services.transport = &transport;
  auto agent = Must(Agent::Create(SmallWindow("timed"), services));
  MustOk(agent->AppendUser("What time is it?").status());
  transport.Reply("Now.");
  Turn turn = Must(agent->Complete());
  CHECK(turn.record.request_id != request_ids[0]);
  CHECK(turn.record.started_unix_ms > testing::FakeClock::kStartUnixMillis);
}

}  // namespace
}  // namespace strata
