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

TEST_CASE("TrimMessages names the input message of each kept one, and what a mask changed",
          "[agent][trim]") {
  TrimOptions options;
  options.policy = "last-n";  // masks all but the last five tool results
  auto trimmed = TrimMessages(Conversation(8), Small(100000), options);
  REQUIRE(trimmed.ok());
  const auto input = nlohmann::json::parse(Conversation(8));
  const auto rendered = nlohmann::json::parse(trimmed->messages_json);
  REQUIRE(trimmed->kept.size() == rendered.size());
  CHECK(trimmed->kept[0].input_index == 1);  // the system message, moved first
  size_t masked = 0;
  for (size_t k = 0; k < trimmed->kept.size(); ++k) {
    const TrimmedMessage& m = trimmed->kept[k];
    REQUIRE(m.input_index >= 0);
    const auto& original = input[static_cast<size_t>(m.input_index)];
    CHECK(rendered[k]["role"] == original["role"]);
    if (m.masked_content) {
      ++masked;
      CHECK(original["role"] == "tool");
      CHECK(rendered[k]["content"] == *m.masked_content);
      CHECK(*m.masked_content != original["content"]);
    } else if (original["content"].is_string()) {
      CHECK(rendered[k]["content"] == original["content"]);
    }
  }
  CHECK(masked == 3);  // 8 tool results, the last 5 kept
}

TEST_CASE("TrimMessages counts content-part lists as their text, other parts as their JSON",
          "[agent][trim]") {
  const std::string parts = R"([{"role":"user","content":[{"type":"text","text":"Look at "},)"
                            R"({"type":"image_url","image_url":{"url":"x.png"}},)"
                            R"({"type":"text","text":" this."}]}])";
  const std::string flat = R"([{"role":"user","content":"Look at {\"image_url\":{\"url\":\"x.png\"},\"type\":\"image_url\"} this."}])";
  TrimOptions options;
  options.chat_template = "";
  auto from_parts = TrimMessages(parts, Small(1000), options);
  auto from_text = TrimMessages(flat, Small(1000), options);
  REQUIRE(from_parts.ok());
  REQUIRE(from_text.ok());
  CHECK(from_parts->input_tokens == from_text->input_tokens);
  CHECK(nlohmann::json::parse(from_parts->messages_json) ==
        nlohmann::json::parse(from_text->messages_json));
  auto bad_part = TrimMessages(R"([{"role":"user","content":[7]}])", Small(1000), options);
  REQUIRE_FALSE(bad_part.ok());
  CHECK(bad_part.status().message().find("messages[0].content") != std::string::npos);
}

TEST_CASE("TrimMessages counts with the caller's tokenizer when one is given", "[agent][trim]") {
  // Counts every text as 1,000 tokens: the conversation cannot fit 3,000 unless trimmed hard.
  class Heavy final : public Tokenizer {
   public:
    std::string Name() const override { return "heavy"; }
    bool IsEstimate() const override { return true; }
    std::vector<int32_t> Encode(std::string_view) const override {
      return std::vector<int32_t>(1000, 0);
    }
    size_t Count(std::string_view) const override { return 1000; }
  } heavy;
  TrimOptions options;
  options.chat_template = "";
  auto by_spec = TrimMessages(Conversation(2), Small(100000), options);
  options.counting_tokenizer = &heavy;
  auto by_caller = TrimMessages(Conversation(2), Small(100000), options);
  REQUIRE(by_spec.ok());
  REQUIRE(by_caller.ok());
  CHECK(by_caller->input_tokens >= 7000);  // seven messages of 1,000 tokens each at least
  CHECK(by_spec->input_tokens < by_caller->input_tokens);
}

}  // namespace
}  // namespace strata
