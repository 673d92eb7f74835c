// Client: build -> predict -> send -> append -> record, and prefix-break explanations.
#include "strata/client.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <functional>
#include <map>
#include <mutex>

#include "strata/isolation.h"
#include "transport/retry.h"

namespace strata {
namespace {

// What identifies a rendered segment, to find the first one that differs between two requests.
struct SegmentSignature {
  std::string id;
  Layer layer = Layer::kHistory;
  SegmentKind kind = SegmentKind::kUser;
  SegmentState state = SegmentState::kLive;
  std::string version;
  size_t content_hash = 0;
};

std::vector<SegmentSignature> Signatures(const Context& context) {
  std::vector<SegmentSignature> out;
  for (const Segment& s : context.Segments()) {
    if (s.state == SegmentState::kEvicted || s.state == SegmentState::kSummarized) continue;
    SegmentSignature sig{s.id, s.layer, s.kind, s.state, s.version, 0};
    std::string all = s.content;
    all += '\x1f';
    all += s.reasoning;
    for (const ToolCall& c : s.tool_calls) all += '\x1f' + c.id + '\x1f' + c.name + '\x1f' + c.arguments;
    sig.content_hash = std::hash<std::string>{}(all);
    out.push_back(std::move(sig));
  }
  return out;
}

// The segment that starts each rendered message (kSingleMessage: the stable layers share one).
std::vector<SegmentSignature> MessageStarts(const std::vector<SegmentSignature>& sigs, SystemLayout layout) {
  std::vector<SegmentSignature> out;
  bool system_open = false;
  bool volatile_open = false;
  for (const SegmentSignature& s : sigs) {
    if (s.layer == Layer::kTools) continue;
    bool stable = s.layer == Layer::kSystem || s.layer == Layer::kIndex || s.layer == Layer::kDocs;
    if (stable && layout == SystemLayout::kSingleMessage) {
      if (!system_open) out.push_back(s);
      system_open = true;
      continue;
    }
    if (s.layer == Layer::kVolatile) {
      if (!volatile_open) out.push_back(s);
      volatile_open = true;
      continue;
    }
    out.push_back(s);
  }
  return out;
}

std::string ReasonFor(const SegmentSignature* now, const SegmentSignature* before,
                      const std::vector<LintWarning>& warnings) {
  const SegmentSignature* s = now != nullptr ? now : before;
  if (s == nullptr) return "unknown";
  for (const LintWarning& w : warnings) {
    if (w.segment_id == s->id) return "lint hit (" + w.what + ": " + w.excerpt + ")";
  }
  switch (s->layer) {
    case Layer::kTools: return "tools changed";
    case Layer::kSystem: return "system prompt changed";
    case Layer::kIndex:
    case Layer::kDocs:
      if (now != nullptr && before != nullptr && now->id == before->id && now->version != before->version) {
        return "doc version change (" + before->version + " -> " + now->version + ")";
      }
      return now == nullptr ? "document removed" : (before == nullptr ? "document added" : "document changed");
    case Layer::kHistory:
      if (now == nullptr || before == nullptr || now->id != before->id || now->state != before->state ||
          now->kind == SegmentKind::kSummary) {
        return "compaction";
      }
      return "history segment changed";
    case Layer::kVolatile: return "volatile content";
  }
  return "unknown";
}

// The prompt text of `body` and where its messages start: the configured chat template's, else
// the default GLM-5.3 template's (RenderPromptText). Either renders the chat_template_kwargs the
// body carries (clear_thinking, enable_thinking) as the server's template does.
StatusOr<PromptText> PromptFor(const ChatTemplate* chat_template, std::string_view body) {
  if (chat_template == nullptr) return RenderPromptText(body);
  STRATA_ASSIGN_OR_RETURN(RenderedPrompt rendered, chat_template->RenderWithOffsets(body));
  PromptText prompt;
  prompt.text = std::move(rendered.text);
  prompt.message_offsets = std::move(rendered.message_offsets);
  prompt.tools_bytes = rendered.preamble_bytes;
  return prompt;
}

}  // namespace

class Client::Impl {
 public:
  explicit Impl(ClientOptions options)
      : options_(std::move(options)),
        clock_(options_.clock != nullptr ? options_.clock : SystemClock()),
        model_(options_.cache) {
    static const char kHex[] = "0123456789abcdef";
    uint64_t bits = clock_->Random64();
    for (int i = 0; i < 6; ++i, bits >>= 4) instance_tag_ += kHex[bits % 16];
  }

  std::string SaltFor(const AgentIdentity& agent) const {
    bool per_agent = std::find(options_.per_agent_salt_agents.begin(), options_.per_agent_salt_agents.end(),
                               agent.id) != options_.per_agent_salt_agents.end();
    return DeriveCacheSalt(options_.deployment_secret, IsolationKeyOf(agent, per_agent));
  }

