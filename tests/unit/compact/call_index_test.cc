// compact_internal::CallIndex against the plain definition it replaces: a map of every call by
// id (the last holder wins) and, walking the results from the end, a set of the calls' tool names
// and arguments seen after each (and one of those answered after each by a result that is not an
// error log). Random histories repeat ids, tools and arguments, answer calls
// that do not exist, and answer calls before they are made; built whole, and plan after plan with
// the tables kept while the history grows, changes in place, shrinks and moves.
#include "compact/call_index.h"

#include <catch2/catch.hpp>
#include <deque>
#include <functional>
#include <map>
#include <random>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "compact/segment_facts.h"

namespace strata {
namespace {

struct Reference {
  std::vector<const ToolCall*> call_of;
  std::vector<uint8_t> superseded;
  std::vector<uint8_t> answered_later;
};

Reference Plainly(const std::vector<const Segment*>& h) {
  std::map<std::string, const ToolCall*> calls;
  for (const Segment* s : h) {
    for (const ToolCall& call : s->tool_calls) calls[call.id] = &call;
  }
  Reference out;
  out.call_of.assign(h.size(), nullptr);
  out.superseded.assign(h.size(), 0);
  out.answered_later.assign(h.size(), 0);
  for (size_t i = 0; i < h.size(); ++i) {
    if (h[i]->kind != SegmentKind::kToolResult && h[i]->kind != SegmentKind::kErrorLog) continue;
    auto it = calls.find(h[i]->tool_call_id);
    if (it != calls.end()) out.call_of[i] = it->second;
  }
  std::set<std::pair<std::string, std::string>> later, answered;
  for (size_t k = h.size(); k-- > 0;) {
    if (out.call_of[k] == nullptr) continue;
    const std::pair<std::string, std::string> key(out.call_of[k]->name, out.call_of[k]->arguments);
    out.superseded[k] = !later.emplace(key).second;
    out.answered_later[k] = answered.count(key) > 0;
    if (h[k]->kind != SegmentKind::kErrorLog) answered.insert(key);
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
    const std::vector<uint8_t>& superseded = index.Superseded();
    for (size_t i = 0; i < segments.size(); ++i) {
      INFO("round " << round << ", segment " << i);
      if (segments[i].kind == SegmentKind::kToolResult || segments[i].kind == SegmentKind::kErrorLog)
        CHECK(index.Of(i) == expected.call_of[i]);
      CHECK(superseded[i] == expected.superseded[i]);
      CHECK(index.AnsweredLater()[i] == expected.answered_later[i]);
    }
  }
}

// A fingerprint of what the index reads of a segment (the context's covers content and calls).
uint64_t FingerprintOf(const Segment& s) {
  std::string text = s.content;
  for (const ToolCall& c : s.tool_calls) text += "|" + c.id + "|" + c.name + "|" + c.arguments;
  return std::hash<std::string>()(text);
}

TEST_CASE("the call index kept from plan to plan equals one built whole as the history changes",
          "[compact][call_index]") {
  std::mt19937 random(7);
  auto pick = [&](int n) { return static_cast<int>(random() % static_cast<unsigned>(n)); };
  int made = 0;
  std::deque<Segment> history;
  std::vector<std::string> pending;  // ids results answered before any call had them
  // A call id: mostly fresh; sometimes one a call in the history holds, or one a result already
  // answered.
  auto call_id = [&](int c) -> std::string {
    if (!pending.empty() && pick(3) == 0) {
      std::string id = pending.back();
      pending.pop_back();
      return id;
    }
    if (!history.empty() && pick(6) == 0) {
      const Segment& s = history[static_cast<size_t>(pick(static_cast<int>(history.size())))];
      if (!s.tool_calls.empty()) return s.tool_calls[0].id;
    }
    return "call_" + std::to_string(made * 4 + c);
  };
  auto segment = [&]() {
    Segment s;
    s.id = "seg-" + std::to_string(made++);  // never reused, as a context's
    const int kind = pick(5);
    if (kind == 0) {
      s.kind = SegmentKind::kUser;
      s.content = "go";
    } else if (kind <= 2) {
      s.kind = SegmentKind::kToolCall;
      for (int c = 0, n = 1 + pick(2); c < n; ++c) {
        s.tool_calls.push_back({call_id(c), "tool_" + std::to_string(pick(2)),
                                "{\"path\":\"f" + std::to_string(pick(3)) + ".py\"}"});
      }
    } else {
      s.kind = kind == 3 ? SegmentKind::kToolResult : SegmentKind::kErrorLog;
      s.content = "output";
    }
    return s;
  };
  compact_internal::SegmentFactsCache cache;
  size_t continued = 0, rebuilt = 0, same_plan = 0;
  for (int plan = 0; plan < 400; ++plan) {
    const int change = pick(10);
    if (plan % 80 == 0) history.clear();  // a new agent, now and then: orphans go with the old
    if (change < 6 || history.empty()) {  // appends
      for (int k = 0, n = 1 + pick(3); k < n; ++k) {
        Segment s = segment();
        if (s.kind == SegmentKind::kToolResult || s.kind == SegmentKind::kErrorLog) {
          // A call of the latest assistant message, as a context's results answer; rarely one not
          // (yet) made, which stops the tables being kept until it is gone.
          const Segment* last = nullptr;
          for (auto it = history.rbegin(); it != history.rend() && last == nullptr; ++it) {
            if (!it->tool_calls.empty()) last = &*it;
          }
          if (last == nullptr && pick(4) != 0) {  // nothing to answer yet, mostly
            s.kind = SegmentKind::kUser;
            history.push_back(std::move(s));
            continue;
          }
          if (last == nullptr || pick(80) == 0) {
            s.tool_call_id = "early_" + std::to_string(made);
            pending.push_back(s.tool_call_id);
          } else {
            s.tool_call_id = last->tool_calls[static_cast<size_t>(
                                                  pick(static_cast<int>(last->tool_calls.size())))]
                                 .id;
          }
        }
        history.push_back(std::move(s));
      }
    } else if (change == 6) {  // a call's arguments or id changed in place
      Segment& s = history[static_cast<size_t>(pick(static_cast<int>(history.size())))];
      if (!s.tool_calls.empty()) {
        ToolCall& c = s.tool_calls[0];
        if (pick(2) == 0)
          c.arguments += " ";
        else
          c.id = "call_" + std::to_string(pick(made * 4 + 1));
      } else {
        s.content += "!";  // a result masked in place
      }
    } else if (change == 7) {  // the tail dropped
      for (int k = 0, n = pick(3); k < n && !history.empty(); ++k) history.pop_back();
    } else if (change == 8) {  // a segment removed from the middle: the rest move
      history.erase(history.begin() + pick(static_cast<int>(history.size())));
    }  // else: nothing changed
    CompactionInput in;
    for (const Segment& s : history) {
      in.history.push_back(&s);
      in.history_fingerprints.push_back(FingerprintOf(s));
    }
    compact_internal::SegmentFacts facts = cache.Begin(in);
    // Built at some plans only (a plan may stop before it needs the index): the kept tables catch
    // up with every change since they were last built.
    if (pick(4) != 0) {
      const compact_internal::CallIndex index(in, facts);
      (index.continued() ? continued : rebuilt) += 1;
      const Reference expected = Plainly(in.history);
      const std::vector<uint8_t>& superseded = index.Superseded();
      REQUIRE(superseded.size() == history.size());
      for (size_t i = 0; i < history.size(); ++i) {
        INFO("plan " << plan << ", segment " << i);
        if (history[i].kind == SegmentKind::kToolResult ||
            history[i].kind == SegmentKind::kErrorLog)
          CHECK(index.Of(i) == expected.call_of[i]);
        CHECK(superseded[i] == expected.superseded[i]);
        CHECK(index.AnsweredLater()[i] == expected.answered_later[i]);
      }
      // A second index in the same plan (a plan relaxing its protections) takes the tables as
      // they are.
      if (pick(3) == 0) {
        const compact_internal::CallIndex again(in, facts);
        same_plan += again.continued();
        CHECK(again.Superseded() == expected.superseded);
        CHECK(again.AnsweredLater() == expected.answered_later);
        for (size_t i = 0; i < history.size(); ++i) CHECK(again.Of(i) == index.Of(i));
      }
    }
    cache.Keep(std::move(facts));
  }
  INFO("continued " << continued << ", rebuilt " << rebuilt);
  CHECK(continued > 50);
  CHECK(rebuilt > 20);
  CHECK(same_plan > 20);
}

}  // namespace
}  // namespace strata
