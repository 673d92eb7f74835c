#include "delta_joiner.h"

#include <catch2/catch.hpp>
#include <string>
#include <vector>

namespace strata::sidecar {
namespace {

StreamDelta Fragment(StreamDelta::Kind kind, std::string text, bool more_follows,
                     int tool_call_index = 0, std::string id = "", std::string name = "") {
  StreamDelta d;
  d.kind = kind;
  d.text = std::move(text);
  d.more_follows = more_follows;
  d.tool_call_index = tool_call_index;
  d.tool_call_id = std::move(id);
  d.tool_name = std::move(name);
  return d;
}

constexpr auto kContent = StreamDelta::Kind::kContent;
constexpr auto kReasoning = StreamDelta::Kind::kReasoning;
constexpr auto kArguments = StreamDelta::Kind::kToolCallArguments;

TEST_CASE(
    "fragments that arrive together are joined by part, in order, and none is held past its pass",
    "[sidecar]") {
  DeltaJoiner joiner;
  std::vector<StreamDelta> out;
  auto emit = [&](const StreamDelta& d) { out.push_back(d); };

  // One pass: reasoning, content, then two tool calls' arguments.
  joiner.Add(Fragment(kReasoning, "th", true), emit);
  joiner.Add(Fragment(kReasoning, "ink", true), emit);
  CHECK(out.empty());  // held: more follows
  joiner.Add(Fragment(kContent, "a", true), emit);
  REQUIRE(out.size() == 1);  // another part: the reasoning goes on
  CHECK(out[0].kind == kReasoning);
  CHECK(out[0].text == "think");
  CHECK_FALSE(out[0].more_follows);
  joiner.Add(Fragment(kContent, "b", true), emit);
  joiner.Add(Fragment(kArguments, "{\"p\"", true, 0, "c1", "read"), emit);
  joiner.Add(Fragment(kArguments, ":1}", true, 0, "c1", "read"), emit);
  joiner.Add(Fragment(kArguments, "{}", false, 1, "c2", "ls"), emit);  // the pass's last
  REQUIRE(out.size() == 4);
  CHECK(out[1].kind == kContent);
  CHECK(out[1].text == "ab");
  CHECK(out[2].kind == kArguments);
  CHECK(out[2].text == "{\"p\":1}");
  CHECK(out[2].tool_call_index == 0);
  CHECK(out[2].tool_call_id == "c1");
  CHECK(out[2].tool_name == "read");
  CHECK(out[3].tool_call_index == 1);  // another call is another part
  CHECK(out[3].text == "{}");

  // A call's id and name known only from a later fragment are kept on the joined one.
  joiner.Add(Fragment(kArguments, "[", true, 2), emit);
  joiner.Add(Fragment(kArguments, "]", false, 2, "c3", "grep"), emit);
  REQUIRE(out.size() == 5);
  CHECK(out[4].text == "[]");
  CHECK(out[4].tool_call_id == "c3");
  CHECK(out[4].tool_name == "grep");

  // Fragments that did not arrive together are not joined.
  joiner.Add(Fragment(kContent, "x", false), emit);
  joiner.Add(Fragment(kContent, "y", false), emit);
  REQUIRE(out.size() == 7);
  CHECK(out[5].text == "x");
  CHECK(out[6].text == "y");

  // Flush hands on what a transport left held, once.
  joiner.Add(Fragment(kContent, "z", true), emit);
  CHECK(out.size() == 7);
  joiner.Flush(emit);
  joiner.Flush(emit);
  REQUIRE(out.size() == 8);
  CHECK(out[7].text == "z");
  CHECK_FALSE(out[7].more_follows);
}

}  // namespace
}  // namespace strata::sidecar