  StatusOr<BuiltRequest> Preview(const Context& context, const std::string& request_id) const {
    return context.Preview(Options(context, request_id));
  }

  BuildOptions Options(const Context& context, const std::string& request_id) const {
    RequestFields fields;
    fields.stream = options_.stream;
    fields.max_output_tokens = options_.max_output_tokens;
    if (options_.send_cache_salt) fields.cache_salt = SaltFor(context.options().agent);
    fields.request_id = request_id;
    fields.thinking = options_.thinking;
    fields.reasoning_effort = options_.reasoning_effort;
    fields.keep_reasoning = !context.options().render.reasoning_field.empty();
    BuildOptions build;
    build.extra_fields = ProfileFields(options_.backend, fields);
    return build;
  }

  StatusOr<Completion> Complete(Context& context, const CompleteOptions& copt) {
    const AgentIdentity& agent = context.options().agent;
    RequestRecord rec;
    rec.agent_id = agent.id;
    rec.pool = options_.pool;
    rec.endpoint = options_.transport->Endpoint();
    rec.model = context.options().render.model;
    rec.started_unix_ms = clock_->UnixMillis();
    rec.request_id = !copt.request_id.empty() ? copt.request_id
                                               : agent.id + "-" + instance_tag_ + "-" + std::to_string(++sequence_);
    const int64_t start_us = clock_->NowMicros();
    auto fail = [&](Status status) -> Status {
      rec.code = status.code();
      rec.error = status.message();
      rec.total_ms = static_cast<double>(clock_->NowMicros() - start_us) / 1000.0;
      Emit(rec);
      return status;
    };

    // Build() (unlike Preview()) may compact the history first (budget and policy permitting).
    StatusOr<BuiltRequest> built = context.Build(Options(context, rec.request_id));
    if (!built.ok()) return fail(built.status());
    const std::string salt = options_.send_cache_salt ? SaltFor(agent) : std::string();
    StatusOr<PromptText> prompt = PromptFor(options_.chat_template, built->body);
    if (!prompt.ok()) return fail(prompt.status());
    PromptBlocks blocks = HashPrompt(prompt->text, salt, options_.tokenizer, model_.options());
    rec.cached_tokens_predicted = model_.Lookup(blocks);
    rec.input_tokens = blocks.prompt_tokens;

    std::vector<SegmentSignature> sigs = Signatures(context);
    std::vector<SegmentSignature> starts = MessageStarts(sigs, context.options().render.system_layout);
    const size_t history_blocks = HistoryBlocks(*built, *prompt, blocks, starts);

    std::optional<PrefixBreakEvent> changed = PredictBreak(agent.id, rec, blocks, sigs, built->warnings);
    if (changed && built->compaction.has_value()) changed->reason = "compaction";

    Completion done;
    done.body = built->body;
    CallOptions call;
    call.deadline = options_.deadline;
    call.cancel = copt.cancel;
    call.request_id = rec.request_id;
    call.headers = copt.headers;
    call.prompt_tokens = blocks.prompt_tokens;  // scales the first-byte timeout to the prefill
    Status sent = options_.transport->Send(built->body, call, &done.response);
    const Response& resp = done.response;
    rec.attempts = resp.attempts;
    rec.http_status = resp.http_status;
    rec.ttft_ms = resp.timings.ttft_ms;
    rec.decode_ms = resp.timings.decode_ms;
    if (!sent.ok()) return fail(sent);

    model_.Insert(blocks);
    RecordUsage(resp, rec);

    if (copt.append_reply) {
      AssistantMessage message;
      message.content = resp.content;
      message.reasoning = resp.reasoning;
      message.tool_calls = resp.tool_calls;
      StatusOr<std::string> appended = context.AppendAssistant(std::move(message));
      if (!appended.ok()) {
        return fail(Status(appended.status().code(),
                           "the server's reply could not be appended: " + appended.status().message()));
      }
      done.assistant_segment_id = *appended;
    }
    rec.total_ms = static_cast<double>(clock_->NowMicros() - start_us) / 1000.0;

    if (std::optional<PrefixBreakEvent> shortfall = ServerShortfall(rec, blocks, *prompt, starts, changed)) {
      done.prefix_break = shortfall;
      EmitEvent(*shortfall);
    } else if (changed) {
      done.prefix_break = changed;
      EmitEvent(*changed);
    }
    RememberPrefix(agent.id, blocks, history_blocks, std::move(sigs));
    Emit(rec);
    done.record = rec;
    return done;
  }

  ClientOptions options_;
  Clock* clock_;  // options_.clock or SystemClock()
  PrefixCacheModel model_;

