// Context::Impl, the state behind strata/context.h, and the helpers its parts share. Private to
// strata::core. The members are defined by topic, one file each:
//   context.cc           construction, options, the volatile layer, inspection, the public
//                        forwarding
//   context_stable.cc    the stable layers: system prompts, tools, index and docs documents
//   context_history.cc   appends to the history (user, assistant, tool results with hygiene,
//                        recall)
//   context_render.cc    the render buffers (header_, history_buf_) and the request they assemble
//   context_edit.cc      history edits: validate, pairing check, cost report, apply; Compact()
//   context_budget.cc    Build(), Preview() and PreviewBuild(): render, count, compact within the
//                        budget (bounded rounds)
//   context_snapshot.cc  Snapshot() and restoring one
//   context_rewind.cc    Rewind(): back, in place, to an earlier snapshot; Mark() and
//                        RewindToMark(): the same to a mark, keeping only what changed since
//
// Rendering keeps two buffers so that Build() costs about one copy of the request:
//   header_       `{"model":...,"tools":[...],"messages":[` plus the stable system message(s);
//                 rebuilt only when a stable layer changes (rare by design).
//   history_buf_  the history messages' JSON, comma-joined; an append adds bytes at its end and a
//                 later edit (compaction) re-renders from the edited segment on.
// Every mutation is prepared (validated, segments built) before anything changes, then recorded in
// the journal, then applied by steps that cannot fail: a refused or unjournaled change leaves the
// context untouched.
#ifndef STRATA_CORE_CONTEXT_IMPL_H_
#define STRATA_CORE_CONTEXT_IMPL_H_

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "core/growing_text.h"
#include "strata/context.h"

namespace strata {
namespace internal {

// history_offsets_ entry of a segment that is not rendered.
inline constexpr size_t kNoOffset = static_cast<size_t>(-1);

// The layers rendered before the history, in the order of Layer (system, tools, index, docs).
inline constexpr Layer kStableLayers[] = {Layer::kSystem, Layer::kTools, Layer::kIndex,
                                          Layer::kDocs};
inline constexpr size_t kStableLayerCount = sizeof(kStableLayers) / sizeof(kStableLayers[0]);
static_assert(static_cast<int>(Layer::kHistory) == static_cast<int>(kStableLayerCount),
              "the stable layers are the ones before the history");

// The slot of a layer in arrays indexed by Layer (LayerUsage[kLayerCount], the stable layers).
constexpr size_t LayerIndex(Layer layer) { return static_cast<size_t>(layer); }

// SegmentFingerprint::hash of `s` (context_render.cc).
uint64_t FingerprintHash(const Segment& s);

inline bool IsRendered(const Segment& s) {
  return s.state == SegmentState::kLive || s.state == SegmentState::kMasked;
}

// The rendered history as CompactionInput lists it (Context::Impl::MakeInput): each rendered
// segment, its fingerprint and its original's bytes (0: none kept), kept as the history is rendered
// so that an input is lent these lists, not gathered segment by segment. Its pointers name the
// segments of the Impl that keeps it: a copy or a move of the Impl does not carry it (the copy's
// segments are others), and it is dropped when an insertion into the history moves segments;
// MakeInput then gathers it again.
struct RenderedHistoryView {
  bool valid = false;
  // While an input holds the lists (Lend), they are not here: a change of the history meanwhile
  // marks them stale, and they are dropped when given back.
  bool lent = false;
  bool lent_originals = false;  // original_bytes went with them
  bool stale = false;
  std::vector<const Segment*> segments;
  std::vector<uint64_t> fingerprints;
  std::vector<size_t> original_bytes;
  size_t originals = 0;  // entries of original_bytes above 0
  // CompactionInput::history_serial of the last input made from it (0: none since it was
  // gathered), and how many leading entries are unchanged since.
  uint64_t last_serial = 0;
  size_t unchanged = 0;

