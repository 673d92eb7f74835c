// Randomized (seeded) operation sequences checked against the rendering invariants:
// determinism (I6), append-only history (I7), valid tool-call pairing (I4), and refusal without
// change for bad input.
#include <catch2/catch.hpp>
#include <random>

#include "testing/context_testing.h"

namespace strata {
namespace {

using testing::NewContext;
using testing::PairingError;

struct Op {
  enum Kind { kUser, kAssistant, kToolResult, kBadToolResult, kVolatile, kUnicode } kind;
  std::string text;
  std::vector<ToolCall> calls;
  std::string call_id;
};

// Applies `op` to `context`; returns the status.
Status Apply(Context& context, const Op& op) {
  switch (op.kind) {
    case Op::kUser:
    case Op::kUnicode: return context.AppendUser(op.text).status();
    case Op::kAssistant: return context.AppendAssistant({op.text, "", op.calls}).status();
    case Op::kToolResult:
    case Op::kBadToolResult: return context.AppendToolResult({op.call_id, op.text, false}).status();
    case Op::kVolatile: return context.SetVolatile("now", op.text);
  }
  return InternalError("unreachable");
}

std::string RandomText(std::mt19937& rng) {
  static const std::vector<std::string> pieces = {
      "ls -la\n", "Traceback (most recent call last):\n", "  File \"a.py\", line 3, in f\n",
      "    x()\n", "ValueError: no\n", "é", "日本", "😀", "\"quoted\"", "\\", "\t", "\x01", "line\n",
      "same\n", "same\n", "same\n", "0123456789"};
  std::string out;
  const int count = static_cast<int>(rng() % 200);
  for (int i = 0; i < count; ++i) out += pieces[rng() % pieces.size()];
  return out;
}

std::vector<Op> RandomOps(std::mt19937& rng, const std::vector<std::string>& open, int step) {
  std::vector<Op> ops;
  const int roll = static_cast<int>(rng() % 100);
  if (!open.empty()) {
    if (roll < 80) {
      ops.push_back({Op::kToolResult, RandomText(rng), {}, open[rng() % open.size()]});
    } else if (roll < 90) {
      ops.push_back({Op::kBadToolResult, "x", {}, "nope_" + std::to_string(step)});
    } else {
      ops.push_back({Op::kUser, "interrupt", {}, ""});  // refused while calls are open
    }
    return ops;
  }
  if (roll < 25) {
    ops.push_back({Op::kUser, RandomText(rng), {}, ""});
  } else if (roll < 75) {
    Op op{Op::kAssistant, RandomText(rng), {}, ""};
    const int calls = static_cast<int>(rng() % 4);
    for (int i = 0; i < calls; ++i) {
      op.calls.push_back({"call_" + std::to_string(step) + "_" + std::to_string(i), "bash",
                          "{\"command\": \"echo " + std::to_string(rng() % 5) + "\"}"});
    }
    ops.push_back(op);
  } else if (roll < 85) {
    ops.push_back({Op::kVolatile, "t=" + std::to_string(step), {}, ""});
  } else if (roll < 92) {
    ops.push_back({Op::kUnicode, "bad \xF0\x28\x8C\x28", {}, ""});  // invalid UTF-8: refused
  } else {
    ops.push_back({Op::kBadToolResult, "x", {}, "ghost"});
  }
  return ops;
}

TEST_CASE("random operation sequences keep determinism, append-only history and pairing",
          "[core][property]") {
  for (uint32_t seed = 1; seed <= 40; ++seed) {
    CAPTURE(seed);
    std::mt19937 rng(seed);
    ContextOptions options;
    options.hygiene.max_segment_tokens = 64 + rng() % 200;  // exercise truncation too
    auto a = NewContext(options);
    auto b = NewContext(options);  // receives the same operations: must render the same bytes
    REQUIRE(a->SetSystemPrompt("You are an agent.").ok());
    REQUIRE(b->SetSystemPrompt("You are an agent.").ok());
    REQUIRE(a->SetTools(R"([{"type":"function","function":{"name":"bash"}}])").ok());
    REQUIRE(b->SetTools(R"([{"function":{"name":"bash"},"type":"function"}])").ok());

    std::string previous_body;
    size_t previous_history_end = 0;
    for (int step = 0; step < 120; ++step) {
      CAPTURE(step);
      for (const Op& op : RandomOps(rng, a->OpenToolCalls(), step)) {
        auto before = a->Build();
        const ContextSnapshot snapshot_before = a->Snapshot();
        Status sa = Apply(*a, op);
        Status sb = Apply(*b, op);
        CHECK(sa == sb);
        if (!sa.ok()) {
          // Refused whole: nothing changed.
          const ContextSnapshot after = a->Snapshot();
          REQUIRE(after.segments.size() == snapshot_before.segments.size());
          auto rebuilt = a->Build();
          REQUIRE(rebuilt.ok() == before.ok());
          if (before.ok()) CHECK(rebuilt->body == before->body);
        }
      }
      auto request = a->Build();
      auto twin = b->Build();
      REQUIRE(request.ok() == twin.ok());
      if (!request.ok()) {
        CHECK(request.status().code() == StatusCode::kFailedPrecondition);  // open calls
        CHECK_FALSE(a->OpenToolCalls().empty());
        continue;
      }
      CHECK(request->body == twin->body);
      CHECK(PairingError(request->body).empty());
      if (!previous_body.empty()) {
        // Append-only: the previous request up to its history end is a prefix of this one.
        CHECK(request->body.compare(0, previous_history_end, previous_body, 0,
                                    previous_history_end) == 0);
      }
      previous_body = request->body;
      previous_history_end = request->history_end_bytes;
    }
  }
}

}  // namespace
}  // namespace strata