 private:
  // How many of the prompt's blocks the next request can reuse: those before the history's end in
  // the prompt (where the volatile message starts, else before the generation prompt).
  size_t HistoryBlocks(const BuiltRequest& built, const PromptText& prompt, const PromptBlocks& blocks,
                       const std::vector<SegmentSignature>& starts) const {
    size_t history_end = prompt.text.size() - std::string_view("<|assistant|>").size();
    if (options_.chat_template != nullptr || prompt.message_offsets.empty()) {
      // The prompt of the body cut after the last history message: the common prefix with the full
      // prompt ends where the history ends (whatever the template adds after it differs).
      std::string cut = built.body.substr(0, built.history_end_bytes) + "]}";
      StatusOr<PromptText> history = PromptFor(options_.chat_template, cut);
      if (history.ok()) {
        const std::string& a = prompt.text;
        const std::string& b = history->text;
        size_t n = std::min(a.size(), b.size());
        history_end = static_cast<size_t>(std::mismatch(a.begin(), a.begin() + n, b.begin()).first - a.begin());
      }
    } else if (!starts.empty() && starts.back().layer == Layer::kVolatile) {
      history_end = prompt.message_offsets.back();
    }
    size_t history_blocks = std::min(blocks.cacheable_blocks, BlocksIn(prompt.text, history_end));
    // With an exact tokenizer the tokens at the history end may merge with what follows it (the
    // next message's role marker), so the block holding the boundary is not counted as stable.
    if (options_.tokenizer != nullptr && !options_.tokenizer->IsEstimate() && history_blocks > 0) --history_blocks;
    return history_blocks;
  }

  // The answer's usage in the record (the server's prompt count wins over the prediction's).
  void RecordUsage(const Response& resp, RequestRecord& rec) const {
    if (resp.usage.reported && resp.usage.prompt_tokens > 0) rec.input_tokens = resp.usage.prompt_tokens;
    rec.cached_tokens_reported = resp.usage.cached_tokens;
    rec.output_tokens = resp.usage.completion_tokens;
    rec.reasoning_tokens = resp.usage.reasoning_tokens;
    rec.finish_reason = resp.finish_reason;
    rec.kv_cache_bytes = (rec.input_tokens + rec.output_tokens) * options_.kv_bytes_per_token +
                         options_.kv_bytes_per_sequence;
  }

  // A kServerShortfall event when the server served less than the model predicted, by more than
  // one block, locating the segment where its reported cache ends.
  std::optional<PrefixBreakEvent> ServerShortfall(const RequestRecord& rec, const PromptBlocks& blocks,
                                                  const PromptText& prompt,
                                                  const std::vector<SegmentSignature>& starts,
                                                  const std::optional<PrefixBreakEvent>& changed) const {
    if (!rec.cached_tokens_reported ||
        *rec.cached_tokens_reported + static_cast<int64_t>(blocks.block_tokens) >= rec.cached_tokens_predicted) {
      return std::nullopt;
    }
    PrefixBreakEvent e;
    e.kind = PrefixBreakEvent::Kind::kServerShortfall;
    e.agent_id = rec.agent_id;
    e.request_id = rec.request_id;
    e.predicted_cached_tokens = rec.cached_tokens_predicted;
    e.reported_cached_tokens = rec.cached_tokens_reported;
    e.previous_prompt_tokens = changed ? changed->previous_prompt_tokens : rec.cached_tokens_predicted;
    size_t offset = OffsetOfTokens(prompt.text, *rec.cached_tokens_reported);
    size_t message = 0;
    for (size_t i = 0; i < prompt.message_offsets.size(); ++i) {
      if (prompt.message_offsets[i] <= offset) message = i;
    }
    if (offset < prompt.tools_bytes) {
      e.layer = "tools";
    } else if (starts.size() == prompt.message_offsets.size() && message < starts.size()) {
      e.segment_id = starts[message].id;
      e.layer = std::string(LayerName(starts[message].layer));
    }
    e.reason = "server evicted or mismatched (reported " + std::to_string(*rec.cached_tokens_reported) +
               " cached tokens, predicted " + std::to_string(rec.cached_tokens_predicted) + ")";
    return e;
  }

  // What the next request of this agent is compared with.
  void RememberPrefix(const std::string& agent_id, const PromptBlocks& blocks, size_t history_blocks,
                      std::vector<SegmentSignature> sigs) {
    std::lock_guard<std::mutex> lock(mu_);
    AgentState& state = agents_[agent_id];
    state.hashes.assign(blocks.hashes.begin(), blocks.hashes.begin() + history_blocks);
    state.history_tokens = static_cast<int64_t>(history_blocks * blocks.block_tokens);
    state.signatures = std::move(sigs);
  }