  RenderedHistoryView() = default;
  RenderedHistoryView(const RenderedHistoryView&) {}
  RenderedHistoryView(RenderedHistoryView&&) noexcept {}
  RenderedHistoryView& operator=(const RenderedHistoryView&) {
    Drop();
    return *this;
  }
  RenderedHistoryView& operator=(RenderedHistoryView&&) noexcept {
    Drop();
    return *this;
  }
  void Drop() {
    stale = lent;
    valid = false;
    last_serial = 0;
    unchanged = 0;
    segments.clear();
    fingerprints.clear();
    original_bytes.clear();
    originals = 0;
  }
  void Add(const Segment* s, uint64_t fingerprint, size_t original) {
    if (lent) {
      stale = true;
      return;
    }
    segments.push_back(s);
    fingerprints.push_back(fingerprint);
    original_bytes.push_back(original);
    originals += original > 0;
  }
  // Entry `n` and those after it changed in place.
  void Touch(size_t n) {
    stale = stale || lent;
    unchanged = std::min(unchanged, n);
  }
  // Keeps the first `n` entries.
  void Cut(size_t n) {
    Touch(n);
    if (lent) return;
    for (size_t i = n; i < original_bytes.size(); ++i) originals -= original_bytes[i] > 0;
    if (n < segments.size()) {
      segments.resize(n);
      fingerprints.resize(n);
      original_bytes.resize(n);
    }
  }
  // Moves the lists into `input` (original_bytes only when an entry is above 0), and back.
  void Lend(CompactionInput& input) {
    lent = true;
    stale = false;
    lent_originals = originals > 0;
    input.history.swap(segments);
    input.history_fingerprints.swap(fingerprints);
    if (lent_originals) input.original_bytes.swap(original_bytes);
  }
  void TakeBack(CompactionInput& input) {
    if (!lent) return;
    lent = false;
    segments.swap(input.history);
    fingerprints.swap(input.history_fingerprints);
    if (lent_originals) original_bytes.swap(input.original_bytes);
    if (stale) Drop();
  }
};

inline bool RenderOrderLess(const Segment& a, const Segment& b) {
  if (a.order != b.order) return a.order < b.order;
  if (a.position != b.position) return a.position < b.position;
  return a.seq < b.seq;
}

inline bool IsToolResultKind(SegmentKind kind) {
  return kind == SegmentKind::kToolResult || kind == SegmentKind::kErrorLog;
}
inline bool IsAssistantKind(SegmentKind kind) {
  return kind == SegmentKind::kAssistant || kind == SegmentKind::kToolCall;
}

// "a, b, c, ... (N more)", or "none".
std::string JoinNames(const std::vector<std::string>& names, size_t limit = 10);

// The dedupe key of a tool output: same tool, same arguments, same content.
std::string OutputKey(std::string_view tool, std::string_view arguments, std::string_view content);

// Adds summarizer `name` to `names` (CompactionReport::summarizer, joined by ", ") unless it is
// empty or already listed.
inline void AddSummarizerName(const std::string& name, std::string& names) {
  if (name.empty()) return;
  for (size_t at = 0; !names.empty() && at <= names.size();) {
    size_t end = names.find(", ", at);
    if (end == std::string::npos) end = names.size();
    if (names.compare(at, end - at, name) == 0) return;
    at = end + 2;
  }
  names += (names.empty() ? "" : ", ") + name;
}

// Adds how a summary was asked for (CompactionReport::summary_request, joined by "; ") unless it
// is empty or already there.
inline void AddSummaryRequest(const std::string& request, std::string& requests) {
  if (request.empty() || requests.find(request) != std::string::npos) return;
  requests += (requests.empty() ? "" : "; ") + request;
}

}  // namespace internal

class Context::Impl {
 public:
  explicit Impl(ContextOptions options);
  // A copy that changes nothing of this one, for PreviewBuild: no journal, no mark, and this
  // context's recycled body (not copied: moved) to render into. The copy is kept (preview_copy_)
  // and the next one is copied into its memory.
  Impl& CopyForPreview() const;

  const ContextOptions& options() const { return options_; }

  // Stable layers (context_stable.cc).
  Status SetSystemPrompts(std::vector<std::string> prompts);
  Status SetTools(std::string_view tools_json);
  StatusOr<std::string> AddDocument(Layer layer, Document doc);
  Status UpdateDocument(Layer layer, Document doc);
  StatusOr<std::string> PutDocument(Layer layer, Document doc);
  Status RemoveDocument(Layer layer, std::string_view name);

  // History appends (context_history.cc).
  StatusOr<std::string> AppendUser(std::string content);
  StatusOr<std::string> AppendAssistant(AssistantMessage message);
  StatusOr<std::string> AppendToolResult(ToolResult result);
  std::vector<std::string> OpenToolCalls() const { return open_calls_; }
  Status SetPinned(std::string_view segment_id, bool pinned);
  StatusOr<std::string> AnswerRecall(const std::string& tool_call_id, size_t max_tokens);

