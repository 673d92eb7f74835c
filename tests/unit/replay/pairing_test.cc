// The pairing of tool calls and results in the request bodies a replay builds
// (replay_internal::PairingChecker, sdk/src/replay/pairing.h).
#include "replay/pairing.h"

#include <catch2/catch.hpp>
#include <string>
#include <vector>

namespace strata {
namespace {

const std::string kCall =
    R"({"role":"assistant","content":"","tool_calls":[{"id":"c1","type":"function","function":{"name":"read","arguments":"{}"}}]})";
const std::string kResult = R"({"role":"tool","tool_call_id":"c1","content":"ok"})";
const std::string kOther = R"({"role":"tool","tool_call_id":"c9","content":"ok"})";
const std::string kUser = R"({"role":"user","content":"go"})";

// A body of `messages`, rendered with a serial, continuing the render `previous` for `unchanged`
// bytes.
BuiltRequest Body(const std::vector<std::string>& messages, uint64_t serial, uint64_t previous = 0,
                  size_t unchanged = 0) {
  BuiltRequest built;
  built.body = R"({"model":"m","tools":[{"type":"function"}],"messages":[)";
  for (size_t i = 0; i < messages.size(); ++i) built.body += (i ? "," : "") + messages[i];
  built.body += R"(],"stream":false})";
  built.render_serial = serial;
  built.previous_render_serial = previous;
  built.unchanged_bytes = unchanged;
  return built;
}

TEST_CASE("a body pairs when every result answers a call before it and none is left open",
          "[replay]") {
  CHECK(replay_internal::PairingChecker().Check(Body({kUser, kCall, kResult}, 1)));
  CHECK_FALSE(replay_internal::PairingChecker().Check(Body({kUser, kCall}, 1)));    // unanswered
  CHECK_FALSE(replay_internal::PairingChecker().Check(Body({kUser, kResult}, 1)));  // no call
  CHECK_FALSE(replay_internal::PairingChecker().Check(Body({kUser, kCall, kOther}, 1)));
  CHECK_FALSE(replay_internal::PairingChecker().Check(Body({kUser, kCall, kUser, kResult}, 1)));
  BuiltRequest not_json = Body({kUser}, 1);
  not_json.body = "not json";
  CHECK_FALSE(replay_internal::PairingChecker().Check(not_json));
  BuiltRequest no_messages = Body({kUser}, 1);
  no_messages.body = R"({"model":"m"})";
  CHECK_FALSE(replay_internal::PairingChecker().Check(no_messages));
}

TEST_CASE("a body that continues the one checked before is checked from its first new message",
          "[replay]") {
  replay_internal::PairingChecker pairing;
  const BuiltRequest first = Body({kUser, kCall}, 10);
  CHECK_FALSE(pairing.Check(first));  // the call is not answered yet
  // The next render keeps the first one's messages and answers the call.
  const BuiltRequest second = Body({kUser, kCall, kResult}, 11, 10, first.body.rfind(']'));
  CHECK(pairing.Check(second));
  // A body that claims to keep its predecessor's bytes is not read there again: a call doctored
  // inside them (its id no longer the result's) is taken as the state it had.
  std::string doctored_call = kCall;
  doctored_call.replace(doctored_call.find("c1"), 2, "c2");
  const size_t kept = second.body.rfind(']');
  const BuiltRequest doctored = Body({kUser, doctored_call, kResult, kUser}, 12, 11, kept);
  CHECK(pairing.Check(doctored));
  CHECK_FALSE(replay_internal::PairingChecker().Check(doctored));  // read whole: c1 has no call
  // Not the render checked last (another serial): read whole.
  const BuiltRequest other = Body({kUser, doctored_call, kResult, kUser}, 20, 99, kept);
  CHECK_FALSE(pairing.Check(other));
  // An edit inside the kept messages: checked from the message it cuts into.
  const BuiltRequest base = Body({kUser, kCall, kResult}, 30);
  CHECK(pairing.Check(base));
  const BuiltRequest edited = Body({kUser, kCall, kOther}, 31, 30, base.body.find(kResult));
  CHECK_FALSE(pairing.Check(edited));
}

}  // namespace
}  // namespace strata
