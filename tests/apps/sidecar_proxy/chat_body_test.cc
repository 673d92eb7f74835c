#include "chat_body.h"

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace strata::sidecar {
namespace {

using json = nlohmann::json;

// What ParseChatBody gives, as one value: the messages put back into the body.
std::optional<json> Whole(std::string_view body) {
  std::optional<ChatBody> parsed = ParseChatBody(body);
  if (!parsed) return std::nullopt;
  json out = parsed->fields;
  if (parsed->split) {
    json messages = json::array();
    for (const auto& m : parsed->messages) messages.push_back(*m);
    out["messages"] = messages;
  }
  return out;
}

TEST_CASE("a chat body parses as nlohmann parses it whether its messages were seen or not",
          "[sidecar_proxy]") {
  const std::string system = R"({"role":"system","content":"be brief"})";
  const std::string user = R"({"role":"user","content":"caf\u00e9 [\"x\"] {y}"})";
  const std::string call =
      R"({"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function",)"
      R"("function":{"name":"run","arguments":"{\"cmd\":\"ls\"}"}}]})";
  const std::vector<std::string> bodies = {
      R"({"model":"m","messages":[)" + system + "," + user + "]}",
      R"({"model":"m","messages":[)" + system + "," + user + "," + call + R"(],"stream":true})",
      R"( { "messages" : [ )" + system + " , " + user + R"( ] , "tools" : [] } )",
      R"({"messages":[]})",
      R"({"m\u0065ssages":[)" + user + "]}",                                // an escaped key
      R"({"messages":[)" + system + R"(],"messages":[)" + user + "]}",      // given twice
      R"({"messages":{"role":"user"}})",                                    // not an array
      R"({"messages":[)" + system + R"(,{"role":"user","content":tru}]})",  // an element not JSON
      R"({"messages":[)" + system + " " + user + "]}",                      // no comma
      R"({"messages":[)" + system + "]} x",                                 // junk after the body
      R"({"messages":[)" + system + R"(],"n":01})",                         // a field not JSON
      R"([)" + system + "]",                                                // not an object
      R"({"messages":[)" + system + R"(,"\ud800"]})",                       // a lone surrogate
      "",
  };
  for (int pass = 0; pass < 2; ++pass) {  // the second pass finds the messages in the memo
    for (size_t i = 0; i < bodies.size(); ++i) {
      INFO("pass " << pass << ", body " << i << ": " << bodies[i]);
      const json expected = json::parse(bodies[i], nullptr, false);
      const std::optional<json> got = Whole(bodies[i]);
      REQUIRE(got.has_value() == !expected.is_discarded());
      if (got) CHECK(*got == expected);
    }
  }
}

TEST_CASE("a chat message seen before is not parsed again", "[sidecar_proxy]") {
  const std::string first = R"({"role":"user","content":"a message seen twice, 7f3a"})";
  const std::string second = R"({"role":"assistant","content":"and its answer, 7f3a"})";
  std::optional<ChatBody> a = ParseChatBody(R"({"messages":[)" + first + "]}");
  std::optional<ChatBody> b =
      ParseChatBody(R"({"model":"m","messages":[)" + first + "," + second + "]}");
  REQUIRE(a.has_value());
  REQUIRE(b.has_value());
  REQUIRE(a->split);
  REQUIRE(b->split);
  REQUIRE(b->messages.size() == 2);
  CHECK(b->messages[0].get() == a->messages[0].get());
  CHECK((*b->messages[1])["content"] == "and its answer, 7f3a");
  CHECK(b->fields == json::parse(R"({"model":"m","messages":[]})"));
}

}  // namespace
}  // namespace strata::sidecar