  // The volatile layer (context.cc).
  Status SetVolatile(std::string key, std::string value);
  Status RemoveVolatile(std::string_view key);
  void ClearVolatile() { volatile_.clear(); }

  // The request as the buffers stand, without counting or compacting (context_render.cc).
  StatusOr<BuiltRequest> Render(const BuildOptions& build) const;
  // Context::Recycle: the next Render() writes into this memory when it is large enough.
  void Recycle(std::string body) const {
    spare_body_ = std::move(body);
    spare_serial_ = 0;  // a caller's body: its bytes may have changed
  }
  // Recycle() of this context's render `serial` unchanged (its own, seen by no caller, or one a
  // caller hands back as it was): when it is still the last render, the next Render() keeps the
  // leading bytes it shares with it and writes only the rest. A body whose size is not the last
  // render's is not that render: only its memory is reused.
  void RecycleRender(std::string body, uint64_t serial) const {
    spare_serial_ = body.size() == last_render_bytes_ ? serial : 0;
    spare_body_ = std::move(body);
  }
  // The leading bytes the next render shares with the last one (BuiltRequest::unchanged_bytes).
  size_t UnchangedSinceLastRender() const;
  // Sets out's render serials and unchanged bytes (UnchangedSinceLastRender() before the render),
  // and notes it as the last render.
  void NoteRender(size_t unchanged, BuiltRequest* out) const;

  // Token accounting (context_budget.cc).
  size_t VolatileTokens() const;
  size_t MessageCount() const;
  size_t InputTokens() const;
  size_t LimitTokens() const;

  // Context::Preview, Context::PreviewBuild and Context::Build (context_budget.cc): Preview and
  // PreviewBuild never change the context; BuildWithinBudget compacts, its first round applying
  // `first_plan` when given instead of asking the policy.
  StatusOr<BuiltRequest> Preview(const BuildOptions& build) const;
  StatusOr<BuiltRequest> PreviewBuild(const BuildOptions& build) const;
  StatusOr<size_t> CountRequest(const BuildOptions& build) const;
  StatusOr<BuiltRequest> BuildWithinBudget(const BuildOptions& build,
                                           const HistoryEdit* first_plan = nullptr);

  // History edits (context_edit.cc). With `require_reduction`, an edit that would not lower the
  // input tokens (the context's own count) is not applied: *not_reducing is set and the unapplied
  // report is returned.
  StatusOr<std::optional<CompactionReport>> Compact(bool force);
  StatusOr<CompactionReport> ApplyEdit(const HistoryEdit& edit, std::string policy,
                                       std::string reason, bool require_reduction = false,
                                       bool* not_reducing = nullptr);
  const std::vector<CompactionReport>& Compactions() const { return compactions_; }

  // Inspection (context.cc).
  std::vector<Segment> Segments() const;
  std::vector<const Segment*> LayerSegments(Layer layer) const;
  std::vector<SegmentFingerprint> Fingerprints() const;
  std::vector<SegmentFingerprint> FingerprintsAfter(const std::vector<SegmentFingerprint>& earlier,
                                                    size_t* kept, uint64_t* serial = nullptr) const;
  const Segment* Find(std::string_view id) const;
  StatusOr<std::string> Recall(std::string_view recall_id) const;
  ContextStats Stats() const;
  std::vector<LintWarning> Lint() const { return lint_; }

  // Snapshots (context_snapshot.cc).
  ContextSnapshot Snapshot() const;
  Status LoadSnapshot(ContextSnapshot snapshot);
  // Context::Rewind, Mark, RewindToMark and ClearMark (context_rewind.cc).
  Status Rewind(ContextSnapshot snapshot);
  void Mark();
  Status RewindToMark();
  void ClearMark() { mark_.reset(); }
  bool HasMark() const { return mark_.has_value(); }
  bool ChangedSinceMark() const {
    return mark_ && (!mark_->segments.empty() || !mark_->originals.empty() || mark_->turn != turn_);
  }

