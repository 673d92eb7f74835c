// strata-sim: a prefix-caching Chat Completions endpoint simulator (HTTP/1.1 + SGLang gRPC).
#include "sim_server.h"

#include <arpa/inet.h>
#include <grpcpp/grpcpp.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
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

#include "sglang/runtime/v1/sglang.grpc.pb.h"
#include "strata/segment.h"

namespace strata::sim {
namespace {

using nlohmann::json;
namespace pb = ::sglang::runtime::v1;

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

}  // namespace

class SimServer::Impl {
 public:
  explicit Impl(SimOptions options)
      : options_(std::move(options)), cache_(options_.cache), kv_(KvOptions(options_), [this](int64_t us) { return Sleep(us); }) {}

  static KvSimOptions KvOptions(const SimOptions& o) {
    KvSimOptions kv = o.kv;
    kv.prefill_us_per_token = o.prefill_us_per_token;
    return kv;
  }

  Status Init() {
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

  Plan MakePlan(const std::string& protocol, const std::string& path, const std::string& body,
                const std::map<std::string, std::string>& headers) {
    Plan plan;
    plan.log.protocol = protocol;
    plan.log.path = path;
    plan.log.headers = headers;
    plan.log.body = body;
    const bool flat_default = options_.flavor != "openai";
    // Which fault applies.
    std::optional<Fault> fault;
    auto header = headers.find("x-strata-sim-fault");
    if (header != headers.end() && !header->second.empty()) {
      StatusOr<Fault> f = ParseFault(header->second);
      if (!f.ok()) return ErrorPlan(std::move(plan), 400, f.status().message(), flat_default ? "flat" : "nested", "invalid_fault");
      if (f->times >= 0) {
        auto rid = headers.find("x-request-id");
        std::string key = rid != headers.end() ? rid->second : std::to_string(std::hash<std::string>{}(body));
        std::lock_guard<std::mutex> lock(mu_);
        if (fault_attempts_[key + "|" + f->spec]++ < f->times) fault = *f;
      } else {
        fault = *f;
      }
    } else {
      std::lock_guard<std::mutex> lock(mu_);
      if (!injected_.empty()) {
        fault = injected_.front();
        injected_.pop_front();
      }
    }
    if (!fault && !options_.default_fault.empty()) fault = *ParseFault(options_.default_fault);
    if (fault) plan.log.fault = fault->spec;
    const std::string shape = fault && !fault->shape.empty() ? fault->shape : (flat_default ? "flat" : "nested");
    if (fault && (fault->kind == "429" || fault->kind == "500" || fault->kind == "503" || fault->kind == "400")) {
      int status = std::atoi(fault->kind.c_str());
      std::string message = status == 429 ? "The server is overloaded (simulated); retry later."
                            : status == 400 ? "Simulated bad request."
                                            : "Simulated server error " + fault->kind + ".";
      plan = ErrorPlan(std::move(plan), status, message, shape,
                       status == 429 ? "TooManyRequests" : status == 400 ? "BadRequestError" : "InternalServerError");
      if (status == 429) plan.retry_after = fault->retry_after;
      return plan;
    }

    json request = json::parse(body, nullptr, false);
    if (request.is_discarded() || !request.is_object()) {
      return ErrorPlan(std::move(plan), 400, "request body is not valid JSON", shape, "BadRequestError");
    }
    StatusOr<PromptText> prompt = Status(StatusCode::kUnknown, "");
    if (options_.chat_template != nullptr) {
      StatusOr<std::string> text = options_.chat_template->Render(body);
      if (text.ok()) {
        PromptText rendered;
        rendered.text = std::move(text).value();
        prompt = std::move(rendered);
      }
    }
    if (!prompt.ok()) prompt = RenderPromptText(body);
    if (!prompt.ok()) return ErrorPlan(std::move(plan), 400, prompt.status().message(), shape, "BadRequestError");
    std::string salt;
    for (const char* key : {"cache_salt", "extra_key"}) {
      if (request.contains(key) && request[key].is_string()) {
        salt = request[key].get<std::string>();
        break;
      }
    }
    plan.log.cache_salt = salt;
    for (const char* key : {"rid", "request_id"}) {
      if (request.contains(key) && request[key].is_string()) plan.rid = request[key].get<std::string>();
    }
    if (plan.rid.empty()) {
      auto rid = headers.find("x-request-id");
      if (rid != headers.end()) plan.rid = rid->second;
    }
    PromptBlocks blocks = HashPrompt(prompt->text, salt, options_.tokenizer, options_.cache);
    const int64_t prompt_tokens = blocks.prompt_tokens;
    plan.log.prompt_tokens = prompt_tokens;
    int64_t max_out = 0;
    for (const char* key : {"max_completion_tokens", "max_tokens"}) {
      if (request.contains(key) && request[key].is_number_integer()) max_out = request[key].get<int64_t>();
    }
    if ((fault && fault->kind == "oversize") || prompt_tokens > options_.max_context_tokens) {
      std::string message = "This model's maximum context length is " + std::to_string(options_.max_context_tokens) +
                            " tokens. However, you requested " + std::to_string(prompt_tokens + max_out) +
                            " tokens (" + std::to_string(prompt_tokens) + " in the messages, " +
                            std::to_string(max_out) + " in the completion). Please reduce the length of the "
                            "messages or completion.";
      return ErrorPlan(std::move(plan), 400, message, shape, "BadRequestError");
    }
    const int64_t cached = cache_.LookupAndInsert(blocks);
    plan.log.cached_tokens = cached;
    plan.prefill_us = kv_.PrefillMicros(prompt_tokens, cached);
    if (fault && (fault->kind == "slow-first-byte")) plan.prefill_us += int64_t{fault->delay_ms} * 1000;
    if (fault && (fault->kind == "stall" || fault->kind == "reset" || fault->kind == "malformed-sse")) plan.fault = fault;

    // The reply.
    Reply reply;
    auto scripted = headers.find("x-strata-sim-reply");
    size_t assistants = 0;
    if (request["messages"].is_array()) {
      for (const json& m : request["messages"]) {
        if (m.is_object() && m.value("role", "") == "assistant") ++assistants;
      }
    }
    if (scripted != headers.end()) {
      json m = json::parse(scripted->second, nullptr, false);
      if (m.is_discarded() || !m.is_object()) {
        return ErrorPlan(std::move(plan), 400, "X-Strata-Sim-Reply is not a JSON object", shape, "BadRequestError");
      }
      reply = ReplyFromMessage(m);
    } else if (assistants < script_.size()) {
      reply = script_[assistants];
    } else {
      uint64_t n = ++generated_;
      reply.content = "Simulated reply " + std::to_string(n) + ".";
      size_t want = static_cast<size_t>(options_.generated_output_tokens) * options_.cache.bytes_per_token;
      while (reply.content.size() < want) reply.content += " lorem";
      if (reply.content.size() > want && want > 0) reply.content.resize(std::max<size_t>(want, 1));
    }
    size_t chunk = options_.chunk_bytes;
    auto chunk_header = headers.find("x-strata-sim-chunk");
    if (chunk_header != headers.end()) chunk = std::max(1, std::atoi(chunk_header->second.c_str()));

    const std::string model = request.value("model", "glm-5.3-flash");
    const std::string reasoning_field = options_.flavor == "vllm" ? "reasoning" : "reasoning_content";
    plan.stream = request.value("stream", false);
    bool include_usage = false;
    if (request.contains("stream_options") && request["stream_options"].is_object()) {
      include_usage = request["stream_options"].value("include_usage", false);
    }
    auto count = [&](const std::string& s) -> int64_t {
      if (options_.tokenizer != nullptr) return static_cast<int64_t>(options_.tokenizer->Count(s));
      size_t bpt = std::max<size_t>(1, options_.cache.bytes_per_token);
      return static_cast<int64_t>((s.size() + bpt - 1) / bpt);
    };
    int64_t reasoning_tokens = count(reply.reasoning);
    int64_t completion_tokens = reasoning_tokens + count(reply.content);
    for (const ToolCall& c : reply.tool_calls) completion_tokens += count(c.name) + count(c.arguments);
    const std::string finish = reply.tool_calls.empty() ? "stop" : "tool_calls";
    json usage = {{"prompt_tokens", prompt_tokens},
                  {"completion_tokens", completion_tokens},
                  {"total_tokens", prompt_tokens + completion_tokens}};
    if (options_.cached_report == CachedReport::kPresent) {
      usage["prompt_tokens_details"] = {{"cached_tokens", cached}};
    } else if (options_.cached_report == CachedReport::kNull) {
      usage["prompt_tokens_details"] = nullptr;
    }
    if (reasoning_tokens > 0) usage["completion_tokens_details"] = {{"reasoning_tokens", reasoning_tokens}};
    const std::string id = "chatcmpl-sim-" + std::to_string(++completions_);
    const double decode_us = options_.decode_us_per_token;
    plan.prompt_tokens = prompt_tokens;
    plan.kv_output_tokens = max_out > 0 ? max_out : completion_tokens;
    auto delay_for = [&](const std::string& piece) { return static_cast<int64_t>(count(piece) * decode_us); };

    if (!plan.stream) {
      json message = {{"role", "assistant"}};
      message["content"] = reply.content.empty() && !reply.tool_calls.empty() ? json(nullptr) : json(reply.content);
      if (!reply.reasoning.empty()) message[reasoning_field] = reply.reasoning;
      if (!reply.tool_calls.empty()) {
        json calls = json::array();
        for (const ToolCall& c : reply.tool_calls) {
          calls.push_back({{"id", c.id}, {"type", "function"}, {"function", {{"name", c.name}, {"arguments", c.arguments}}}});
        }
        message["tool_calls"] = calls;
      }
      json answer = {{"id", id}, {"object", "chat.completion"}, {"created", 1700000000}, {"model", model},
                     {"choices", json::array({{{"index", 0}, {"message", message}, {"finish_reason", finish}}})},
                     {"usage", usage}};
      plan.payloads.push_back(answer.dump());
      plan.delay_us.push_back(static_cast<int64_t>(static_cast<double>(completion_tokens) * decode_us));
      plan.log.status = 200;
      return plan;
    }
    auto chunk_json = [&](json delta, const json& finish_reason) {
      json c = {{"id", id}, {"object", "chat.completion.chunk"}, {"created", 1700000000}, {"model", model},
                {"choices", json::array({{{"index", 0}, {"delta", std::move(delta)}, {"finish_reason", finish_reason}}})}};
      return c.dump();
    };
    auto add = [&](std::string payload, int64_t delay) {
      plan.payloads.push_back(std::move(payload));
      plan.delay_us.push_back(delay);
    };
    add(chunk_json({{"role", "assistant"}, {"content", ""}}, nullptr), 0);
    for (const std::string& p : Pieces(reply.reasoning, chunk)) add(chunk_json({{reasoning_field, p}}, nullptr), delay_for(p));
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
    add(chunk_json(json::object(), finish), 0);
    if (include_usage) {
      json u = {{"id", id}, {"object", "chat.completion.chunk"}, {"created", 1700000000}, {"model", model},
                {"choices", json::array()}, {"usage", usage}};
      add(u.dump(), 0);
    }
    add("[DONE]", 0);
    plan.log.status = 200;
    return plan;
  }

  Plan ErrorPlan(Plan plan, int status, const std::string& message, const std::string& shape, const std::string& type) {
    plan.status = status;
    plan.error_message = message;
    json error = {{"message", message}, {"type", type}, {"param", nullptr}, {"code", status}};
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
    while (log_.size() > options_.max_logged_requests) log_.pop_front();
  }

  // ---- Timing and stopping ----------------------------------------------------------------

  // Sleeps `us` unless the server stops first. False when stopping.
  bool Sleep(int64_t us) {
    if (us <= 0) return !stopping_.load();
    std::unique_lock<std::mutex> lock(stop_mu_);
    return !stop_cv_.wait_for(lock, std::chrono::microseconds(us), [this] { return stopping_.load(); });
  }

  // Concurrency limit: a counting semaphore with a FIFO-ish queue.
  void AcquireSlot() {
    if (options_.max_concurrency <= 0) return;
    std::unique_lock<std::mutex> lock(slot_mu_);
    slot_cv_.wait(lock, [this] { return in_flight_ < options_.max_concurrency || stopping_.load(); });
    ++in_flight_;
  }
  void ReleaseSlot() {
    if (options_.max_concurrency <= 0) return;
    {
      std::lock_guard<std::mutex> lock(slot_mu_);
      --in_flight_;
    }
    slot_cv_.notify_one();
  }

  bool Aborted(const std::string& rid) {
    std::lock_guard<std::mutex> lock(mu_);
    return abort_all_ || (!rid.empty() && aborted_.count(rid) > 0);
  }
  bool Abort(const std::string& rid, bool all) {
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
      conn_fds_.insert(fd);
      auto it = conn_threads_.emplace(conn_threads_.end());
      *it = std::thread([this, fd, it] {
        ServeConnection(fd);
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
      case 411: return "Length Required";
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

  void ServeConnection(int fd) {
    std::string buffer;
    char chunk[65536];
    while (!stopping_.load()) {
      size_t header_end;
      while ((header_end = buffer.find("\r\n\r\n")) == std::string::npos) {
        ssize_t n = recv(fd, chunk, sizeof(chunk), 0);
        if (n <= 0) return;
        buffer.append(chunk, static_cast<size_t>(n));
        if (buffer.size() > (1u << 20) && buffer.find("\r\n\r\n") == std::string::npos) return;
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
      size_t length = headers.count("content-length") ? std::strtoull(headers["content-length"].c_str(), nullptr, 10) : 0;
      if (Lower(headers["expect"]) == "100-continue" && buffer.size() < length) {
        if (!WriteAll(fd, "HTTP/1.1 100 Continue\r\n\r\n")) return;
      }
      if (headers.count("transfer-encoding") > 0) {
        WriteAll(fd, SimpleResponse(411, R"({"object":"error","message":"strata-sim needs Content-Length","code":411})"));
        return;
      }
      while (buffer.size() < length) {
        ssize_t n = recv(fd, chunk, sizeof(chunk), 0);
        if (n <= 0) return;
        buffer.append(chunk, static_cast<size_t>(n));
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
        json error = {{"object", "error"}, {"message", "no route for " + method + " " + path}, {"code", 404}};
        if (!WriteAll(fd, SimpleResponse(404, error.dump()))) return;
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
    std::string head =
        "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nCache-Control: no-cache\r\n"
        "Transfer-Encoding: chunked\r\n\r\n";
    // Events due at the same time are written together (one send), unless flush_each_event.
    std::string pending = head;
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

  // ---- gRPC ------------------------------------------------------------------------------

  class GrpcService final : public pb::SglangService::Service {
   public:
    explicit GrpcService(Impl* impl) : impl_(impl) {}

    grpc::Status HealthCheck(grpc::ServerContext*, const pb::HealthCheckRequest*,
                             pb::HealthCheckResponse* reply) override {
      reply->set_healthy(true);
      return grpc::Status::OK;
    }

    grpc::Status Abort(grpc::ServerContext*, const pb::AbortRequest* request, pb::AbortResponse* reply) override {
      reply->set_success(impl_->Abort(request->rid(), request->abort_all()));
      return grpc::Status::OK;
    }

    grpc::Status ChatComplete(grpc::ServerContext* context, const pb::OpenAIRequest* request,
                              grpc::ServerWriter<pb::OpenAIStreamChunk>* writer) override {
      std::map<std::string, std::string> headers;
      for (const auto& [k, v] : request->trace_headers()) headers[Lower(k)] = v;
      for (const auto& [k, v] : context->client_metadata()) {
        headers[Lower(std::string(k.data(), k.size()))] = std::string(v.data(), v.size());
      }
      Plan plan = impl_->MakePlan("grpc", "/sglang.runtime.v1.SglangService/ChatComplete", request->json_body(), headers);
      impl_->Log(plan.log);
      if (plan.status != 200) {
        grpc::StatusCode code = plan.status == 429   ? grpc::StatusCode::RESOURCE_EXHAUSTED
                                : plan.status == 503 ? grpc::StatusCode::UNAVAILABLE
                                : plan.status == 400 ? grpc::StatusCode::INVALID_ARGUMENT
                                                     : grpc::StatusCode::INTERNAL;
        return grpc::Status(code, plan.error_message);
      }
      impl_->AcquireSlot();
      struct SlotGuard {
        Impl* impl;
        ~SlotGuard() { impl->ReleaseSlot(); }
      } guard{impl_};
      if (!impl_->Sleep(plan.prefill_us)) return grpc::Status(grpc::StatusCode::UNAVAILABLE, "server stopping");
      std::vector<std::string> payloads;
      for (const std::string& p : plan.payloads) {
        if (p != "[DONE]") payloads.push_back(p);
      }
      for (size_t i = 0; i < payloads.size(); ++i) {
        if (context->IsCancelled()) return grpc::Status(grpc::StatusCode::CANCELLED, "cancelled by the client");
        if (plan.fault && static_cast<int>(i) == plan.fault->after) {
          if (plan.fault->kind == "stall") {
            // Stalls in slices so that an Abort or a cancelled call ends the stall early.
            for (int64_t left = int64_t{plan.fault->delay_ms} * 1000; left > 0 && !impl_->Aborted(plan.rid) &&
                                                                       !context->IsCancelled();
                 left -= 10000) {
              if (!impl_->Sleep(std::min<int64_t>(left, 10000))) {
                return grpc::Status(grpc::StatusCode::UNAVAILABLE, "stopping");
              }
            }
          } else if (plan.fault->kind == "reset") {
            return grpc::Status(grpc::StatusCode::UNAVAILABLE, "connection reset (simulated)");
          } else if (plan.fault->kind == "malformed-sse") {
            pb::OpenAIStreamChunk bad;
            bad.set_json_chunk("{\"id\": \"chatcmpl-sim\", \"choices\": [");
            writer->Write(bad);
          }
        }
        if (impl_->Aborted(plan.rid)) {
          pb::OpenAIStreamChunk last;
          json abort = {{"id", "chatcmpl-sim-abort"}, {"object", "chat.completion.chunk"},
                        {"choices", json::array({{{"index", 0}, {"delta", json::object()}, {"finish_reason", "abort"}}})}};
          last.set_json_chunk(abort.dump());
          last.set_finished(true);
          writer->Write(last);
          return grpc::Status::OK;
        }
        if (!impl_->Sleep(plan.delay_us[i])) return grpc::Status(grpc::StatusCode::UNAVAILABLE, "stopping");
        pb::OpenAIStreamChunk chunk;
        chunk.set_json_chunk(payloads[i]);
        chunk.set_finished(i + 1 == payloads.size());
        if (!writer->Write(chunk)) return grpc::Status(grpc::StatusCode::CANCELLED, "client went away");
      }
      return grpc::Status::OK;
    }

   private:
    Impl* impl_;
  };

  Status StartGrpc() {
    grpc_service_ = std::make_unique<GrpcService>(this);
    grpc::ServerBuilder builder;
    builder.AddListeningPort(options_.host + ":" + std::to_string(options_.grpc_port),
                             grpc::InsecureServerCredentials(), &grpc_port_);
    builder.RegisterService(grpc_service_.get());
    builder.SetMaxReceiveMessageSize(256 << 20);
    grpc_server_ = builder.BuildAndStart();
    if (grpc_server_ == nullptr || grpc_port_ == 0) {
      return UnavailableError("cannot bind gRPC on " + options_.host + ":" + std::to_string(options_.grpc_port));
    }
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
    if (grpc_server_) grpc_server_->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(1));
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

  std::unique_ptr<GrpcService> grpc_service_;
  std::unique_ptr<grpc::Server> grpc_server_;

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
}

PrefixCacheModel& SimServer::cache() { return impl_->cache_; }
uint64_t SimServer::connections_accepted() const { return impl_->connections_.load(); }

void SimServer::Stop() { impl_->Stop(); }

}  // namespace strata::sim
