// Context: the layered segment model and its incremental, byte-stable rendering.
//
// Rendering keeps two buffers so that Build() costs about one copy of the request:
//   header_       `{"model":...,"tools":[...],"messages":[` plus the stable system message(s);
//                 rebuilt only when a stable layer changes (rare by design).
//   history_buf_  the history messages' JSON, comma-joined; an append adds bytes at its end and a
//                 later edit (compaction) re-renders from the edited segment on.
// Every mutation is prepared (validated, segments built) before anything changes, then recorded in
// the journal, then applied by steps that cannot fail: a refused or unjournaled change leaves the
// context untouched.
#include "strata/context.h"

#include <algorithm>
#include <deque>
#include <nlohmann/json.hpp>
#include <set>
#include <unordered_map>
#include <unordered_set>

#include "core/hygiene.h"
#include "core/json_text.h"
#include "core/text_util.h"

namespace strata {

using internal::AppendJsonString;
using internal::ValidateUtf8;

std::string LintWarning::ToString() const {
  return "segment " + segment_id + " (" + std::string(LayerName(layer)) + " layer) contains a " +
         what + " at byte " + std::to_string(offset) + ": \"" + excerpt +
         "\"; volatile content in a stable layer breaks the prefix cache whenever it changes — move "
         "it to the volatile layer (Context::SetVolatile)";
}

namespace {

constexpr size_t kNoOffset = static_cast<size_t>(-1);

bool IsRendered(const Segment& s) {
  return s.state == SegmentState::kLive || s.state == SegmentState::kMasked;
}

bool RenderOrderLess(const Segment& a, const Segment& b) {
  if (a.order != b.order) return a.order < b.order;
  if (a.position != b.position) return a.position < b.position;
  return a.seq < b.seq;
}

bool IsToolResultKind(SegmentKind kind) {
  return kind == SegmentKind::kToolResult || kind == SegmentKind::kErrorLog;
}
bool IsAssistantKind(SegmentKind kind) {
  return kind == SegmentKind::kAssistant || kind == SegmentKind::kToolCall;
}

std::string JoinNames(const std::vector<std::string>& names, size_t limit = 10) {
  if (names.empty()) return "none";
  std::string out;
  for (size_t i = 0; i < names.size() && i < limit; ++i) {
    if (i) out += ", ";
    out += names[i];
  }
  if (names.size() > limit) out += ", ... (" + std::to_string(names.size() - limit) + " more)";
  return out;
}

// The dedupe key of a tool output: same tool, same arguments, same content.
std::string OutputKey(std::string_view tool, std::string_view arguments, std::string_view content) {
  std::string key;
  key.reserve(tool.size() + arguments.size() + 66);
  key.append(tool).push_back('\0');
  key.append(arguments).push_back('\0');
  key += internal::Sha256Hex(content);
  return key;
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

}  // namespace

class Context::Impl {
 public:
  explicit Impl(ContextOptions options) : options_(std::move(options)) {
    if (options_.tokenizer == nullptr) {
      owned_tokenizer_ = MakeEstimateTokenizer(4.0);
      tokenizer_ = owned_tokenizer_.get();
    } else {
      tokenizer_ = options_.tokenizer;
    }
    RebuildHeader();
  }

  const ContextOptions& options() const { return options_; }

  // ----------------------------------------------------------------------------- stable layers

  Status SetSystemPrompts(std::vector<std::string> prompts) {
    for (size_t i = 0; i < prompts.size(); ++i) {
      STRATA_RETURN_IF_ERROR(ValidateUtf8(prompts[i], "system prompt " + std::to_string(i)));
    }
    std::vector<Segment>& current = stable_[0];
    if (current.size() == prompts.size() &&
        std::equal(current.begin(), current.end(), prompts.begin(),
                   [](const Segment& s, const std::string& p) { return s.content == p; })) {
      return Status::Ok();  // unchanged: keep ids, bytes and the journal quiet
    }
    std::vector<Segment> fresh;
    uint64_t seq = next_seq_;
    for (size_t i = 0; i < prompts.size(); ++i) {
      Segment s = NewSegment(seq++, SegmentKind::kSystem, Layer::kSystem);
      s.content = std::move(prompts[i]);
      s.position = static_cast<int64_t>(i);
      s.pinned = true;
      s.tokens = CountTokens(s);
      fresh.push_back(std::move(s));
    }
    return ReplaceStableLayer(Layer::kSystem, std::move(fresh), seq);
  }

  Status SetTools(std::string_view tools_json) {
    STRATA_RETURN_IF_ERROR(ValidateUtf8(tools_json, "tools JSON"));
    STRATA_RETURN_IF_ERROR(internal::CheckJsonDepth(tools_json, "tools JSON"));  // each tool is re-printed
    nlohmann::json tools = nlohmann::json::parse(tools_json.begin(), tools_json.end(), nullptr,
                                                 /*allow_exceptions=*/false);
    if (tools.is_discarded()) {
      STRATA_RETURN_IF_ERROR(internal::CanonicalizeJson(tools_json, "tools JSON").status());
      return InvalidArgumentError("tools JSON is malformed");
    }
    if (!tools.is_array()) {
      return InvalidArgumentError(std::string("tools JSON must be an array of tool objects, got a ") +
                                  tools.type_name() +
                                  R"(; pass [{"type":"function","function":{"name":...}}, ...])");
    }
    std::vector<Segment> fresh;
    std::set<std::string> names;
    uint64_t seq = next_seq_;
    for (size_t i = 0; i < tools.size(); ++i) {
      const nlohmann::json& tool = tools[i];
      const std::string where = "tools[" + std::to_string(i) + "]";
      if (!tool.is_object()) return InvalidArgumentError(where + " is not an object");
      auto type = tool.find("type");
      if (type == tool.end() || !type->is_string() || *type != "function") {
        return InvalidArgumentError(where + R"( must have "type": "function")");
      }
      auto function = tool.find("function");
      if (function == tool.end() || !function->is_object()) {
        return InvalidArgumentError(where + R"( has no "function" object)");
      }
      auto name = function->find("name");
      if (name == function->end() || !name->is_string() || name->get<std::string>().empty()) {
        return InvalidArgumentError(where + R"(.function has no non-empty "name" string)");
      }
      if (!names.insert(name->get<std::string>()).second) {
        return InvalidArgumentError(where + ": duplicate tool name \"" + name->get<std::string>() +
                                    "\"; each tool must have a unique name");
      }
      Segment s = NewSegment(seq++, SegmentKind::kTools, Layer::kTools);
      s.name = name->get<std::string>();
      s.content = tool.dump(-1, ' ', false, nlohmann::json::error_handler_t::strict);
      s.position = static_cast<int64_t>(i);
      s.pinned = true;
      s.tokens = CountTokens(s);
      fresh.push_back(std::move(s));
    }
    const std::vector<Segment>& current = stable_[1];
    if (current.size() == fresh.size() &&
        std::equal(current.begin(), current.end(), fresh.begin(),
                   [](const Segment& a, const Segment& b) { return a.content == b.content; })) {
      return Status::Ok();
    }
    return ReplaceStableLayer(Layer::kTools, std::move(fresh), seq);
  }