  struct AgentState {
    std::vector<uint64_t> hashes;  // block hashes up to the end of the previous request's history
    int64_t history_tokens = 0;
    std::vector<SegmentSignature> signatures;
  };

  size_t BlocksIn(const std::string& text, size_t bytes) const {
    const PrefixCacheOptions& o = model_.options();
    bool exact = options_.tokenizer != nullptr && !options_.tokenizer->IsEstimate();
    size_t tokens = exact ? options_.tokenizer->Count(std::string_view(text).substr(0, bytes))
                          : bytes / std::max<size_t>(1, o.bytes_per_token);
    return tokens / std::max<size_t>(1, o.block_tokens);
  }

  size_t OffsetOfTokens(const std::string& text, int64_t tokens) const {
    bool exact = options_.tokenizer != nullptr && !options_.tokenizer->IsEstimate();
    if (!exact) return std::min(text.size(), static_cast<size_t>(tokens) * model_.options().bytes_per_token);
    size_t total = options_.tokenizer->Count(text);
    if (total == 0) return 0;
    return std::min(text.size(), static_cast<size_t>(static_cast<double>(tokens) / total * text.size()));
  }

  std::optional<PrefixBreakEvent> PredictBreak(const std::string& agent_id, const RequestRecord& rec,
                                               const PromptBlocks& blocks,
                                               const std::vector<SegmentSignature>& sigs,
                                               const std::vector<LintWarning>& warnings) {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = agents_.find(agent_id);
    if (it == agents_.end() || it->second.hashes.empty()) return std::nullopt;
    const AgentState& prev = it->second;
    size_t same = 0;
    while (same < prev.hashes.size() && same < blocks.hashes.size() && prev.hashes[same] == blocks.hashes[same]) {
      ++same;
    }
    if (same >= prev.hashes.size()) return std::nullopt;
    PrefixBreakEvent e;
    e.kind = PrefixBreakEvent::Kind::kPrefixChanged;
    e.agent_id = agent_id;
    e.request_id = rec.request_id;
    e.predicted_cached_tokens = rec.cached_tokens_predicted;
    e.previous_prompt_tokens = prev.history_tokens;
    size_t i = 0;
    while (i < sigs.size() && i < prev.signatures.size() && sigs[i].id == prev.signatures[i].id &&
           sigs[i].content_hash == prev.signatures[i].content_hash && sigs[i].state == prev.signatures[i].state &&
           sigs[i].version == prev.signatures[i].version) {
      ++i;
    }
    const SegmentSignature* now = i < sigs.size() ? &sigs[i] : nullptr;
    const SegmentSignature* before = i < prev.signatures.size() ? &prev.signatures[i] : nullptr;
    const SegmentSignature* named = now != nullptr ? now : before;
    if (named != nullptr) {
      e.segment_id = named->id;
      e.layer = std::string(LayerName(named->layer));
    }
    e.reason = ReasonFor(now, before, warnings);
    return e;
  }

  void Emit(const RequestRecord& rec) {
    if (options_.record_sink != nullptr) options_.record_sink->Write(rec).IgnoreError();
  }
  void EmitEvent(const PrefixBreakEvent& e) {
    if (options_.on_prefix_break) options_.on_prefix_break(e);
    if (options_.record_sink != nullptr) options_.record_sink->WriteEvent(e).IgnoreError();
  }

  std::string instance_tag_;
  std::atomic<uint64_t> sequence_{0};
  std::mutex mu_;
  std::map<std::string, AgentState> agents_;  // guarded by mu_
};

StatusOr<std::unique_ptr<Client>> Client::Create(ClientOptions options) {
  if (options.transport == nullptr) return InvalidArgumentError("ClientOptions.transport is required");
  if (options.cache.block_tokens == 0) return InvalidArgumentError("ClientOptions.cache.block_tokens must be > 0");
  if (options.cache.bytes_per_token == 0) {
    return InvalidArgumentError("ClientOptions.cache.bytes_per_token must be > 0");
  }
  return std::unique_ptr<Client>(new Client(std::make_unique<Impl>(std::move(options))));
}

Client::Client(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Client::~Client() = default;

StatusOr<Completion> Client::Complete(Context& context, const CompleteOptions& options) {
  return impl_->Complete(context, options);
}

StatusOr<BuiltRequest> Client::PreviewRequest(const Context& context,
                                              const std::string& request_id) const {
  return impl_->Preview(context, request_id);
}

std::string Client::CacheSaltFor(const AgentIdentity& agent) const { return impl_->SaltFor(agent); }

PrefixCacheModel& Client::cache_model() { return impl_->model_; }

}  // namespace strata
