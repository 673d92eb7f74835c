// One request of a context, from build to record (turn.h).
#include "transport/turn.h"

#include <algorithm>
#include <iterator>
#include <optional>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <utility>

namespace strata::turn_internal {

uint64_t Fnv64(std::string_view text, uint64_t h) {
  for (unsigned char c : text) {
    h ^= c;
    h *= 1099511628211ULL;
  }
  return h;
}


namespace {

// The cause a changed (or added: old == nullptr) stable-layer segment gives.
std::string StableCause(const SegmentSignature& s, const SegmentSignature* old,
                        const std::vector<LintWarning>& warnings) {
  std::string lint;
  for (const LintWarning& w : warnings) {
    if (w.segment_id == s.id) lint = "lint hit (" + w.what + ": " + w.excerpt + ")";
  }
  if (!lint.empty()) return lint;
  if (s.layer == Layer::kTools) return "tools changed";
  if (s.layer == Layer::kSystem) return "system prompt changed";
  if (old == nullptr) return "document added";
  if (old->version != s.version) return "doc version change (" + old->version + " -> " + s.version + ")";
  return "document changed";
}

// The cause a removed stable-layer segment gives.
std::string RemovedCause(const SegmentSignature& s) {
  if (s.layer == Layer::kTools) return "tools changed";
  if (s.layer == Layer::kSystem) return "system prompt changed";
  return "document removed";
}

}  // namespace

std::vector<std::string> BreakCauses(const std::vector<SegmentSignature>& before,
                                     const std::vector<SegmentSignature>& now, bool compacted,
                                     const std::vector<LintWarning>& warnings,
                                     std::string* first_id, Layer* first_layer, size_t before_from) {
  std::vector<std::string> causes;
  auto add = [&](std::string cause) {
    if (std::find(causes.begin(), causes.end(), cause) == causes.end()) {
      causes.push_back(std::move(cause));
    }
  };
  // old[k] pairs with now[k]: the first before_from signatures of `before` are the request's too.
  const SegmentSignature* old_at = before.data() + std::min(before_from, before.size());
  const size_t olds = before.size() - std::min(before_from, before.size());
  size_t i = 0;
  while (i < olds && i < now.size() && old_at[i].id == now[i].id && old_at[i].hash == now[i].hash &&
         old_at[i].state == now[i].state && old_at[i].version == now[i].version) {
    ++i;
  }
  const SegmentSignature* first = i < now.size() ? &now[i] : (i < olds ? &old_at[i] : nullptr);
  if (first != nullptr) {
    *first_id = first->id;
    *first_layer = first->layer;
  }
  // The first i signatures are the same on both sides and give no cause; segment ids are unique on
  // each side, so none of the rest has its id among them: only the rest are compared, and a turn
  // that changed its end costs what it changed, not the number of segments.
  std::unordered_map<std::string_view, const SegmentSignature*> old_by_id;
  old_by_id.reserve(olds - std::min(i, olds));
  for (size_t k = i; k < olds; ++k) old_by_id.emplace(old_at[k].id, &old_at[k]);
  std::unordered_set<std::string_view> now_ids;
  now_ids.reserve(now.size() - std::min(i, now.size()));
  bool history_changed = false;
  bool history_altered = false;  // a history segment's state changed: a policy altered it
  for (size_t k = i; k < now.size(); ++k) {
    const SegmentSignature& s = now[k];
    now_ids.insert(s.id);
    auto it = old_by_id.find(s.id);
    const SegmentSignature* old = it == old_by_id.end() ? nullptr : it->second;
    if (s.layer == Layer::kHistory) {
      if (old != nullptr && old->state != s.state) history_altered = true;
      if (old != nullptr && old->hash != s.hash) history_changed = true;
      continue;
    }
    if (old != nullptr && old->hash == s.hash && old->version == s.version) continue;
    add(StableCause(s, old, warnings));
  }
  for (size_t k = i; k < olds; ++k) {
    const SegmentSignature& s = old_at[k];
    if (now_ids.count(s.id)) continue;
    if (s.layer == Layer::kHistory) {
      history_changed = true;
    } else {
      add(RemovedCause(s));
    }
  }
  // A compaction of this build, or one made before it (Context::Compact, or a build this turn
  // did not make) that altered segments in place.
  if (compacted || history_altered) {
    add("compaction");
  } else if (history_changed) {
    add("history segment changed");
  }
  return causes;
}

std::string JoinCauses(const std::vector<std::string>& causes) {
  std::string out;
  for (size_t i = 0; i < causes.size(); ++i) {
    if (i > 0) out += i + 1 == causes.size() ? " and " : ", ";
    out += causes[i];
  }
  return out.empty() ? "unknown" : out;
}

RequestIds::RequestIds(Clock* clock) {
  static const char kHex[] = "0123456789abcdef";
  uint64_t bits = (clock != nullptr ? clock : SystemClock())->Random64();
  for (int i = 0; i < 6; ++i, bits >>= 4) tag_ += kHex[bits % 16];
}

std::string RequestIds::Next(const std::string& agent_id) {
  return agent_id + "-" + tag_ + "-" + std::to_string(++sequence_);
}

StatusOr<SharedPrompt> TemplatePromptModel::Render(std::string_view body) {
  SharedPrompt prompt;
  if (template_ == nullptr) {
    STRATA_ASSIGN_OR_RETURN(PromptText text, RenderPromptText(body));
    prompt.text = std::make_shared<const std::string>(std::move(text.text));
    prompt.message_offsets = std::move(text.message_offsets);
    prompt.tools_bytes = text.tools_bytes;
    return prompt;
  }
  STRATA_ASSIGN_OR_RETURN(RenderedPrompt rendered, template_->RenderWithOffsets(body));
  prompt.text = std::make_shared<const std::string>(std::move(rendered.text));
  prompt.message_offsets = std::move(rendered.message_offsets);
  prompt.tools_bytes = rendered.preamble_bytes;
  return prompt;
}

size_t TemplatePromptModel::Count(std::string_view text) {
  if (exact()) return tokenizer_->Count(text);
  return text.size() / std::max<size_t>(1, options_.bytes_per_token);
}

std::shared_ptr<const PromptBlocks> TemplatePromptModel::Hash(std::string_view text,
                                                             std::string_view salt) {
  return std::make_shared<const PromptBlocks>(HashPrompt(text, salt, tokenizer_, options_));
}

TurnRun::TurnRun(const TurnEnv& env, const Context& context, std::string request_id) : env_(env) {
  if (env_.clock == nullptr) env_.clock = SystemClock();
  record_.agent_id = context.options().agent.id;
  record_.endpoint = env_.transport->Endpoint();
  record_.model = context.options().render.model;
  record_.started_unix_ms = env_.clock->UnixMillis();
  record_.request_id = std::move(request_id);
  start_us_ = env_.clock->NowMicros();
}

Status TurnRun::Build(Context& context, const BuildOptions& fields, const PrefixReference& reference) {
  env_.prompt->BeginBuild();
  StatusOr<BuiltRequest> built = context.Build(fields);
  if (!built.ok()) return built.status();
  const bool compacted = built->compaction.has_value();
  return Analyze(context, std::move(built).value(), reference, compacted, /*just_built=*/true);
}

Status TurnRun::Analyze(const Context& context, BuiltRequest built, const PrefixReference& reference,
                        bool compacted, bool just_built) {
  STRATA_ASSIGN_OR_RETURN(SharedPrompt prompt, just_built ? env_.prompt->RenderBuilt(built.body)
                                                          : env_.prompt->Render(built.body));
  built_ = std::move(built);
  prompt_ = std::move(prompt);
  blocks_ = env_.prompt->Hash(*prompt_.text, env_.salt);
  record_.cached_tokens_predicted = env_.model->Lookup(*blocks_);
  record_.input_tokens =
      built_.input_tokens_exact ? static_cast<int64_t>(built_.input_tokens) : blocks_->prompt_tokens;
  history_blocks_ = HistoryBlocks(prompt_);
  previous_history_blocks_ = reference.history_blocks;
  Resign(context, reference);
  locate_messages_ = !prompt_.message_offsets.empty();
  system_layout_ = context.options().render.system_layout;
  volatile_start_.reset();
  if (locate_messages_ && built_.layers[static_cast<int>(Layer::kVolatile)].segments > 0) {
    // Context::Segments() is the one accessor that lists the volatile items: copied only then.
    for (const Segment& s : context.Segments()) {
      if (s.layer != Layer::kVolatile) continue;
      volatile_start_ = s.id;  // the first: the volatile items are one message
      break;
    }
  }
  // A break: the request reuses fewer blocks than the previous request's history held.
  const size_t same = SharedChainPrefix(reference.hashes, blocks_->hashes);
  changed_.reset();
  break_causes_.clear();
  if (reference.hashes.empty() || static_cast<int64_t>(same) >= reference.history_blocks) {
    return Status::Ok();
  }
  PrefixBreakEvent e;
  e.kind = PrefixBreakEvent::Kind::kPrefixChanged;
  e.agent_id = record_.agent_id;
  e.request_id = record_.request_id;
  e.predicted_cached_tokens = record_.cached_tokens_predicted;
  e.previous_prompt_tokens = reference.history_blocks * static_cast<int64_t>(blocks_->block_tokens);
  Layer first_layer = Layer::kHistory;
  break_causes_ = BreakCauses(reference.signatures, signatures_, compacted, built_.warnings,
                              &e.segment_id, &first_layer, signatures_kept_);
  if (!e.segment_id.empty()) e.layer = std::string(LayerName(first_layer));
  e.reason = JoinCauses(break_causes_);
  changed_ = std::move(e);
  return Status::Ok();
}

Status TurnRun::AnalyzeInstead(const BuiltRequest& sent, const PrefixReference& reference) {
  STRATA_ASSIGN_OR_RETURN(SharedPrompt prompt, env_.prompt->Render(sent.body));
  built_ = sent;
  prompt_ = std::move(prompt);
  blocks_ = env_.prompt->Hash(*prompt_.text, env_.salt);
  record_.cached_tokens_predicted = env_.model->Lookup(*blocks_);
  record_.input_tokens =
      built_.input_tokens_exact ? static_cast<int64_t>(built_.input_tokens) : blocks_->prompt_tokens;
  history_blocks_ = reference.history_blocks;
  previous_history_blocks_ = reference.history_blocks;
  signatures_kept_ = reference.signatures.size();  // the reference's signatures stay
  signatures_.clear();
  signatures_serial_ = reference.signatures_serial;
  locate_messages_ = false;
  changed_.reset();
  break_causes_.clear();
  return Status::Ok();
}

void TurnRun::Resign(const Context& context, const PrefixReference& reference) {
  // The context keeps each segment's Fnv64 (SegmentFingerprint::hash, computed when the segment
  // is added or changed): the signatures the reference shares are compared, not copied.
  signatures_serial_ = reference.signatures_serial;
  signatures_ =
      context.FingerprintsAfter(reference.signatures, &signatures_kept_, &signatures_serial_);
}

std::optional<std::pair<std::string, Layer>> TurnRun::MessageStart(const PrefixReference& reference,
                                                                   size_t message,
                                                                   size_t messages) const {
  std::optional<std::pair<std::string, Layer>> found;
  size_t n = 0;
  bool system_open = false;
  auto visit = [&](const SegmentSignature& s) {
    if (s.layer == Layer::kTools) return;
    const bool stable =
        s.layer == Layer::kSystem || s.layer == Layer::kIndex || s.layer == Layer::kDocs;
    if (stable && system_layout_ == SystemLayout::kSingleMessage) {
      if (system_open) return;
      system_open = true;
    }
    if (n++ == message) found.emplace(s.id, s.layer);
  };
  for (size_t i = 0; i < signatures_kept_ && i < reference.signatures.size(); ++i) {
    visit(reference.signatures[i]);
  }
  for (const SegmentSignature& s : signatures_) visit(s);
  if (volatile_start_) {
    if (n++ == message) found.emplace(*volatile_start_, Layer::kVolatile);
  }
  if (n != messages) return std::nullopt;
  return found;
}

// Blocks of the prompt up to the end of its history (what the next request can reuse).
int64_t TurnRun::HistoryBlocks(const SharedPrompt& prompt) const {
  const std::string& text = *prompt.text;
  size_t end = text.size();
  // Without a volatile message the request's messages are its history: no second render.
  if (built_.layers[static_cast<int>(Layer::kVolatile)].segments > 0) {
    StatusOr<SharedPrompt> history =
        env_.prompt->Render(built_.body.substr(0, built_.history_end_bytes) + "]}");
    if (history.ok()) {
      const std::string& other = *history->text;
      size_t n = std::min(text.size(), other.size());
      end = static_cast<size_t>(std::mismatch(text.begin(), text.begin() + n, other.begin()).first -
                                text.begin());
    }
  }
  const std::string_view tail = std::string_view(text).substr(end);
  size_t tail_tokens = env_.prompt->exact()
                           ? env_.prompt->Count(tail)
                           : tail.size() / std::max<size_t>(1, env_.prompt->bytes_per_token());
  int64_t history_tokens = std::max<int64_t>(0, blocks_->prompt_tokens - static_cast<int64_t>(tail_tokens));
  int64_t n = std::min<int64_t>(static_cast<int64_t>(blocks_->cacheable_blocks),
                                history_tokens / static_cast<int64_t>(std::max<size_t>(1, blocks_->block_tokens)));
  // Tokens at the history end may merge with what follows: that block is not counted stable.
  if (env_.prompt->exact() && n > 0) --n;
  return n;
}

CallOptions TurnRun::CallFor(CallOptions call) const {
  call.request_id = record_.request_id;
  call.prompt_tokens =
      blocks_->prompt_tokens > 0 ? blocks_->prompt_tokens : static_cast<int64_t>(built_.input_tokens);
  return call;
}

Status TurnRun::Send(const CallOptions& call, Response* response) {
  Status sent = env_.transport->Send(built_.body, call, response);
  record_.attempts = response->attempts;
  record_.http_status = response->http_status;
  record_.ttft_ms = response->timings.ttft_ms;
  record_.decode_ms = response->timings.decode_ms;
  return sent;
}

// A kServerShortfall event when the server served less than the model predicted, by more than one
// block, locating the segment where its reported cache ends when the message offsets are known.
std::optional<PrefixBreakEvent> TurnRun::Shortfall(const PrefixReference& reference) const {
  const RequestRecord& rec = record_;
  if (!rec.cached_tokens_reported ||
      *rec.cached_tokens_reported + static_cast<int64_t>(blocks_->block_tokens) >= rec.cached_tokens_predicted) {
    return std::nullopt;
  }
  PrefixBreakEvent e;
  e.kind = PrefixBreakEvent::Kind::kServerShortfall;
  e.agent_id = rec.agent_id;
  e.request_id = rec.request_id;
  e.predicted_cached_tokens = rec.cached_tokens_predicted;
  e.reported_cached_tokens = rec.cached_tokens_reported;
  e.previous_prompt_tokens = previous_history_blocks_ * static_cast<int64_t>(blocks_->block_tokens);
  if (locate_messages_) {
    // Where the server's cache ends: the reported tokens' share of the prompt's bytes.
    const std::string& text = *prompt_.text;
    const int64_t total = std::max<int64_t>(1, blocks_->prompt_tokens);
    size_t offset = std::min(text.size(), static_cast<size_t>(static_cast<double>(*rec.cached_tokens_reported) /
                                                              static_cast<double>(total) * text.size()));
    size_t message = 0;
    for (size_t i = 0; i < prompt_.message_offsets.size(); ++i) {
      if (prompt_.message_offsets[i] <= offset) message = i;
    }
    if (offset < prompt_.tools_bytes) {
      e.layer = "tools";
    } else if (std::optional<std::pair<std::string, Layer>> start =
                   MessageStart(reference, message, prompt_.message_offsets.size())) {
      e.segment_id = std::move(start->first);
      e.layer = std::string(LayerName(start->second));
    }
  }
  e.reason = "server evicted or mismatched (reported " + std::to_string(*rec.cached_tokens_reported) +
             " cached tokens, predicted " + std::to_string(rec.cached_tokens_predicted) + ")";
  if (changed_) e.reason += "; the prompt also changed: " + changed_->reason;
  return e;
}

void TurnRun::Finish(const Response& resp, PrefixReference* reference, bool keep_reference) {
  if (resp.usage.reported && resp.usage.prompt_tokens > 0) record_.input_tokens = resp.usage.prompt_tokens;
  record_.cached_tokens_reported = resp.usage.cached_tokens;
  record_.output_tokens = resp.usage.completion_tokens;
  record_.reasoning_tokens = resp.usage.reasoning_tokens;
  record_.finish_reason = resp.finish_reason;
  record_.kv_cache_bytes =
      (record_.input_tokens + record_.output_tokens) * env_.kv_bytes_per_token + env_.kv_bytes_per_sequence;
  env_.model->Insert(*blocks_);
  std::optional<PrefixBreakEvent> shortfall = Shortfall(*reference);
  prefix_break_ = shortfall ? shortfall : changed_;
  StampDuration();
  if (!keep_reference) {
    // The hashes the reference shares with this chain stay; the rest of its history is copied.
    const std::vector<uint64_t>& hashes = blocks_->hashes;
    const size_t history = std::min<size_t>(static_cast<size_t>(std::max<int64_t>(0, history_blocks_)),
                                            hashes.size());
    const size_t same = std::min(SharedChainPrefix(reference->hashes, hashes), history);
    reference->hashes.resize(same);
    reference->hashes.insert(reference->hashes.end(), hashes.begin() + same, hashes.begin() + history);
  }
  reference->history_blocks = history_blocks_;
  // The run's own signatures are not read after this.
  reference->signatures.resize(std::min(signatures_kept_, reference->signatures.size()));
  reference->signatures.insert(reference->signatures.end(),
                               std::make_move_iterator(signatures_.begin()),
                               std::make_move_iterator(signatures_.end()));
  signatures_.clear();
  signatures_kept_ = reference->signatures.size();
  reference->signatures_serial = signatures_serial_;
}

void TurnRun::StampDuration() {
  record_.total_ms = static_cast<double>(env_.clock->NowMicros() - start_us_) / 1000.0;
}

void TurnRun::Fail(const Status& status) {
  record_.code = status.code();
  record_.error = status.message();
  prefix_break_.reset();  // a failed request reports no break
  StampDuration();
}

void TurnRun::Warn(std::string warning) {
  warnings_.push_back(std::move(warning));
  if (env_.write_failures != nullptr) env_.write_failures->fetch_add(1);
}

void TurnRun::Emit(RecordSink* sink, const std::function<void(const PrefixBreakEvent&)>& on_break) {
  // The break first, then the record (the order a JSON-lines sink has always written them in).
  if (prefix_break_ && on_break) on_break(*prefix_break_);
  if (sink == nullptr) return;
  if (prefix_break_) {
    if (Status written = sink->WriteEvent(*prefix_break_); !written.ok()) {
      Warn("the prefix-break event of request " + record_.request_id +
           " was not written: " + written.message());
    }
  }
  if (Status written = sink->Write(record_); !written.ok()) {
    Warn("the record of request " + record_.request_id + " was not written: " + written.message());
  }
}

}  // namespace strata::turn_internal
