// What the strata policy derives from a history segment's bytes (its ranked identifiers, its
// recall id, the exit status it shows), kept with the segment from one plan to the next: segments
// do not change, so a plan reads the bytes of a segment once in its life instead of at every
// build, and costs the number of segments it looks at, not their size.
//
//   SegmentFacts facts = cache.Begin(input);     // under the cache's lock, O(segments)
//   facts.ContentIds(i) ...                      // derived on first use, then kept
//   cache.Keep(std::move(facts));                // what this plan derived, for the next one
//
// Facts are keyed by the segment's id and its fingerprint (CompactionInput::history_fingerprints,
// the FNV the context keeps of every segment) with its content's size and recall id; a segment
// whose key differs is derived anew. An input without fingerprints (not made by a Context) derives
// everything and keeps nothing. Keep() holds the facts of the last plan's segments only, so the
// cache is bounded by the history.
//
// Thread safety: SegmentFactsCache is thread-safe; a SegmentFacts belongs to one plan (one thread).
#ifndef STRATA_SRC_COMPACT_SEGMENT_FACTS_H_
#define STRATA_SRC_COMPACT_SEGMENT_FACTS_H_

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_set>
#include <vector>

#include "core/thread_annotations.h"
#include "strata/compaction_policy.h"

namespace strata::compact_internal {

// The facts of one segment; each is derived when first asked for.
struct KeptFacts {
  uint64_t fingerprint = 0;
  size_t content_bytes = 0;
  std::string recall_field;  // Segment::recall_id as it was
  std::shared_ptr<const std::vector<std::string>> content_ids;  // RankedIdentifiers(content)
  std::shared_ptr<const std::vector<std::string>> message_ids;  // ... of content and call arguments
  // RankedIdentifiers of the arguments of the call a tool result answers, and those arguments
  // (the call is another segment's: its text is compared, not assumed unchanged).
  std::string call_arguments;
  std::shared_ptr<const std::vector<std::string>> call_ids;
  std::optional<std::string> recall_id;                         // CompactionInput::RecallId
  std::optional<std::string> exit_status;                       // ExitStatusOf(content)
  // Hashes of the segment's tool calls (CallIdHash of each id, CallKeyHash of each tool name
  // with its arguments; the fingerprint covers the calls), and of a tool result's tool_call_id
  // (which a segment keeps for its life).
  bool call_hashes = false;
  std::vector<uint64_t> call_id_hashes;
  std::vector<uint64_t> call_key_hashes;
  std::optional<uint64_t> result_call_id_hash;
  // Tokens of the segment's reasoning as CompactionInput::Count counted them with `counted_by`
  // (the input's tokenizer; the fingerprint covers the reasoning).
  std::optional<size_t> reasoning_tokens;
  const Tokenizer* counted_by = nullptr;
};

// The hash of a tool call id, and of a call's tool name with its arguments.
uint64_t CallIdHash(std::string_view id);
uint64_t CallKeyHash(std::string_view name, std::string_view arguments);

// The tables of a CallIndex (compact/call_index.h), kept with the facts from one plan to the next
// for the history they were built for: the next plan's index continues them when that history only
// grew and no segment holding calls changed.
struct KeptCallTables {
  static constexpr uint32_t kEmpty = UINT32_MAX;
  struct Slot {  // a call by the hash of its id
    uint64_t hash = 0;
    uint32_t segment = kEmpty;  // the history index of the assistant message holding it
    uint32_t call = 0;          // its index in that message's tool_calls
  };
  struct Latest {  // the latest tool result answering a call, by the hash of its tool and arguments
    uint64_t key = 0;
    uint32_t result = kEmpty;  // the result's history index
  };
  bool valid = false;
  size_t segments = 0;  // the history's size they describe
  uint64_t plan = 0;    // SegmentFacts::plan() of the plan that built or continued them last
  std::vector<Slot> calls;
  size_t calls_used = 0;
  std::vector<Latest> latest;
  size_t latest_used = 0;
  std::vector<uint8_t> superseded;  // by history index (CallIndex::Superseded)
  std::vector<uint8_t> answered_later;  // by history index (CallIndex::AnsweredLater)
  // [k]: the history index of the result before result k with the same call (kEmpty: none), so
  // that a result that is not an error log marks the ones before it as answered, up to the first
  // already marked.
  std::vector<uint32_t> previous;
  size_t orphans = 0;               // tool results whose call is not in the history
};

// The names SegmentFacts::MessageNames() gives, kept with the facts from one plan to the next for
// the history's first `segments` segments.
struct KeptMessageNames {
  bool valid = false;
  size_t segments = 0;
  std::unordered_set<std::string_view> names;  // views into `held`
  std::vector<std::shared_ptr<const std::vector<std::string>>> held;
};

// What a policy reads of every segment at each plan, one contiguous row per segment
// (SegmentFacts::Rows), so that its passes over the whole history read the rows, not the segments.
struct SegmentRow {
  int64_t turn = 0;
  size_t tokens = 0;  // the message's tokens (MessageTokens)
  uint32_t bits = 0;  // the policy's flags
};

// The rows of the last input they were computed for (its history_serial), kept from plan to plan,
// with what is continued with them from the first row filled again, so that a pass asking for the
// rows of some flags, or for sums and maxima over a range of rows, does not read every row.
struct KeptRows {
  uint64_t serial = 0;
  std::vector<SegmentRow> rows;
  std::vector<size_t> tokens_before;     // [i]: the tokens of rows[0, i) (rows.size() + 1 entries)
  // [i]: the largest turn of rows[0, i) (INT64_MIN at 0), leaving out the rows whose bits share a
  // bit with the `turn_exempt` mask Rows() was given (rows that may sit among older ones).
  std::vector<int64_t> max_turn_before;
  // [k]: the indexes, ascending, of the rows whose bits share a bit with the k-th mask Rows() was
  // given.
  std::vector<std::vector<uint32_t>> with_bits;
};

// One plan's facts of CompactionInput::history, by index.
class SegmentFacts {
 public:
  // The ranked identifiers of history[i]'s content (ExtractIdentifiers(content, n) is its first n).
  const std::vector<std::string>& ContentIds(size_t i);
  // The ranked identifiers of history[i]'s content followed by "\n" and each tool call's
  // arguments (the content's when it has no calls).
  const std::vector<std::string>& MessageIds(size_t i);
  // The ranked identifiers of `arguments`, the arguments of the call tool result history[i]
  // answers (kept with the result while its call's arguments stay the same).
  const std::vector<std::string>& CallIds(size_t i, const std::string& arguments);
  // The input's RecallId(history[i]) (the context keeps it for the edit that masks it).
  const std::string& RecallId(size_t i);
  // ExitStatusOf(history[i].content).
  const std::string& ExitStatus(size_t i);
  // CallIdHash of each of history[i]'s tool calls' ids, and CallKeyHash of each call.
  const std::vector<uint64_t>& CallIdHashes(size_t i);
  const std::vector<uint64_t>& CallKeyHashes(size_t i);
  // CallIdHash of history[i].tool_call_id.
  uint64_t ResultCallIdHash(size_t i);
  // in.Count(history[i].reasoning), counted once per tokenizer.
  size_t ReasoningTokens(size_t i);