 private:
  // --- An edit being prepared (context_edit.cc): everything it would change, nothing changed yet.
  struct PendingSummary {
    size_t first_index;  // history index of the first segment it replaces
    Segment segment;
  };
  struct PreparedEdit {
    std::unordered_map<size_t, Segment> changed;  // history index -> new value
    std::vector<PendingSummary> summaries;
    std::unordered_map<std::string, SegmentState> hidden_calls;  // tool_call_id -> its new state
    ContextChange change;                                        // collects the kept originals
    CompactionReport report;                                     // counts, then cost
    uint64_t next_seq = 0;                                       // after the summaries' seqs
  };
  StatusOr<size_t> LocateEditTarget(const std::string& id, const char* what,
                                    const PreparedEdit& prepared) const;
  void KeepEditOriginal(Segment& s, ContextChange& change) const;
  // CompactionInput::recall_id_of: the recall id of `s`, kept in recall_ids_ when `s` is one of
  // this context's history segments.
  std::string RememberedRecallId(const Segment& s) const;
  Status PrepareSegmentEdits(const HistoryEdit& edit, const std::string& policy,
                             PreparedEdit& prepared) const;
  Status PrepareSummaries(const HistoryEdit& edit, const std::string& policy,
                          PreparedEdit& prepared) const;
  void PointDuplicatesAtHidden(const std::string& policy, PreparedEdit& prepared) const;
  Status CheckPairing(const PreparedEdit& prepared) const;
  // Fills the report's boundary and tokens; returns the change in input tokens.
  int64_t ReportEditCost(const HistoryEdit& edit, std::string policy, std::string reason,
                         PreparedEdit& prepared) const;
  Status CommitEdit(PreparedEdit& prepared);
  static std::string DescribeTrigger(const CompactionInput& input);

  // --- The budget (context_budget.cc).
  // A policy's input whose history lists are input_view_'s own, lent instead of copied: they go
  // back when it is destroyed or GiveBack() is called, which must come before the history changes
  // (a change meanwhile makes MakeInput gather them again).
  class LentInput {
   public:
    explicit LentInput(internal::RenderedHistoryView* view) : view_(view) {}
    LentInput(LentInput&& other) noexcept
        : input(std::move(other.input)), view_(std::exchange(other.view_, nullptr)) {}
    LentInput(const LentInput&) = delete;
    LentInput& operator=(const LentInput&) = delete;
    LentInput& operator=(LentInput&&) = delete;
    ~LentInput() { GiveBack(); }
    void GiveBack() {
      if (view_ != nullptr) view_->TakeBack(input);
      view_ = nullptr;
    }
    CompactionInput input;

   private:
    internal::RenderedHistoryView* view_;
  };
  LentInput MakeInput(bool forced) const;
  StatusOr<BuiltRequest> RenderCounted(const BuildOptions& build) const;
  Status OverBudgetError(size_t tokens, size_t limit, bool can_compact) const;
  // What round `round` of BuildWithinBudget would apply to the request counted at `tokens`: the
  // policy's edit (its reason filled in), or an empty one when the policy does not compact.
  // `prediction`: for PreviewBuild (CompactionInput::prediction).
  StatusOr<HistoryEdit> PlanRound(const BuildOptions& build, size_t tokens, size_t limit,
                                  size_t round, bool prediction = false) const;
  // One round of BuildWithinBudget: plans (or takes `planned`) and applies a compaction of the
  // request counted at `tokens`; the applied round's report, or nullopt when the edit is empty or
  // does not reduce.
  StatusOr<std::optional<CompactionReport>> CompactionRound(const BuildOptions& build,
                                                            size_t tokens, size_t limit,
                                                            size_t round,
                                                            const HistoryEdit* planned);

  // CompactionRound when round `rounds` may compact the request counted at `tokens` (the first
  // round ahead of the limit, by the policy's trigger; later ones only above it), else nullopt.
  StatusOr<std::optional<CompactionReport>> MaybeCompactionRound(const BuildOptions& build,
                                                                 size_t tokens, size_t rounds,
                                                                 const HistoryEdit* first_plan);
  // Whether a build plans before it renders: with a budget and a policy but no request counter,
  // the count the policy plans with is the context's own (InputTokens()), which needs no render.
  bool PlansBeforeRendering() const {
    return options_.budget && options_.compaction != nullptr && options_.request_counter == nullptr;
  }

  // --- Snapshots (context_snapshot.cc).
  Status ReplaySnapshotHistory(std::vector<Segment> history);

  // --- The mark (context_rewind.cc): what the context held at Mark(), for what changed since.
  struct MarkedState {
    int64_t turn = 0;
    // Segment id -> its value at the mark (nullopt: no such segment then).
    std::unordered_map<std::string, std::optional<Segment>> segments;
    // Recall id -> the original kept under it at the mark (nullopt: none then).
    std::unordered_map<std::string, std::optional<std::string>> originals;
  };
  // Keeps, in mark_, the current value of each segment and original `change` (not applied yet)
  // alters, unless an earlier change since the mark kept it.
  void KeepForMark(const ContextChange& change);