  Status ValidateDocument(Layer layer, const Document& doc) {
    if (layer != Layer::kIndex && layer != Layer::kDocs) {
      return InvalidArgumentError("documents belong to the index or docs layer, not \"" +
                                  std::string(LayerName(layer)) + "\"");
    }
    if (doc.name.empty()) return InvalidArgumentError("document name is empty; give it a name");
    STRATA_RETURN_IF_ERROR(ValidateUtf8(doc.name, "document name"));
    STRATA_RETURN_IF_ERROR(ValidateUtf8(doc.version, "version of document \"" + doc.name + "\""));
    STRATA_RETURN_IF_ERROR(ValidateUtf8(doc.content, "content of document \"" + doc.name + "\""));
    return Status::Ok();
  }

  StatusOr<std::string> AddDocument(Layer layer, Document doc) {
    STRATA_RETURN_IF_ERROR(ValidateDocument(layer, doc));
    if (FindDocument(layer, doc.name) != nullptr) {
      return AlreadyExistsError("document \"" + doc.name + "\" already exists in the " +
                                std::string(LayerName(layer)) +
                                " layer; use UpdateDocument or PutDocument to change it");
    }
    Segment s = NewSegment(next_seq_, layer == Layer::kIndex ? SegmentKind::kIndex : SegmentKind::kDoc,
                           layer);
    s.name = std::move(doc.name);
    s.content = std::move(doc.content);
    s.version = std::move(doc.version);
    s.order = doc.order;
    s.position = static_cast<int64_t>(s.seq);
    s.tokens = CountTokens(s);
    std::vector<Segment> layer_segments = StableLayer(layer);
    layer_segments.push_back(s);
    ContextChange change;
    change.upserted.push_back(s);
    STRATA_RETURN_IF_ERROR(Record(change, turn_));
    ++next_seq_;
    SetStableLayer(layer, std::move(layer_segments));
    return s.id;
  }

  Status UpdateDocument(Layer layer, Document doc) {
    STRATA_RETURN_IF_ERROR(ValidateDocument(layer, doc));
    const Segment* existing = FindDocument(layer, doc.name);
    if (existing == nullptr) {
      return NotFoundError("no document \"" + doc.name + "\" in the " + std::string(LayerName(layer)) +
                           " layer (known: " + JoinNames(DocumentNames(layer)) +
                           "); use AddDocument or PutDocument to add it");
    }
    if (existing->content == doc.content && existing->version == doc.version &&
        existing->order == doc.order) {
      return Status::Ok();
    }
    Segment s = *existing;
    s.content = std::move(doc.content);
    s.version = std::move(doc.version);
    s.order = doc.order;
    s.state = SegmentState::kLive;
    s.tokens = CountTokens(s);
    std::vector<Segment> layer_segments = StableLayer(layer);
    for (Segment& candidate : layer_segments) {
      if (candidate.id == s.id) candidate = s;
    }
    ContextChange change;
    change.upserted.push_back(std::move(s));
    STRATA_RETURN_IF_ERROR(Record(change, turn_));
    SetStableLayer(layer, std::move(layer_segments));
    return Status::Ok();
  }

  StatusOr<std::string> PutDocument(Layer layer, Document doc) {
    STRATA_RETURN_IF_ERROR(ValidateDocument(layer, doc));
    if (const Segment* existing = FindDocument(layer, doc.name)) {
      std::string id = existing->id;
      STRATA_RETURN_IF_ERROR(UpdateDocument(layer, std::move(doc)));
      return id;
    }
    return AddDocument(layer, std::move(doc));
  }

  Status RemoveDocument(Layer layer, std::string_view name) {
    if (layer != Layer::kIndex && layer != Layer::kDocs) {
      return InvalidArgumentError("documents belong to the index or docs layer, not \"" +
                                  std::string(LayerName(layer)) + "\"");
    }
    const Segment* existing = FindDocument(layer, name);
    if (existing == nullptr) {
      return NotFoundError("no document \"" + std::string(name) + "\" in the " +
                           std::string(LayerName(layer)) + " layer (known: " +
                           JoinNames(DocumentNames(layer)) + ")");
    }
    std::vector<Segment> layer_segments = StableLayer(layer);
    ContextChange change;
    change.removed_ids.push_back(existing->id);
    layer_segments.erase(std::remove_if(layer_segments.begin(), layer_segments.end(),
                                        [&](const Segment& s) { return s.name == name; }),
                         layer_segments.end());
    STRATA_RETURN_IF_ERROR(Record(change, turn_));
    SetStableLayer(layer, std::move(layer_segments));
    return Status::Ok();
  }

  // ----------------------------------------------------------------------------------- history

  Status RequireNoOpenCalls(std::string_view action) const {
    if (open_calls_.empty()) return Status::Ok();
    return FailedPreconditionError(std::string("cannot ") + std::string(action) +
                                   ": the last assistant message has unanswered tool calls (" +
                                   JoinNames(open_calls_) +
                                   "); append their results with AppendToolResult first");
  }

  StatusOr<std::string> AppendUser(std::string content) {
    STRATA_RETURN_IF_ERROR(ValidateUtf8(content, "user message"));
    STRATA_RETURN_IF_ERROR(RequireNoOpenCalls("append a user message"));
    Segment s = NewHistorySegment(SegmentKind::kUser, turn_);
    s.content = std::move(content);
    s.tokens = CountTokens(s);
    ContextChange change;
    change.upserted.push_back(s);
    STRATA_RETURN_IF_ERROR(Record(change, turn_));
    return ApplyHistoryAppend(std::move(s));
  }

  StatusOr<std::string> AppendAssistant(AssistantMessage message) {
    STRATA_RETURN_IF_ERROR(ValidateUtf8(message.content, "assistant content"));
    STRATA_RETURN_IF_ERROR(ValidateUtf8(message.reasoning, "assistant reasoning"));
    std::unordered_set<std::string> ids;
    for (size_t i = 0; i < message.tool_calls.size(); ++i) {
      const ToolCall& call = message.tool_calls[i];
      const std::string where = "tool_calls[" + std::to_string(i) + "]";
      if (call.id.empty()) return InvalidArgumentError(where + " has an empty id");
      STRATA_RETURN_IF_ERROR(ValidateUtf8(call.id, where + ".id"));
      STRATA_RETURN_IF_ERROR(ValidateUtf8(call.name, where + ".name"));
      STRATA_RETURN_IF_ERROR(ValidateUtf8(call.arguments, where + ".arguments"));
      if (call.name.empty()) {
        return InvalidArgumentError(where + " (id \"" + call.id + "\") has an empty function name");
      }
      if (!ids.insert(call.id).second) {
        return InvalidArgumentError(where + ": duplicate tool call id \"" + call.id +
                                    "\" in one assistant message");
      }
    }
    STRATA_RETURN_IF_ERROR(RequireNoOpenCalls("append an assistant message"));
    const int64_t new_turn = turn_ + 1;
    Segment s = NewHistorySegment(
        message.tool_calls.empty() ? SegmentKind::kAssistant : SegmentKind::kToolCall, new_turn);
    s.content = std::move(message.content);
    s.reasoning = std::move(message.reasoning);
    s.tool_calls = std::move(message.tool_calls);
    s.tokens = CountTokens(s);
    ContextChange change;
    change.upserted.push_back(s);
    STRATA_RETURN_IF_ERROR(Record(change, new_turn));
    turn_ = new_turn;
    RegisterCalls(s);
    return ApplyHistoryAppend(std::move(s));
  }