  // The history before this input's first `kept` segments is the one the cache kept facts for,
  // each segment at its index (kept() is that history's whole size when it only grew or changed
  // segments in place; 0 when segments moved or nothing was kept); of those, the facts of
  // resets() no longer described their segment (changed in place).
  size_t kept() const { return kept_; }
  const std::vector<size_t>& resets() const { return resets_; }
  // A number naming this plan (its Begin()), unique in the process.
  uint64_t plan() const { return plan_; }
  // A row per segment, fill(i) giving history[i]'s, with the indexes of the rows sharing a bit
  // with each of `masks` (KeptRows::with_bits, in the order of `masks`) and the running sums and
  // maxima. Rows kept for the input the context made just before this one are taken as they are for
  // the entries it vouches unchanged (CompactionInput::history_unchanged); the others are filled
  // again, and the rest continued from the first of them. fill must depend only on the segment and
  // its facts (and what is constant for the policy and the context); `masks` and `turn_exempt`
  // must be the same at every plan of a policy.
  template <typename Fill>
  const KeptRows& Rows(Fill fill, const std::vector<uint32_t>& masks, uint32_t turn_exempt = 0) {
    const size_t n = in_->history.size();
    std::vector<SegmentRow>& rows = rows_.rows;
    if (rows_.serial != 0 && rows_.serial == in_->history_serial && rows.size() == n) return rows_;
    size_t from = 0;
    if (rows_.serial != 0 && rows_.serial == in_->previous_history_serial &&
        rows_.with_bits.size() == masks.size())
      from = std::min({in_->history_unchanged, rows.size(), n});
    rows.resize(n);
    for (size_t i = from; i < n; ++i) rows[i] = fill(i);
    rows_.tokens_before.resize(n + 1);
    rows_.max_turn_before.resize(n + 1);
    rows_.tokens_before[0] = 0;
    rows_.max_turn_before[0] = INT64_MIN;
    for (size_t i = from; i < n; ++i) {
      rows_.tokens_before[i + 1] = rows_.tokens_before[i] + rows[i].tokens;
      rows_.max_turn_before[i + 1] = (rows[i].bits & turn_exempt)
                                         ? rows_.max_turn_before[i]
                                         : std::max(rows_.max_turn_before[i], rows[i].turn);
    }
    rows_.with_bits.resize(masks.size());
    for (size_t k = 0; k < masks.size(); ++k) {
      std::vector<uint32_t>& with = rows_.with_bits[k];
      while (!with.empty() && with.back() >= from) with.pop_back();
      for (size_t i = from; i < n; ++i) {
        if (rows[i].bits & masks[k]) with.push_back(static_cast<uint32_t>(i));
      }
    }
    rows_.serial = in_->history_serial;
    return rows_;
  }
  // The call tables kept with the facts (invalid when kept() is 0, or when a segment holding calls
  // changed in place), for CallIndex to continue.
  KeptCallTables& call_tables() { return calls_; }
  // MessageIds of every segment of the history that is not a tool result (the messages a policy
  // never masks), kept from plan to plan (through plans that do not ask): continued with the
  // segments added since while the history only grew and none of those messages changed.
  const std::unordered_set<std::string_view>& MessageNames();

