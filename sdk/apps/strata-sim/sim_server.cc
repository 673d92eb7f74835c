// strata-sim: a prefix-caching Chat Completions endpoint simulator (HTTP/1.1 + SGLang gRPC).
#include "sim_server.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <fstream>
#include <functional>
#include <list>
#include <mutex>
#include <set>
#include <sstream>
#include <thread>

#include "sim_grpc.h"
#include "strata/segment.h"

namespace strata::sim {
namespace {

using nlohmann::json;

std::string Lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

struct Fault {
  std::string kind;  // "429", "500", "503", "400", "slow-first-byte", "stall", "reset", "malformed-sse", "oversize"
  std::string shape;  // "flat" / "nested" / "" (flavor default)
  double retry_after = 1;
  int delay_ms = 2000;
  int after = 2;
  int times = -1;
  std::string spec;
};

StatusOr<Fault> ParseFault(const std::string& spec) {
  Fault f;
  f.spec = spec;
  std::stringstream in(spec);
  std::string item;
  bool first = true;
  while (std::getline(in, item, ',')) {
    while (!item.empty() && item.front() == ' ') item.erase(0, 1);
    while (!item.empty() && item.back() == ' ') item.pop_back();
    if (first) {
      f.kind = Lower(item);
      first = false;
      continue;
    }
    size_t eq = item.find('=');
    if (eq == std::string::npos) return InvalidArgumentError("fault option \"" + item + "\" is not key=value");
    std::string key = Lower(item.substr(0, eq)), value = item.substr(eq + 1);
    if (key == "shape") f.shape = Lower(value);
    else if (key == "retry_after") f.retry_after = std::atof(value.c_str());
    else if (key == "delay_ms") f.delay_ms = std::atoi(value.c_str());
    else if (key == "after") f.after = std::atoi(value.c_str());
    else if (key == "times") f.times = std::atoi(value.c_str());
    else return InvalidArgumentError("unknown fault option \"" + key + "\" (known: shape, retry_after, delay_ms, after, times)");
  }
  static const std::set<std::string> kKinds = {"429", "500", "503", "400", "slow-first-byte", "stall",
                                               "reset", "malformed-sse", "oversize"};
  if (kKinds.count(f.kind) == 0) {
    return InvalidArgumentError("unknown fault \"" + f.kind +
                                "\" (known: 429, 500, 503, 400, slow-first-byte, stall, reset, malformed-sse, oversize)");
  }
  return f;
}

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

struct Reply {
  std::string content, reasoning;
  std::vector<ToolCall> tool_calls;
};

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

// The answer to one request, independent of the protocol that carries it.
struct Plan {
  int status = 200;
  std::string error_body;
  std::string error_message;
  std::string error_type;
  bool serving_error = false;  // found while serving (context length), not a malformed request
  double retry_after = -1;
  bool stream = false;
  std::vector<std::string> payloads;  // stream: SSE data payloads ("[DONE]" last); else one JSON body
  std::vector<int64_t> delay_us;      // decode time before each payload
  int64_t prefill_us = 0;
  int64_t prompt_tokens = 0, kv_output_tokens = 0;  // for the KV-memory model (sim_kv.h)
  std::optional<Fault> fault;
  std::string rid;
  SimRequestLog log;
};

// A request field vLLM's OpenAI server would refuse (pydantic types plus its own checks): the
// message, and the offending parameter for the error body's "param".
struct Invalid {
  std::string message;
  std::string param;
};

std::string TypeName(const json& v) {
  switch (v.type()) {
    case json::value_t::null: return "null";
    case json::value_t::boolean: return "a boolean";
    case json::value_t::string: return "a string";
    case json::value_t::array: return "an array";
    case json::value_t::object: return "an object";
    case json::value_t::number_float: return "a float";
    default: return "an integer";
  }
}

bool IsInteger(const json& v) {
  if (v.is_number_integer() || v.is_number_unsigned()) return true;
  if (!v.is_number_float()) return false;
  double d = v.get<double>();
  return d == static_cast<double>(static_cast<int64_t>(d)) && d > -9e18 && d < 9e18;  // 5.0 like pydantic
}

// Request bodies may nest at most this deep: the prompt renderers and chat templates walk JSON
// recursively, and a 100 KB body of nested arrays would overflow their stack.
constexpr size_t kMaxRequestDepth = 256;

size_t Depth(const json& root) {
  size_t deepest = 0;
  std::vector<std::pair<const json*, size_t>> stack{{&root, 1}};
  while (!stack.empty()) {
    auto [value, depth] = stack.back();
    stack.pop_back();
    deepest = std::max(deepest, depth);
    if (value->is_structured()) {
      for (const json& child : *value) stack.emplace_back(&child, depth + 1);
    }
  }
  return deepest;
}

// Why messages[`i`] (`m`) is refused, as vLLM/SGLang would refuse it; nullopt when it is not.
std::optional<Invalid> ValidateMessage(const json& m, size_t i) {
  static const std::set<std::string> kRoles = {"system", "developer", "user", "assistant", "tool", "function"};
  std::string where = "messages[" + std::to_string(i) + "]";
  if (!m.is_object()) return Invalid{where + " must be an object, got " + TypeName(m), where};
  if (!m.contains("role") || !m["role"].is_string()) {
    return Invalid{where + ".role must be a string, got " + (m.contains("role") ? TypeName(m["role"]) : "nothing"),
                   where + ".role"};
  }
  std::string role = m["role"].get<std::string>();
  if (kRoles.count(role) == 0) {
    return Invalid{where + ".role \"" + role +
                       "\" is not one of system, developer, user, assistant, tool, function",
                   where + ".role"};
  }
  if (m.contains("content") && !m["content"].is_null() && !m["content"].is_string()) {
    if (!m["content"].is_array()) {
      return Invalid{where + ".content must be a string, an array of parts or null, got " + TypeName(m["content"]),
                     where + ".content"};
    }
    for (const json& part : m["content"]) {
      if (!part.is_object() || !part.contains("type") || !part["type"].is_string()) {
        return Invalid{where + ".content parts must be objects with a \"type\"", where + ".content"};
      }
    }
  }
  for (const char* name : {"name", "tool_call_id", "reasoning_content", "reasoning"}) {
    if (m.contains(name) && !m[name].is_null() && !m[name].is_string()) {
      return Invalid{where + "." + name + " must be a string, got " + TypeName(m[name]), where + "." + name};
    }
  }
  if (m.contains("tool_calls") && !m["tool_calls"].is_null()) {
    if (!m["tool_calls"].is_array()) {
      return Invalid{where + ".tool_calls must be an array, got " + TypeName(m["tool_calls"]), where + ".tool_calls"};
    }
    for (const json& call : m["tool_calls"]) {
      if (!call.is_object() || !call.contains("function") || !call["function"].is_object() ||
          !call["function"].contains("name") || !call["function"]["name"].is_string()) {
        return Invalid{where + ".tool_calls entries must be {\"function\":{\"name\":...,\"arguments\":...}}",
                       where + ".tool_calls"};
      }
    }
  }
  return std::nullopt;
}

std::optional<Invalid> ValidateRequest(const json& request) {
  if (!request.is_object()) return Invalid{"the request body must be a JSON object", ""};
  if (Depth(request) > kMaxRequestDepth) {
    return Invalid{"the request body nests deeper than " + std::to_string(kMaxRequestDepth) + " levels", ""};
  }
  auto expect = [&](const char* name, bool ok, const char* what) -> std::optional<Invalid> {
    if (ok) return std::nullopt;
    return Invalid{std::string("\"") + name + "\" must be " + what + ", got " + TypeName(request[name]), name};
  };
  auto has = [&](const char* name) { return request.contains(name) && !request[name].is_null(); };
  std::optional<Invalid> bad;
  if (has("model") && (bad = expect("model", request["model"].is_string(), "a string"))) return bad;
  if (has("stream") && (bad = expect("stream", request["stream"].is_boolean(), "a boolean"))) return bad;
  for (const char* name : {"cache_salt", "rid", "request_id", "reasoning_effort"}) {
    if (has(name) && (bad = expect(name, request[name].is_string(), "a string"))) return bad;
  }
  for (const char* name : {"chat_template_kwargs", "stream_options"}) {
    if (has(name) && (bad = expect(name, request[name].is_object(), "an object"))) return bad;
  }
  if (has("stream_options") && !(has("stream") && request["stream"].get<bool>())) {
    return Invalid{"Stream options can only be defined when `stream=True`.", "stream_options"};
  }
  for (const char* name : {"max_tokens", "max_completion_tokens", "n", "seed", "priority"}) {
    if (!has(name)) continue;
    const json& v = request[name];
    if (!IsInteger(v)) {
      return Invalid{std::string("\"") + name + "\" must be an integer, got " +
                         (v.is_number() ? v.dump() : TypeName(v)),
                     name};
    }
  }
  for (const char* name : {"max_tokens", "max_completion_tokens", "n"}) {
    if (has(name) && request[name].get<double>() < 1) {
      return Invalid{std::string(name) + " must be at least 1, got " + request[name].dump() + ".", name};
    }
  }
  for (const char* name : {"temperature", "top_p", "presence_penalty", "frequency_penalty"}) {
    if (has(name) && (bad = expect(name, request[name].is_number(), "a number"))) return bad;
  }
  if (has("temperature") && request["temperature"].get<double>() < 0) {
    return Invalid{"temperature must be non-negative, got " + request["temperature"].dump() + ".", "temperature"};
  }
  if (has("top_p") && (request["top_p"].get<double>() <= 0 || request["top_p"].get<double>() > 1)) {
    return Invalid{"top_p must be in (0, 1], got " + request["top_p"].dump() + ".", "top_p"};
  }
  if (has("tools")) {
    if ((bad = expect("tools", request["tools"].is_array(), "an array"))) return bad;
    for (size_t i = 0; i < request["tools"].size(); ++i) {
      const json& tool = request["tools"][i];
      std::string where = "tools[" + std::to_string(i) + "]";
      if (!tool.is_object() || !tool.contains("function") || !tool["function"].is_object() ||
          !tool["function"].contains("name") || !tool["function"]["name"].is_string()) {
        return Invalid{where + " must be {\"type\":\"function\",\"function\":{\"name\":...}}", where};
      }
    }
  }
  if (!request.contains("messages")) return Invalid{"\"messages\" is required", "messages"};
  if ((bad = expect("messages", request["messages"].is_array(), "an array"))) return bad;
  if (request["messages"].empty()) return Invalid{"\"messages\" must hold at least one message", "messages"};
  for (size_t i = 0; i < request["messages"].size(); ++i) {
    if ((bad = ValidateMessage(request["messages"][i], i))) return bad;
  }
  return std::nullopt;
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


// Which request an attempt belongs to, for a fault's `times`: its X-Request-Id without strata's
// "-retry<n>" suffix (a retry is another attempt of the same request), else a hash of the body.
std::string AttemptKey(const std::map<std::string, std::string>& headers, const std::string& body) {
  auto rid = headers.find("x-request-id");
  if (rid == headers.end()) return std::to_string(std::hash<std::string>{}(body));
  std::string key = rid->second;
  size_t suffix = key.rfind("-retry");
  if (suffix != std::string::npos && suffix + 6 < key.size() &&
      key.find_first_not_of("0123456789", suffix + 6) == std::string::npos) {
    key.resize(suffix);
  }
  return key;
}

// Faults answered with an HTTP error status instead of a completion.
bool IsStatusFault(const Fault& fault) {
  return fault.kind == "429" || fault.kind == "500" || fault.kind == "503" || fault.kind == "400";
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

class SimServer::Impl : public GrpcEngine {
 public:
  explicit Impl(SimOptions options)
      : options_(std::move(options)), cache_(options_.cache), kv_(KvOptions(options_), [this](int64_t us) { return Sleep(us); }) {}

  static KvSimOptions KvOptions(const SimOptions& o) {
    KvSimOptions kv = o.kv;
    kv.prefill_us_per_token = o.prefill_us_per_token;
    return kv;
  }

  Status Init() {
    for (auto [name, port] : {std::pair<const char*, int>{"HTTP", options_.http_port}, {"gRPC", options_.grpc_port}}) {
      if (port < -1 || port > 65535) {
        return InvalidArgumentError(std::string(name) + " port " + std::to_string(port) +
                                    " is out of range; use 0..65535 (0: any free port) or -1 (none)");
      }
    }
    if (options_.error_shape != "nested" && options_.error_shape != "flat") {
      return InvalidArgumentError("error shape \"" + options_.error_shape + "\" is not nested or flat");
    }
    if (!options_.default_fault.empty()) {
      StatusOr<Fault> f = ParseFault(options_.default_fault);
      if (!f.ok()) return f.status();
    }
    if (!options_.trajectory_path.empty()) {
      std::ifstream in(options_.trajectory_path);
      if (!in) return InvalidArgumentError("cannot open trajectory \"" + options_.trajectory_path + "\"");
      std::string line;
      int number = 0;
      while (std::getline(in, line)) {
        ++number;
        if (line.empty()) continue;
        json m = json::parse(line, nullptr, false);
        if (m.is_discarded() || !m.is_object()) {
          return InvalidArgumentError("trajectory line " + std::to_string(number) + " is not a JSON object");
        }
        if (m.value("role", "") == "assistant") script_.push_back(ReplyFromMessage(m));
      }
    }
    return Status();
  }

  // ---- The engine ------------------------------------------------------------------------

  // Never throws: a request that makes the engine throw (a JSON type error missed by the
  // validation) is answered 400 with what went wrong, never an exception out of a serving thread.
  Plan MakePlan(const std::string& protocol, const std::string& path, const std::string& body,
                const std::map<std::string, std::string>& headers) {
    try {
      return MakePlanOrThrow(protocol, path, body, headers);
    } catch (const std::exception& e) {
      return ErrorPlan(NewPlan(protocol, path, body, headers), 400, std::string("invalid request: ") + e.what(),
                       options_.error_shape, "BadRequestError");
    }
  }

  // A plan with only the request's log filled in.
  Plan NewPlan(const std::string& protocol, const std::string& path, const std::string& body,
               const std::map<std::string, std::string>& headers) const {
    Plan plan;
    plan.log.protocol = protocol;
    plan.log.path = path;
    plan.log.headers = headers;
    plan.log.body_bytes = body.size();
    plan.log.body = body.substr(0, options_.max_logged_body_bytes);
    return plan;
  }

  // The request's checks, as vLLM/SGLang refuse requests (after an injected fault: the body, the
  // prompt, the context length), then the plan: cache hit and prefill time, then the reply.
  Plan MakePlanOrThrow(const std::string& protocol, const std::string& path, const std::string& body,
                       const std::map<std::string, std::string>& headers) {
    Plan plan = NewPlan(protocol, path, body, headers);
    const std::string default_shape = options_.error_shape == "flat" ? "flat" : "nested";
    std::optional<Fault> fault;
    Status chosen = ChooseFault(headers, body, &fault);
    if (!chosen.ok()) return ErrorPlan(std::move(plan), 400, chosen.message(), default_shape, "invalid_fault");
    if (fault) plan.log.fault = fault->spec;
    const std::string shape = fault && !fault->shape.empty() ? fault->shape : default_shape;
    if (fault && IsStatusFault(*fault)) return StatusFaultPlan(std::move(plan), *fault, shape);

    json request = json::parse(body, nullptr, false);
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

  // Sets `*fault` to the fault this request meets: the X-Strata-Sim-Fault header's (while its
  // `times` last for this request, retries included), else the next one InjectFault queued, else
  // the default one; nullopt for none. An error, `*fault` untouched, when the header is malformed.
  Status ChooseFault(const std::map<std::string, std::string>& headers, const std::string& body,
                     std::optional<Fault>* fault) {
    auto header = headers.find("x-strata-sim-fault");
    if (header != headers.end() && !header->second.empty()) {
      StatusOr<Fault> f = ParseFault(header->second);
      if (!f.ok()) return f.status();
      if (f->times < 0) {
        *fault = *f;
        return Status();
      }
      const std::string key = AttemptKey(headers, body) + "|" + f->spec;
      std::lock_guard<std::mutex> lock(mu_);
      if (fault_attempts_[key]++ < f->times) {
        *fault = *f;
        return Status();
      }
    } else {
      std::lock_guard<std::mutex> lock(mu_);
      if (!injected_.empty()) {
        *fault = injected_.front();
        injected_.pop_front();
        return Status();
      }
    }
    if (!options_.default_fault.empty()) *fault = *ParseFault(options_.default_fault);
    return Status();
  }

  // The error a status fault ("429", "500", "503" or "400") answers with.
  static Plan StatusFaultPlan(Plan plan, const Fault& fault, const std::string& shape) {
    int status = std::atoi(fault.kind.c_str());
    std::string message = status == 429 ? "The server is overloaded (simulated); retry later."
                          : status == 400 ? "Simulated bad request."
                                          : "Simulated server error " + fault.kind + ".";
    plan = ErrorPlan(std::move(plan), status, message, shape,
                     status == 429 ? "TooManyRequests" : status == 400 ? "BadRequestError" : "InternalServerError");
    if (status == 429) plan.retry_after = fault.retry_after;
    return plan;
  }

  // The text the prompt's cache blocks are cut from: the chat template's rendering, or
  // RenderPromptText() when there is no template or it refuses the body.
  StatusOr<PromptText> RenderPrompt(const std::string& body) const {
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

  // vLLM's answer to a prompt over the context window, in its words (clients match them).
  Plan ContextTooLongPlan(Plan plan, int64_t prompt_tokens, int64_t max_out, const std::string& shape) const {
    std::string message = "This model's maximum context length is " + std::to_string(options_.max_context_tokens) +
                          " tokens. However, you requested " + std::to_string(prompt_tokens + max_out) +
                          " tokens (" + std::to_string(prompt_tokens) + " in the messages, " +
                          std::to_string(max_out) + " in the completion). Please reduce the length of the "
                          "messages or completion.";
    plan.serving_error = true;
    return ErrorPlan(std::move(plan), 400, message, shape, "BadRequestError");
  }

  // What the assistant answers a (validated) request: the X-Strata-Sim-Reply header's message, else
  // SimOptions::answer's, else the trajectory's assistant turn after as many as the request holds,
  // else generated text of about generated_output_tokens. An error when the header is no JSON object.
  StatusOr<Reply> ChooseReply(const json& request, const std::map<std::string, std::string>& headers, int64_t prompt_tokens) {
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

  // What a completion carries, whether answered whole or streamed.
  struct Completion {
    std::string id, model, reasoning_field, finish_reason;
    Reply reply;
    json usage;
  };

  // Fills `plan` with `reply`, cut at `max_out` tokens (0: no cap) as a server stops generating
  // there: one chat.completion body, or the stream's chunks, each after its decode time.
  Plan PlanReply(Plan plan, const json& request, const std::map<std::string, std::string>& headers, Reply reply,
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

  // Tokens of reply text: the tokenizer's count, else bytes / bytes_per_token rounded up.
  int64_t CountTokens(const std::string& s) const {
    if (options_.tokenizer != nullptr) return static_cast<int64_t>(options_.tokenizer->Count(s));
    size_t bpt = std::max<size_t>(1, options_.cache.bytes_per_token);
    return static_cast<int64_t>((s.size() + bpt - 1) / bpt);
  }

  // The chat.completion body of a reply answered whole.
  static std::string CompletionBody(const Completion& done) {
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

  // Appends the chat.completion.chunk stream of a reply to `plan`: the role; reasoning, content and
  // tool-call arguments in pieces of X-Strata-Sim-Chunk (else chunk_bytes) bytes, each after its
  // decode time; the finish reason; the usage when stream_options.include_usage; "[DONE]".
  void AddStreamChunks(const Completion& done, const json& request, const std::map<std::string, std::string>& headers,
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

  static Plan ErrorPlan(Plan plan, int status, const std::string& message, const std::string& shape, const std::string& type,
                 const std::string& param = "") {
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

  void Log(const SimRequestLog& log) {
    std::lock_guard<std::mutex> lock(mu_);
    log_.push_back(log);
    log_bytes_ += log.body.size();
    while (!log_.empty() && (log_.size() > options_.max_logged_requests || log_bytes_ > options_.max_log_bytes)) {
      log_bytes_ -= log_.front().body.size();
      log_.pop_front();
    }
  }

  // ---- Timing and stopping ----------------------------------------------------------------

  // Sleeps `us` unless the server stops first. False when stopping.
  bool Sleep(int64_t us) override {
    if (us <= 0) return !stopping_.load();
    std::unique_lock<std::mutex> lock(stop_mu_);
    return !stop_cv_.wait_for(lock, std::chrono::microseconds(us), [this] { return stopping_.load(); });
  }

  // Concurrency limit: a counting semaphore with a FIFO-ish queue.
  void AcquireSlot() override {
    if (options_.max_concurrency <= 0) return;
    std::unique_lock<std::mutex> lock(slot_mu_);
    slot_cv_.wait(lock, [this] { return in_flight_ < options_.max_concurrency || stopping_.load(); });
    ++in_flight_;
  }
  void ReleaseSlot() override {
    if (options_.max_concurrency <= 0) return;
    {
      std::lock_guard<std::mutex> lock(slot_mu_);
      --in_flight_;
    }
    slot_cv_.notify_one();
  }

  bool Aborted(const std::string& rid) override {
    std::lock_guard<std::mutex> lock(mu_);
    return abort_all_ || (!rid.empty() && aborted_.count(rid) > 0);
  }
  bool Abort(const std::string& rid, bool all) override {
    std::lock_guard<std::mutex> lock(mu_);
    if (all) abort_all_ = true;
    else aborted_.insert(rid);
    return true;
  }

  // ---- HTTP ------------------------------------------------------------------------------

  Status StartHttp() {
    listen_fd_ = socket(AF_INET, SOCK_STREAM, 0);
    if (listen_fd_ < 0) return UnavailableError(std::string("socket: ") + std::strerror(errno));
    int one = 1;
    setsockopt(listen_fd_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(static_cast<uint16_t>(options_.http_port));
    if (inet_pton(AF_INET, options_.host.c_str(), &addr.sin_addr) != 1) {
      return InvalidArgumentError("host \"" + options_.host + "\" is not an IPv4 address");
    }
    if (bind(listen_fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
      return UnavailableError("cannot bind " + options_.host + ":" + std::to_string(options_.http_port) + ": " +
                              std::strerror(errno));
    }
    if (listen(listen_fd_, 512) != 0) return UnavailableError(std::string("listen: ") + std::strerror(errno));
    socklen_t len = sizeof(addr);
    getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&addr), &len);
    http_port_ = ntohs(addr.sin_port);
    accept_thread_ = std::thread([this] { AcceptLoop(); });
    return Status();
  }

  void AcceptLoop() {
    while (!stopping_.load()) {
      int fd = accept(listen_fd_, nullptr, nullptr);
      if (fd < 0) {
        if (stopping_.load()) break;
        if (errno == EINTR || errno == ECONNABORTED) continue;
        if (errno == EMFILE || errno == ENFILE) {
          Sleep(10000);
          continue;
        }
        break;
      }
      ++connections_;
      int one = 1;
      setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
      std::lock_guard<std::mutex> lock(conn_mu_);
      ReapLocked();
      if (stopping_.load()) {
        close(fd);
        break;
      }
      if (options_.max_connections > 0 && conn_fds_.size() >= static_cast<size_t>(options_.max_connections)) {
        WriteAll(fd, SimpleResponse(503, ErrorBody(503, "over " + std::to_string(options_.max_connections) +
                                                            " open connections; retry later"),
                                    "Connection: close\r\n"));
        close(fd);
        continue;
      }
      conn_fds_.insert(fd);
      auto it = conn_threads_.emplace(conn_threads_.end());
      *it = std::thread([this, fd, it] {
        // Nothing a client sends may end the process: an exception stops this connection only.
        try {
          ServeConnection(fd);
        } catch (const std::exception& e) {
          WriteAll(fd, SimpleResponse(500, ErrorBody(500, std::string("strata-sim internal error: ") + e.what()),
                                      "Connection: close\r\n"));
        } catch (...) {
        }
        std::lock_guard<std::mutex> lock(conn_mu_);
        conn_fds_.erase(fd);
        close(fd);
        finished_.push_back(it);
      });
    }
  }

  void ReapLocked() {
    for (auto it : finished_) {
      if (it->joinable()) it->join();
      conn_threads_.erase(it);
    }
    finished_.clear();
  }

  static bool WriteAll(int fd, const std::string& data) {
    size_t off = 0;
    while (off < data.size()) {
      ssize_t n = send(fd, data.data() + off, data.size() - off, MSG_NOSIGNAL);
      if (n <= 0) {
        if (n < 0 && errno == EINTR) continue;
        return false;
      }
      off += static_cast<size_t>(n);
    }
    return true;
  }

  static std::string Reason(int status) {
    switch (status) {
      case 200: return "OK";
      case 400: return "Bad Request";
      case 404: return "Not Found";
      case 408: return "Request Timeout";
      case 411: return "Length Required";
      case 413: return "Content Too Large";
      case 431: return "Request Header Fields Too Large";
      case 429: return "Too Many Requests";
      case 500: return "Internal Server Error";
      case 503: return "Service Unavailable";
      default: return "Status";
    }
  }

  static std::string SimpleResponse(int status, const std::string& body, const std::string& extra = "") {
    return "HTTP/1.1 " + std::to_string(status) + " " + Reason(status) +
           "\r\nContent-Type: application/json\r\nContent-Length: " + std::to_string(body.size()) + "\r\n" + extra +
           "\r\n" + body;
  }

  // Waits up to `timeout_ms` for bytes and appends them. False on timeout, EOF or error.
  bool RecvWithin(int fd, std::string* buffer, int64_t timeout_ms) {
    if (timeout_ms <= 0) return false;
    pollfd p{fd, POLLIN, 0};
    int ready;
    do {
      ready = poll(&p, 1, static_cast<int>(std::min<int64_t>(timeout_ms, INT32_MAX)));
    } while (ready < 0 && errno == EINTR);
    if (ready <= 0) return false;
    char chunk[65536];
    ssize_t n = recv(fd, chunk, sizeof(chunk), 0);
    if (n <= 0) return false;
    buffer->append(chunk, static_cast<size_t>(n));
    return true;
  }

  std::string ErrorBody(int status, const std::string& message) const {
    Plan plan = ErrorPlan(Plan(), status, message, options_.error_shape,
                                                   status == 413   ? "RequestEntityTooLarge"
                                                   : status == 408 ? "RequestTimeout"
                                                   : status == 503 ? "ServiceUnavailable"
                                                                   : "BadRequestError");
    return plan.error_body;
  }

  void ServeConnection(int fd) {
    std::string buffer;
    using Clock = std::chrono::steady_clock;
    auto ms_since = [](Clock::time_point t) {
      return std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - t).count();
    };
    while (!stopping_.load()) {
      // A kept-alive connection may wait idle_timeout_ms for its next request; from its first byte
      // the head and the body must arrive within request_timeout_ms.
      if (buffer.empty() && !RecvWithin(fd, &buffer, options_.idle_timeout_ms)) return;
      const Clock::time_point started = Clock::now();
      auto reject = [&](int status, const std::string& message) {
        WriteAll(fd, SimpleResponse(status, ErrorBody(status, message), "Connection: close\r\n"));
      };
      size_t header_end;
      while ((header_end = buffer.find("\r\n\r\n")) == std::string::npos) {
        if (buffer.size() > options_.max_header_bytes) {
          return reject(431, "request head over " + std::to_string(options_.max_header_bytes) + " bytes");
        }
        if (!RecvWithin(fd, &buffer, options_.request_timeout_ms - ms_since(started))) {
          if (ms_since(started) >= options_.request_timeout_ms) {
            reject(408, "request head not received within " + std::to_string(options_.request_timeout_ms) + " ms");
          }
          return;
        }
      }
      if (header_end > options_.max_header_bytes) {
        return reject(431, "request head over " + std::to_string(options_.max_header_bytes) + " bytes");
      }
      std::string head = buffer.substr(0, header_end);
      buffer.erase(0, header_end + 4);
      std::istringstream lines(head);
      std::string request_line;
      std::getline(lines, request_line);
      if (!request_line.empty() && request_line.back() == '\r') request_line.pop_back();
      std::istringstream rl(request_line);
      std::string method, target, version;
      rl >> method >> target >> version;
      std::map<std::string, std::string> headers;
      std::string line;
      while (std::getline(lines, line)) {
        if (!line.empty() && line.back() == '\r') line.pop_back();
        size_t colon = line.find(':');
        if (colon == std::string::npos) continue;
        std::string value = line.substr(colon + 1);
        while (!value.empty() && value.front() == ' ') value.erase(0, 1);
        while (!value.empty() && value.back() == ' ') value.pop_back();
        headers[Lower(line.substr(0, colon))] = value;
      }
      if (headers.count("transfer-encoding") > 0) {
        return reject(411, "strata-sim needs Content-Length (no chunked request bodies)");
      }
      size_t length = 0;
      if (headers.count("content-length") > 0) {
        const std::string& text = headers["content-length"];
        bool digits = !text.empty() && text.size() <= 19 &&
                      std::all_of(text.begin(), text.end(), [](char c) { return c >= '0' && c <= '9'; });
        if (!digits) return reject(400, "Content-Length \"" + text + "\" is not a non-negative integer");
        length = std::strtoull(text.c_str(), nullptr, 10);
      }
      if (length > options_.max_request_bytes) {
        return reject(413, "request body of " + std::to_string(length) + " bytes is over the limit of " +
                               std::to_string(options_.max_request_bytes) + " bytes");
      }
      if (Lower(headers["expect"]) == "100-continue" && buffer.size() < length) {
        if (!WriteAll(fd, "HTTP/1.1 100 Continue\r\n\r\n")) return;
      }
      while (buffer.size() < length) {
        if (!RecvWithin(fd, &buffer, options_.request_timeout_ms - ms_since(started))) {
          if (ms_since(started) >= options_.request_timeout_ms) {
            reject(408, "request body not received within " + std::to_string(options_.request_timeout_ms) + " ms");
          }
          return;
        }
      }
      std::string body = buffer.substr(0, length);
      buffer.erase(0, length);
      bool keep_alive = Lower(headers["connection"]) != "close" && version != "HTTP/1.0";
      std::string path = target.substr(0, target.find('?'));
      auto ends_with = [&](const std::string& suffix) {
        return path.size() >= suffix.size() && path.compare(path.size() - suffix.size(), suffix.size(), suffix) == 0;
      };
      if (method == "GET" && ends_with("/models")) {
        json models = {{"object", "list"}, {"data", json::array({{{"id", "glm-5.3-flash"}, {"object", "model"}}})}};
        if (!WriteAll(fd, SimpleResponse(200, models.dump()))) return;
      } else if (method == "GET" && path == "/metrics") {
        if (!WriteAll(fd, MetricsResponse())) return;
      } else if (method == "GET" && ends_with("/health")) {
        if (!WriteAll(fd, SimpleResponse(200, "{}"))) return;
      } else if (method == "POST" && ends_with("/chat/completions")) {
        if (!ServeChat(fd, path, body, headers)) return;
      } else {
        Plan plan = ErrorPlan(Plan(), 404, "no route for " + method + " " + path, options_.error_shape, "NotFoundError");
        if (!WriteAll(fd, SimpleResponse(404, plan.error_body))) return;
      }
      if (!keep_alive) return;
    }
  }

  // False when the connection must be closed.
  bool ServeChat(int fd, const std::string& path, const std::string& body,
                 const std::map<std::string, std::string>& headers) {
    Plan plan = MakePlan("http", path, body, headers);
    Log(plan.log);
    if (plan.status != 200) {
      std::string extra;
      if (plan.retry_after >= 0) extra = "Retry-After: " + std::to_string(static_cast<int>(plan.retry_after)) + "\r\n";
      return WriteAll(fd, SimpleResponse(plan.status, plan.error_body, extra));
    }
    // Like vLLM (uvicorn) and SGLang: a stream's headers go out at once, before the queue and the
    // prefill; its first event comes after them. A whole answer waits for everything.
    if (plan.stream) {
      if (!WriteAll(fd, "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nCache-Control: no-cache\r\n"
                        "Transfer-Encoding: chunked\r\n\r\n")) {
        return false;
      }
    }
    AcquireSlot();
    struct SlotGuard {
      Impl* impl;
      ~SlotGuard() { impl->ReleaseSlot(); }
    } guard{this};
    KvSequence seq(&kv_);  // the KV-memory model: admission (may queue), prefill, growth
    if (!seq.Admit(plan.prompt_tokens, plan.kv_output_tokens)) {
      if (seq.too_large) return WriteAll(fd, SimpleResponse(400, KvTooLargeBody(plan.prompt_tokens)));
      return false;
    }
    if (!seq.Prefill(plan.prefill_us)) return false;
    if (!plan.stream) {
      if (!Sleep(plan.delay_us[0])) return false;
      return WriteAll(fd, SimpleResponse(200, plan.payloads[0]));
    }
    // Events due at the same time are written together (one send), unless flush_each_event.
    std::string pending;
    auto flush = [&]() {
      if (pending.empty()) return true;
      bool ok = WriteAll(fd, pending);
      pending.clear();
      return ok;
    };
    auto write_chunk = [&](const std::string& data) {
      char size[32];
      std::snprintf(size, sizeof(size), "%zx\r\n", data.size());
      pending += std::string(size) + data + "\r\n";
      return options_.flush_each_event ? flush() : true;
    };
    for (size_t i = 0; i < plan.payloads.size(); ++i) {
      if ((plan.fault && static_cast<int>(i) == plan.fault->after) || plan.delay_us[i] > 0) {
        if (!flush()) return false;
      }
      if (plan.fault && static_cast<int>(i) == plan.fault->after) {
        if (plan.fault->kind == "stall") {
          if (!Sleep(int64_t{plan.fault->delay_ms} * 1000)) return false;
        } else if (plan.fault->kind == "reset") {
          linger l{1, 0};
          setsockopt(fd, SOL_SOCKET, SO_LINGER, &l, sizeof(l));
          shutdown(fd, SHUT_RDWR);
          return false;
        } else if (plan.fault->kind == "malformed-sse") {
          if (!write_chunk("data: {\"id\": \"chatcmpl-sim\", \"choices\": [{\"delta\": {\"content\": \"x\"\n\n")) return false;
          if (!flush()) return false;
        }
      }
      if (!Sleep(plan.delay_us[i])) return false;
      if (!seq.Grow(plan.prompt_tokens + plan.kv_output_tokens * static_cast<int64_t>(i + 1) / static_cast<int64_t>(plan.payloads.size()), plan.prefill_us)) return false;
      if (!write_chunk("data: " + plan.payloads[i] + "\n\n")) return false;
    }
    pending += "0\r\n\r\n";
    return flush();
  }

  // ---- gRPC (sim_grpc.cc) -----------------------------------------------------------------

  GrpcPlan PlanGrpc(const std::string& body, const std::map<std::string, std::string>& headers,
                    const std::string& peer) override {
    Plan plan = MakePlan("grpc", "/sglang.runtime.v1.SglangService/ChatComplete", body, headers);
    plan.log.peer = peer;
    Log(plan.log);
    GrpcPlan out;
    out.status = plan.status;
    out.error_message = plan.error_message;
    out.error_type = plan.error_type;
    out.serving_error = plan.serving_error || plan.log.fault.rfind("400", 0) == 0;
    out.stream = plan.stream;
    out.payloads = std::move(plan.payloads);
    out.delay_us = std::move(plan.delay_us);
    out.prefill_us = plan.prefill_us;
    out.prompt_tokens = plan.prompt_tokens;
    out.kv_output_tokens = plan.kv_output_tokens;
    if (plan.fault) {
      out.fault_kind = plan.fault->kind;
      out.fault_after = plan.fault->after;
      out.fault_delay_ms = plan.fault->delay_ms;
    }
    out.rid = plan.rid;
    return out;
  }

  KvSim& Kv() override { return kv_; }

  Status StartGrpc() {
    StatusOr<std::unique_ptr<SimGrpcServer>> server = SimGrpcServer::Start(this, options_.host, options_.grpc_port);
    if (!server.ok()) return server.status();
    grpc_server_ = std::move(server).value();
    grpc_port_ = grpc_server_->port();
    return Status();
  }

  void Stop() {
    if (stopping_.exchange(true)) return;
    kv_.Stop();
    stop_cv_.notify_all();
    slot_cv_.notify_all();
    if (listen_fd_ >= 0) {
      shutdown(listen_fd_, SHUT_RDWR);
      close(listen_fd_);
    }
    if (accept_thread_.joinable()) accept_thread_.join();
    {
      std::lock_guard<std::mutex> lock(conn_mu_);
      for (int fd : conn_fds_) shutdown(fd, SHUT_RDWR);
    }
    for (;;) {
      {
        std::lock_guard<std::mutex> lock(conn_mu_);
        ReapLocked();
        if (conn_threads_.empty()) break;
      }
      // Wait for it to finish (it reaps itself into finished_).
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    if (grpc_server_) grpc_server_->Stop();
  }

  SimOptions options_;
  PrefixCacheModel cache_;
  KvSim kv_;

  // One request's sequence in the KV-memory model; released when it goes out of scope.
  struct KvSequence {
    explicit KvSequence(KvSim* kv) : kv(kv) {}
    ~KvSequence() {
      if (admitted) kv->Release(id);
    }
    bool Admit(int64_t prompt_tokens, int64_t output_tokens) {
      int64_t wait_us = 0;
      KvSim::Admission a = kv->Admit(prompt_tokens, output_tokens, &id, &wait_us);
      admitted = a == KvSim::Admission::kAdmitted;
      too_large = a == KvSim::Admission::kTooLarge;
      return admitted;
    }
    bool Prefill(int64_t us) { return kv->Prefill(id, us); }
    bool Grow(int64_t tokens, int64_t prefill_us) { return kv->Grow(id, tokens, prefill_us); }
    KvSim* kv;
    uint64_t id = 0;
    bool admitted = false, too_large = false;
  };
  std::string KvTooLargeBody(int64_t prompt_tokens) const {
    json error = {{"object", "error"},
                  {"message", "prompt of " + std::to_string(prompt_tokens) + " tokens does not fit the KV cache of " +
                                  std::to_string(options_.kv.capacity_tokens) + " tokens"},
                  {"type", "BadRequestError"}, {"code", 400}};
    return error.dump();
  }
  std::string MetricsResponse() {
    std::string body = kv_.MetricsText(static_cast<int64_t>(cache_.size_blocks()));
    return "HTTP/1.1 200 OK\r\nContent-Type: text/plain; version=0.0.4\r\nContent-Length: " +
           std::to_string(body.size()) + "\r\n\r\n" + body;
  }
  int http_port_ = -1;
  int grpc_port_ = 0;

  mutable std::mutex mu_;
  std::deque<Fault> injected_;                // guarded by mu_
  std::map<std::string, int> fault_attempts_;  // guarded by mu_
  std::deque<SimRequestLog> log_;             // guarded by mu_
  size_t log_bytes_ = 0;                      // bodies in log_; guarded by mu_
  std::set<std::string> aborted_;             // guarded by mu_
  bool abort_all_ = false;                    // guarded by mu_
  std::vector<Reply> script_;                 // immutable after Init
  std::atomic<uint64_t> generated_{0};
  std::atomic<uint64_t> completions_{0};
  std::atomic<uint64_t> connections_{0};

 private:
  std::atomic<bool> stopping_{false};
  std::mutex stop_mu_;
  std::condition_variable stop_cv_;
  std::mutex slot_mu_;
  std::condition_variable slot_cv_;
  int in_flight_ = 0;  // guarded by slot_mu_

  int listen_fd_ = -1;
  std::thread accept_thread_;
  std::mutex conn_mu_;
  std::set<int> conn_fds_;                                       // guarded by conn_mu_
  std::list<std::thread> conn_threads_;                          // guarded by conn_mu_
  std::vector<std::list<std::thread>::iterator> finished_;       // guarded by conn_mu_

  std::unique_ptr<SimGrpcServer> grpc_server_;

  friend class SimServer;
};

StatusOr<std::unique_ptr<SimServer>> SimServer::Start(SimOptions options) {
  auto impl = std::make_unique<Impl>(std::move(options));
  Status s = impl->Init();
  if (!s.ok()) return s;
  if (impl->options_.http_port >= 0) {
    s = impl->StartHttp();
    if (!s.ok()) return s;
  }
  if (impl->options_.grpc_port >= 0) {
    s = impl->StartGrpc();
    if (!s.ok()) {
      impl->Stop();
      return s;
    }
  }
  return std::unique_ptr<SimServer>(new SimServer(std::move(impl)));
}

SimServer::SimServer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
SimServer::~SimServer() { Stop(); }
int SimServer::http_port() const { return impl_->http_port_; }
int SimServer::grpc_port() const { return impl_->grpc_port_; }
std::string SimServer::base_url() const {
  return "http://" + impl_->options_.host + ":" + std::to_string(impl_->http_port_) + "/v1";
}
std::string SimServer::grpc_target() const {
  return impl_->options_.host + ":" + std::to_string(impl_->grpc_port_);
}

Status SimServer::InjectFault(const std::string& spec, int count) {
  StatusOr<Fault> f = ParseFault(spec);
  if (!f.ok()) return f.status();
  std::lock_guard<std::mutex> lock(impl_->mu_);
  for (int i = 0; i < count; ++i) impl_->injected_.push_back(*f);
  return Status();
}

std::vector<SimRequestLog> SimServer::requests() const {
  std::lock_guard<std::mutex> lock(impl_->mu_);
  return std::vector<SimRequestLog>(impl_->log_.begin(), impl_->log_.end());
}

void SimServer::ClearRequests() {
  std::lock_guard<std::mutex> lock(impl_->mu_);
  impl_->log_.clear();
  impl_->log_bytes_ = 0;
}

PrefixCacheModel& SimServer::cache() { return impl_->cache_; }
uint64_t SimServer::connections_accepted() const { return impl_->connections_.load(); }
uint64_t SimServer::grpc_cancelled_calls() const {
  return impl_->grpc_server_ ? impl_->grpc_server_->cancelled_calls() : 0;
}

void SimServer::Stop() { impl_->Stop(); }

}  // namespace strata::sim