  StatusOr<std::string> AppendToolResult(ToolResult result) {
    STRATA_RETURN_IF_ERROR(ValidateUtf8(result.tool_call_id, "tool_call_id"));
    STRATA_RETURN_IF_ERROR(ValidateUtf8(result.content, "tool result for \"" + result.tool_call_id + "\""));
    if (std::find(open_calls_.begin(), open_calls_.end(), result.tool_call_id) == open_calls_.end()) {
      std::string known = open_calls_.empty() ? "no call is open" : "open: " + JoinNames(open_calls_);
      std::string why = FindLastCall(result.tool_call_id) ? " (that call was already answered)" : "";
      return InvalidArgumentError("tool result for unknown tool_call_id \"" + result.tool_call_id +
                                  "\"" + why + " (" + known +
                                  "); a tool result must answer a call of the last assistant message");
    }
    const ToolCall& call = *FindLastCall(result.tool_call_id);
    Segment s = NewHistorySegment(SegmentKind::kToolResult, turn_);
    s.tool_call_id = result.tool_call_id;
    s.name = call.name;
    ContextChange change;
    std::string output_key;
    ApplyHygiene(s, std::move(result.content), result.is_error, call, change, output_key);
    s.tokens = CountTokens(s);
    change.upserted.insert(change.upserted.begin(), s);
    STRATA_RETURN_IF_ERROR(Record(change, turn_));
    open_calls_.erase(std::find(open_calls_.begin(), open_calls_.end(), s.tool_call_id));
    if (!output_key.empty()) output_index_.emplace(std::move(output_key), s.tool_call_id);
    for (auto& [id, original] : change.originals) recall_.emplace(id, std::move(original));
    CountHygiene(s, +1);
    return ApplyHistoryAppend(std::move(s));
  }

  std::vector<std::string> OpenToolCalls() const { return open_calls_; }

  Status SetPinned(std::string_view segment_id, bool pinned) {
    auto it = index_.find(std::string(segment_id));
    if (it == index_.end()) return NotFoundError("no segment \"" + std::string(segment_id) + "\"");
    if (it->second.first != Layer::kHistory) {
      return InvalidArgumentError("segment \"" + std::string(segment_id) +
                                  "\" is in a stable layer, which is always pinned");
    }
    Segment& s = history_[it->second.second];
    if (s.pinned == pinned) return Status::Ok();
    Segment updated = s;
    updated.pinned = pinned;
    ContextChange change;
    change.upserted.push_back(updated);
    STRATA_RETURN_IF_ERROR(Record(change, turn_));
    s.pinned = pinned;
    return Status::Ok();
  }

  // ---------------------------------------------------------------------------------- volatile

