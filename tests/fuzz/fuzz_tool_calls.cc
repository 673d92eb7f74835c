// Tool-call argument assembly from a stream: the input is a sequence of fragments separated by 0xFF;
// each fragment's first byte chooses the tool call's index (0-3) and whether the chunk also carries an
// id and a name; the rest is an `arguments` fragment, sent as a JSON string in a
// chat.completion.chunk delta. The assembled arguments of each call must be exactly the
// concatenation of its fragments, byte for byte (strata never re-serializes arguments).
#include <map>
#include <nlohmann/json.hpp>
#include <string>

#include "fuzz_util.h"
#include "transport/chat_parser.h"

namespace ti = strata::transport_internal;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  ti::ChatAssembler assembler;
  std::map<int, std::string> expected;
  for (std::string_view fragment : strata::fuzz::Split(strata::fuzz::AsText(data, size), "\xff")) {
    if (fragment.empty()) continue;
    const int index = static_cast<unsigned char>(fragment[0]) % 4;
    const bool named = (static_cast<unsigned char>(fragment[0]) & 0x10) != 0;
    const std::string arguments(fragment.substr(1));
    nlohmann::json call = {{"index", index}, {"function", {{"arguments", arguments}}}};
    if (named) {
      call["id"] = "call_" + std::to_string(index);
      call["type"] = "function";
      call["function"]["name"] = "tool" + std::to_string(index);
    }
    nlohmann::json chunk = {
        {"object", "chat.completion.chunk"},
        {"choices", {{{"index", 0}, {"delta", {{"tool_calls", {call}}}}}}}};
    // Fragments that are not valid UTF-8 cannot travel in JSON; skip them as a server would fail to.
    std::string payload;
    try {
      payload = chunk.dump();
    } catch (const nlohmann::json::exception&) {
      continue;
    }
    strata::Status s = assembler.AddJson(payload);
    STRATA_FUZZ_CHECK(s.ok(), "a well-formed tool-call chunk was refused: " + s.ToString());
    expected[index] += arguments;
  }
  strata::Response response;
  assembler.Finish(&response);
  // One call per index seen, in index order.
  STRATA_FUZZ_CHECK(response.tool_calls.size() == expected.size(), "tool calls lost or invented");
  size_t i = 0;
  for (const auto& [index, arguments] : expected) {
    STRATA_FUZZ_CHECK(response.tool_calls[i++].arguments == arguments,
                      "assembled arguments of call " + std::to_string(index) +
                          " differ from the streamed fragments");
  }
  return 0;
}
