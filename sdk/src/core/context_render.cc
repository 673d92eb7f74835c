// Context, the render buffers and the request they assemble: header_ (model, tools, the stable
// system message(s)) is rebuilt when a stable layer changes; history_buf_ grows by one message per
// append and is re-rendered from the first edited segment on after an edit; Render() joins them
// with the volatile message and the extra fields.
#include <algorithm>
#include <atomic>
#include <set>

#include "core/context_impl.h"
#include "core/hygiene.h"
#include "core/json_text.h"
#include "core/large_block.h"
#include "core/text_util.h"

namespace strata {

using internal::AppendJsonString;
using internal::IsRendered;
using internal::JoinNames;
using internal::kNoOffset;
using internal::ValidateUtf8;

namespace {

// The capacity a request body is allocated with: from 64 KB on, its size rounded up to a multiple
// of the power of two between a 16th and an 8th of it (at most 12.5% more). Each turn's body is a
// little longer than the last one, and glibc maps every allocation above its mmap threshold
// afresh, raising the threshold only to the size last freed: bodies of exactly their size would
// each be mapped anew and have every page faulted in again. Rounded, successive bodies ask for the
// same size for many turns and reuse the memory the previous one freed (a body of 4 MB growing by
// 2 KB a turn: a new mapping every 128 to 256 turns), and a body handed back
// with Recycle() holds the next one until the history has grown by the headroom. When the caller
// recycles (`recycling`: it handed back a body too small for this one), the body gets room for a
// quarter more, and holds the next bodies for longer than the rounding's headroom would.
size_t BodyCapacity(size_t bytes, bool recycling) {
  if (recycling) bytes += bytes / 4;
  constexpr size_t kFrom = size_t{64} << 10;
  if (bytes < kFrom) return bytes;
  size_t step = kFrom >> 4;
  while ((step << 4) <= bytes) step <<= 1;
  return (bytes + step - 1) / step * step;
}

// Reserves `capacity` in an empty string, from memory the allocator keeps when it can
// (core/large_block.h): a body larger than any before is not mapped afresh and faulted in whole.
void ReserveBody(std::string& body, size_t capacity) {
  internal::PrepareLargeBlock(capacity + 1);  // a string allocates one byte more, its terminator's
  body.reserve(capacity);
}

// Serials of every context's renders: unique in the process, so that a serial kept from one
// render never names another (a context restored from a snapshot renders with new ones).
uint64_t NextRenderSerial() {
  static std::atomic<uint64_t> serial{0};
  return serial.fetch_add(1, std::memory_order_relaxed) + 1;
}

void AppendDocumentBlock(std::string& out, const Segment& s) {
  out += "<document layer=\"";
  out += LayerName(s.layer);
  out += "\" name=\"";
  out += s.name;
  out += "\"";
  if (!s.version.empty()) {
    out += " version=\"";
    out += s.version;
    out += "\"";
  }
  out += ">\n";
  out += s.content;
  out += "\n</document>";
}

// The text of a stable segment inside the system message.
std::string StableText(const Segment& s) {
  if (s.layer == Layer::kSystem) return s.content;
  std::string out;
  AppendDocumentBlock(out, s);
  return out;
}

void AppendSystemMessage(std::string& out, std::string_view content) {
  out += "{\"role\":\"system\",\"content\":";
  AppendJsonString(out, content);
  out += "}";
}

// `,"name":value` for each extra field (values canonicalized), refusing the names the context
// renders itself and duplicates. A field the last render had with the same value (`last`, whose
// canonical values are `last_values`) takes its canonical value from there; *values receives
// this render's.
StatusOr<std::string> RenderExtraFields(
    const std::vector<std::pair<std::string, std::string>>& fields,
    const std::vector<std::pair<std::string, std::string>>& last,
    const std::vector<std::string>& last_values, std::vector<std::string>* values) {
  std::string extra;
  std::set<std::string> seen;
  values->clear();
  for (size_t i = 0; i < fields.size(); ++i) {
    const auto& [name, value] = fields[i];
    if (name.empty()) return InvalidArgumentError("extra request field with an empty name");
    STRATA_RETURN_IF_ERROR(ValidateUtf8(name, "extra field name"));
    if (name == "model" || name == "tools" || name == "messages") {
      return InvalidArgumentError("extra field \"" + name +
                                  "\" is rendered by the context itself; set it through "
                                  "RenderOptions or the context's layers instead");
    }
    if (!seen.insert(name).second) {
      return InvalidArgumentError("extra field \"" + name + "\" given twice");
    }
    if (i < last.size() && i < last_values.size() && last[i].second == value) {
      values->push_back(last_values[i]);
    } else {
      STRATA_ASSIGN_OR_RETURN(std::string canonical,
                              internal::CanonicalizeJson(value, "extra field \"" + name + "\""));
      values->push_back(std::move(canonical));
    }
    extra.push_back(',');
    AppendJsonString(extra, name);
    extra.push_back(':');
    extra += values->back();
  }
  return extra;
}

uint64_t Fnv64(std::string_view text, uint64_t h) {
  for (unsigned char c : text) {
    h ^= c;
    h *= 1099511628211ULL;
  }
  return h;
}

}  // namespace

uint64_t internal::FingerprintHash(const Segment& s) {
  uint64_t h = Fnv64(s.content, 1469598103934665603ULL);
  h = Fnv64(s.reasoning, h ^ 0x1f);
  for (const ToolCall& c : s.tool_calls) {
    h = Fnv64(c.id, h);
    h = Fnv64("\x1f", h);
    h = Fnv64(c.name, h);
    h = Fnv64("\x1f", h);
    h = Fnv64(c.arguments, h);
  }
  return h;
}

// The volatile layer's one message ("key: value" lines), or "" when the layer is empty.
std::string Context::Impl::RenderVolatileMessage() const {
  if (volatile_.empty()) return "";
  std::string text;
  for (size_t i = 0; i < volatile_.size(); ++i) {
    if (i) text.push_back('\n');
    text += volatile_[i].first;
    text += ": ";
    text += volatile_[i].second;
  }
  std::string message = "{\"role\":";
  AppendJsonString(message, options_.render.volatile_role);
  message += ",\"content\":";
  AppendJsonString(message, text);
  message += "}";
  return message;
}

StatusOr<BuiltRequest> Context::Impl::Render(const BuildOptions& build) const {
  if (!open_calls_.empty()) {
    return FailedPreconditionError("cannot build a request while tool calls are unanswered (" +
                                   JoinNames(open_calls_) +
                                   "); servers reject an assistant tool call without its result — "
                                   "append the results first");
  }
  // A turn's fields are usually the previous turn's: their canonical rendering is kept.
  if (build.extra_fields != extra_fields_rendered_for_) {
    std::vector<std::string> values;
    STRATA_ASSIGN_OR_RETURN(std::string rendered,
                            RenderExtraFields(build.extra_fields, extra_fields_rendered_for_,
                                              extra_field_values_, &values));
    extra_fields_rendered_ = std::move(rendered);
    extra_fields_rendered_for_ = build.extra_fields;
    extra_field_values_ = std::move(values);
  }
  const std::string& extra = extra_fields_rendered_;
  const std::string volatile_message = RenderVolatileMessage();
  const size_t history_messages = rendered_history_messages_;
  const size_t messages = stable_messages_ + history_messages + (volatile_.empty() ? 0 : 1);
  if (messages == 0) {
    return FailedPreconditionError(
        "nothing to send: the context has no messages; set a system prompt or append a user "
        "message first");
  }

  BuiltRequest out;
  std::string& body = out.body;
  const size_t size =
      header_.size() + 1 + history_buf_.size() + 1 + volatile_message.size() + 1 + extra.size() + 1;
  // The spare memory holds the last render itself (a build's own render before its compaction):
  // the bytes this render shares with it stay, and only the rest is written.
  const size_t unchanged = UnchangedSinceLastRender();
  const bool continues =
      spare_serial_ != 0 && spare_serial_ == last_render_serial_ && spare_body_.size() >= unchanged;
  if (continues) {
    body.swap(spare_body_);
    body.resize(unchanged);
    if (body.capacity() < size) {
      // Too small for this body: its kept bytes move once into room for the next bodies too (a
      // fresh string's reserve() is exact; a non-empty one's would at least double).
      std::string room;
      ReserveBody(room, BodyCapacity(size, /*recycling=*/true));
      room.append(body);
      body.swap(room);
    }
  } else if (spare_body_.capacity() >= size) {
    body.swap(spare_body_);  // memory already faulted in; what it held is overwritten
    body.clear();
  } else {
    // An empty string's capacity is its inline buffer's: anything more was handed back.
    ReserveBody(body, BodyCapacity(size, spare_body_.capacity() > std::string().capacity()));
  }
  spare_body_ = std::string();
  spare_serial_ = 0;
  if (body.size() < header_.size()) body.assign(header_);
  out.stable_prefix_bytes = header_.size();
  if (!history_buf_.empty()) {
    // The history starts after the header and, when there are stable messages, a comma.
    const size_t history_start = header_.size() + (stable_messages_ > 0 ? 1 : 0);
    if (body.size() < history_start) body.push_back(',');
    body.append(history_buf_.view().substr(body.size() - history_start));
  }
  out.history_end_bytes = body.size();
  if (!volatile_message.empty()) {
    if (stable_messages_ + history_messages > 0) body.push_back(',');
    body += volatile_message;
  }
  body.push_back(']');
  body += extra;
  body.push_back('}');

  out.stable_prefix_hash = stable_prefix_hash_;
  out.message_count = messages;
  for (int i = 0; i < kLayerCount; ++i) out.layers[i] = usage_[i];
  LayerUsage& vol = out.layers[internal::LayerIndex(Layer::kVolatile)];
  for (const auto& item : volatile_) {
    vol.segments += 1;
    vol.bytes += item.first.size() + 2 + item.second.size();
    vol.tokens += tokenizer_->Count(item.first) + tokenizer_->Count(item.second) + 1;
  }
  for (const LayerUsage& usage : out.layers) out.total_tokens += usage.tokens;
  out.input_tokens = InputTokens();
  out.limit_tokens = LimitTokens();
  out.tokens_estimated = tokenizer_->IsEstimate();
  out.warnings = lint_;
  NoteRender(unchanged, &out);
  return out;
}

// The bytes `out` shares with the last render: the header when it was not rebuilt since, and
// with it the history up to the shortest it has been since (appends leave the bytes before them
// as they were; an edit re-renders from its boundary). Then `out` becomes the last render.
size_t Context::Impl::UnchangedSinceLastRender() const {
  if (last_render_serial_ == 0 || last_render_header_generation_ != header_generation_) return 0;
  const size_t history = std::min(history_low_water_, last_render_history_bytes_);
  // Both bodies have the history after the header (and its comma) when both have one.
  return header_.size() + (history > 0 ? (stable_messages_ > 0 ? 1 : 0) + history : 0);
}

void Context::Impl::NoteRender(size_t unchanged, BuiltRequest* out) const {
  out->unchanged_bytes = unchanged;
  out->render_serial = NextRenderSerial();
  out->previous_render_serial = last_render_serial_;
  last_render_serial_ = out->render_serial;
  last_render_header_generation_ = header_generation_;
  last_render_history_bytes_ = history_buf_.size();
  last_render_bytes_ = out->body.size();
  history_low_water_ = history_buf_.size();
}

// Appends the rendered JSON of one history message.
void Context::Impl::RenderHistoryMessage(std::string& out, const Segment& s) const {
  switch (s.kind) {
    case SegmentKind::kAssistant:
    case SegmentKind::kToolCall: {
      out += "{\"role\":\"assistant\",\"content\":";
      AppendJsonString(out, s.content);
      if (!s.reasoning.empty() && !options_.render.reasoning_field.empty()) {
        out.push_back(',');
        AppendJsonString(out, options_.render.reasoning_field);
        out.push_back(':');
        AppendJsonString(out, s.reasoning);
      }
      if (!s.tool_calls.empty()) {
        out += ",\"tool_calls\":[";
        for (size_t i = 0; i < s.tool_calls.size(); ++i) {
          if (i) out.push_back(',');
          out += "{\"id\":";
          AppendJsonString(out, s.tool_calls[i].id);
          out += ",\"type\":\"function\",\"function\":{\"name\":";
          AppendJsonString(out, s.tool_calls[i].name);
          out += ",\"arguments\":";
          AppendJsonString(out, s.tool_calls[i].arguments);
          out += "}}";
        }
        out.push_back(']');
      }
      out.push_back('}');
      return;
    }
    case SegmentKind::kToolResult:
    case SegmentKind::kErrorLog:
      out += "{\"role\":\"tool\",\"tool_call_id\":";
      AppendJsonString(out, s.tool_call_id);
      out += ",\"content\":";
      AppendJsonString(out, s.content);
      out.push_back('}');
      return;
    case SegmentKind::kSystem:
      AppendSystemMessage(out, s.content);
      return;
    default:  // user, summary
      out += "{\"role\":\"user\",\"content\":";
      AppendJsonString(out, s.content);
      out.push_back('}');
      return;
  }
}

// An upper bound of the bytes RenderHistoryMessage adds for `s` (plus the separator).
size_t Context::Impl::RenderedSizeBound(const Segment& s) const {
  size_t bytes = 128 + options_.render.reasoning_field.size() +
                 internal::JsonStringSize(s.content) + internal::JsonStringSize(s.reasoning) +
                 internal::JsonStringSize(s.tool_call_id);
  for (const ToolCall& call : s.tool_calls) {
    bytes += 64 + internal::JsonStringSize(call.id) + internal::JsonStringSize(call.name) +
             internal::JsonStringSize(call.arguments);
  }
  return bytes;
}

// Grows the history buffer by a quarter at a time: a 1M-token history holds at most 25% slack,
// and appends stay amortized O(1). Past GrowingText::kMapFrom the growth remaps the buffer's
// pages: the history is not copied (nor faulted in again) when it grows.
void Context::Impl::ReserveHistory(size_t extra) {
  const size_t needed = history_buf_.size() + extra;
  if (needed <= history_buf_.capacity()) return;
  history_buf_.reserve(std::max(needed, history_buf_.size() + history_buf_.size() / 4 + 4096));
}

std::string Context::Impl::ApplyHistoryAppend(Segment s) {
  if (s.seq >= next_seq_) next_seq_ = s.seq + 1;
  if (s.position >= next_position_) next_position_ = s.position + 1;
  index_[s.id] = {Layer::kHistory, history_.size()};
  std::string id = s.id;
  history_.push_back(std::move(s));
  RenderHistoryAt(history_.size() - 1);
  return id;
}

// Appends the JSON of history_[i] (the last segment rendered so far + 1) to history_buf_.
void Context::Impl::RenderHistoryAt(size_t i) {
  const Segment& s = history_[i];
  history_usage_before_.push_back(Usage(Layer::kHistory));
  if (!IsRendered(s)) {
    history_offsets_.push_back(kNoOffset);
    history_hashes_.push_back(0);
    return;
  }
  history_hashes_.push_back(internal::FingerprintHash(s));
  if (input_view_.valid) input_view_.Add(&s, history_hashes_.back(), OriginalBytesOf(s));
  const size_t bound = RenderedSizeBound(s);
  ReserveHistory(bound);
  history_offsets_.push_back(history_buf_.size());
  if (!history_buf_.empty()) history_buf_.push_back(',');
  std::string message;  // this message's JSON, then appended (no memory kept past it)
  message.reserve(bound);
  RenderHistoryMessage(message, s);
  history_buf_.append(message);
  ++rendered_history_messages_;
  LayerUsage& usage = Usage(Layer::kHistory);
  usage.segments += 1;
  usage.bytes += ContentBytes(s);
  usage.tokens += s.tokens;
}

// Re-renders the history from segment `index` on (after an edit); bytes before it stay as they
// are. history_offsets_ must describe the buffer as it was before the edit up to `index`.
void Context::Impl::RerenderHistoryFrom(size_t index) {
  size_t cut = history_buf_.size();
  for (size_t i = index; i < history_offsets_.size(); ++i) {
    if (history_offsets_[i] != kNoOffset) {
      cut = history_offsets_[i];
      break;
    }
  }
  history_buf_.truncate(cut);
  history_low_water_ = std::min(history_low_water_, cut);
  fingerprints_.low_water = std::min(fingerprints_.low_water, index);
  history_offsets_.resize(index);
  history_hashes_.resize(index);
  // The usage of the segments before `index`, as it was when segment `index` was rendered (an
  // index past the last rendered segment cuts nothing).
  LayerUsage& usage = Usage(Layer::kHistory);
  if (index < history_usage_before_.size()) {
    usage = history_usage_before_[index];
    history_usage_before_.resize(index);
  }
  rendered_history_messages_ = usage.segments;
  if (input_view_.valid) input_view_.Cut(usage.segments);
  for (size_t i = index; i < history_.size(); ++i) RenderHistoryAt(i);
}

size_t Context::Impl::OriginalBytesOf(const Segment& s) const {
  if (s.state != SegmentState::kLive || s.hygiene == HygieneAction::kNone) return 0;
  auto kept = recall_.find(s.recall_id);
  return kept != recall_.end() ? kept->second.size() : 0;
}

void Context::Impl::RebuildHeader() {
  std::string header = "{\"model\":";
  AppendJsonString(header, options_.render.model);
  const std::vector<Segment>& tools = StableSlot(Layer::kTools);
  if (!tools.empty()) {
    header += ",\"tools\":[";
    for (size_t i = 0; i < tools.size(); ++i) {
      if (i) header.push_back(',');
      header += tools[i].content;
    }
    header.push_back(']');
  }
  header += ",\"messages\":[";
  stable_messages_ = 0;
  lint_.clear();
  std::string combined;
  for (Layer layer : {Layer::kSystem, Layer::kIndex, Layer::kDocs}) {
    for (const Segment& s : StableSlot(layer)) {
      for (internal::LintHit& hit : internal::ScanVolatileLooking(s.content)) {
        lint_.push_back(
            LintWarning{s.id, s.layer, std::move(hit.what), hit.offset, std::move(hit.excerpt)});
      }
      if (options_.render.system_layout == SystemLayout::kMessagePerSegment) {
        if (stable_messages_ > 0) header.push_back(',');
        AppendSystemMessage(header, StableText(s));
        ++stable_messages_;
      } else {
        if (!combined.empty()) combined += "\n\n";
        combined += StableText(s);
      }
    }
  }
  if (options_.render.system_layout == SystemLayout::kSingleMessage &&
      (!StableSlot(Layer::kSystem).empty() || !StableSlot(Layer::kIndex).empty() ||
       !StableSlot(Layer::kDocs).empty())) {
    AppendSystemMessage(header, combined);
    stable_messages_ = 1;
  }
  for (size_t l = 0; l < stable_.size(); ++l) {
    stable_hashes_[l].clear();
    for (const Segment& s : stable_[l]) stable_hashes_[l].push_back(internal::FingerprintHash(s));
  }
  header_ = std::move(header);
  ++header_generation_;
  stable_prefix_hash_ = internal::Sha256Hex(header_);
}

}  // namespace strata