 private:
  friend class SegmentFactsCache;
  const CompactionInput* in_ = nullptr;
  bool keyed_ = false;  // the input has fingerprints: the facts may be kept
  // The leading segments whose ids Begin() found in the cache at their index, and the cache's
  // Keep() count then (another plan's Keep() in between rewrote them).
  size_t same_ids_ = 0;
  uint64_t keeps_ = 0;
  size_t kept_ = 0;
  uint64_t plan_ = 0;
  std::vector<size_t> resets_;
  KeptCallTables calls_;
  KeptMessageNames names_;
  KeptRows rows_;
  std::vector<KeptFacts> facts_;
};

class SegmentFactsCache {
 public:
  // The facts kept for `in`'s segments (fresh ones for those not kept), taken out of the cache
  // until Keep() gives them back. `in` must outlive them.
  SegmentFacts Begin(const CompactionInput& in);
  // Keeps `facts` (the segments of its plan's input) and drops every other segment's.
  void Keep(SegmentFacts facts);
  // `in` was planned without facts (a plan kept for its input): when the context says its history
  // is, entry for entry, the one of the input the facts (or the rows) were kept for, they are kept
  // for `in` too, so that the next input's history_unchanged still applies.
  void Advance(const CompactionInput& in);

 private:
  internal::Mutex mu_;
  // The last plan's segments by their index in its input: their ids and facts. A history that
  // only grew or changed segments in place finds each segment's facts at its own index, and costs
  // a comparison of ids per segment (the facts are taken whole, not moved one by one); one whose
  // segments moved (a compaction removed some) looks the ids up, once.
  std::vector<std::string> ids_ STRATA_GUARDED_BY(mu_);
  std::vector<KeptFacts> facts_ STRATA_GUARDED_BY(mu_);
  uint64_t keeps_ STRATA_GUARDED_BY(mu_) = 0;  // Keep() calls so far
  KeptCallTables calls_ STRATA_GUARDED_BY(mu_);  // of the last plan's history
  KeptMessageNames names_ STRATA_GUARDED_BY(mu_);
  KeptRows rows_ STRATA_GUARDED_BY(mu_);             // valid by their serial, whatever the ids
  uint64_t kept_serial_ STRATA_GUARDED_BY(mu_) = 0;  // history_serial of the kept facts' input
};

}  // namespace strata::compact_internal

#endif  // STRATA_SRC_COMPACT_SEGMENT_FACTS_H_