  // --- History bookkeeping (context_history.cc).
  const ToolCall* FindLastCall(std::string_view id) const;
  void RegisterCalls(const Segment& s);
  void CountHygiene(const Segment& s, int sign);
  // Adds output_index_[key] = call unless the key is there already (the first output stays).
  void IndexOutput(std::string key, const std::string& call);
  void ApplyHygiene(Segment& s, std::string content, bool is_error, const ToolCall& call,
                    ContextChange& change, std::string& output_key) const;
  void KeepOriginal(const std::string& recall_id, std::string original,
                    ContextChange& change) const;

  // --- Shared (context.cc).
  Segment NewSegment(uint64_t seq, SegmentKind kind, Layer layer) const;
  Segment NewHistorySegment(SegmentKind kind, int64_t turn) const;
  size_t CountTokens(const Segment& s) const;
  static size_t ContentBytes(const Segment& s);
  Status Record(ContextChange& change, int64_t turn_after);
  Status RequireNoOpenCalls(std::string_view action) const;

  // --- Render buffers (context_render.cc).
  std::string RenderVolatileMessage() const;
  void RenderHistoryMessage(std::string& out, const Segment& s) const;
  size_t RenderedSizeBound(const Segment& s) const;
  void ReserveHistory(size_t extra);
  std::string ApplyHistoryAppend(Segment s);
  void RenderHistoryAt(size_t i);
  void RerenderHistoryFrom(size_t index);
  // The bytes of the original append-time hygiene kept for live segment `s`; 0 when none.
  size_t OriginalBytesOf(const Segment& s) const;
  void RebuildHeader();

  // --- Stable layers (context_stable.cc).
  Status ValidateDocument(Layer layer, const Document& doc);
  std::vector<Segment>& StableSlot(Layer layer) { return stable_[internal::LayerIndex(layer)]; }
  const std::vector<Segment>& StableSlot(Layer layer) const {
    return stable_[internal::LayerIndex(layer)];
  }
  std::vector<Segment> StableLayer(Layer layer) const { return StableSlot(layer); }
  Status ReplaceStableLayer(Layer layer, std::vector<Segment> fresh, uint64_t next_seq);
  void SetStableLayer(Layer layer, std::vector<Segment> segments);
  void ReindexStable(Layer layer);
  const Segment* FindDocument(Layer layer, std::string_view name) const;
  std::vector<std::string> DocumentNames(Layer layer) const;

  LayerUsage& Usage(Layer layer) { return usage_[internal::LayerIndex(layer)]; }
  const LayerUsage& Usage(Layer layer) const { return usage_[internal::LayerIndex(layer)]; }

  ContextOptions options_;
  std::shared_ptr<const Tokenizer> owned_tokenizer_;  // shared with a CopyForPreview()
  const Tokenizer* tokenizer_ = nullptr;

  // Indexed by Layer (StableSlot); each in render order.
  std::array<std::vector<Segment>, internal::kStableLayerCount> stable_;
  // Render order. A deque: no reallocation slack or moves as a long history grows, and pointers
  // returned by Find() stay valid across appends.
  std::deque<Segment> history_;
  std::vector<size_t>
      history_offsets_;  // start of each segment's JSON in history_buf_, or kNoOffset
  // SegmentFingerprint::hash of each history segment (0 when not rendered), kept beside
  // history_offsets_ and recomputed with the rendering, from an edit's boundary on.
  std::vector<uint64_t> history_hashes_;
  // The history's usage before each history segment, kept beside history_offsets_:
  // RerenderHistoryFrom(index) restores it instead of summing the segments before `index` again.
  std::vector<LayerUsage> history_usage_before_;
  // MakeInput's rendered history, kept by RenderHistoryAt and RerenderHistoryFrom while valid.
  mutable internal::RenderedHistoryView input_view_;
  // The same for the stable segments, indexed like stable_; recomputed by RebuildHeader().
  std::array<std::vector<uint64_t>, internal::kStableLayerCount> stable_hashes_;
  internal::GrowingText history_buf_;  // grows by remapping its pages, not by copying them
  mutable std::string spare_body_;  // memory handed back by Recycle(), for the next Render()
  // The extra fields the last successful Render() was given, their canonical rendering, and each
  // field's canonical value (parallel to the fields): a field whose value is the same as last time
  // is not canonicalized again (a turn's fields differ from the last turn's in the request id).
  mutable std::vector<std::pair<std::string, std::string>> extra_fields_rendered_for_;
  mutable std::string extra_fields_rendered_;
  mutable std::vector<std::string> extra_field_values_;
  // The render spare_body_ holds unchanged (RecycleRender), or 0 when its bytes are not known.
  mutable uint64_t spare_serial_ = 0;
  size_t rendered_history_messages_ = 0;
  std::vector<std::pair<std::string, std::string>> volatile_;

