// The model's tool-call arguments as the agent keeps them (agent/tool_arguments.h).
#include "agent/tool_arguments.h"

#include <catch2/catch.hpp>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "strata/chat_template.h"
#include "testing/status_testing.h"

namespace strata {
namespace {

using agent_internal::KeepableToolCalls;
using testing::Must;

TEST_CASE("tool calls whose arguments are an object or empty are kept byte for byte",
          "[agent][tool_arguments]") {
  const std::vector<ToolCall> calls = {{"c1", "read", "{\"path\": \"a.txt\"}"},
                                       {"c2", "list", ""},
                                       {"c3", "read", "  {\"path\":\"b\"}  "}};
  const std::vector<ToolCall> kept = KeepableToolCalls(calls);
  REQUIRE(kept.size() == 3);
  for (size_t i = 0; i < calls.size(); ++i) CHECK(kept[i].arguments == calls[i].arguments);
}

TEST_CASE("arguments that are not a JSON object are kept whole under unparsed_arguments",
          "[agent][tool_arguments]") {
  std::string cut = "x";
  for (int i = 0; i < 150; ++i) cut += "\xC3\xA9";  // non-ASCII, not JSON
  const std::vector<ToolCall> calls = {{"c1", "read", cut},
                                       {"c2", "read", "{\"path\": \"a"},  // cut-off JSON
                                       {"c3", "read", "[1, 2]"},          // JSON, not an object
                                       {"c4", "read", "bad \xFF byte"}};  // invalid UTF-8
  const std::vector<ToolCall> kept = KeepableToolCalls(calls);
  REQUIRE(kept.size() == 4);
  for (size_t i = 0; i < 3; ++i) {
    const nlohmann::json parsed = nlohmann::json::parse(kept[i].arguments);
    REQUIRE(parsed.is_object());
    CHECK(parsed.size() == 1);
    CHECK(parsed["unparsed_arguments"] == calls[i].arguments);
    CHECK(kept[i].id == calls[i].id);
    CHECK(kept[i].name == calls[i].name);
  }
  CHECK(nlohmann::json::parse(kept[3].arguments)["unparsed_arguments"] ==
        "bad \xEF\xBF\xBD byte");
  CHECK(agent_internal::UnparsedArguments(kept[0].arguments) == cut);
  CHECK_FALSE(agent_internal::UnparsedArguments(calls[0].arguments).has_value());
  CHECK_FALSE(agent_internal::UnparsedArguments("{\"path\": \"a\"}").has_value());
}

TEST_CASE("kept arguments render with the chat templates that refuse the model's text",
          "[agent][tool_arguments]") {
  const std::string cut = "x\xC3\xA9\xC3\xA9 not json";
  for (const std::string name : {"glm-5.3", "generic"}) {
    INFO(name);
    std::unique_ptr<ChatTemplate> tmpl = Must(MakeChatTemplate(name));
    auto request = [](const std::string& arguments) {
      nlohmann::json call = {{"id", "c1"},
                             {"type", "function"},
                             {"function", {{"name", "read"}, {"arguments", arguments}}}};
      return nlohmann::json{
          {"messages",
           {{{"role", "user"}, {"content", "go"}},
            {{"role", "assistant"}, {"content", ""}, {"tool_calls", {call}}},
            {{"role", "tool"}, {"tool_call_id", "c1"}, {"content", "error"}}}}}
          .dump();
    };
    CHECK_FALSE(tmpl->Render(request(cut)).ok());
    const std::string kept = KeepableToolCalls({{"c1", "read", cut}})[0].arguments;
    CHECK(tmpl->Render(request(kept)).ok());
  }
}

}  // namespace
}  // namespace strata
