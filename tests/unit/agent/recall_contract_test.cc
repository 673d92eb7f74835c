// One context_recall contract (strata/compaction_policy.h RecallToolSchema()): the Agent offers
// the same tool a Context user offers, and answers a call with the page Context::AnswerRecall
// would give for the same arguments and the same share.
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>
#include <string>

#include "core/recall_page.h"
#include "strata/agent.h"
#include "strata/compaction_policy.h"
#include "testing/scripted_transport.h"
#include "testing/status_testing.h"

namespace strata {
namespace {

using testing::Must;
using testing::MustOk;
using testing::ScriptedTransport;

Response ToolCallReply(const std::string& id, const std::string& name,
                       const std::string& arguments) {
  Response r;
  r.tool_calls.push_back(ToolCall{id, name, arguments});
  r.finish_reason = "tool_calls";
  r.attempts = 1;
  return r;
}

AgentConfig RecallConfig() {
  AgentConfig c;
  c.identity.id = "recaller";
  c.tokenizer = "estimate";
  c.budget.window = 8000;
  c.hygiene.max_segment_tokens = 100;  // the long output below is truncated, kept for recall
  return c;
}

TEST_CASE("context_recall: the Agent offers RecallToolSchema(), byte for byte", "[agent][recall]") {
  ScriptedTransport transport;
  AgentServices services;
  services.transport = &transport;
  auto agent = Must(Agent::Create(RecallConfig(), services));
  MustOk(agent->AppendUser("go").status());
  const RequestPreview preview = Must(agent->PreviewRequest());
  const nlohmann::json body = nlohmann::json::parse(preview.body);
  REQUIRE(body["tools"].is_array());
  REQUIRE_FALSE(body["tools"].empty());
  CHECK(body["tools"][0].dump() == RecallToolSchema());
  CHECK(preview.body.find(RecallToolSchema()) != std::string::npos);
}

TEST_CASE("context_recall: the Agent answers a call with the contract's page", "[agent][recall]") {
  ScriptedTransport transport;
  AgentServices services;
  services.transport = &transport;
  auto agent = Must(Agent::Create(RecallConfig(), services));
  std::string big;
  for (int i = 0; i < 2000; ++i) big += "entry " + std::to_string(i) + "\n";
  MustOk(agent->AppendUser("go").status());
  transport.Respond(ToolCallReply("c1", "dump", "{}"));
  Must(agent->Complete());
  MustOk(agent->AppendToolResult({"c1", big, false}).status());
  std::string recall_id;
  for (const Segment& s : agent->context().Segments()) {
    if (s.tool_call_id == "c1") recall_id = s.recall_id;
  }
  REQUIRE_FALSE(recall_id.empty());

  transport.Respond(ToolCallReply(
      "c2", kRecallToolName, R"({"recall_id":")" + recall_id + R"(","offset":7,"max_tokens":20})"));
  Must(agent->Complete());
  MustOk(agent->DispatchToolCalls());
  std::string answered;
  for (const Segment& s : agent->context().Segments()) {
    if (s.tool_call_id == "c2") answered = s.content;
  }
  // What the contract's page is for these arguments, counted with the agent's tokenizer.
  const RecallPage page = Must(agent->Recall(recall_id, 7, 20));
  CHECK(page.tokens <= 20);
  CHECK(page.remaining_bytes > 0);
  CHECK(answered == internal::RecallAnswerText(page));
}

}  // namespace
}  // namespace strata