  Status SetVolatile(std::string key, std::string value) {
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

  Status RemoveVolatile(std::string_view key) {
    for (auto it = volatile_.begin(); it != volatile_.end(); ++it) {
      if (it->first == key) {
        volatile_.erase(it);
        return Status::Ok();
      }
    }
    std::vector<std::string> keys;
    for (const auto& item : volatile_) keys.push_back(item.first);
    return NotFoundError("no volatile item \"" + std::string(key) + "\" (known: " + JoinNames(keys) + ")");
  }

  void ClearVolatile() { volatile_.clear(); }

  // --------------------------------------------------------------------------------- rendering

  StatusOr<BuiltRequest> Render(const BuildOptions& build) const {
    if (!open_calls_.empty()) {
      return FailedPreconditionError("cannot build a request while tool calls are unanswered (" +
                                     JoinNames(open_calls_) +
                                     "); servers reject an assistant tool call without its result — "
                                     "append the results first");
    }
    std::string extra;
    std::set<std::string> seen;
    for (const auto& [name, value] : build.extra_fields) {
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
      STRATA_ASSIGN_OR_RETURN(std::string canonical,
                              internal::CanonicalizeJson(value, "extra field \"" + name + "\""));
      extra.push_back(',');
      AppendJsonString(extra, name);
      extra.push_back(':');
      extra += canonical;
    }
    std::string volatile_message;
    if (!volatile_.empty()) {
      std::string text;
      for (size_t i = 0; i < volatile_.size(); ++i) {
        if (i) text.push_back('\n');
        text += volatile_[i].first;
        text += ": ";
        text += volatile_[i].second;
      }
      volatile_message = "{\"role\":";
      AppendJsonString(volatile_message, options_.render.volatile_role);
      volatile_message += ",\"content\":";
      AppendJsonString(volatile_message, text);
      volatile_message += "}";
    }
    const size_t history_messages = rendered_history_messages_;
    const size_t messages = stable_messages_ + history_messages + (volatile_.empty() ? 0 : 1);
    if (messages == 0) {
      return FailedPreconditionError(
          "nothing to send: the context has no messages; set a system prompt or append a user "
          "message first");
    }

    BuiltRequest out;
    std::string& body = out.body;
    body.reserve(header_.size() + 1 + history_buf_.size() + 1 + volatile_message.size() + 1 +
                 extra.size() + 1);
    body += header_;
    out.stable_prefix_bytes = header_.size();
    if (!history_buf_.empty()) {
      if (stable_messages_ > 0) body.push_back(',');
      body += history_buf_;
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
    LayerUsage& vol = out.layers[static_cast<int>(Layer::kVolatile)];
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
    return out;
  }

  // -------------------------------------------------------------------------------- compaction

  size_t VolatileTokens() const {
    size_t tokens = 0;
    for (const auto& item : volatile_) {
      tokens += tokenizer_->Count(item.first) + tokenizer_->Count(item.second) + 1;
    }
    return tokens;
  }

  size_t MessageCount() const {
    return stable_messages_ + rendered_history_messages_ + (volatile_.empty() ? 0 : 1);
  }

  size_t InputTokens() const {
    size_t tokens = VolatileTokens();
    for (int i = 0; i < static_cast<int>(Layer::kVolatile); ++i) tokens += usage_[i].tokens;
    const size_t tools = stable_[static_cast<int>(Layer::kTools)].size();
    return tokens + options_.message_overhead_tokens * (MessageCount() + tools + 1);
  }

  size_t LimitTokens() const {
    return options_.budget ? static_cast<size_t>(std::max<int64_t>(0, UsableInputTokens(*options_.budget))) : 0;
  }

  CompactionInput MakeInput(bool forced) const {
    CompactionInput input;
    for (const Segment& s : history_) {
      if (IsRendered(s)) input.history.push_back(&s);
    }
    for (int i = 0; i < static_cast<int>(Layer::kHistory); ++i) input.stable_tokens += usage_[i].tokens;
    input.volatile_tokens = VolatileTokens();
    input.history_tokens = usage_[static_cast<int>(Layer::kHistory)].tokens;
    input.total_tokens = InputTokens();
    if (options_.budget) {
      input.limit_tokens = LimitTokens();
      input.trigger_tokens = static_cast<size_t>(std::max<int64_t>(0, TriggerTokens(*options_.budget)));
      input.target_tokens = static_cast<size_t>(std::max<int64_t>(0, TargetTokens(*options_.budget)));
    }
    input.message_overhead_tokens = options_.message_overhead_tokens;
    input.turn = turn_;
    input.forced = forced;
    input.tokenizer = tokenizer_;
    return input;
  }

  StatusOr<std::optional<CompactionReport>> Compact(bool force) {
    CompactionPolicy* policy = options_.compaction;
    if (policy == nullptr) {
      return FailedPreconditionError("no compaction policy is set (ContextOptions::compaction)");
    }
    CompactionInput input = MakeInput(force);
    if (!force && !policy->ShouldCompact(input)) return std::optional<CompactionReport>();
    STRATA_ASSIGN_OR_RETURN(HistoryEdit edit, policy->Plan(input));
    if (edit.empty()) return std::optional<CompactionReport>();
    std::string reason = force ? "requested" : (edit.reason.empty() ? DescribeTrigger(input) : edit.reason);
    bool not_reducing = false;
    STRATA_ASSIGN_OR_RETURN(CompactionReport report,
                            ApplyEdit(edit, policy->Name(), std::move(reason), /*require_reduction=*/true,
                                      &not_reducing));
    if (not_reducing) return std::optional<CompactionReport>();
    return std::optional<CompactionReport>(std::move(report));
  }

  static std::string DescribeTrigger(const CompactionInput& input) {
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

  // With `require_reduction`, an edit that would not lower the input tokens (the context's own
  // count) is not applied: *not_reducing is set and the unapplied report is returned.
  StatusOr<CompactionReport> ApplyEdit(const HistoryEdit& edit, std::string policy, std::string reason,
                                       bool require_reduction = false, bool* not_reducing = nullptr) {
    if (not_reducing != nullptr) *not_reducing = false;
    if (edit.empty()) return InvalidArgumentError("the edit is empty");
    if (!open_calls_.empty()) {
      return FailedPreconditionError("cannot compact while tool calls are unanswered (" +
                                     JoinNames(open_calls_) + ")");
    }
    // 1. Validate and compute every touched segment's new value, without changing anything.
    std::unordered_map<size_t, Segment> changed;  // history index -> new value
    auto locate = [&](const std::string& id, const char* what) -> StatusOr<size_t> {
      auto it = index_.find(id);
      if (it == index_.end() || it->second.first != Layer::kHistory) {
        return InvalidArgumentError(std::string(what) + " names \"" + id + "\", which is not a history segment");
      }
      const size_t i = it->second.second;
      const Segment& s = history_[i];
      if (!IsRendered(s)) {
        return InvalidArgumentError(std::string(what) + " names \"" + id + "\", which is already " +
                                    std::string(SegmentStateName(s.state)));
      }
      if (s.pinned) return InvalidArgumentError(std::string(what) + " names pinned segment \"" + id + "\"");
      if (changed.count(i)) return InvalidArgumentError("the edit touches segment \"" + id + "\" twice");
      return i;
    };
    ContextChange change;
    auto keep_original = [&](Segment& s) {
      if (!s.recall_id.empty() && (recall_.count(s.recall_id) || !options_.keep_originals)) return;
      if (!s.recall_id.empty()) {
        for (const auto& kept : change.originals) if (kept.first == s.recall_id) return;
      }
      s.recall_id = RecallIdFor(s.content);
      if (!options_.keep_originals || recall_.count(s.recall_id)) return;
      for (const auto& kept : change.originals) if (kept.first == s.recall_id) return;
      change.originals.emplace_back(s.recall_id, s.content);
    };
    CompactionReport report;
    for (const SegmentEdit& e : edit.edits) {
      STRATA_ASSIGN_OR_RETURN(size_t i, locate(e.segment_id, "edit"));
      Segment s = history_[i];
      switch (e.action) {
        case SegmentEdit::Action::kMask:
          if (!IsToolResultKind(s.kind)) {
            return InvalidArgumentError("cannot mask \"" + s.id + "\": only tool results are masked, it is a " +
                                        std::string(SegmentKindName(s.kind)));
          }
          if (e.placeholder.empty()) return InvalidArgumentError("mask of \"" + s.id + "\" has an empty placeholder");
          STRATA_RETURN_IF_ERROR(ValidateUtf8(e.placeholder, "placeholder for \"" + s.id + "\""));
          keep_original(s);
          s.content = e.placeholder;
          s.state = SegmentState::kMasked;
          ++report.masked;
          break;
        case SegmentEdit::Action::kEvict:
          keep_original(s);
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
      changed.emplace(i, std::move(s));
    }
    struct PendingSummary {
      size_t first_index;
      Segment segment;
    };
    std::vector<PendingSummary> summaries;
    uint64_t seq = next_seq_;
    for (const SummaryEdit& summary : edit.summaries) {
      if (summary.replaces.empty()) return InvalidArgumentError("a summary replaces no segment");
      if (summary.content.empty()) return InvalidArgumentError("a summary has empty content");
      STRATA_RETURN_IF_ERROR(ValidateUtf8(summary.content, "summary content"));
      size_t previous = 0;
      for (size_t k = 0; k < summary.replaces.size(); ++k) {
        STRATA_ASSIGN_OR_RETURN(size_t i, locate(summary.replaces[k], "summary"));
        if (k > 0) {
          for (size_t between = previous + 1; between < i; ++between) {
            if (IsRendered(history_[between]) && !changed.count(between)) {
              return InvalidArgumentError("summary span is not contiguous: \"" + history_[between].id +
                                          "\" lies between \"" + summary.replaces[k - 1] + "\" and \"" +
                                          summary.replaces[k] + "\"");
            }
          }
          if (i < previous) return InvalidArgumentError("summary span is not in render order");
        }
        Segment s = history_[i];
        keep_original(s);
        s.state = SegmentState::kSummarized;
        s.policy = policy;
        changed.emplace(i, std::move(s));
        ++report.summarized;
        previous = i;
      }
      const size_t first = index_.at(summary.replaces.front()).second;
      Segment s = NewSegment(seq++, SegmentKind::kSummary, Layer::kHistory);
      s.position = history_[first].position;
      s.turn = turn_;
      s.content = summary.content;
      s.policy = policy;
      s.tokens = CountTokens(s);
      summaries.push_back({first, std::move(s)});
    }

    // 1b. A deduplicated result that points at an output this edit hides would point at nothing
    // the model can see: its reference says so and keeps the recall id of the (identical) content.
    // Duplicates follow their original, so this never moves the boundary.
    std::unordered_map<std::string, SegmentState> hidden_calls;  // tool_call_id -> its new state
    for (const auto& [i, segment] : changed) {
      if (IsToolResultKind(segment.kind) && segment.state != SegmentState::kLive) {
        hidden_calls.emplace(segment.tool_call_id, segment.state);
      }
    }
    if (!hidden_calls.empty()) {
      for (size_t j = 0; j < history_.size(); ++j) {
        const Segment& d = history_[j];
        if (changed.count(j) || !IsRendered(d) || d.state != SegmentState::kLive ||
            d.hygiene != HygieneAction::kDeduplicated) {
          continue;
        }
        auto hidden = hidden_calls.find(d.duplicate_of);
        if (hidden == hidden_calls.end()) continue;
        Segment s = d;
        const std::string anchor = "result of call " + d.duplicate_of;
        const size_t at = s.content.find(anchor);
        const std::string note = ", which is " + std::string(SegmentStateName(hidden->second)) +
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

    // 2. The rendered history after the edit must keep every tool call paired.
    {
      std::vector<std::string> open;
      size_t summary_cursor = 0;
      std::vector<const PendingSummary*> by_index;
      for (const PendingSummary& p : summaries) by_index.push_back(&p);
      std::sort(by_index.begin(), by_index.end(),
                [](const PendingSummary* a, const PendingSummary* b) { return a->first_index < b->first_index; });
      auto visit = [&](const Segment& s) -> Status {
        if (!IsRendered(s)) return Status::Ok();
        if (IsToolResultKind(s.kind)) {
          auto it = std::find(open.begin(), open.end(), s.tool_call_id);
          if (it == open.end()) {
            return InvalidArgumentError("the edit would leave tool result \"" + s.id + "\" (call \"" +
                                        s.tool_call_id + "\") without its assistant tool call; "
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
        auto it = changed.find(i);
        STRATA_RETURN_IF_ERROR(visit(it == changed.end() ? history_[i] : it->second));
      }
      if (!open.empty()) {
        return InvalidArgumentError("the edit would leave tool call \"" + open.front() + "\" without its result");
      }
    }

    // 3. Report: boundary, tokens, invalidation.
    size_t boundary = history_.size();
    for (const auto& [i, segment] : changed) boundary = std::min(boundary, i);
    report.policy = policy;
    report.reason = std::move(reason);
    report.turn = turn_;
    report.boundary_index = boundary;
    report.boundary_segment_id = history_[boundary].id;
    report.tokens_before = InputTokens();
    for (size_t i = boundary; i < history_.size(); ++i) {
      if (IsRendered(history_[i])) {
        report.invalidated_tokens += history_[i].tokens + options_.message_overhead_tokens;
      }
    }
    int64_t delta = 0;
    for (const auto& [i, segment] : changed) {
      const Segment& old = history_[i];
      delta -= static_cast<int64_t>(old.tokens + options_.message_overhead_tokens);
      if (IsRendered(segment)) delta += static_cast<int64_t>(segment.tokens + options_.message_overhead_tokens);
    }
    for (const PendingSummary& p : summaries) {
      delta += static_cast<int64_t>(p.segment.tokens + options_.message_overhead_tokens);
    }
    report.tokens_after = static_cast<size_t>(static_cast<int64_t>(report.tokens_before) + delta);
    report.explanation = edit.explanation;
    if (require_reduction && delta >= 0) {
      if (not_reducing != nullptr) *not_reducing = true;
      return report;  // nothing changed
    }

    // 4. Journal, then apply.
    for (const auto& [i, segment] : changed) change.upserted.push_back(segment);
    for (const PendingSummary& p : summaries) change.upserted.push_back(p.segment);
    std::sort(change.upserted.begin(), change.upserted.end(),
              [](const Segment& a, const Segment& b) { return a.seq < b.seq; });
    change.compaction = report;
    STRATA_RETURN_IF_ERROR(Record(change, turn_));

    for (auto& [id, original] : change.originals) recall_.emplace(id, std::move(original));
    for (auto& [i, segment] : changed) history_[i] = std::move(segment);
    if (!hidden_calls.empty()) {
      // A later identical output is rendered in full again (and becomes the new original), rather
      // than pointing at one the model no longer sees.
      for (auto it = output_index_.begin(); it != output_index_.end();) {
        it = hidden_calls.count(it->second) ? output_index_.erase(it) : std::next(it);
      }
    }
    next_seq_ = seq;
    // Insert summaries before their first replaced segment, last first so indexes stay valid.
    std::sort(summaries.begin(), summaries.end(),
              [](const PendingSummary& a, const PendingSummary& b) { return a.first_index > b.first_index; });
    for (PendingSummary& p : summaries) {
      history_.insert(history_.begin() + static_cast<std::ptrdiff_t>(p.first_index), std::move(p.segment));
      history_offsets_.insert(history_offsets_.begin() + static_cast<std::ptrdiff_t>(p.first_index), kNoOffset);
      if (last_call_segment_ != kNoOffset && last_call_segment_ >= p.first_index) ++last_call_segment_;
    }
    if (!summaries.empty()) {
      for (size_t i = boundary; i < history_.size(); ++i) index_[history_[i].id] = {Layer::kHistory, i};
    }
    RerenderHistoryFrom(boundary);
    compactions_.push_back(report);
    return report;
  }

  Status OverBudgetError(size_t tokens, size_t limit, bool can_compact) const {
    using internal::WithThousands;
    size_t protected_history = 0;
    for (const Segment& s : history_) {
      if (IsRendered(s) && s.pinned) protected_history += s.tokens + options_.message_overhead_tokens;
    }
    std::string layers;
    for (Layer layer : {Layer::kSystem, Layer::kTools, Layer::kIndex, Layer::kDocs, Layer::kHistory}) {
      layers += std::string(LayerName(layer)) + " " + WithThousands(usage_[static_cast<int>(layer)].tokens) + ", ";
    }
    layers += "volatile " + WithThousands(VolatileTokens()) + " (pinned history " +
              WithThousands(protected_history) + ")";
    std::string advice =
        can_compact ? "the compaction policy could not reduce it further; shrink the stable or volatile "
                      "layers, unpin history, or raise the budget"
                    : (options_.compaction == nullptr
                           ? "set ContextOptions::compaction to let strata compact the history, or raise the budget"
                           : "call Build() on a non-const Context so that it can compact first");
    return ResourceExhaustedError("request needs " + WithThousands(tokens) +
                                  " input tokens but the budget allows " + WithThousands(limit) +
                                  " (tokens by layer: " + layers + "); " + advice);
  }

  // Renders and, with a request counter, counts the request exactly.
  StatusOr<BuiltRequest> RenderCounted(const BuildOptions& build) const {
    STRATA_ASSIGN_OR_RETURN(BuiltRequest request, Render(build));
    if (options_.request_counter != nullptr) {
      STRATA_ASSIGN_OR_RETURN(request.input_tokens, options_.request_counter->CountRequest(request.body));
      request.input_tokens_exact = true;
    }
    return request;
  }

  // How many compactions one Build() may apply. The first round is the policy's plan (down to the
  // target above the trigger, or the cost model's choice below it); later rounds run only while the
  // request is still above the hard limit, which happens when the exact count (chat template,
  // tokenizer) is higher than the context's own count the policy planned with, and every round must
  // lower the input tokens or it is not applied. One plan plus up to three such corrections: a
  // policy that keeps removing a few tokens at a time cannot turn one build into many prefix
  // invalidations; if the request still does not fit after them, Build() fails (RESOURCE_EXHAUSTED)
  // instead. The report says how many rounds were used (CompactionReport::rounds).
  static constexpr size_t kMaxCompactionRounds = 4;

  StatusOr<BuiltRequest> BuildWithinBudget(const BuildOptions& build) {
    std::optional<CompactionReport> merged;
    for (size_t rounds = 0;;) {
      STRATA_ASSIGN_OR_RETURN(BuiltRequest request, RenderCounted(build));
      if (!options_.budget) return request;
      const size_t tokens = request.input_tokens;
      const size_t limit = LimitTokens();
      if (options_.compaction != nullptr && rounds < kMaxCompactionRounds && (rounds == 0 || tokens > limit)) {
        CompactionInput input = MakeInput(false);
        input.total_tokens = tokens;  // plan against the exact count when there is one
        input.round = rounds;
        if (tokens > limit || options_.compaction->ShouldCompact(input)) {
          STRATA_ASSIGN_OR_RETURN(HistoryEdit edit, options_.compaction->Plan(input));
          if (!edit.empty()) {
            bool not_reducing = false;
            STRATA_ASSIGN_OR_RETURN(
                CompactionReport report,
                ApplyEdit(edit, options_.compaction->Name(),
                          edit.reason.empty() ? DescribeTrigger(input) : edit.reason,
                          /*require_reduction=*/true, &not_reducing));
            if (!not_reducing) {
              ++rounds;
              report.tokens_before = tokens;
              if (!merged) {
                merged = report;
              } else {
                // One Build, one report: the earliest boundary and the first measured cost.
                if (report.boundary_index < merged->boundary_index) {
                  merged->boundary_index = report.boundary_index;
                  merged->boundary_segment_id = report.boundary_segment_id;
                }
                merged->invalidated_tokens = std::max(merged->invalidated_tokens, report.invalidated_tokens);
                merged->masked += report.masked;
                merged->evicted += report.evicted;
                merged->summarized += report.summarized;
                merged->reasoning_dropped += report.reasoning_dropped;
              }
              merged->rounds = rounds;
              continue;
            }
          }
        }
      }
      if (tokens > limit) return OverBudgetError(tokens, limit, options_.compaction != nullptr);
      if (merged) {
        merged->tokens_after = tokens;
        compactions_.back().tokens_after = tokens;
        compactions_.back().rounds = merged->rounds;
      }
      request.compaction = std::move(merged);
      return request;
    }
  }

  StatusOr<BuiltRequest> Build(const BuildOptions& build) const {
    STRATA_ASSIGN_OR_RETURN(BuiltRequest request, RenderCounted(build));
    if (options_.budget && request.input_tokens > LimitTokens()) {
      return OverBudgetError(request.input_tokens, LimitTokens(), false);
    }
    return request;
  }

  StatusOr<std::string> AnswerRecall(const std::string& tool_call_id) {
    const ToolCall* call = FindLastCall(tool_call_id);
    if (call == nullptr ||
        std::find(open_calls_.begin(), open_calls_.end(), tool_call_id) == open_calls_.end()) {
      return InvalidArgumentError("\"" + tool_call_id + "\" is not an open tool call (open: " +
                                  JoinNames(open_calls_) + ")");
    }
    if (call->name != kRecallToolName) {
      return InvalidArgumentError("call \"" + tool_call_id + "\" is to \"" + call->name + "\", not " +
                                  kRecallToolName);
    }
    std::string answer;
    nlohmann::json arguments = nlohmann::json::parse(call->arguments, nullptr, false);
    std::string recall_id;
    if (arguments.is_object() && arguments.contains("recall_id") && arguments["recall_id"].is_string()) {
      recall_id = arguments["recall_id"].get<std::string>();
    }
    if (recall_id.empty()) {
      answer = "[strata: context_recall needs {\"recall_id\": \"r-...\"}; the ids appear in masked, "
               "truncated and summarized content]";
    } else if (auto original = recall_.find(recall_id); original != recall_.end()) {
      answer = original->second;
    } else {
      answer = "[strata: nothing is kept under recall id " + recall_id + "]";
    }
    // The recalled original is appended as it is: hygiene would cut it again.
    Segment s = NewHistorySegment(SegmentKind::kToolResult, turn_);
    s.tool_call_id = tool_call_id;
    s.name = call->name;
    s.content = std::move(answer);
    s.tokens = CountTokens(s);
    ContextChange change;
    change.upserted.push_back(s);
    STRATA_RETURN_IF_ERROR(Record(change, turn_));
    open_calls_.erase(std::find(open_calls_.begin(), open_calls_.end(), tool_call_id));
    return ApplyHistoryAppend(std::move(s));
  }

  const std::vector<CompactionReport>& Compactions() const { return compactions_; }

  // -------------------------------------------------------------------------------- inspection

  std::vector<Segment> Segments() const {
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

  const Segment* Find(std::string_view id) const {
    auto it = index_.find(std::string(id));
    if (it == index_.end()) return nullptr;
    const auto [layer, i] = it->second;
    return layer == Layer::kHistory ? &history_[i] : &stable_[static_cast<int>(layer)][i];
  }

  StatusOr<std::string> Recall(std::string_view recall_id) const {
    auto it = recall_.find(std::string(recall_id));
    if (it == recall_.end()) {
      return NotFoundError("no original kept under recall id \"" + std::string(recall_id) +
                           "\"" +
                           (options_.keep_originals ? "" : " (this context does not keep originals)"));
    }
    return it->second;
  }

  ContextStats Stats() const {
    ContextStats stats = counters_;
    stats.segments = index_.size();
    stats.turns = static_cast<size_t>(turn_);
    for (int i = 0; i < kLayerCount; ++i) stats.layers[i] = usage_[i];
    return stats;
  }

  std::vector<LintWarning> Lint() const { return lint_; }

  ContextSnapshot Snapshot() const {
    ContextSnapshot snapshot;
    for (const auto& layer : stable_) {
      snapshot.segments.insert(snapshot.segments.end(), layer.begin(), layer.end());
    }
    snapshot.segments.insert(snapshot.segments.end(), history_.begin(), history_.end());
    snapshot.originals.assign(recall_.begin(), recall_.end());
    std::sort(snapshot.originals.begin(), snapshot.originals.end());
    snapshot.turn = turn_;
    return snapshot;
  }

  Status LoadSnapshot(ContextSnapshot snapshot) {
    std::unordered_set<std::string> ids;
    std::vector<Segment> layers[kLayerCount];
    uint64_t max_seq = 0;
    for (Segment& s : snapshot.segments) {
      if (s.id.empty()) return InvalidArgumentError("snapshot has a segment with an empty id");
      if (!ids.insert(s.id).second) {
        return InvalidArgumentError("snapshot has two segments with id \"" + s.id + "\"");
      }
      const int layer = static_cast<int>(s.layer);
      if (layer < 0 || layer >= kLayerCount || s.layer == Layer::kVolatile) {
        return InvalidArgumentError("snapshot segment \"" + s.id + "\" has layer " +
                                    std::to_string(layer) + ", which cannot be restored");
      }
      max_seq = std::max(max_seq, s.seq);
      layers[layer].push_back(std::move(s));
    }
    for (auto& [id, original] : snapshot.originals) recall_.emplace(id, std::move(original));
    turn_ = snapshot.turn;
    next_seq_ = max_seq + 1;
    for (int i = 0; i < 4; ++i) {
      std::sort(layers[i].begin(), layers[i].end(), RenderOrderLess);
      stable_[i] = std::move(layers[i]);
    }
    std::vector<Segment>& history = layers[static_cast<int>(Layer::kHistory)];
    std::sort(history.begin(), history.end(), RenderOrderLess);
    // Replay the history's bookkeeping and check that its pairing is valid.
    for (Segment& s : history) {
      next_position_ = std::max(next_position_, s.position + 1);
      if (!IsRendered(s)) {
        ApplyHistoryAppend(std::move(s));
        continue;
      }
      if (IsAssistantKind(s.kind)) {
        if (!open_calls_.empty()) {
          return InvalidArgumentError("snapshot history: assistant segment \"" + s.id +
                                      "\" follows unanswered tool calls (" + JoinNames(open_calls_) + ")");
        }
        RegisterCalls(s);
      } else if (IsToolResultKind(s.kind)) {
        auto open = std::find(open_calls_.begin(), open_calls_.end(), s.tool_call_id);
        if (open == open_calls_.end()) {
          return InvalidArgumentError("snapshot history: tool result \"" + s.id + "\" answers \"" +
                                      s.tool_call_id + "\", which is not an open call");
        }
        open_calls_.erase(open);
        if (s.hygiene != HygieneAction::kDeduplicated && s.state == SegmentState::kLive) {
          const ToolCall& call = *FindLastCall(s.tool_call_id);
          auto original = s.recall_id.empty() ? recall_.end() : recall_.find(s.recall_id);
          output_index_.emplace(
              OutputKey(call.name, call.arguments,
                        original == recall_.end() ? s.content : original->second),
              s.tool_call_id);
        }
        CountHygiene(s, +1);
      } else if (!open_calls_.empty()) {
        return InvalidArgumentError("snapshot history: segment \"" + s.id +
                                    "\" follows unanswered tool calls (" + JoinNames(open_calls_) + ")");
      }
      ApplyHistoryAppend(std::move(s));
    }
    for (int i = 0; i < 4; ++i) ReindexStable(static_cast<Layer>(i));
    RebuildHeader();
    return Status::Ok();
  }

 private:
  // The call `id` of the last assistant message that made tool calls, or nullptr.
  const ToolCall* FindLastCall(std::string_view id) const {
    if (last_call_segment_ == kNoOffset) return nullptr;
    for (const ToolCall& call : history_[last_call_segment_].tool_calls) {
      if (call.id == id) return &call;
    }
    return nullptr;
  }

  Segment NewSegment(uint64_t seq, SegmentKind kind, Layer layer) const {
    Segment s;
    s.seq = seq;
    s.id = "s" + std::to_string(seq);
    s.kind = kind;
    s.layer = layer;
    s.turn = turn_;
    return s;
  }

  Segment NewHistorySegment(SegmentKind kind, int64_t turn) const {
    Segment s = NewSegment(next_seq_, kind, Layer::kHistory);
    s.position = next_position_;
    s.turn = turn;
    return s;
  }

  size_t CountTokens(const Segment& s) const {
    size_t tokens = tokenizer_->Count(s.content) + tokenizer_->Count(s.reasoning);
    for (const ToolCall& call : s.tool_calls) {
      tokens += tokenizer_->Count(call.name) + tokenizer_->Count(call.arguments);
    }
    return tokens;
  }

  static size_t ContentBytes(const Segment& s) {
    size_t bytes = s.content.size() + s.reasoning.size();
    for (const ToolCall& call : s.tool_calls) bytes += call.name.size() + call.arguments.size();
    return bytes;
  }

  Status Record(ContextChange& change, int64_t turn_after) {
    if (options_.journal == nullptr) return Status::Ok();
    change.turn = turn_after;
    return options_.journal->Record(change);
  }

  void RegisterCalls(const Segment& s) {
    // `s` is about to be appended at history_.size().
    open_calls_.clear();
    last_call_segment_ = s.tool_calls.empty() ? kNoOffset : history_.size();
    for (const ToolCall& call : s.tool_calls) {
      open_calls_.push_back(call.id);
    }
  }

  void CountHygiene(const Segment& s, int sign) {
    size_t* counter = nullptr;
    switch (s.hygiene) {
      case HygieneAction::kTruncated: counter = &counters_.truncated; break;
      case HygieneAction::kDeduplicated: counter = &counters_.deduplicated; break;
      case HygieneAction::kFolded: counter = &counters_.folded; break;
      case HygieneAction::kNone: return;
    }
    *counter += sign;
    auto original = recall_.find(s.recall_id);
    if (original != recall_.end() && original->second.size() > s.content.size()) {
      counters_.bytes_saved_by_hygiene += sign * (original->second.size() - s.content.size());
    }
  }

  // Decides what a tool result renders as. Fills s.content, s.kind, s.hygiene, s.recall_id,
  // s.duplicate_of; adds the kept original to change.originals; sets output_key when this output
  // should be indexed for later deduplication.
  void ApplyHygiene(Segment& s, std::string content, bool is_error, const ToolCall& call,
                    ContextChange& change, std::string& output_key) const {
    const HygieneOptions& h = options_.hygiene;
    const bool error_log = is_error || internal::LooksLikeErrorLog(content);
    if (error_log) s.kind = SegmentKind::kErrorLog;
    const std::string recall_id = RecallIdFor(content);

    if (h.deduplicate && content.size() >= h.min_bytes) {
      std::string key = OutputKey(call.name, call.arguments, content);
      auto earlier = output_index_.find(key);
      if (earlier != output_index_.end()) {
        s.hygiene = HygieneAction::kDeduplicated;
        s.duplicate_of = earlier->second;
        s.recall_id = recall_id;
        s.content = internal::DuplicateReference(earlier->second, call.name, content, recall_id);
        KeepOriginal(recall_id, std::move(content), change);
        return;
      }
      output_key = std::move(key);
    }

    std::string rendered = content;
    if (error_log && h.fold_error_logs && content.size() >= h.min_bytes) {
      if (auto folded = internal::FoldErrorLog(rendered, h, recall_id)) {
        rendered = std::move(*folded);
        s.hygiene = HygieneAction::kFolded;
      }
    }
    if (h.max_segment_tokens > 0) {
      const size_t tokens = tokenizer_->Count(rendered);
      if (tokens > h.max_segment_tokens) {
        const double bytes_per_token = static_cast<double>(rendered.size()) / tokens;
        const double keep_bytes = bytes_per_token * static_cast<double>(h.max_segment_tokens);
        const double head_share = std::clamp(h.head_share, 0.0, 1.0);
        // Leave room for the marker line (about 40 tokens).
        const double budget = std::max(0.0, keep_bytes - 40 * bytes_per_token);
        rendered = internal::KeepHeadAndTail(rendered, static_cast<size_t>(budget * head_share),
                                             static_cast<size_t>(budget * (1 - head_share)),
                                             bytes_per_token, recall_id);
        s.hygiene = HygieneAction::kTruncated;
      }
    }
    if (s.hygiene != HygieneAction::kNone) {
      s.recall_id = recall_id;
      KeepOriginal(recall_id, std::move(content), change);
    }
    s.content = std::move(rendered);
  }

  void KeepOriginal(const std::string& recall_id, std::string original, ContextChange& change) const {
    if (!options_.keep_originals || recall_.count(recall_id)) return;
    change.originals.emplace_back(recall_id, std::move(original));
  }

  // Appends the rendered JSON of one history message.
  void RenderHistoryMessage(std::string& out, const Segment& s) const {
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
  size_t RenderedSizeBound(const Segment& s) const {
    size_t bytes = 128 + options_.render.reasoning_field.size() +
                   internal::JsonStringSize(s.content) + internal::JsonStringSize(s.reasoning) +
                   internal::JsonStringSize(s.tool_call_id);
    for (const ToolCall& call : s.tool_calls) {
      bytes += 64 + internal::JsonStringSize(call.id) + internal::JsonStringSize(call.name) +
               internal::JsonStringSize(call.arguments);
    }
    return bytes;
  }

  // Grows the history buffer by a quarter at a time instead of std::string's doubling: a 1M-token
  // history holds at most 25% slack instead of up to 100%, and appends stay amortized O(1).
  void ReserveHistory(size_t extra) {
    const size_t needed = history_buf_.size() + extra;
    if (needed <= history_buf_.capacity()) return;
    // libstdc++'s reserve() on a non-empty string grows to at least twice the old capacity, so
    // grow into a fresh string, whose reserve() is exact.
    std::string grown;
    grown.reserve(std::max(needed, history_buf_.size() + history_buf_.size() / 4 + 4096));
    grown.append(history_buf_);
    history_buf_.swap(grown);
  }

  std::string ApplyHistoryAppend(Segment s) {
    if (s.seq >= next_seq_) next_seq_ = s.seq + 1;
    if (s.position >= next_position_) next_position_ = s.position + 1;
    index_[s.id] = {Layer::kHistory, history_.size()};
    std::string id = s.id;
    history_.push_back(std::move(s));
    RenderHistoryAt(history_.size() - 1);
    return id;
  }

  // Appends the JSON of history_[i] (the last segment rendered so far + 1) to history_buf_.
  void RenderHistoryAt(size_t i) {
    const Segment& s = history_[i];
    if (!IsRendered(s)) {
      history_offsets_.push_back(kNoOffset);
      return;
    }
    ReserveHistory(RenderedSizeBound(s));
    history_offsets_.push_back(history_buf_.size());
    if (!history_buf_.empty()) history_buf_.push_back(',');
    RenderHistoryMessage(history_buf_, s);
    ++rendered_history_messages_;
    LayerUsage& usage = usage_[static_cast<int>(Layer::kHistory)];
    usage.segments += 1;
    usage.bytes += ContentBytes(s);
    usage.tokens += s.tokens;
  }

  // Re-renders the history from segment `index` on (after an edit); bytes before it stay as they
  // are. history_offsets_ must describe the buffer as it was before the edit up to `index`.
  void RerenderHistoryFrom(size_t index) {
    size_t cut = history_buf_.size();
    for (size_t i = index; i < history_offsets_.size(); ++i) {
      if (history_offsets_[i] != kNoOffset) {
        cut = history_offsets_[i];
        break;
      }
    }
    history_buf_.resize(cut);
    history_offsets_.resize(index);
    rendered_history_messages_ = 0;
    LayerUsage& usage = usage_[static_cast<int>(Layer::kHistory)];
    usage = LayerUsage{};
    for (size_t i = 0; i < index; ++i) {
      const Segment& s = history_[i];
      if (!IsRendered(s)) continue;
      ++rendered_history_messages_;
      usage.segments += 1;
      usage.bytes += ContentBytes(s);
      usage.tokens += s.tokens;
    }
    for (size_t i = index; i < history_.size(); ++i) RenderHistoryAt(i);
  }

  std::vector<Segment> StableLayer(Layer layer) const { return stable_[static_cast<int>(layer)]; }

  Status ReplaceStableLayer(Layer layer, std::vector<Segment> fresh, uint64_t next_seq) {
    ContextChange change;
    change.upserted = fresh;
    for (const Segment& old : stable_[static_cast<int>(layer)]) change.removed_ids.push_back(old.id);
    STRATA_RETURN_IF_ERROR(Record(change, turn_));
    next_seq_ = next_seq;
    SetStableLayer(layer, std::move(fresh));
    return Status::Ok();
  }

  void SetStableLayer(Layer layer, std::vector<Segment> segments) {
    std::vector<Segment>& slot = stable_[static_cast<int>(layer)];
    for (const Segment& old : slot) index_.erase(old.id);
    std::stable_sort(segments.begin(), segments.end(), RenderOrderLess);
    slot = std::move(segments);
    ReindexStable(layer);
    RebuildHeader();
  }

  void ReindexStable(Layer layer) {
    const std::vector<Segment>& slot = stable_[static_cast<int>(layer)];
    LayerUsage usage;
    for (size_t i = 0; i < slot.size(); ++i) {
      index_[slot[i].id] = {layer, i};
      usage.segments += 1;
      usage.bytes += ContentBytes(slot[i]);
      usage.tokens += slot[i].tokens;
    }
    usage_[static_cast<int>(layer)] = usage;
  }

  const Segment* FindDocument(Layer layer, std::string_view name) const {
    for (const Segment& s : stable_[static_cast<int>(layer)]) {
      if (s.name == name) return &s;
    }
    return nullptr;
  }

  std::vector<std::string> DocumentNames(Layer layer) const {
    std::vector<std::string> names;
    for (const Segment& s : stable_[static_cast<int>(layer)]) names.push_back(s.name);
    return names;
  }

  void RebuildHeader() {
    std::string header = "{\"model\":";
    AppendJsonString(header, options_.render.model);
    const std::vector<Segment>& tools = stable_[static_cast<int>(Layer::kTools)];
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
      for (const Segment& s : stable_[static_cast<int>(layer)]) {
        for (internal::LintHit& hit : internal::ScanVolatileLooking(s.content)) {
          lint_.push_back(LintWarning{s.id, s.layer, std::move(hit.what), hit.offset, std::move(hit.excerpt)});
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
        (!stable_[0].empty() || !stable_[2].empty() || !stable_[3].empty())) {
      AppendSystemMessage(header, combined);
      stable_messages_ = 1;
    }
    header_ = std::move(header);
    stable_prefix_hash_ = internal::Sha256Hex(header_);
  }

  ContextOptions options_;
  std::unique_ptr<Tokenizer> owned_tokenizer_;
  const Tokenizer* tokenizer_ = nullptr;

  std::vector<Segment> stable_[4];  // system, tools, index, docs; each in render order
  // Render order. A deque: no reallocation slack or moves as a long history grows, and pointers
  // returned by Find() stay valid across appends.
  std::deque<Segment> history_;
  std::vector<size_t> history_offsets_;  // start of each segment's JSON in history_buf_, or kNoOffset
  std::string history_buf_;
  size_t rendered_history_messages_ = 0;
  std::vector<std::pair<std::string, std::string>> volatile_;

  std::string header_;
  size_t stable_messages_ = 0;
  std::string stable_prefix_hash_;
  std::vector<LintWarning> lint_;

  size_t last_call_segment_ = kNoOffset;  // history index of the last assistant message with calls
  std::vector<std::string> open_calls_;                       // of the last assistant message
  std::unordered_map<std::string, std::string> output_index_;  // OutputKey -> first call id
  std::unordered_map<std::string, std::string> recall_;        // recall id -> original
  std::unordered_map<std::string, std::pair<Layer, size_t>> index_;  // segment id -> location

  std::vector<CompactionReport> compactions_;
  int64_t turn_ = 0;
  uint64_t next_seq_ = 1;
  int64_t next_position_ = 1;
  LayerUsage usage_[kLayerCount];
  ContextStats counters_;
};

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
                                std::to_string(options.hygiene.head_share) + "; use a value in [0, 1]");
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
StatusOr<BuiltRequest> Context::Build(const BuildOptions& options) const {
  return impl_->Build(options);
}
StatusOr<BuiltRequest> Context::Build(const BuildOptions& options) {
  return impl_->BuildWithinBudget(options);
}
size_t Context::InputTokens() const { return impl_->InputTokens(); }
StatusOr<std::optional<CompactionReport>> Context::Compact(bool force) { return impl_->Compact(force); }
StatusOr<CompactionReport> Context::ApplyEdit(const HistoryEdit& edit, std::string policy,
                                              std::string reason) {
  return impl_->ApplyEdit(edit, std::move(policy), std::move(reason));
}
const std::vector<CompactionReport>& Context::Compactions() const { return impl_->Compactions(); }
StatusOr<std::string> Context::AnswerRecall(const std::string& tool_call_id) {
  return impl_->AnswerRecall(tool_call_id);
}
std::vector<Segment> Context::Segments() const { return impl_->Segments(); }
const Segment* Context::Find(std::string_view id) const { return impl_->Find(id); }
StatusOr<std::string> Context::Recall(std::string_view recall_id) const {
  return impl_->Recall(recall_id);
}
ContextStats Context::Stats() const { return impl_->Stats(); }
ContextSnapshot Context::Snapshot() const { return impl_->Snapshot(); }
std::vector<LintWarning> Context::Lint() const { return impl_->Lint(); }

}  // namespace strata
