// strata-sim's engine (sim_impl.h): one request's Plan, whatever protocol carries it: the checks,
// the prefix-cache lookup and prefill time, the reply (cut at the output cap) and its body or
// stream chunks, and the error bodies.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <functional>

#include "sim_impl.h"

namespace strata::sim {
namespace sim_internal {

Reply ReplyFromMessage(const json& m) {
  Reply r;
  if (m.contains("content") && m["content"].is_string()) r.content = m["content"].get<std::string>();
  for (const char* key : {"reasoning_content", "reasoning"}) {
    if (m.contains(key) && m[key].is_string() && r.reasoning.empty()) r.reasoning = m[key].get<std::string>();
  }
  if (m.contains("tool_calls") && m["tool_calls"].is_array()) {
    for (const json& c : m["tool_calls"]) {
      ToolCall call;
      if (c.contains("id") && c["id"].is_string()) call.id = c["id"].get<std::string>();
      const json& f = c.contains("function") ? c["function"] : c;
      if (f.contains("name") && f["name"].is_string()) call.name = f["name"].get<std::string>();
      if (f.contains("arguments")) {
        call.arguments = f["arguments"].is_string() ? f["arguments"].get<std::string>() : f["arguments"].dump();
      }
      r.tool_calls.push_back(std::move(call));
    }
  }
  return r;
}

}  // namespace sim_internal

using sim_internal::Fault;
using sim_internal::Invalid;
using sim_internal::IsStatusFault;
using sim_internal::json;
using sim_internal::Plan;
using sim_internal::Reply;
using sim_internal::ReplyFromMessage;
using sim_internal::ValidateRequest;

namespace {

// Splits UTF-8 text into pieces of about `n` bytes, never inside a code point.
std::vector<std::string> Pieces(const std::string& text, size_t n) {
  std::vector<std::string> out;
  n = std::max<size_t>(1, n);
  size_t i = 0;
  while (i < text.size()) {
    size_t end = std::min(text.size(), i + n);
    while (end < text.size() && (static_cast<unsigned char>(text[end]) & 0xC0) == 0x80) ++end;
    out.push_back(text.substr(i, end - i));
    i = end;
  }
  return out;
}

// The longest prefix of `text` (whole UTF-8 code points) that counts at most `tokens`.
std::string PrefixWithin(const std::string& text, int64_t tokens, const std::function<int64_t(const std::string&)>& count) {
  if (count(text) <= tokens) return text;
  size_t lo = 0, hi = text.size();  // count(text[0, lo)) <= tokens < count(text[0, hi))
  while (hi - lo > 1) {
    size_t mid = lo + (hi - lo) / 2;
    while (mid > lo && (static_cast<unsigned char>(text[mid]) & 0xC0) == 0x80) --mid;
    if (mid == lo) break;
    if (count(text.substr(0, mid)) <= tokens) lo = mid;
    else hi = mid;
  }
  return text.substr(0, lo);
}

// Cuts a reply to `max_tokens` output tokens (reasoning, then content, then whole tool calls), as a
// server stops generating at the cap. True when something was cut.
bool CapReply(Reply* reply, int64_t max_tokens, const std::function<int64_t(const std::string&)>& count) {
  int64_t left = max_tokens;
  bool cut = false;
  for (std::string* text : {&reply->reasoning, &reply->content}) {
    int64_t n = count(*text);
    if (n <= left) {
      left -= n;
      continue;
    }
    *text = PrefixWithin(*text, std::max<int64_t>(0, left), count);
    left = 0;
    cut = true;
  }
  std::vector<ToolCall> kept;
  for (ToolCall& call : reply->tool_calls) {
    int64_t n = count(call.name) + count(call.arguments);
    if (!cut && n <= left) {
      left -= n;
      kept.push_back(std::move(call));
    } else {
      cut = true;
    }
  }
  reply->tool_calls = std::move(kept);
  return cut;
}

// The cache salt of a (validated) request: vLLM's "cache_salt", else SGLang's "extra_key".
std::string CacheSalt(const json& request) {
  for (const char* key : {"cache_salt", "extra_key"}) {
    if (request.contains(key) && request[key].is_string()) return request[key].get<std::string>();
  }
  return "";
}

// The id an abort names the request by (SGLang's rid): "request_id", else "rid", else X-Request-Id.
std::string RequestId(const json& request, const std::map<std::string, std::string>& headers) {
  std::string rid;
  for (const char* key : {"rid", "request_id"}) {
    if (request.contains(key) && request[key].is_string()) rid = request[key].get<std::string>();
  }
  if (rid.empty()) {
    auto header = headers.find("x-request-id");
    if (header != headers.end()) rid = header->second;
  }
  return rid;
}

// The output cap of a (validated) request; 0 when it sets none.
int64_t MaxOutputTokens(const json& request) {
  int64_t max_out = 0;
  for (const char* key : {"max_tokens", "max_completion_tokens"}) {  // the latter wins, as in vLLM
    if (request.contains(key) && request[key].is_number()) max_out = static_cast<int64_t>(request[key].get<double>());
  }
  return max_out;
}

}  // namespace

Plan SimServer::Impl::MakePlan(const std::string& protocol, const std::string& path, const std::string& body,
              const std::map<std::string, std::string>& headers) {
  const int64_t started = clock_->NowMicros();
  Plan plan;
  try {
    plan = MakePlanOrThrow(protocol, path, body, headers);
  } catch (const std::exception& e) {
    plan = ErrorPlan(NewPlan(protocol, path, body, headers), 400, std::string("invalid request: ") + e.what(),
                     options_.error_shape, "BadRequestError");
  }
  plan.log.processing_us = std::max<int64_t>(0, clock_->NowMicros() - started);
  CountProcessing(plan.log.processing_us);
  return plan;
}

Plan SimServer::Impl::NewPlan(const std::string& protocol, const std::string& path, const std::string& body,
             const std::map<std::string, std::string>& headers) const {
  Plan plan;
  plan.log.protocol = protocol;
  plan.log.path = path;
  plan.log.headers = headers;
  plan.log.body_bytes = body.size();
  plan.log.body = body.substr(0, options_.max_logged_body_bytes);
  return plan;
}

Plan SimServer::Impl::MakePlanOrThrow(const std::string& protocol, const std::string& path, const std::string& body,
                     const std::map<std::string, std::string>& headers) {
  Plan plan = NewPlan(protocol, path, body, headers);
  const std::string default_shape = options_.error_shape == "flat" ? "flat" : "nested";
  std::optional<Fault> fault;
  Status chosen = ChooseFault(headers, body, &fault);
  if (!chosen.ok()) return ErrorPlan(std::move(plan), 400, chosen.message(), default_shape, "invalid_fault");
  if (fault) plan.log.fault = fault->spec;
  const std::string shape = fault && !fault->shape.empty() ? fault->shape : default_shape;
  if (fault && IsStatusFault(*fault)) return StatusFaultPlan(std::move(plan), *fault, shape);

  // SimOptions::answer is handed the whole request; the engine itself needs only its shape.
  json request = options_.answer ? json::parse(body, nullptr, false) : sim_internal::ParseRequestShape(body);
  if (request.is_discarded()) {
    return ErrorPlan(std::move(plan), 400, "request body is not valid JSON", shape, "BadRequestError");
  }
  if (std::optional<Invalid> invalid = ValidateRequest(request)) {
    return ErrorPlan(std::move(plan), 400, invalid->message, shape, "BadRequestError", invalid->param);
  }
  StatusOr<PromptText> prompt = RenderPrompt(body);
  if (!prompt.ok()) return ErrorPlan(std::move(plan), 400, prompt.status().message(), shape, "BadRequestError");
  plan.log.cache_salt = CacheSalt(request);
  plan.rid = RequestId(request, headers);
  PromptBlocks blocks = HashPrompt(prompt->text, plan.log.cache_salt, options_.tokenizer, options_.cache);
  const int64_t prompt_tokens = blocks.prompt_tokens;
  plan.log.prompt_tokens = prompt_tokens;
  const int64_t max_out = MaxOutputTokens(request);
  if ((fault && fault->kind == "oversize") || prompt_tokens > options_.max_context_tokens) {
    return ContextTooLongPlan(std::move(plan), prompt_tokens, max_out, shape);
  }
  const int64_t cached = cache_.LookupAndInsert(blocks);
  plan.log.cached_tokens = cached;
  plan.prefill_us = kv_.PrefillMicros(prompt_tokens, cached);
  if (fault && (fault->kind == "slow-first-byte")) plan.prefill_us += int64_t{fault->delay_ms} * 1000;
  if (fault && (fault->kind == "stall" || fault->kind == "reset" || fault->kind == "malformed-sse")) plan.fault = fault;

  StatusOr<Reply> reply = ChooseReply(request, headers, prompt_tokens);
  if (!reply.ok()) return ErrorPlan(std::move(plan), 400, reply.status().message(), shape, "BadRequestError");
  plan.prompt_tokens = prompt_tokens;
  return PlanReply(std::move(plan), request, headers, std::move(reply).value(), cached, max_out);
}

StatusOr<PromptText> SimServer::Impl::RenderPrompt(const std::string& body) const {
  if (options_.chat_template != nullptr) {
    StatusOr<std::string> text = options_.chat_template->Render(body);
    if (text.ok()) {
      PromptText rendered;
      rendered.text = std::move(text).value();
      return rendered;
    }
  }
  return RenderPromptText(body);
}

Plan SimServer::Impl::ContextTooLongPlan(Plan plan, int64_t prompt_tokens, int64_t max_out, const std::string& shape) const {
  std::string message = "This model's maximum context length is " + std::to_string(options_.max_context_tokens) +
                        " tokens. However, you requested " + std::to_string(prompt_tokens + max_out) +
                        " tokens (" + std::to_string(prompt_tokens) + " in the messages, " +
                        std::to_string(max_out) + " in the completion). Please reduce the length of the "
                        "messages or completion.";
  plan.serving_error = true;
  return ErrorPlan(std::move(plan), 400, message, shape, "BadRequestError");
}

StatusOr<Reply> SimServer::Impl::ChooseReply(const json& request, const std::map<std::string, std::string>& headers, int64_t prompt_tokens) {
  auto scripted = headers.find("x-strata-sim-reply");
  if (scripted != headers.end()) {
    json m = json::parse(scripted->second, nullptr, false);
    if (m.is_discarded() || !m.is_object()) return InvalidArgumentError("X-Strata-Sim-Reply is not a JSON object");
    return ReplyFromMessage(m);
  } else if (options_.answer) return Reply{options_.answer(request.dump(), prompt_tokens), "", {}};
  size_t assistants = 0;
  for (const json& m : request["messages"]) {
    if (m.is_object() && m.value("role", "") == "assistant") ++assistants;
  }
  if (assistants < script_.size()) return script_[assistants];
  Reply reply;
  uint64_t n = ++generated_;
  reply.content = "Simulated reply " + std::to_string(n) + ".";
  size_t want = static_cast<size_t>(options_.generated_output_tokens) * options_.cache.bytes_per_token;
  while (reply.content.size() < want) reply.content += " lorem";
  if (reply.content.size() > want && want > 0) reply.content.resize(std::max<size_t>(want, 1));
  return reply;
}

Plan SimServer::Impl::PlanReply(Plan plan, const json& request, const std::map<std::string, std::string>& headers, Reply reply,
               int64_t cached, int64_t max_out) {
  Completion done;
  done.model =
      request.contains("model") && request["model"].is_string() ? request["model"].get<std::string>() : "glm-5.3-flash";
  done.reasoning_field = options_.flavor == "vllm" ? "reasoning" : "reasoning_content";
  plan.stream = request.contains("stream") && request["stream"].is_boolean() && request["stream"].get<bool>();
  // A server stops at the output cap: the reply is cut there and finishes with "length".
  bool capped = max_out > 0 && CapReply(&reply, max_out, [this](const std::string& s) { return CountTokens(s); });
  int64_t reasoning_tokens = CountTokens(reply.reasoning);
  int64_t completion_tokens = reasoning_tokens + CountTokens(reply.content);
  for (const ToolCall& c : reply.tool_calls) completion_tokens += CountTokens(c.name) + CountTokens(c.arguments);
  done.finish_reason = capped ? "length" : reply.tool_calls.empty() ? "stop" : "tool_calls";
  done.usage = {{"prompt_tokens", plan.prompt_tokens},
                {"completion_tokens", completion_tokens},
                {"total_tokens", plan.prompt_tokens + completion_tokens}};
  if (options_.cached_report == CachedReport::kPresent) {
    done.usage["prompt_tokens_details"] = {{"cached_tokens", cached}};
  } else if (options_.cached_report == CachedReport::kNull) {
    done.usage["prompt_tokens_details"] = nullptr;
  }
  if (reasoning_tokens > 0) done.usage["completion_tokens_details"] = {{"reasoning_tokens", reasoning_tokens}};
  done.id = "chatcmpl-sim-" + std::to_string(++completions_);
  done.reply = std::move(reply);
  plan.kv_output_tokens = max_out > 0 ? max_out : completion_tokens;
  if (plan.stream) {
    AddStreamChunks(done, request, headers, &plan);
  } else {
    plan.payloads.push_back(CompletionBody(done));
    plan.delay_us.push_back(
        static_cast<int64_t>(static_cast<double>(completion_tokens) * options_.decode_us_per_token));
  }
  plan.log.status = 200;
  return plan;
}

int64_t SimServer::Impl::CountTokens(const std::string& s) const {
  if (options_.tokenizer != nullptr) return static_cast<int64_t>(options_.tokenizer->Count(s));
  size_t bpt = std::max<size_t>(1, options_.cache.bytes_per_token);
  return static_cast<int64_t>((s.size() + bpt - 1) / bpt);
}

std::string SimServer::Impl::CompletionBody(const Completion& done) {
  const Reply& reply = done.reply;
  json message = {{"role", "assistant"}};
  message["content"] = reply.content.empty() && !reply.tool_calls.empty() ? json(nullptr) : json(reply.content);
  if (!reply.reasoning.empty()) message[done.reasoning_field] = reply.reasoning;
  if (!reply.tool_calls.empty()) {
    json calls = json::array();
    for (const ToolCall& c : reply.tool_calls) {
      calls.push_back(
          {{"id", c.id}, {"type", "function"}, {"function", {{"name", c.name}, {"arguments", c.arguments}}}});
    }
    message["tool_calls"] = calls;
  }
  json answer = {{"id", done.id}, {"object", "chat.completion"}, {"created", 1700000000}, {"model", done.model},
                 {"choices",
                  json::array({{{"index", 0}, {"message", message}, {"finish_reason", done.finish_reason}}})},
                 {"usage", done.usage}};
  return answer.dump();
}

void SimServer::Impl::AddStreamChunks(const Completion& done, const json& request, const std::map<std::string, std::string>& headers,
                     Plan* plan) const {
  size_t chunk = options_.chunk_bytes;
  auto chunk_header = headers.find("x-strata-sim-chunk");
  if (chunk_header != headers.end()) chunk = std::max(1, std::atoi(chunk_header->second.c_str()));
  bool include_usage = false;
  if (request.contains("stream_options") && request["stream_options"].is_object()) {
    const json& so = request["stream_options"];
    include_usage =
        so.contains("include_usage") && so["include_usage"].is_boolean() && so["include_usage"].get<bool>();
  }
  auto chunk_json = [&](json delta, const json& finish_reason) {
    json c = {{"id", done.id}, {"object", "chat.completion.chunk"}, {"created", 1700000000}, {"model", done.model},
              {"choices", json::array({{{"index", 0}, {"delta", std::move(delta)}, {"finish_reason", finish_reason}}})}};
    return c.dump();
  };
  auto add = [&](std::string payload, int64_t delay) {
    plan->payloads.push_back(std::move(payload));
    plan->delay_us.push_back(delay);
  };
  auto delay_for = [&](const std::string& piece) {
    return static_cast<int64_t>(CountTokens(piece) * options_.decode_us_per_token);
  };
  const Reply& reply = done.reply;
  add(chunk_json({{"role", "assistant"}, {"content", ""}}, nullptr), 0);
  for (const std::string& p : Pieces(reply.reasoning, chunk)) {
    add(chunk_json({{done.reasoning_field, p}}, nullptr), delay_for(p));
  }
  for (const std::string& p : Pieces(reply.content, chunk)) add(chunk_json({{"content", p}}, nullptr), delay_for(p));
  for (size_t i = 0; i < reply.tool_calls.size(); ++i) {
    const ToolCall& c = reply.tool_calls[i];
    add(chunk_json({{"tool_calls", json::array({{{"index", i}, {"id", c.id}, {"type", "function"},
                                                  {"function", {{"name", c.name}, {"arguments", ""}}}}})}},
                   nullptr),
        delay_for(c.name));
    for (const std::string& p : Pieces(c.arguments, chunk)) {
      add(chunk_json({{"tool_calls", json::array({{{"index", i}, {"function", {{"arguments", p}}}}})}}, nullptr),
          delay_for(p));
    }
  }
  add(chunk_json(json::object(), done.finish_reason), 0);
  if (include_usage) {
    json u = {{"id", done.id}, {"object", "chat.completion.chunk"}, {"created", 1700000000}, {"model", done.model},
              {"choices", json::array()}, {"usage", done.usage}};
    add(u.dump(), 0);
  }
  add("[DONE]", 0);
}

Plan SimServer::Impl::ErrorPlan(Plan plan, int status, const std::string& message, const std::string& shape, const std::string& type,
               const std::string& param) {
  plan.status = status;
  plan.error_message = message;
  plan.error_type = type;
  json error = {{"message", message}, {"type", type}, {"param", param.empty() ? json(nullptr) : json(param)},
                {"code", status}};
  if (shape == "nested") {
    plan.error_body = json({{"error", error}}).dump();
  } else {
    json flat = {{"object", "error"}};
    for (auto& [k, v] : error.items()) flat[k] = v;
    plan.error_body = flat.dump();
  }
  plan.log.status = status;
  return plan;
}

}  // namespace strata::sim