  std::string header_;
  uint64_t header_generation_ = 0;  // RebuildHeader() calls so far
  size_t stable_messages_ = 0;
  // The last Render(): its serial, the header generation and the history's size it rendered, and
  // the shortest history_buf_ has been since (RerenderHistoryFrom cuts it). What the next render
  // is known to share with it (BuiltRequest::unchanged_bytes).
  mutable uint64_t last_render_serial_ = 0;
  mutable uint64_t last_render_header_generation_ = 0;
  mutable size_t last_render_history_bytes_ = 0;
  mutable size_t last_render_bytes_ = 0;  // its body's size
  mutable size_t history_low_water_ = 0;
  // The list the last FingerprintsAfter() with a serial described (Context::FingerprintsAfter):
  // its serial (0: none), the header generation and history size it saw, its rendered stable
  // segments, and the lowest history index re-rendered since (RerenderHistoryFrom, which every
  // change to a rendered history segment goes through): the history before it, and the stable
  // layers while the generation is the same, are as that list has them.
  struct FingerprintSerial {
    uint64_t serial = 0;
    uint64_t header_generation = 0;
    size_t history_size = 0;
    size_t stable_rendered = 0;
    size_t low_water = SIZE_MAX;
  };
  mutable FingerprintSerial fingerprints_;
  std::string stable_prefix_hash_;
  std::vector<LintWarning> lint_;

  size_t last_call_segment_ =
      internal::kNoOffset;               // history index of the last assistant message with calls
  std::vector<std::string> open_calls_;  // of the last assistant message
  std::unordered_map<std::string, std::string> output_index_;        // OutputKey -> first call id
  // The reverse of output_index_: call id -> the OutputKeys that map to it there (one, unless a
  // client gave two calls the same id). A hidden call's entries are found without walking every
  // output (CommitEdit).
  std::unordered_map<std::string, std::vector<std::string>> output_keys_of_call_;
  // Call id -> the ids of the history segments deduplicated against its output, in append order
  // (entries are only added: a reader checks that the segment still points at the call). An edit
  // that hides a call's result finds the duplicates to point at it without walking the history
  // (PointDuplicatesAtHidden).
  std::unordered_map<std::string, std::vector<std::string>> duplicates_of_;
  std::unordered_map<std::string, std::string> recall_;              // recall id -> original
  // Segment seq -> RecallIdFor(its content), for history segments that carry no recall id, as a
  // compaction policy asked for them (RememberedRecallId): the edit that masks, evicts or
  // summarizes one takes its id from here instead of hashing the content again. A seq names one
  // content while its segment carries no recall id: an edit that changes the content gives it
  // one, and a rewind starts from a fresh state (seqs are never given twice).
  mutable std::unordered_map<uint64_t, std::string> recall_ids_;
  std::unordered_map<std::string, std::pair<Layer, size_t>> index_;  // segment id -> location

  std::vector<CompactionReport> compactions_;
  std::optional<MarkedState> mark_;  // set by Mark()
  // The copy the last compacting PreviewBuild() applied its plan to (CopyForPreview): copying
  // into its memory writes where the last copy was, instead of into memory the allocator maps and
  // faults in anew (a 1M-token context holds over 8 MB of segments and rendered history). Copying
  // or moving a context copies or moves none of it.
  struct PreviewCopy {
    PreviewCopy() = default;
    PreviewCopy(const PreviewCopy&) {}
    PreviewCopy& operator=(const PreviewCopy&) { return *this; }
    PreviewCopy(PreviewCopy&&) noexcept {}
    PreviewCopy& operator=(PreviewCopy&&) noexcept { return *this; }
    std::unique_ptr<Impl> impl;
  };
  mutable PreviewCopy preview_copy_;
  int64_t turn_ = 0;
  uint64_t next_seq_ = 1;
  int64_t next_position_ = 1;
  LayerUsage usage_[kLayerCount];  // indexed by Layer (Usage)
  ContextStats counters_;
};

}  // namespace strata

#endif  // STRATA_CORE_CONTEXT_IMPL_H_
