// Whether the request bodies a replay builds pair tool calls and results (private to
// strata::replay; EvaluateTrace's pairing_errors):
//
//   replay_internal::PairingChecker pairing;
//   for (each BuiltRequest `built` of one context, in order) ok = pairing.Check(built);
//
// A body pairs when each tool result answers a call of the assistant message before it (or of
// the results since), and no call is left unanswered. Successive bodies of one context repeat the
// previous body's beginning: a body is checked from the last message that ends inside the bytes
// it shares with the body checked before it (BuiltRequest::unchanged_bytes, when that body is
// the render before it), so a request costs its new messages, not all of them.
//
// Thread safety: one checker per context (not thread-safe).
#ifndef STRATA_SRC_REPLAY_PAIRING_H_
#define STRATA_SRC_REPLAY_PAIRING_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "core/json_scan.h"
#include "strata/context.h"

namespace strata::replay_internal {

class PairingChecker {
 public:
  // Whether `built.body` pairs its calls and results (false as well when the light scan does not
  // take it apart, internal::SplitMemberArray, or a message is not JSON).
  bool Check(const BuiltRequest& built);

 private:
  struct State {
    std::vector<std::string> open;  // calls not answered yet
    bool after_calls = false;       // the last message that is not a result made calls
  };
  bool Reset();

  uint64_t serial_ = 0;             // the render last checked
  internal::JsonArraySplit split_;  // where its messages are
  // The state after each of its messages, as far as they were checked (a failing message and
  // those after it have none).
  std::vector<State> states_;
};

}  // namespace strata::replay_internal

#endif  // STRATA_SRC_REPLAY_PAIRING_H_
