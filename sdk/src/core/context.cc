// Context: the layered segment model and its incremental, byte-stable rendering. This file holds
// construction, the options check, the volatile layer, inspection, the helpers the other parts
// share and the public methods (which forward to Context::Impl); context_impl.h says which file
// defines the rest.
#include "strata/context.h"

#include <algorithm>
#include <atomic>
#include <cstdint>

#include "core/context_impl.h"
#include "core/json_text.h"
#include "core/text_util.h"

namespace strata {

using internal::IsRendered;
using internal::JoinNames;
using internal::LayerIndex;
using internal::ValidateUtf8;

std::string LintWarning::ToString() const {
  return "segment " + segment_id + " (" + std::string(LayerName(layer)) + " layer) contains a " +
         what + " at byte " + std::to_string(offset) + ": \"" + excerpt +
         "\"; volatile content in a stable layer breaks the prefix cache whenever it changes — "
         "move "
         "it to the volatile layer (Context::SetVolatile)";
}

namespace internal {

std::string JoinNames(const std::vector<std::string>& names, size_t limit) {
  if (names.empty()) return "none";
  std::string out;
  for (size_t i = 0; i < names.size() && i < limit; ++i) {
    if (i) out += ", ";
    out += names[i];
  }
  if (names.size() > limit) out += ", ... (" + std::to_string(names.size() - limit) + " more)";
  return out;
}

std::string OutputKey(std::string_view tool, std::string_view arguments, std::string_view content) {
  std::string key;
  key.reserve(tool.size() + arguments.size() + 66);
  key.append(tool).push_back('\0');
  key.append(arguments).push_back('\0');
  key += Sha256Hex(content);
  return key;
}

}  // namespace internal

Context::Impl::Impl(ContextOptions options) : options_(std::move(options)) {
  if (options_.tokenizer == nullptr) {
    owned_tokenizer_ = MakeEstimateTokenizer(4.0);
    tokenizer_ = owned_tokenizer_.get();
  } else {
    tokenizer_ = options_.tokenizer;
  }
  RebuildHeader();
}

Context::Impl& Context::Impl::CopyForPreview() const {
  std::string spare = std::move(spare_body_);
  const uint64_t spare_serial = spare_serial_;
  // Copies every member: the segments, the render buffers (so the copy's renders continue this
  // context's), the indexes; a tokenizer this context made is shared. Into the kept copy, the
  // strings are assigned where the last copy's were.
  if (preview_copy_.impl == nullptr) {
    preview_copy_.impl = std::make_unique<Impl>(*this);
  } else {
    *preview_copy_.impl = *this;
  }
  Impl& copy = *preview_copy_.impl;
  // The copy's last render is this context's: a spare holding that render holds it for the copy
  // too. The copy's own spare, emptied by the assignment, holds no render.
  copy.spare_serial_ = 0;
  spare_serial_ = spare_serial;
  if (spare.capacity() > copy.spare_body_.capacity()) {
    std::swap(copy.spare_body_, spare);
    std::swap(copy.spare_serial_, spare_serial_);
  }
  spare_body_ = std::move(spare);  // the smaller of the two stays here
  copy.options_.journal = nullptr;
  copy.mark_.reset();
  return copy;
}

// ---------------------------------------------------------------------------------------- shared

Segment Context::Impl::NewSegment(uint64_t seq, SegmentKind kind, Layer layer) const {
  Segment s;
  s.seq = seq;
  s.id = "s" + std::to_string(seq);
  s.kind = kind;
  s.layer = layer;
  s.turn = turn_;
  return s;
}

Segment Context::Impl::NewHistorySegment(SegmentKind kind, int64_t turn) const {
  Segment s = NewSegment(next_seq_, kind, Layer::kHistory);
  s.position = next_position_;
  s.turn = turn;
  return s;
}

size_t Context::Impl::CountTokens(const Segment& s) const {
  size_t tokens = tokenizer_->Count(s.content) + tokenizer_->Count(s.reasoning);
  for (const ToolCall& call : s.tool_calls) {
    tokens += tokenizer_->Count(call.name) + tokenizer_->Count(call.arguments);
  }
  return tokens;
}

size_t Context::Impl::ContentBytes(const Segment& s) {
  size_t bytes = s.content.size() + s.reasoning.size();
  for (const ToolCall& call : s.tool_calls) bytes += call.name.size() + call.arguments.size();
  return bytes;
}

Status Context::Impl::Record(ContextChange& change, int64_t turn_after) {
  if (mark_) KeepForMark(change);  // before anything changes (context_rewind.cc)
  if (options_.journal == nullptr) return Status::Ok();
  change.turn = turn_after;
  return options_.journal->Record(change);
}

Status Context::Impl::RequireNoOpenCalls(std::string_view action) const {
  if (open_calls_.empty()) return Status::Ok();
  return FailedPreconditionError(std::string("cannot ") + std::string(action) +
                                 ": the last assistant message has unanswered tool calls (" +
                                 JoinNames(open_calls_) +
                                 "); append their results with AppendToolResult first");
}

// -------------------------------------------------------------------------------------- volatile

Status Context::Impl::SetVolatile(std::string key, std::string value) {
  if (key.empty()) return InvalidArgumentError("volatile key is empty");
  STRATA_RETURN_IF_ERROR(ValidateUtf8(key, "volatile key"));
  STRATA_RETURN_IF_ERROR(ValidateUtf8(value, "volatile value for \"" + key + "\""));
  if (key.find('\n') != std::string::npos) {
    return InvalidArgumentError("volatile key \"" + key + "\" contains a newline");
  }
  for (auto& item : volatile_) {
    if (item.first == key) {
      item.second = std::move(value);
      return Status::Ok();
    }
  }
  volatile_.emplace_back(std::move(key), std::move(value));
  return Status::Ok();
}

Status Context::Impl::RemoveVolatile(std::string_view key) {
  for (auto it = volatile_.begin(); it != volatile_.end(); ++it) {
    if (it->first == key) {
      volatile_.erase(it);
      return Status::Ok();
    }
  }
  std::vector<std::string> keys;
  for (const auto& item : volatile_) keys.push_back(item.first);
  return NotFoundError("no volatile item \"" + std::string(key) + "\" (known: " + JoinNames(keys) +
                       ")");
}

// ------------------------------------------------------------------------------------ inspection

std::vector<Segment> Context::Impl::Segments() const {
  std::vector<Segment> out;
  for (const auto& layer : stable_) out.insert(out.end(), layer.begin(), layer.end());
  out.insert(out.end(), history_.begin(), history_.end());
  for (const auto& [key, value] : volatile_) {
    Segment s;
    s.id = "volatile:" + key;
    s.kind = SegmentKind::kVolatile;
    s.layer = Layer::kVolatile;
    s.name = key;
    s.content = value;
    s.tokens = tokenizer_->Count(value);
    out.push_back(std::move(s));
  }
  return out;
}

std::vector<const Segment*> Context::Impl::LayerSegments(Layer layer) const {
  std::vector<const Segment*> out;
  if (layer == Layer::kHistory) {
    out.reserve(history_.size());
    for (const Segment& s : history_) out.push_back(&s);
  } else if (layer != Layer::kVolatile) {
    const std::vector<Segment>& slot = StableSlot(layer);
    out.reserve(slot.size());
    for (const Segment& s : slot) out.push_back(&s);
  }
  return out;
}

std::vector<SegmentFingerprint> Context::Impl::Fingerprints() const {
  size_t kept = 0;
  return FingerprintsAfter({}, &kept);
}

std::vector<SegmentFingerprint> Context::Impl::FingerprintsAfter(
    const std::vector<SegmentFingerprint>& earlier, size_t* kept, uint64_t* serial) const {
  std::vector<SegmentFingerprint> out;
  size_t same = 0;
  bool matching = true;
  auto visit = [&](const Segment& s, uint64_t hash) {
    if (matching && same < earlier.size()) {
      const SegmentFingerprint& e = earlier[same];
      if (e.hash == hash && e.state == s.state && e.layer == s.layer && e.id == s.id &&
          e.version == s.version) {
        ++same;
        return;
      }
    }
    matching = false;
    out.push_back(SegmentFingerprint{s.id, s.layer, s.kind, s.state, s.version, hash});
  };
  // With the serial of the list `earlier` is, the stable layers (same header generation) and the
  // history before the lowest index re-rendered since are that list's first entries: they are
  // counted, not compared. Rendered segments are those with an offset in history_buf_.
  size_t from = 0;       // the first history segment compared
  bool counted = false;  // the stable layers and the history before `from` were counted
  if (serial != nullptr && *serial != 0 && *serial == fingerprints_.serial &&
      header_generation_ == fingerprints_.header_generation) {
    from = std::min({fingerprints_.low_water, fingerprints_.history_size, history_.size()});
    size_t rendered_from = 0;
    for (size_t i = from; i < history_offsets_.size(); ++i)
      rendered_from += history_offsets_[i] != internal::kNoOffset;
    const size_t lead = fingerprints_.stable_rendered + rendered_history_messages_ - rendered_from;
    if (lead <= earlier.size()) {
      same = lead;
      counted = true;
    } else {
      from = 0;  // not the list the serial names: compare everything
    }
  }
  size_t stable_rendered = 0;
  for (size_t l = 0; l < stable_.size(); ++l) {
    for (size_t i = 0; i < stable_[l].size(); ++i) {
      if (!IsRendered(stable_[l][i])) continue;
      ++stable_rendered;
      if (!counted) visit(stable_[l][i], stable_hashes_[l][i]);
    }
  }
  for (size_t i = from; i < history_.size(); ++i) {
    if (IsRendered(history_[i])) visit(history_[i], history_hashes_[i]);
  }
  *kept = same;
  if (serial != nullptr) {
    static std::atomic<uint64_t> next_serial{1};
    fingerprints_.serial = next_serial.fetch_add(1, std::memory_order_relaxed);
    fingerprints_.header_generation = header_generation_;
    fingerprints_.history_size = history_.size();
    fingerprints_.low_water = SIZE_MAX;
    fingerprints_.stable_rendered = stable_rendered;
    *serial = fingerprints_.serial;
  }
  return out;
}

const Segment* Context::Impl::Find(std::string_view id) const {
  auto it = index_.find(std::string(id));
  if (it == index_.end()) return nullptr;
  const auto [layer, i] = it->second;
  return layer == Layer::kHistory ? &history_[i] : &StableSlot(layer)[i];
}

StatusOr<std::string> Context::Impl::Recall(std::string_view recall_id) const {
  auto it = recall_.find(std::string(recall_id));
  if (it == recall_.end()) {
    return NotFoundError(
        "no original kept under recall id \"" + std::string(recall_id) + "\"" +
        (options_.keep_originals ? "" : " (this context does not keep originals)"));
  }
  return it->second;
}

ContextStats Context::Impl::Stats() const {
  ContextStats stats = counters_;
  stats.segments = index_.size();
  stats.turns = static_cast<size_t>(turn_);
  for (int i = 0; i < kLayerCount; ++i) stats.layers[i] = usage_[i];
  return stats;
}

// ------------------------------------------------------------------------------------ Context

namespace {

Status ValidateOptions(const ContextOptions& options) {
  if (options.agent.id.empty()) {
    return InvalidArgumentError("ContextOptions.agent.id is empty; every agent needs an id");
  }
  STRATA_RETURN_IF_ERROR(ValidateUtf8(options.agent.id, "agent id"));
  STRATA_RETURN_IF_ERROR(ValidateUtf8(options.agent.tenant, "agent tenant"));
  STRATA_RETURN_IF_ERROR(ValidateUtf8(options.agent.scope, "agent scope"));
  STRATA_RETURN_IF_ERROR(ValidateUtf8(options.render.model, "model name"));
  if (options.render.model.empty()) {
    return InvalidArgumentError("RenderOptions.model is empty; name the model the server serves");
  }
  const std::string& role = options.render.volatile_role;
  if (role != "user" && role != "system" && role != "developer") {
    return InvalidArgumentError("RenderOptions.volatile_role is \"" + role +
                                "\"; use \"user\", \"system\" or \"developer\"");
  }
  STRATA_RETURN_IF_ERROR(ValidateUtf8(options.render.reasoning_field, "reasoning field name"));
  if (!(options.hygiene.head_share >= 0.0 && options.hygiene.head_share <= 1.0)) {
    return InvalidArgumentError("HygieneOptions.head_share is " +
                                std::to_string(options.hygiene.head_share) +
                                "; use a value in [0, 1]");
  }
  if (options.budget) {
    Status budget = options.budget->Validate();
    if (!budget.ok()) return Status(budget.code(), "ContextOptions.budget: " + budget.message());
  }
  if (options.hygiene.max_segment_tokens != 0 && options.hygiene.max_segment_tokens < 64) {
    return InvalidArgumentError("HygieneOptions.max_segment_tokens is " +
                                std::to_string(options.hygiene.max_segment_tokens) +
                                "; use 0 (off) or at least 64 so that head, tail and marker fit");
  }
  return Status::Ok();
}

}  // namespace

Context::Context(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Context::~Context() = default;

StatusOr<std::unique_ptr<Context>> Context::Create(ContextOptions options) {
  STRATA_RETURN_IF_ERROR(ValidateOptions(options));
  return std::unique_ptr<Context>(new Context(std::make_unique<Impl>(std::move(options))));
}

StatusOr<std::unique_ptr<Context>> Context::Restore(ContextOptions options,
                                                    ContextSnapshot snapshot) {
  STRATA_RETURN_IF_ERROR(ValidateOptions(options));
  auto impl = std::make_unique<Impl>(std::move(options));
  STRATA_RETURN_IF_ERROR(impl->LoadSnapshot(std::move(snapshot)));
  return std::unique_ptr<Context>(new Context(std::move(impl)));
}

const ContextOptions& Context::options() const { return impl_->options(); }
Status Context::SetSystemPrompts(std::vector<std::string> prompts) {
  return impl_->SetSystemPrompts(std::move(prompts));
}
Status Context::SetTools(std::string_view tools_json) { return impl_->SetTools(tools_json); }
StatusOr<std::string> Context::AddDocument(Layer layer, Document document) {
  return impl_->AddDocument(layer, std::move(document));
}
Status Context::UpdateDocument(Layer layer, Document document) {
  return impl_->UpdateDocument(layer, std::move(document));
}
StatusOr<std::string> Context::PutDocument(Layer layer, Document document) {
  return impl_->PutDocument(layer, std::move(document));
}
Status Context::RemoveDocument(Layer layer, std::string_view name) {
  return impl_->RemoveDocument(layer, name);
}
StatusOr<std::string> Context::AppendUser(std::string content) {
  return impl_->AppendUser(std::move(content));
}
StatusOr<std::string> Context::AppendAssistant(AssistantMessage message) {
  return impl_->AppendAssistant(std::move(message));
}
StatusOr<std::string> Context::AppendToolResult(ToolResult result) {
  return impl_->AppendToolResult(std::move(result));
}
std::vector<std::string> Context::OpenToolCalls() const { return impl_->OpenToolCalls(); }
Status Context::SetPinned(std::string_view segment_id, bool pinned) {
  return impl_->SetPinned(segment_id, pinned);
}
Status Context::SetVolatile(std::string key, std::string value) {
  return impl_->SetVolatile(std::move(key), std::move(value));
}
Status Context::RemoveVolatile(std::string_view key) { return impl_->RemoveVolatile(key); }
void Context::ClearVolatile() { impl_->ClearVolatile(); }
StatusOr<BuiltRequest> Context::Preview(const BuildOptions& options) const {
  return impl_->Preview(options);
}
StatusOr<BuiltRequest> Context::PreviewBuild(const BuildOptions& options) const {
  return impl_->PreviewBuild(options);
}
StatusOr<size_t> Context::CountRequest(const BuildOptions& options) const {
  return impl_->CountRequest(options);
}
void Context::Recycle(std::string body) { impl_->Recycle(std::move(body)); }
void Context::Recycle(std::string body, uint64_t render_serial) {
  impl_->RecycleRender(std::move(body), render_serial);
}
StatusOr<BuiltRequest> Context::Build(const BuildOptions& options) {
  return impl_->BuildWithinBudget(options);
}
size_t Context::InputTokens() const { return impl_->InputTokens(); }
StatusOr<std::optional<CompactionReport>> Context::Compact(bool force) {
  return impl_->Compact(force);
}
StatusOr<CompactionReport> Context::ApplyEdit(const HistoryEdit& edit, std::string policy,
                                              std::string reason) {
  return impl_->ApplyEdit(edit, std::move(policy), std::move(reason));
}
const std::vector<CompactionReport>& Context::Compactions() const { return impl_->Compactions(); }
StatusOr<std::string> Context::AnswerRecall(const std::string& tool_call_id, size_t max_tokens) {
  return impl_->AnswerRecall(tool_call_id, max_tokens);
}
std::vector<Segment> Context::Segments() const { return impl_->Segments(); }
std::vector<const Segment*> Context::LayerSegments(Layer layer) const {
  return impl_->LayerSegments(layer);
}
std::vector<SegmentFingerprint> Context::Fingerprints() const { return impl_->Fingerprints(); }
std::vector<SegmentFingerprint> Context::FingerprintsAfter(
    const std::vector<SegmentFingerprint>& earlier, size_t* kept) const {
  return impl_->FingerprintsAfter(earlier, kept);
}
std::vector<SegmentFingerprint> Context::FingerprintsAfter(
    const std::vector<SegmentFingerprint>& earlier, size_t* kept, uint64_t* serial) const {
  return impl_->FingerprintsAfter(earlier, kept, serial);
}
const Segment* Context::Find(std::string_view id) const { return impl_->Find(id); }
StatusOr<std::string> Context::Recall(std::string_view recall_id) const {
  return impl_->Recall(recall_id);
}
ContextStats Context::Stats() const { return impl_->Stats(); }
ContextSnapshot Context::Snapshot() const { return impl_->Snapshot(); }
Status Context::Rewind(ContextSnapshot snapshot) { return impl_->Rewind(std::move(snapshot)); }
void Context::Mark() { impl_->Mark(); }
Status Context::RewindToMark() { return impl_->RewindToMark(); }
void Context::ClearMark() { impl_->ClearMark(); }
bool Context::HasMark() const { return impl_->HasMark(); }
bool Context::ChangedSinceMark() const { return impl_->ChangedSinceMark(); }
std::vector<LintWarning> Context::Lint() const { return impl_->Lint(); }

}  // namespace strata
