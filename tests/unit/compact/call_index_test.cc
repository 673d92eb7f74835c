// compact_internal::CallIndex against the plain definition it replaces: a map of every call by
// id (the last holder wins) and, walking the results from the end, a set of the calls' tool names
// and arguments seen after each. Random histories repeat ids, tools and arguments, answer calls
// that do not exist, and answer calls before they are made.
#include <catch2/catch.hpp>

#include <map>
#include <random>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "compact/call_index.h"
#include "compact/segment_facts.h"

namespace strata {
namespace {

struct Reference {
  std::vector<const ToolCall*> call_of;
  std::vector<bool> superseded;
};

Reference Plainly(const std::vector<const Segment*>& h) {
  std::map<std::string, const ToolCall*> calls;
  for (const Segment* s : h) {
    for (const ToolCall& call : s->tool_calls) calls[call.id] = &call;
  }
  Reference out;
  out.call_of.assign(h.size(), nullptr);
  out.superseded.assign(h.size(), false);
  for (size_t i = 0; i < h.size(); ++i) {
    if (h[i]->kind != SegmentKind::kToolResult && h[i]->kind != SegmentKind::kErrorLog) continue;
    auto it = calls.find(h[i]->tool_call_id);
    if (it != calls.end()) out.call_of[i] = it->second;
  }
  std::set<std::pair<std::string, std::string>> later;
  for (size_t k = h.size(); k-- > 0;) {
    if (out.call_of[k] == nullptr) continue;
    out.superseded[k] = !later.emplace(out.call_of[k]->name, out.call_of[k]->arguments).second;
  }
  return out;
}

TEST_CASE("the call index finds each result's call and the superseded results as a map would",
          "[compact][call_index]") {
  std::mt19937 random(20261207);
  auto pick = [&](int n) { return static_cast<int>(random() % static_cast<unsigned>(n)); };
  for (int round = 0; round < 300; ++round) {
    std::vector<Segment> segments(static_cast<size_t>(1 + pick(60)));
    for (size_t i = 0; i < segments.size(); ++i) {
      Segment& s = segments[i];
      s.id = "seg-" + std::to_string(i);
      const int kind = pick(4);
      if (kind == 0) {
        s.kind = SegmentKind::kUser;
        s.content = "do it";
      } else if (kind == 1) {
        s.kind = SegmentKind::kToolCall;
        for (int c = 0, n = 1 + pick(3); c < n; ++c) {
          // Few ids, tools and arguments: repeats within a history are the point.
          s.tool_calls.push_back({"call_" + std::to_string(pick(12)), "tool_" + std::to_string(pick(3)),
                                  "{\"path\":\"f" + std::to_string(pick(4)) + ".py\"}"});
        }
      } else {
        s.kind = kind == 2 ? SegmentKind::kToolResult : SegmentKind::kErrorLog;
        s.tool_call_id = "call_" + std::to_string(pick(14));  // 12 and 13 are never called
        s.content = "output";
      }
    }
    CompactionInput in;
    for (const Segment& s : segments) in.history.push_back(&s);
    compact_internal::SegmentFactsCache cache;
    compact_internal::SegmentFacts facts = cache.Begin(in);
    const compact_internal::CallIndex index(in, facts);
    const Reference expected = Plainly(in.history);
    const std::vector<bool> superseded = index.Superseded();
    for (size_t i = 0; i < segments.size(); ++i) {
      INFO("round " << round << ", segment " << i);
      if (segments[i].kind == SegmentKind::kToolResult || segments[i].kind == SegmentKind::kErrorLog)
        CHECK(index.Of(i) == expected.call_of[i]);
      CHECK(superseded[i] == expected.superseded[i]);
    }
  }
}

}  // namespace
}  // namespace strata
