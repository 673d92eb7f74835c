// Context, history edits (compaction). An edit is applied in four steps, each its own function:
//   1. prepare   (PrepareSegmentEdits, PrepareSummaries, PointDuplicatesAtHidden): validate every
//                target and compute each touched segment's new value, changing nothing;
//   2. pairing   (CheckPairing): the rendered history after the edit keeps every tool call paired
//                with its results;
//   3. cost      (ReportEditCost): the boundary (first touched segment), the tokens before and
//   after,
//                and the tokens of the prefix it invalidates;
//   4. apply     (CommitEdit): journal, then apply with steps that cannot fail.
// A refused edit (steps 1-2, a journal error, or a non-reducing edit under require_reduction)
// leaves the context untouched.
#include <algorithm>

#include "core/context_impl.h"
#include "core/hygiene.h"
#include "core/text_util.h"

namespace strata {

using internal::IsAssistantKind;
using internal::IsRendered;
using internal::IsToolResultKind;
using internal::JoinNames;
using internal::kNoOffset;
using internal::ValidateUtf8;

StatusOr<std::optional<CompactionReport>> Context::Impl::Compact(bool force) {
  CompactionPolicy* policy = options_.compaction;
  if (policy == nullptr) {
    return FailedPreconditionError("no compaction policy is set (ContextOptions::compaction)");
  }
  LentInput lent = MakeInput(force);
  const CompactionInput& input = lent.input;
  if (!force && !policy->ShouldCompact(input)) return std::optional<CompactionReport>();
  STRATA_ASSIGN_OR_RETURN(HistoryEdit edit, policy->Plan(input));
  if (edit.empty()) return std::optional<CompactionReport>();
  std::string reason =
      force ? "requested" : (edit.reason.empty() ? DescribeTrigger(input) : edit.reason);
  lent.GiveBack();  // before the edit changes the history
  bool not_reducing = false;
  STRATA_ASSIGN_OR_RETURN(CompactionReport report,
                          ApplyEdit(edit, policy->Name(), std::move(reason),
                                    /*require_reduction=*/true, &not_reducing));
  if (not_reducing) return std::optional<CompactionReport>();
  return std::optional<CompactionReport>(std::move(report));
}

std::string Context::Impl::DescribeTrigger(const CompactionInput& input) {
  using internal::WithThousands;
  if (input.limit_tokens && input.total_tokens > input.limit_tokens) {
    return "input " + WithThousands(input.total_tokens) + " tokens above the limit " +
           WithThousands(input.limit_tokens);
  }
  if (input.trigger_tokens && input.total_tokens > input.trigger_tokens) {
    return "input " + WithThousands(input.total_tokens) + " tokens above the trigger " +
           WithThousands(input.trigger_tokens);
  }
  return "policy";
}

StatusOr<CompactionReport> Context::Impl::ApplyEdit(const HistoryEdit& edit, std::string policy,
                                                    std::string reason, bool require_reduction,
                                                    bool* not_reducing) {
  if (not_reducing != nullptr) *not_reducing = false;
  if (edit.empty()) return InvalidArgumentError("the edit is empty");
  if (!open_calls_.empty()) {
    return FailedPreconditionError("cannot compact while tool calls are unanswered (" +
                                   JoinNames(open_calls_) + ")");
  }
  PreparedEdit prepared;
  STRATA_RETURN_IF_ERROR(PrepareSegmentEdits(edit, policy, prepared));
  STRATA_RETURN_IF_ERROR(PrepareSummaries(edit, policy, prepared));
  PointDuplicatesAtHidden(policy, prepared);
  STRATA_RETURN_IF_ERROR(CheckPairing(prepared));
  const int64_t delta = ReportEditCost(edit, std::move(policy), std::move(reason), prepared);
  if (require_reduction && delta >= 0) {
    if (not_reducing != nullptr) *not_reducing = true;
    return prepared.report;  // nothing changed
  }
  STRATA_RETURN_IF_ERROR(CommitEdit(prepared));
  return prepared.report;
}

// ------------------------------------------------------------------------------------ 1. prepare

// The history index of an edit's target `id`, if it may be edited (rendered, not pinned, not
// touched twice by this edit).
StatusOr<size_t> Context::Impl::LocateEditTarget(const std::string& id, const char* what,
                                                 const PreparedEdit& prepared) const {
  auto it = index_.find(id);
  if (it == index_.end() || it->second.first != Layer::kHistory) {
    return InvalidArgumentError(std::string(what) + " names \"" + id +
                                "\", which is not a history segment");
  }
  const size_t i = it->second.second;
  const Segment& s = history_[i];
  if (!IsRendered(s)) {
    return InvalidArgumentError(std::string(what) + " names \"" + id + "\", which is already " +
                                std::string(SegmentStateName(s.state)));
  }
  if (s.pinned)
    return InvalidArgumentError(std::string(what) + " names pinned segment \"" + id + "\"");
  if (prepared.changed.count(i)) {
    return InvalidArgumentError("the edit touches segment \"" + id + "\" twice");
  }
  return i;
}

// Gives `s` a recall id and, when originals are kept and this one is not kept yet (nor by this
// edit), adds its content to change.originals.
void Context::Impl::KeepEditOriginal(Segment& s, ContextChange& change) const {
  if (!s.recall_id.empty() && (recall_.count(s.recall_id) || !options_.keep_originals)) return;
  if (!s.recall_id.empty()) {
    for (const auto& kept : change.originals)
      if (kept.first == s.recall_id) return;
  }
  // `s` is a copy of its history segment, its content not yet changed: the id a policy asked
  // for is that content's.
  if (auto remembered = recall_ids_.find(s.seq); remembered != recall_ids_.end()) {
    s.recall_id = std::move(remembered->second);
    recall_ids_.erase(remembered);
  } else {
    s.recall_id = RecallIdFor(s.content);
  }
  if (!options_.keep_originals || recall_.count(s.recall_id)) return;
  for (const auto& kept : change.originals)
    if (kept.first == s.recall_id) return;
  change.originals.emplace_back(s.recall_id, s.content);
}

std::string Context::Impl::RememberedRecallId(const Segment& s) const {
  if (!s.recall_id.empty()) return s.recall_id;
  auto where = index_.find(s.id);
  const bool own = where != index_.end() && where->second.first == Layer::kHistory &&
                   &history_[where->second.second] == &s;
  if (!own) return RecallIdFor(s.content);  // a copy: its content may differ from the seq's
  auto [it, inserted] = recall_ids_.try_emplace(s.seq);
  if (inserted) it->second = RecallIdFor(s.content);
  return it->second;
}

// Masks, evictions and dropped reasoning.
Status Context::Impl::PrepareSegmentEdits(const HistoryEdit& edit, const std::string& policy,
                                          PreparedEdit& prepared) const {
  CompactionReport& report = prepared.report;
  for (const SegmentEdit& e : edit.edits) {
    STRATA_ASSIGN_OR_RETURN(size_t i, LocateEditTarget(e.segment_id, "edit", prepared));
    Segment s = history_[i];
    switch (e.action) {
      case SegmentEdit::Action::kMask:
        if (!IsToolResultKind(s.kind)) {
          return InvalidArgumentError("cannot mask \"" + s.id +
                                      "\": only tool results are masked, it is a " +
                                      std::string(SegmentKindName(s.kind)));
        }
        if (e.placeholder.empty())
          return InvalidArgumentError("mask of \"" + s.id + "\" has an empty placeholder");
        STRATA_RETURN_IF_ERROR(ValidateUtf8(e.placeholder, "placeholder for \"" + s.id + "\""));
        KeepEditOriginal(s, prepared.change);
        s.content = e.placeholder;
        s.state = SegmentState::kMasked;
        ++report.masked;
        break;
      case SegmentEdit::Action::kEvict:
        KeepEditOriginal(s, prepared.change);
        s.state = SegmentState::kEvicted;
        ++report.evicted;
        break;
      case SegmentEdit::Action::kDropReasoning:
        if (!IsAssistantKind(s.kind) || s.reasoning.empty()) {
          return InvalidArgumentError("cannot drop reasoning of \"" + s.id + "\": it has none");
        }
        s.reasoning.clear();
        ++report.reasoning_dropped;
        break;
    }
    s.policy = policy;
    s.tokens = CountTokens(s);
    prepared.changed.emplace(i, std::move(s));
  }
  return Status::Ok();
}

// Summaries: each replaces a contiguous span (in render order) and is placed before its first
// segment.
Status Context::Impl::PrepareSummaries(const HistoryEdit& edit, const std::string& policy,
                                       PreparedEdit& prepared) const {
  uint64_t seq = next_seq_;
  for (const SummaryEdit& summary : edit.summaries) {
    if (summary.replaces.empty()) return InvalidArgumentError("a summary replaces no segment");
    if (summary.content.empty()) return InvalidArgumentError("a summary has empty content");
    STRATA_RETURN_IF_ERROR(ValidateUtf8(summary.content, "summary content"));
    size_t previous = 0;
    for (size_t k = 0; k < summary.replaces.size(); ++k) {
      STRATA_ASSIGN_OR_RETURN(size_t i, LocateEditTarget(summary.replaces[k], "summary", prepared));
      if (k > 0) {
        for (size_t between = previous + 1; between < i; ++between) {
          if (IsRendered(history_[between]) && !prepared.changed.count(between)) {
            return InvalidArgumentError(
                "summary span is not contiguous: \"" + history_[between].id + "\" lies between \"" +
                summary.replaces[k - 1] + "\" and \"" + summary.replaces[k] + "\"");
          }
        }
        if (i < previous) return InvalidArgumentError("summary span is not in render order");
      }
      Segment s = history_[i];
      KeepEditOriginal(s, prepared.change);
      s.state = SegmentState::kSummarized;
      s.policy = policy;
      prepared.changed.emplace(i, std::move(s));
      ++prepared.report.summarized;
      previous = i;
    }
    const size_t first = index_.at(summary.replaces.front()).second;
    Segment s = NewSegment(seq++, SegmentKind::kSummary, Layer::kHistory);
    s.position = history_[first].position;
    s.turn = turn_;
    s.content = summary.content;
    s.name = summary.summarizer;
    s.policy = policy;
    internal::AddSummarizerName(summary.summarizer, prepared.report.summarizer);
    internal::AddSummaryRequest(summary.summary_request, prepared.report.summary_request);
    s.tokens = CountTokens(s);
    prepared.summaries.push_back({first, std::move(s)});
  }
  prepared.next_seq = seq;
  return Status::Ok();
}

// A deduplicated result that points at an output this edit hides would point at nothing the model
// can see: its reference says so and keeps the recall id of the (identical) content. Duplicates
// follow their original, so this never moves the boundary.
void Context::Impl::PointDuplicatesAtHidden(const std::string& policy,
                                            PreparedEdit& prepared) const {
  auto& changed = prepared.changed;
  auto& hidden_calls = prepared.hidden_calls;
  for (const auto& [i, segment] : changed) {
    if (IsToolResultKind(segment.kind) && segment.state != SegmentState::kLive) {
      hidden_calls.emplace(segment.tool_call_id, segment.state);
    }
  }
  for (const auto& [call, state] : hidden_calls) {
    auto duplicates = duplicates_of_.find(call);
    if (duplicates == duplicates_of_.end()) continue;
    for (const std::string& id : duplicates->second) {
      auto where = index_.find(id);
      if (where == index_.end() || where->second.first != Layer::kHistory) continue;
      const size_t j = where->second.second;
      const Segment& d = history_[j];
      if (changed.count(j) || !IsRendered(d) || d.state != SegmentState::kLive ||
          d.hygiene != HygieneAction::kDeduplicated || d.duplicate_of != call) {
        continue;
      }
      Segment s = d;
      const std::string anchor = "result of call " + d.duplicate_of;
      const size_t at = s.content.find(anchor);
      const std::string note = ", which is " + std::string(SegmentStateName(state)) +
                               " (context_recall " + s.recall_id + " gives it back)";
      if (at != std::string::npos) {
        s.content.insert(at + anchor.size(), note);
      } else {
        s.content = "[strata: output identical to the " + anchor + note + "]";
      }
      s.policy = policy;
      s.tokens = CountTokens(s);
      changed.emplace(j, std::move(s));
    }
  }
}

// ------------------------------------------------------------------------------------ 2. pairing

namespace {

// Whether `after` plays the part `before` played in the pairing of calls and results: rendered or
// not alike, the same kind, answering the same call, carrying the same calls.
bool SamePairing(const Segment& before, const Segment& after) {
  return IsRendered(before) == IsRendered(after) && before.kind == after.kind &&
         before.tool_call_id == after.tool_call_id &&
         std::equal(before.tool_calls.begin(), before.tool_calls.end(), after.tool_calls.begin(),
                    after.tool_calls.end(),
                    [](const ToolCall& a, const ToolCall& b) { return a.id == b.id; });
}

}  // namespace

Status Context::Impl::CheckPairing(const PreparedEdit& prepared) const {
  // An edit that adds no summary and changes no segment's part in the pairing (a mask, say) leaves
  // the history paired as every append and every applied edit left it (ApplyEdit refuses any edit
  // while a call is open): no need to walk the whole history.
  if (prepared.summaries.empty() &&
      std::all_of(prepared.changed.begin(), prepared.changed.end(), [this](const auto& entry) {
        return SamePairing(history_[entry.first], entry.second);
      })) {
    return Status::Ok();
  }
  std::vector<std::string> open;
  size_t summary_cursor = 0;
  std::vector<const PendingSummary*> by_index;
  for (const PendingSummary& p : prepared.summaries) by_index.push_back(&p);
  std::sort(by_index.begin(), by_index.end(), [](const PendingSummary* a, const PendingSummary* b) {
    return a->first_index < b->first_index;
  });
  auto visit = [&](const Segment& s) -> Status {
    if (!IsRendered(s)) return Status::Ok();
    if (IsToolResultKind(s.kind)) {
      auto it = std::find(open.begin(), open.end(), s.tool_call_id);
      if (it == open.end()) {
        return InvalidArgumentError("the edit would leave tool result \"" + s.id + "\" (call \"" +
                                    s.tool_call_id +
                                    "\") without its assistant tool call; "
                                    "evict or summarize the call and its results together");
      }
      open.erase(it);
      return Status::Ok();
    }
    if (!open.empty()) {
      return InvalidArgumentError("the edit would leave tool call \"" + open.front() +
                                  "\" without its result; evict or summarize the call and its "
                                  "results together");
    }
    for (const ToolCall& call : s.tool_calls) open.push_back(call.id);
    return Status::Ok();
  };
  for (size_t i = 0; i < history_.size(); ++i) {
    while (summary_cursor < by_index.size() && by_index[summary_cursor]->first_index == i) {
      STRATA_RETURN_IF_ERROR(visit(by_index[summary_cursor++]->segment));
    }
    auto it = prepared.changed.find(i);
    STRATA_RETURN_IF_ERROR(visit(it == prepared.changed.end() ? history_[i] : it->second));
  }
  if (!open.empty()) {
    return InvalidArgumentError("the edit would leave tool call \"" + open.front() +
                                "\" without its result");
  }
  return Status::Ok();
}

// --------------------------------------------------------------------------------------- 3. cost

int64_t Context::Impl::ReportEditCost(const HistoryEdit& edit, std::string policy,
                                      std::string reason, PreparedEdit& prepared) const {
  CompactionReport& report = prepared.report;
  size_t boundary = history_.size();
  for (const auto& [i, segment] : prepared.changed) boundary = std::min(boundary, i);
  report.policy = std::move(policy);
  report.reason = std::move(reason);
  report.turn = turn_;
  report.boundary_index = boundary;
  report.boundary_segment_id = history_[boundary].id;
  report.tokens_before = InputTokens();
  // What the server has cached from the boundary on: the previous request held the history of the
  // turns before this one; what this turn appended since was never sent (and is prefilled anyway).
  for (size_t i = boundary; i < history_.size(); ++i) {
    if (IsRendered(history_[i]) && history_[i].turn < turn_) {
      report.invalidated_tokens += history_[i].tokens + options_.message_overhead_tokens;
    }
  }
  int64_t delta = 0;
  for (const auto& [i, segment] : prepared.changed) {
    const Segment& old = history_[i];
    delta -= static_cast<int64_t>(old.tokens + options_.message_overhead_tokens);
    if (IsRendered(segment))
      delta += static_cast<int64_t>(segment.tokens + options_.message_overhead_tokens);
  }
  for (const PendingSummary& p : prepared.summaries) {
    delta += static_cast<int64_t>(p.segment.tokens + options_.message_overhead_tokens);
  }
  report.tokens_after = static_cast<size_t>(static_cast<int64_t>(report.tokens_before) + delta);
  report.explanation = edit.explanation;
  return delta;
}

// -------------------------------------------------------------------------------------- 4. apply

Status Context::Impl::CommitEdit(PreparedEdit& prepared) {
  ContextChange& change = prepared.change;
  for (const auto& [i, segment] : prepared.changed) change.upserted.push_back(segment);
  for (const PendingSummary& p : prepared.summaries) change.upserted.push_back(p.segment);
  std::sort(change.upserted.begin(), change.upserted.end(),
            [](const Segment& a, const Segment& b) { return a.seq < b.seq; });
  change.compaction = prepared.report;
  STRATA_RETURN_IF_ERROR(Record(change, turn_));

  // Nothing below can fail.
  for (auto& [id, original] : change.originals) recall_.emplace(id, std::move(original));
  for (auto& [i, segment] : prepared.changed) history_[i] = std::move(segment);
  if (!prepared.hidden_calls.empty()) {
    // A later identical output is rendered in full again (and becomes the new original), rather
    // than pointing at one the model no longer sees.
    for (const auto& [call, state] : prepared.hidden_calls) {
      auto keys = output_keys_of_call_.find(call);
      if (keys == output_keys_of_call_.end()) continue;
      for (const std::string& key : keys->second) output_index_.erase(key);
      output_keys_of_call_.erase(keys);
    }
  }
  next_seq_ = prepared.next_seq;
  // Insert summaries before their first replaced segment, last first so indexes stay valid.
  std::vector<PendingSummary>& summaries = prepared.summaries;
  std::sort(summaries.begin(), summaries.end(),
            [](const PendingSummary& a, const PendingSummary& b) {
              return a.first_index > b.first_index;
            });
  for (PendingSummary& p : summaries) {
    history_.insert(history_.begin() + static_cast<std::ptrdiff_t>(p.first_index),
                    std::move(p.segment));
    history_offsets_.insert(history_offsets_.begin() + static_cast<std::ptrdiff_t>(p.first_index),
                            kNoOffset);
    history_hashes_.insert(history_hashes_.begin() + static_cast<std::ptrdiff_t>(p.first_index), 0);
    // Before the summary: what was before the first segment it replaces.
    const LayerUsage before = p.first_index < history_usage_before_.size()
                                  ? history_usage_before_[p.first_index]
                                  : Usage(Layer::kHistory);
    history_usage_before_.insert(
        history_usage_before_.begin() + static_cast<std::ptrdiff_t>(p.first_index), before);
    input_view_.Drop();  // the insertion moved the segments it points to
    if (last_call_segment_ != kNoOffset && last_call_segment_ >= p.first_index)
      ++last_call_segment_;
  }
  const size_t boundary = prepared.report.boundary_index;
  if (!summaries.empty()) {
    for (size_t i = boundary; i < history_.size(); ++i)
      index_[history_[i].id] = {Layer::kHistory, i};
  }
  RerenderHistoryFrom(boundary);
  compactions_.push_back(prepared.report);
  return Status::Ok();
}

}  // namespace strata
