// The Agent's tools (agent_impl.h): the tools array, RegisterTool, dispatching tool calls to their
// handlers, and context_recall (pages of originals, pinned while in use).
#include <algorithm>
#include <exception>
#include <nlohmann/json.hpp>
#include <utility>

#include "agent/agent_impl.h"
#include "agent/tool_arguments.h"
#include "core/recall_page.h"
#include "core/utf8.h"

namespace strata {
namespace {

using json = nlohmann::json;
using internal::Utf8Prefix;  // an unparsable call quoted at a UTF-8 character boundary

}  // namespace

std::string Agent::Impl::ToolsJson() const {
  std::string out = "[";
  bool first = true;
  if (config_.recall.expose_tool) {
    out += RecallToolSchema();  // the one context_recall contract (core/recall_page.h)
    first = false;
  }
  for (const std::string& name : tool_order_) {
    if (!first) out += ",";
    out += tools_.at(name).schema;
    first = false;
  }
  return out + "]";
}

void Agent::Impl::LoadToolsFromContext() {
  for (const Segment& s : context_->Segments()) {
    if (s.layer != Layer::kTools) continue;
    json tool = json::parse(s.content, nullptr, false);
    if (!tool.is_object() || !tool.contains("function")) continue;
    std::string name = tool["function"].value("name", "");
    if (name.empty() || name == kRecallToolName) continue;
    tools_[name] = Tool{s.content, nullptr};
    tool_order_.push_back(name);
  }
}

Status Agent::Impl::ExpireProtections() {
  const int64_t turn = static_cast<int64_t>(context_->Stats().turns);
  bool changed = false;
  for (auto it = protections_.begin(); it != protections_.end();) {
    if (turn >= it->until_turn) {
      if (context_->Find(it->segment_id) != nullptr) {
        STRATA_RETURN_IF_ERROR(context_->SetPinned(it->segment_id, false));
      }
      it = protections_.erase(it);
      changed = true;
    } else {
      ++it;
    }
  }
  return changed ? SaveProtections() : Status::Ok();
}

size_t Agent::Impl::RecallShareTokens() const {
  int64_t base = budget_ ? TargetTokens(*budget_) : config_.budget.window;
  size_t share =
      static_cast<size_t>(static_cast<double>(base) * config_.recall.max_share_of_target);
  // A page, with its header and footer lines (48 tokens at most), must pass append-time
  // truncation untouched.
  const size_t max_segment = config_.hygiene.max_segment_tokens;
  if (max_segment > 0)
    share = std::min(share, max_segment > 96 ? max_segment - 48 : max_segment / 2);
  return std::max<size_t>(share, 16);
}

StatusOr<std::string> Agent::Impl::OriginalOf(std::string_view recall_id) const {
  StatusOr<std::string> original = context_->Recall(recall_id);
  if (original.ok()) return original;
  auto it = joined_originals_.find(std::string(recall_id));
  if (it != joined_originals_.end()) return it->second;
  return NotFoundError("no original is kept under recall id \"" + std::string(recall_id) +
                       "\" for agent \"" + config_.identity.id + "\"");
}

StatusOr<RecallPage> Agent::Impl::Recall(std::string_view recall_id, size_t offset,
                                         size_t max_tokens) const {
  STRATA_ASSIGN_OR_RETURN(std::string original, OriginalOf(recall_id));
  const size_t cap = RecallShareTokens();
  const size_t limit = max_tokens == 0 ? cap : std::min(max_tokens, cap);
  return internal::PageOf(recall_id, original, offset, limit, *tokenizer_);
}

StatusOr<std::string> Agent::Impl::AnswerRecall(const ToolCall& call) {
  StatusOr<internal::RecallRequest> request = internal::ParseRecallArguments(call.arguments);
  if (!request.ok()) {
    const std::optional<std::string> unparsed = agent_internal::UnparsedArguments(call.arguments);
    const std::string text =
        "context_recall needs {\"recall_id\": \"r-...\"} (optional offset, max_tokens); got " +
        Utf8Prefix(unparsed ? *unparsed : call.arguments, 200);
    return context_->AppendToolResult({call.id, text, true});
  }
  StatusOr<RecallPage> page = Recall(request->recall_id, request->offset, request->max_tokens);
  if (!page.ok()) {
    return context_->AppendToolResult({call.id, page.status().message(), true});
  }
  STRATA_ASSIGN_OR_RETURN(
      std::string segment_id,
      context_->AppendToolResult({call.id, internal::RecallAnswerText(*page), false}));
  if (config_.recall.protect_turns > 0) {
    STRATA_RETURN_IF_ERROR(context_->SetPinned(segment_id, true));
    protections_.push_back(
        {segment_id, static_cast<int64_t>(context_->Stats().turns) + config_.recall.protect_turns});
    STRATA_RETURN_IF_ERROR(SaveProtections());
  }
  return segment_id;
}

Status Agent::Impl::Dispatch(RunResult* stats) {
  const std::vector<std::string> open = context_->OpenToolCalls();
  if (open.empty()) return Status::Ok();
  const Segment* last = last_assistant_id_.empty() ? nullptr : context_->Find(last_assistant_id_);
  if (last == nullptr || last->kind != SegmentKind::kToolCall) {
    last = nullptr;
    for (const Segment& s : context_->Segments()) {
      if (s.layer == Layer::kHistory && s.kind == SegmentKind::kToolCall)
        last = context_->Find(s.id);
    }
  }
  if (last == nullptr) return InternalError("open tool calls without an assistant message");
  const std::vector<ToolCall> calls = last->tool_calls;
  for (const ToolCall& call : calls) {
    if (std::find(open.begin(), open.end(), call.id) == open.end()) continue;
    if (stats != nullptr) ++stats->tool_calls;
    if (call.name == kRecallToolName) {
      STRATA_RETURN_IF_ERROR(AnswerRecall(call).status());
      continue;
    }
    ToolOutput output;
    auto it = tools_.find(call.name);
    if (it == tools_.end()) {
      std::string known;
      for (const std::string& n : tool_order_) known += (known.empty() ? "" : ", ") + n;
      output = {"unknown tool \"" + call.name + "\" (tools: " + (known.empty() ? "none" : known) +
                    (config_.recall.expose_tool ? ", context_recall" : "") + ")",
                true};
    } else if (!it->second.handler) {
      output = {"tool \"" + call.name + "\" has no handler registered in this process", true};
    } else {
      try {
        output = it->second.handler(call.arguments);
      } catch (const std::exception& e) {
        output = {"tool \"" + call.name + "\" failed: " + e.what(), true};
      } catch (...) {
        output = {"tool \"" + call.name + "\" failed with an unknown exception", true};
      }
    }
    if (output.is_error && stats != nullptr) ++stats->tool_errors;
    STRATA_RETURN_IF_ERROR(
        context_->AppendToolResult({call.id, std::move(output.content), output.is_error}).status());
  }
  return Status::Ok();
}

Status Agent::RegisterTool(std::string name, std::string_view schema_json, ToolHandler handler) {
  std::lock_guard<std::mutex> lock(impl_->mu_);
  if (name.empty()) return InvalidArgumentError("RegisterTool: the tool name must not be empty");
  if (name == kRecallToolName) {
    return InvalidArgumentError(
        "RegisterTool: \"context_recall\" is the agent's own tool (AgentRecallConfig)");
  }
  json schema = json::parse(schema_json.begin(), schema_json.end(), nullptr, false);
  if (!schema.is_object()) {
    return InvalidArgumentError(
        "RegisterTool(\"" + name +
        "\"): the schema is not a JSON object: " + std::string(schema_json.substr(0, 80)));
  }
  json function = schema.contains("function") ? schema["function"] : schema;
  if (!function.is_object()) {
    return InvalidArgumentError("RegisterTool(\"" + name + "\"): \"function\" must be an object");
  }
  if (function.contains("name") && function["name"] != name) {
    return InvalidArgumentError("RegisterTool(\"" + name + "\"): the schema names another tool, " +
                                function["name"].dump());
  }
  if (function.contains("parameters") && !function["parameters"].is_object()) {
    return InvalidArgumentError("RegisterTool(\"" + name +
                                "\"): \"parameters\" must be a JSON Schema object");
  }
  function["name"] = name;
  json tool = {{"type", "function"}, {"function", function}};
  std::string canonical = tool.dump();  // nlohmann sorts object keys: canonical
  auto& tools = impl_->tools_;
  auto it = tools.find(name);
  if (it != tools.end() && it->second.handler) {
    return InvalidArgumentError("RegisterTool: a tool named \"" + name +
                                "\" is already registered");
  }
  const bool same_schema = it != tools.end() && it->second.schema == canonical;
  Impl::Tool before = it != tools.end() ? it->second : Impl::Tool{};
  const bool existed = it != tools.end();
  tools[name] = Impl::Tool{canonical, std::move(handler)};
  if (!existed) impl_->tool_order_.push_back(name);
  if (same_schema)
    return Status::Ok();  // reattaching a handler after Open: no change to the prefix
  Status set = impl_->context_->SetTools(impl_->ToolsJson());
  if (!set.ok()) {
    if (existed) {
      tools[name] = before;
    } else {
      tools.erase(name);
      impl_->tool_order_.pop_back();
    }
  }
  return set;
}

}  // namespace strata
