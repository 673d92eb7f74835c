#include "compact/segment_facts.h"

#include <algorithm>
#include <atomic>
#include <functional>
#include <string_view>
#include <unordered_map>
#include <utility>

#include "compact/common.h"
#include "compact/history_units.h"
#include "compact/placeholder.h"
#include "core/identifiers.h"

namespace strata::compact_internal {

const std::vector<std::string>& SegmentFacts::ContentIds(size_t i) {
  KeptFacts& f = facts_[i];
  if (!f.content_ids) f.content_ids = internal::RankedIdentifiers(in_->history[i]->content);
  return *f.content_ids;
}

const std::vector<std::string>& SegmentFacts::MessageIds(size_t i) {
  const Segment& s = *in_->history[i];
  if (s.tool_calls.empty()) return ContentIds(i);
  KeptFacts& f = facts_[i];
  if (!f.message_ids) {
    std::string text = s.content;
    for (const ToolCall& call : s.tool_calls) text += "\n" + call.arguments;
    f.message_ids = internal::RankedIdentifiers(text);
  }
  return *f.message_ids;
}

const std::unordered_set<std::string_view>& SegmentFacts::MessageNames() {
  KeptMessageNames& k = names_;
  const std::vector<const Segment*>& h = in_->history;
  // Kept for segments that are this input's, at their index, and (Begin) unchanged where they
  // are messages.
  if (!(k.valid && k.segments <= kept_ && k.segments <= h.size())) k = KeptMessageNames();
  k.valid = true;
  for (size_t i = k.segments; i < h.size(); ++i) {
    if (IsToolResult(*h[i])) continue;
    MessageIds(i);
    KeptFacts& f = facts_[i];
    std::shared_ptr<const std::vector<std::string>> ids =
        h[i]->tool_calls.empty() ? f.content_ids : f.message_ids;
    for (const std::string& id : *ids) k.names.insert(id);
    k.held.push_back(std::move(ids));  // the views stay valid while the names are kept
  }
  k.segments = h.size();
  return k.names;
}

const std::vector<std::string>& SegmentFacts::CallIds(size_t i, const std::string& arguments) {
  KeptFacts& f = facts_[i];
  if (!f.call_ids || f.call_arguments != arguments) {
    f.call_ids = internal::RankedIdentifiers(arguments);
    f.call_arguments = arguments;
  }
  return *f.call_ids;
}

const std::string& SegmentFacts::RecallId(size_t i) {
  KeptFacts& f = facts_[i];
  if (!f.recall_id) f.recall_id = in_->RecallId(*in_->history[i]);
  return *f.recall_id;
}

const std::string& SegmentFacts::ExitStatus(size_t i) {
  KeptFacts& f = facts_[i];
  if (!f.exit_status) f.exit_status = ExitStatusOf(in_->history[i]->content);
  return *f.exit_status;
}

uint64_t CallIdHash(std::string_view id) { return std::hash<std::string_view>()(id); }

uint64_t CallKeyHash(std::string_view name, std::string_view arguments) {
  const uint64_t a = std::hash<std::string_view>()(name);
  return a ^ (std::hash<std::string_view>()(arguments) + 0x9e3779b97f4a7c15ULL + (a << 6) + (a >> 2));
}

namespace {

// The call hashes of `s` into `f`, once.
void HashCalls(KeptFacts& f, const Segment& s) {
  if (f.call_hashes) return;
  f.call_hashes = true;
  f.call_id_hashes.reserve(s.tool_calls.size());
  f.call_key_hashes.reserve(s.tool_calls.size());
  for (const ToolCall& call : s.tool_calls) {
    f.call_id_hashes.push_back(CallIdHash(call.id));
    f.call_key_hashes.push_back(CallKeyHash(call.name, call.arguments));
  }
}

}  // namespace

const std::vector<uint64_t>& SegmentFacts::CallIdHashes(size_t i) {
  KeptFacts& f = facts_[i];
  HashCalls(f, *in_->history[i]);
  return f.call_id_hashes;
}

const std::vector<uint64_t>& SegmentFacts::CallKeyHashes(size_t i) {
  KeptFacts& f = facts_[i];
  HashCalls(f, *in_->history[i]);
  return f.call_key_hashes;
}

size_t SegmentFacts::ReasoningTokens(size_t i) {
  KeptFacts& f = facts_[i];
  if (!f.reasoning_tokens || f.counted_by != in_->tokenizer) {
    f.reasoning_tokens = in_->Count(in_->history[i]->reasoning);
    f.counted_by = in_->tokenizer;
  }
  return *f.reasoning_tokens;
}

uint64_t SegmentFacts::ResultCallIdHash(size_t i) {
  KeptFacts& f = facts_[i];
  if (!f.result_call_id_hash) f.result_call_id_hash = CallIdHash(in_->history[i]->tool_call_id);
  return *f.result_call_id_hash;
}

namespace {

// Whether `facts` (kept for it) still describe segment `s` with fingerprint `fingerprint`.
bool Describes(const KeptFacts& facts, const Segment& s, uint64_t fingerprint) {
  return facts.fingerprint == fingerprint && facts.content_bytes == s.content.size() &&
         facts.recall_field == s.recall_id;
}

// Fresh facts of segment `s`.
void Reset(KeptFacts& facts, const Segment& s, uint64_t fingerprint) {
  facts = KeptFacts();
  facts.fingerprint = fingerprint;
  facts.content_bytes = s.content.size();
  facts.recall_field = s.recall_id;
}

}  // namespace

SegmentFacts SegmentFactsCache::Begin(const CompactionInput& in) {
  SegmentFacts out;
  static std::atomic<uint64_t> plans{0};
  out.plan_ = plans.fetch_add(1, std::memory_order_relaxed) + 1;
  out.in_ = &in;
  out.keyed_ = !in.history.empty() && in.history_fingerprints.size() == in.history.size();
  if (!out.keyed_) {
    out.facts_.resize(in.history.size());
    return out;
  }
  internal::MutexLock lock(mu_);
  out.rows_ = std::move(rows_);  // valid by their serial, whichever way the facts are taken
  rows_ = KeptRows();
  // A history whose kept segments are all at their own index (it only grew, or changed segments
  // in place) takes the kept facts whole, in place: no entry is moved. The facts of a segment
  // found at its own index are checked as its id is (one pass), and fresh ones replace them when
  // they no longer describe it, whichever way the rest is taken.
  const size_t kept = std::min(ids_.size(), in.history.size());
  const bool whole = facts_.size() == ids_.size();
  // The context vouches for the first history_unchanged entries when the facts are those of the
  // input it made before this one: the same segments, unchanged, so not compared.
  size_t same = 0;
  if (whole && in.previous_history_serial != 0 && in.previous_history_serial == kept_serial_)
    same = std::min(in.history_unchanged, kept);
  for (; same < kept && ids_[same] == in.history[same]->id; ++same) {
    const Segment& s = *in.history[same];
    const uint64_t fingerprint = in.history_fingerprints[same];
    if (whole && !Describes(facts_[same], s, fingerprint)) {
      Reset(facts_[same], s, fingerprint);
      out.resets_.push_back(same);
    }
  }
  out.same_ids_ = same;
  out.keeps_ = keeps_;
  if (same == kept && whole) {
    out.facts_ = std::move(facts_);
    facts_.clear();
    out.kept_ = kept;
    out.calls_ = std::move(calls_);
    calls_ = KeptCallTables();
    out.names_ = std::move(names_);
    names_ = KeptMessageNames();
    // What changed is dropped from the kept tables here, whether or not this plan uses them (a
    // plan that does not would otherwise hand them on unaware, and a later one could find other
    // segments at the same indices): tables describing segments the history no longer has, the
    // call tables when a segment holding calls changed in place, the names when a message did.
    if (out.calls_.segments > kept) out.calls_ = KeptCallTables();
    if (out.names_.segments > kept) out.names_ = KeptMessageNames();
    for (size_t i : out.resets_) {
      const Segment& s = *in.history[i];
      if (i < out.calls_.segments && (!s.tool_calls.empty() || s.kind == SegmentKind::kToolCall))
        out.calls_ = KeptCallTables();
      if (i < out.names_.segments && !IsToolResult(s)) out.names_ = KeptMessageNames();
    }
    out.facts_.resize(in.history.size());
    for (size_t i = kept; i < in.history.size(); ++i) {
      Reset(out.facts_[i], *in.history[i], in.history_fingerprints[i]);
    }
    return out;
  }
  out.facts_.resize(in.history.size());
  std::unordered_map<std::string_view, size_t> index;  // ids_ by id, once a segment moved
  for (size_t i = 0; i < in.history.size(); ++i) {
    const Segment& s = *in.history[i];
    KeptFacts& f = out.facts_[i];
    size_t k = i;
    if (k >= ids_.size() || ids_[k] != s.id) {
      if (index.empty()) {
        index.reserve(ids_.size());
        for (size_t j = 0; j < ids_.size(); ++j) index.emplace(ids_[j], j);
      }
      auto found = index.find(s.id);
      k = found == index.end() ? ids_.size() : found->second;
    }
    // Segment ids are unique in an input, so each kept entry is taken at most once.
    if (k < facts_.size() && Describes(facts_[k], s, in.history_fingerprints[i])) {
      f = std::move(facts_[k]);
      continue;
    }
    Reset(f, s, in.history_fingerprints[i]);
  }
  facts_.clear();
  out.resets_.clear();  // segments moved: nothing is kept at its index
  return out;
}

void SegmentFactsCache::Keep(SegmentFacts facts) {
  if (!facts.keyed_) return;
  const std::vector<const Segment*>& history = facts.in_->history;
  internal::MutexLock lock(mu_);
  ids_.resize(history.size());
  // The ids Begin() found at their index are there still, unless another plan kept its own since.
  const size_t same = facts.keeps_ == keeps_ ? std::min(facts.same_ids_, history.size()) : 0;
  ++keeps_;
  for (size_t i = same; i < history.size(); ++i) {
    if (ids_[i] != history[i]->id) ids_[i] = history[i]->id;
  }
  facts_ = std::move(facts.facts_);
  calls_ = std::move(facts.calls_);
  names_ = std::move(facts.names_);
  rows_ = std::move(facts.rows_);
  kept_serial_ = facts.in_->history_serial;
}

void SegmentFactsCache::Advance(const CompactionInput& in) {
  internal::MutexLock lock(mu_);
  const bool same_history =
      in.previous_history_serial != 0 && in.history_unchanged == in.history.size();
  if (!same_history) return;
  if (in.previous_history_serial == kept_serial_ && ids_.size() == in.history.size())
    kept_serial_ = in.history_serial;
  if (in.previous_history_serial == rows_.serial && rows_.rows.size() == in.history.size())
    rows_.serial = in.history_serial;
}

}  // namespace strata::compact_internal
