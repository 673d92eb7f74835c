// TrimMessages: stateless trimming of a caller's message list, same invariants as a Context.
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "strata/agent.h"
#include "testing/context_testing.h"

namespace strata {
namespace {

std::string Conversation(int results) {
  nlohmann::json messages = nlohmann::json::array();
  messages.push_back({{"role", "user"}, {"content", "Find the bug."}});
  messages.push_back({{"role", "system"}, {"content", "You are a coding agent."}});  // moved first
  for (int i = 0; i < results; ++i) {
    const std::string id = "call_" + std::to_string(i);
    messages.push_back(
        {{"role", "assistant"},
         {"content", nullptr},
         {"tool_calls",
          {{{"id", id},
            {"type", "function"},
            {"function",
             {{"name", "cat"}, {"arguments", "{\"i\":" + std::to_string(i) + "}"}}}}}}});
    std::string output;
    for (int line = 0; line < 30; ++line)
      output += "file " + std::to_string(i) + " line " + std::to_string(line) + "\n";
    messages.push_back({{"role", "tool"}, {"tool_call_id", id}, {"content", output}});
  }
  messages.push_back({{"role", "user"}, {"content", "Now fix it."}});
  return messages.dump();
}

Budget Small(int64_t window) {
  Budget b;
  b.window = window;
  b.reserve_output = b.reserve_reasoning = b.reserve_headroom = 0;
  return b;
}

TEST_CASE("TrimMessages brings a long list within the budget, system first, pairs kept",
          "[agent][trim]") {
  auto trimmed = TrimMessages(Conversation(20), Small(3000));
  REQUIRE(trimmed.ok());
  REQUIRE(trimmed->report.has_value());
  CHECK(trimmed->input_tokens <= 3000);
  CHECK(trimmed->report->tokens_after < trimmed->report->tokens_before);
  auto messages = nlohmann::json::parse(trimmed->messages_json);
  CHECK(messages[0]["role"] == "system");
  CHECK(messages.back()["content"] == "Now fix it.");
  nlohmann::json body = {{"model", "m"}, {"messages", messages}};
  CHECK(testing::PairingError(body.dump()).empty());
}

TEST_CASE("TrimMessages returns a list that fits unchanged", "[agent][trim]") {
  auto trimmed = TrimMessages(Conversation(2), Small(100000));
  REQUIRE(trimmed.ok());
  CHECK_FALSE(trimmed->report.has_value());
  auto messages = nlohmann::json::parse(trimmed->messages_json);
  CHECK(messages.size() == 7);
  CHECK(messages[3]["content"].get<std::string>().find("file 0 line 29") != std::string::npos);
}

TEST_CASE("TrimMessages refuses malformed input naming the message", "[agent][trim]") {
  auto bad_role = TrimMessages(R"([{"role":"wizard","content":"x"}])", Small(1000));
  REQUIRE_FALSE(bad_role.ok());
  CHECK(bad_role.status().message().find("messages[0]") != std::string::npos);
  auto orphan = TrimMessages(
      R"([{"role":"user","content":"x"},{"role":"tool","tool_call_id":"nope","content":"y"}])",
      Small(1000));
  REQUIRE_FALSE(orphan.ok());
  CHECK(orphan.status().message().find("messages[1]") != std::string::npos);
  CHECK_FALSE(TrimMessages("{}", Small(1000)).ok());
  CHECK(TrimMessages(Conversation(1), Small(1000), TrimOptions{"nope"}).status().code() ==
        StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace strata
