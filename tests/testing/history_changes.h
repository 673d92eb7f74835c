// Random changes of a context's history of the kinds compaction makes, for the tests that check
// what a context keeps between changes (its fingerprints, its compaction input) against what it
// would gather anew.
#ifndef STRATA_TESTS_TESTING_HISTORY_CHANGES_H_
#define STRATA_TESTS_TESTING_HISTORY_CHANGES_H_

#include <cstdint>
#include <string>
#include <vector>

#include "strata/context.h"

namespace strata::testing {

class HistoryChanges {
 public:
  explicit HistoryChanges(uint32_t seed) : state_(seed) {}

  // A pseudo-random number below n (a linear congruential generator: the same seed, the same run).
  uint32_t Next(uint32_t n) {
    state_ = state_ * 1103515245u + 12345u;
    return (state_ >> 16) % n;
  }
  // Appends a tool call `call` and its result (`output`), and notes the result.
  bool CallAndResult(Context& context, const std::string& call, const std::string& output) {
    if (!context.AppendAssistant({"", "", {{call, "read", "{}"}}}).ok()) return false;
    StatusOr<std::string> result = context.AppendToolResult({call, output, false});
    if (!result.ok()) return false;
    results.push_back(*result);
    return true;
  }
  // Masks a result appended earlier (counted in `masks` when the context applies it).
  void MaskAResult(Context& context) {
    if (results.empty()) return;
    HistoryEdit edit;
    edit.edits.push_back(
        {results[Next(static_cast<uint32_t>(results.size()))], SegmentEdit::Action::kMask, "[m]"});
    if (context.ApplyEdit(edit, "test@1", "test").ok()) ++masks;
  }
  // Summarizes a tool call and its result anywhere in the history (counted in `summaries`). The
  // context's answer: OK also when the history has no such pair.
  Status SummarizeACall(Context& context, const std::string& text) {
    std::vector<SegmentFingerprint> now = context.Fingerprints();
    std::vector<size_t> calls;
    for (size_t i = 0; i + 1 < now.size(); ++i) {
      if (now[i].kind == SegmentKind::kToolCall && now[i + 1].kind == SegmentKind::kToolResult)
        calls.push_back(i);
    }
    if (calls.empty()) return Status::Ok();
    const size_t i = calls[Next(static_cast<uint32_t>(calls.size()))];
    HistoryEdit edit;
    edit.summaries.push_back({{now[i].id, now[i + 1].id}, text});
    Status applied = context.ApplyEdit(edit, "test@1", "test").status();
    if (applied.ok()) ++summaries;
    return applied;
  }
  // Marks, appends a user message and rewinds to the mark (counted in `rewinds`).
  bool RewindAChange(Context& context, const std::string& text) {
    context.Mark();
    if (!context.AppendUser(text).ok() || !context.RewindToMark().ok()) return false;
    ++rewinds;
    return true;
  }

  std::vector<std::string> results;  // the results CallAndResult appended
  size_t masks = 0, summaries = 0, rewinds = 0;

 private:
  uint32_t state_;
};

}  // namespace strata::testing

#endif  // STRATA_TESTS_TESTING_HISTORY_CHANGES_H_
