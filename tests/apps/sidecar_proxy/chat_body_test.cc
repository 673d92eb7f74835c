#include "chat_body.h"

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "testing/status_testing.h"

namespace strata::sidecar {
namespace {

using json = nlohmann::json;

std::string Describe(const ChatMessage& m) {
  std::string calls;
  for (const ToolCall& c : m.tool_calls)
    calls += "[" + c.id + "|" + c.name + "|" + c.arguments + "]";
  return m.role + "|" + m.content + "|" + m.reasoning + "|" + m.tool_call_id + "|" + m.digest +
         "|" + calls;
}

// ParseChatBody against nlohmann's parse of the whole body: the fields are the body without its
// messages, and each message is what ReadChatMessage reads of nlohmann's parse of it, or that
// parse when ReadChatMessage refuses it.
void CheckAsWholeParse(const std::string& body) {
  const json expected = json::parse(body, nullptr, false);
  std::optional<ChatBody> parsed = ParseChatBody(body);
  REQUIRE(parsed.has_value() == !expected.is_discarded());
  if (!parsed) return;
  if (!parsed->split) {
    CHECK(parsed->fields == expected);
    return;
  }
  json fields = expected;
  fields["messages"] = json::array();
  if (parsed->tools != nullptr) {
    CHECK(parsed->tools->value == expected["tools"]);
    REQUIRE(parsed->tools->dumps.size() == expected["tools"].size());
    for (size_t i = 0; i < expected["tools"].size(); ++i) {
      CHECK(parsed->tools->dumps[i] == expected["tools"][i].dump());
    }
    fields["tools"] = json::array();
  }
  CHECK(parsed->fields == fields);
  const json& messages = expected["messages"];
  REQUIRE(parsed->messages.size() == messages.size());
  for (size_t i = 0; i < messages.size(); ++i) {
    INFO("message " << i);
    const ChatElement& got = *parsed->messages[i];
    StatusOr<ChatMessage> read = ReadChatMessage(messages[i], 0);
    REQUIRE((got.read != nullptr) == read.ok());
    if (read.ok()) {
      CHECK(Describe(*got.read) == Describe(*read));
      CHECK(got.value.is_null());
    } else {
      CHECK(got.value == messages[i]);
    }
  }
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
      R"({"messages":[)" + user + R"(,{"role":"robot","content":"x"}]})",   // refused when read
      R"({"messages":[)" + user + R"(,{"role":"tool","content":"x"}]})",    // no tool_call_id
      R"({"tools":[{"type":"function","function":{"name":"f"}}],"messages":[)" + user + "]}",
      R"({"messages":[)" + user + R"(],"tools" : [ ] })",            // empty tools
      R"({"messages":[)" + user + R"(],"tools":null})",              // tools not an array
      R"({"messages":[)" + user + R"(],"tools":[1,],"n":1})",        // tools not JSON
      R"({"messages":[)" + user + R"(],"tools":[],"tools":[2]})",    // tools twice
      R"({"messages":[)" + user + R"(],"tools":[1],"tools":null})",  // an array, then null
      "",
  };
  for (int pass = 0; pass < 2; ++pass) {  // the second pass finds the messages in the memo
    for (size_t i = 0; i < bodies.size(); ++i) {
      INFO("pass " << pass << ", body " << i << ": " << bodies[i]);
      CheckAsWholeParse(bodies[i]);
    }
  }
}

TEST_CASE("a chat message seen before is not parsed or read again", "[sidecar_proxy]") {
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
  REQUIRE(b->messages[1]->read != nullptr);
  CHECK(b->messages[1]->read->content == "and its answer, 7f3a");
  CHECK(b->messages[1]->read->digest == MessageDigest(*b->messages[1]->read));
  CHECK(b->fields == json::parse(R"({"model":"m","messages":[]})"));
  // A message that is refused when read is not kept: the next request parses it again.
  const std::string body = R"({"messages":[{"role":"robot","content":"7f3a"}]})";
  std::optional<ChatBody> c = ParseChatBody(body);
  std::optional<ChatBody> d = ParseChatBody(body);
  REQUIRE(c.has_value());
  REQUIRE(d.has_value());
  REQUIRE(c->messages.size() == 1);
  REQUIRE(d->messages.size() == 1);
  CHECK(c->messages[0]->read == nullptr);
  CHECK(c->messages[0].get() != d->messages[0].get());
}

// The messages of `parsed` against what ReadChatMessage reads of nlohmann's parse of `body`.
void CheckMessages(const ChatBody& parsed, const std::string& body) {
  const json messages = json::parse(body)["messages"];
  REQUIRE(parsed.split);
  REQUIRE(parsed.messages.size() == messages.size());
  for (size_t i = 0; i < messages.size(); ++i) {
    INFO("message " << i);
    REQUIRE(parsed.messages[i]->read != nullptr);
    CHECK(Describe(*parsed.messages[i]->read) ==
          Describe(strata::testing::Must(ReadChatMessage(messages[i], 0))));
  }
}

TEST_CASE("a body of the same conversation is read from where it differs from the previous one",
          "[sidecar_proxy]") {
  auto message = [](const std::string& role, const std::string& text) {
    return json{{"role", role}, {"content", text + " (base test 41c7)"}}.dump();
  };
  const std::vector<std::string> first = {message("system", "be brief"), message("user", "one"),
                                          message("assistant", "two"), message("user", "three")};
  auto body_of = [](const std::vector<std::string>& messages) {
    std::string body = R"({"model":"m","messages":[)";
    for (size_t i = 0; i < messages.size(); ++i) body += (i > 0 ? "," : "") + messages[i];
    return body + R"(],"stream":false})";
  };
  const std::string body1 = body_of(first);
  std::optional<ChatBody> a = ParseChatBody(body1, nullptr, /*keep_base=*/true);
  REQUIRE(a.has_value());
  REQUIRE(a->base != nullptr);
  CHECK(a->reused == 0);
  CHECK(ParseChatBody(body1)->base == nullptr);  // only when asked for
  // The conversation goes on: the messages before the last shared one are the previous body's.
  std::vector<std::string> longer = first;
  longer.push_back(message("assistant", "four"));
  longer.push_back(message("user", "five"));
  const std::string body2 = body_of(longer);
  std::optional<ChatBody> b = ParseChatBody(body2, a->base, true);
  REQUIRE(b.has_value());
  CHECK(b->reused >= 3);
  for (size_t i = 0; i < b->reused; ++i) CHECK(b->messages[i].get() == a->messages[i].get());
  CheckMessages(*b, body2);
  CHECK(b->fields == json::parse(R"({"model":"m","messages":[],"stream":false})"));
  // An edit in the middle: only the messages before it come from the previous body.
  std::vector<std::string> edited = longer;
  edited[1] = message("user", "one, edited");
  const std::string body3 = body_of(edited);
  std::optional<ChatBody> c = ParseChatBody(body3, b->base, true);
  REQUIRE(c.has_value());
  CHECK(c->reused == 1);
  CheckMessages(*c, body3);
  // A body that shares nothing but its first bytes, and one with other fields first.
  const std::string other = R"({"model":"m","messages":[)" + message("user", "else") + "]}";
  std::optional<ChatBody> d = ParseChatBody(other, c->base, true);
  REQUIRE(d.has_value());
  CHECK(d->reused == 0);
  CheckMessages(*d, other);
  const std::string reordered =
      R"({"stream":false,"messages":[)" + first[0] + "," + first[1] + "]}";
  std::optional<ChatBody> e = ParseChatBody(reordered, a->base, true);
  REQUIRE(e.has_value());
  CHECK(e->reused == 0);
  CheckMessages(*e, reordered);

  // A base held by nothing else lends its text's memory to the next one: the shared bytes stay
  // where they are and only what differs is written (here the last message, edited to the same
  // length). One still held elsewhere is copied and left as it was.
  std::shared_ptr<const ChatBodyBase> held = std::move(c->base);
  c.reset();
  REQUIRE(held.use_count() == 1);
  const char* memory = ChatBodyBaseText(*held).data();
  std::vector<std::string> last_edited = edited;
  last_edited.back() = message("user", "fivE");
  const std::string body4 = body_of(last_edited);
  REQUIRE(body4.size() == body3.size());
  std::optional<ChatBody> f = ParseChatBody(body4, std::move(held), true);
  REQUIRE(f.has_value());
  REQUIRE(f->base != nullptr);
  CHECK(ChatBodyBaseText(*f->base) == body4);
  CHECK(ChatBodyBaseText(*f->base).data() == memory);
  CHECK(f->reused == last_edited.size() - 1);
  CheckMessages(*f, body4);
  std::shared_ptr<const ChatBodyBase> shared = f->base;
  std::optional<ChatBody> g = ParseChatBody(body3, shared, true);
  REQUIRE(g.has_value());
  CHECK(ChatBodyBaseText(*shared) == body4);
  CHECK(ChatBodyBaseText(*g->base) == body3);
  CheckMessages(*g, body3);
}

}  // namespace
}  // namespace strata::sidecar
