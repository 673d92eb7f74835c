// The OpenAI-compatible proxy: chat completions through a managed agent, /v1/models passthrough.
#include "proxy.h"

#include <httplib.h>
#include <openssl/rand.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <thread>
#include <utility>

#include "chat_body.h"
#include "core/json_text.h"
#include "core/text_util.h"
#include "core/utf8.h"
#include "delta_joiner.h"
#include "json_body.h"
#include "proxy_notes.h"
#include "proxy_turn.h"
#include "strata/transport.h"
#include "transport/redact.h"

namespace strata::sidecar {
namespace {

using json = nlohmann::json;
using internal::DumpOutsideJson;

// Request fields the proxy handles itself; every other one is forwarded upstream unchanged
// (TurnOptions::extra_fields), except kAgentOwnedFields.
const std::set<std::string> kHandledFields = {"model",  "messages",       "tools",
                                              "stream", "stream_options", "n"};
// Fields the agent sets for isolation and correlation (a client's cache_salt or SGLang extra_key
// could reach another tenant's cache; extra_body is a client library's wrapper that a server may
// merge into the request, its cache keys included): dropped and named in X-Strata-Ignored-Fields.
const std::set<std::string> kAgentOwnedFields = {"cache_salt", "extra_body", "extra_key",
                                                 "request_id", "rid"};

std::string Hex(const unsigned char* data, size_t size) {
  static const char kHex[] = "0123456789abcdef";
  std::string out;
  for (size_t i = 0; i < size; ++i) {
    out += kHex[data[i] >> 4];
    out += kHex[data[i] & 15];
  }
  return out;
}

std::string RandomHex(size_t bytes) {
  std::vector<unsigned char> buffer(bytes);
  if (RAND_bytes(buffer.data(), static_cast<int>(bytes)) != 1) {
    // Ids only need to be distinct; fall back to the clock.
    uint64_t t = static_cast<uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count());
    for (size_t i = 0; i < bytes; ++i) buffer[i] = static_cast<unsigned char>(t >> (8 * (i % 8)));
  }
  return Hex(buffer.data(), bytes);
}

// "chatcmpl-" and 24 hex digits: 12 drawn once per process, then a count. Distinct in the process
// and, by the random half, across processes; asking OpenSSL's generator for every id took about
// 1.6% of a proxied turn.
std::string CompletionId() {
  static const std::string prefix = "chatcmpl-" + RandomHex(6);
  static std::atomic<uint64_t> next{0};
  char count[16];
  std::snprintf(count, sizeof count, "%012llx",
                static_cast<unsigned long long>(next.fetch_add(1) & 0xffffffffffffULL));
  return prefix + count;
}

int64_t UnixSeconds() {
  return std::chrono::duration_cast<std::chrono::seconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

json UsageJson(const Turn& turn) {
  const Usage& u = turn.response.usage;
  const int64_t prompt = u.reported ? u.prompt_tokens : turn.record.input_tokens;
  const int64_t completion = u.reported ? u.completion_tokens : turn.record.output_tokens;
  json usage = {
      {"prompt_tokens", prompt},
      {"completion_tokens", completion},
      {"total_tokens", u.reported && u.total_tokens > 0 ? u.total_tokens : prompt + completion}};
  if (u.cached_tokens) usage["prompt_tokens_details"] = {{"cached_tokens", *u.cached_tokens}};
  if (u.reasoning_tokens > 0) {
    usage["completion_tokens_details"] = {{"reasoning_tokens", u.reasoning_tokens}};
  }
  return usage;
}

json ToolCallsJson(const std::vector<ToolCall>& calls) {
  json list = json::array();
  for (const ToolCall& c : calls) {
    list.push_back({{"id", c.id},
                    {"type", "function"},
                    {"function", {{"name", c.name}, {"arguments", c.arguments}}}});
  }
  return list;
}

// Events carry outside text (the upstream's answer, quotes in error messages): dumped so that no
// byte of it can throw inside the HTTP library's content provider.
std::string SseEvent(const json& data) { return "data: " + DumpOutsideJson(data) + "\n\n"; }

// The answer to a request without "stream": one chat.completion object.
json CompletionJson(const StreamJob& job, const Turn& turn) {
  const Response& r = turn.response;
  json message = {
      {"role", "assistant"},
      {"content", r.content.empty() && !r.tool_calls.empty() ? json(nullptr) : json(r.content)}};
  if (!r.tool_calls.empty()) message["tool_calls"] = ToolCallsJson(r.tool_calls);
  if (!r.reasoning.empty()) message["reasoning_content"] = r.reasoning;
  return {{"id", r.id.empty() ? job.completion_id : r.id},
          {"object", "chat.completion"},
          {"created", job.created},
          {"model", r.model.empty() ? job.model : r.model},
          {"choices", json::array({{{"index", 0},
                                    {"message", std::move(message)},
                                    {"logprobs", nullptr},
                                    {"finish_reason", r.finish_reason}}})},
          {"usage", UsageJson(turn)},
          {"strata", StrataJson(job.agent_id, job.notes, turn)}};
}

// The server-sent events of one streamed answer: a chunk per delta as the turn runs (the chunks
// of the deltas that arrived together in one write), then what no delta carried, the last chunk
// (finish reason and "strata"), the usage chunk when asked for and [DONE]. Once a write fails (the
// client is gone) nothing more is written and `cancel` is cancelled, which stops the upstream
// request.
class ChunkStream {
 public:
  ChunkStream(const StreamJob& job, const std::function<bool(std::string_view)>& write,
              CancellationToken* cancel)
      : job_(job), write_(write), cancel_(cancel) {}

  void Begin() {
    Send(Chunk({{"role", "assistant"}, {"content", ""}}, nullptr));
    Flush();
  }

  void Delta(const StreamDelta& d) {
    switch (d.kind) {
      case StreamDelta::Kind::kContent:
        content_sent_ += d.text;
        Send(Chunk({{"content", d.text}}, nullptr));
        break;
      case StreamDelta::Kind::kReasoning:
        reasoning_sent_ += d.text;
        Send(Chunk({{"reasoning_content", d.text}}, nullptr));
        break;
      case StreamDelta::Kind::kToolCallArguments:
        ToolDelta(d.tool_call_index, d.tool_call_id, d.tool_name, d.text);
        break;
    }
  }

  // Writes the events held since the last write (Send holds them), if any.
  void Flush() {
    if (!open_ || held_.empty()) return;
    if (!write_(held_)) {
      open_ = false;
      cancel_->Cancel();  // the client is gone: stop the upstream call
    }
    held_.clear();
  }

  // The turn failed: its error as the last event.
  void Fail(const Status& status) {
    if (open_) held_ += "data: " + ErrorReply(status, true).body + "\n\n";
    Flush();
  }

  void Finish(const Turn& turn) {
    const Response& r = turn.response;
    auto rest = [](const std::string& full, const std::string& sent) {
      return full.compare(0, sent.size(), sent) == 0 ? full.substr(sent.size()) : std::string();
    };
    if (std::string more = rest(r.reasoning, reasoning_sent_); !more.empty()) {
      Send(Chunk({{"reasoning_content", more}}, nullptr));
    }
    if (std::string more = rest(r.content, content_sent_); !more.empty()) {
      Send(Chunk({{"content", more}}, nullptr));
    }
    for (size_t i = 0; i < r.tool_calls.size(); ++i) {
      const ToolCall& c = r.tool_calls[i];
      const int index = static_cast<int>(i);
      std::string more = rest(c.arguments, arguments_sent_[index]);
      if (!announced_.count(index) || !more.empty()) ToolDelta(index, c.id, c.name, more);
    }
    json last = Chunk(json::object(), r.finish_reason);
    last["strata"] = StrataJson(job_.agent_id, job_.notes, turn);
    Send(last);
    if (job_.include_usage) {
      Send({{"id", job_.completion_id},
            {"object", "chat.completion.chunk"},
            {"created", job_.created},
            {"model", job_.model},
            {"choices", json::array()},
            {"usage", UsageJson(turn)}});
    }
    if (open_) held_ += "data: [DONE]\n\n";
    Flush();
  }

 private:
  // Holds an event for the next Flush().
  void Send(const json& event) {
    if (open_) held_ += SseEvent(event);
  }

  json Chunk(json delta, json finish) const {
    return json{{"id", job_.completion_id},
                {"object", "chat.completion.chunk"},
                {"created", job_.created},
                {"model", job_.model},
                {"choices", json::array({{{"index", 0},
                                          {"delta", std::move(delta)},
                                          {"logprobs", nullptr},
                                          {"finish_reason", std::move(finish)}}})}};
  }

  // A tool call's id and name go with its first delta that has an id.
  void ToolDelta(int index, const std::string& id, const std::string& name,
                 const std::string& arguments) {
    json call = {{"index", index}, {"function", {{"arguments", arguments}}}};
    if (!announced_.count(index) && !id.empty()) {
      call["id"] = id;
      call["type"] = "function";
      call["function"]["name"] = name;
      announced_.insert(index);
    }
    arguments_sent_[index] += arguments;
    Send(Chunk({{"tool_calls", json::array({std::move(call)})}}, nullptr));
  }

  const StreamJob& job_;
  const std::function<bool(std::string_view)>& write_;
  CancellationToken* cancel_;
  bool open_ = true;
  std::string held_;  // events not written yet: Flush() writes them together
  // What was streamed per field, so that the end can add whatever no delta carried.
  std::string content_sent_;
  std::string reasoning_sent_;
  std::map<int, std::string> arguments_sent_;
  std::set<int> announced_;
};

}  // namespace

std::string OpenAiErrorJson(std::string_view message, std::string_view type,
                            std::string_view code) {
  json error = {{"message", std::string(message)},
                {"type", std::string(type)},
                {"param", nullptr},
                {"code", code.empty() ? json(nullptr) : json(std::string(code))}};
  return DumpOutsideJson(json{{"error", std::move(error)}});
}

int UpstreamHttpStatus(const Status& status) {
  // The transport's errors for an answer start their text with "HTTP <status>: " (the agent may
  // put its own words before it; the upstream's text, which may hold anything, comes after).
  const std::string& m = status.message();
  const size_t at = m.find("HTTP ");
  if (at == std::string::npos || at + 9 > m.size() || m[at + 8] != ':') return 0;
  int code = 0;
  for (size_t i = at + 5; i < at + 8; ++i) {
    if (!std::isdigit(static_cast<unsigned char>(m[i]))) return 0;
    code = code * 10 + (m[i] - '0');
  }
  return code >= 100 && code <= 599 ? code : 0;
}

HttpReply ErrorReply(const Status& status, bool upstream) {
  int http = 500;
  std::string type = "api_error";
  switch (status.code()) {
    case StatusCode::kInvalidArgument:
    case StatusCode::kFailedPrecondition:
    case StatusCode::kOutOfRange:
      http = 400;
      type = "invalid_request_error";
      break;
    case StatusCode::kUnauthenticated:
      http = upstream ? 502 : 401;
      type = upstream ? "upstream_error" : "authentication_error";
      break;
    case StatusCode::kPermissionDenied:
      http = upstream ? 502 : 403;
      type = upstream ? "upstream_error" : "permission_error";
      break;
    case StatusCode::kNotFound:
      http = upstream ? 502 : 404;
      type = upstream ? "upstream_error" : "not_found_error";
      break;
    case StatusCode::kAlreadyExists:
    case StatusCode::kAborted:
      http = 409;
      type = "conflict_error";
      break;
    case StatusCode::kResourceExhausted: {
      // An upstream's 400/413/422 that said the prompt is too long is no rate limit: a client
      // must not retry it as one.
      const int answered = upstream ? UpstreamHttpStatus(status) : 0;
      const bool too_long = answered == 400 || answered == 413 || answered == 422;
      http = too_long ? 400 : 429;
      type = too_long ? "invalid_request_error" : "rate_limit_error";
      break;
    }
    case StatusCode::kUnavailable: {
      // An upstream that answered 5xx is answered with its status (a client retries a 503 as
      // the upstream asked); one that could not be reached is a bad gateway.
      const int answered = upstream ? UpstreamHttpStatus(status) : 0;
      http = !upstream ? 503 : answered >= 500 ? answered : 502;
      type = http == 503 ? "service_unavailable" : "upstream_error";
      // The agent is served by another sidecar of a shared store (registry.h owner_wait).
      if (!upstream && status.message().find(" is served by ") != std::string::npos) {
        http = 409;
        type = "conflict_error";
      }
      break;
    }
    case StatusCode::kDeadlineExceeded:
      http = 504;
      type = "timeout_error";
      break;
    case StatusCode::kCancelled:
      http = 499;
      type = "cancelled";
      break;
    default:
      break;
  }
  std::string code = StatusCodeName(status.code());
  for (char& c : code) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (status.code() == StatusCode::kUnauthenticated && !upstream) code = "invalid_api_key";
  if (status.code() == StatusCode::kResourceExhausted && http == 400) {
    code = "context_length_exceeded";
  }
  HttpReply reply;
  reply.status = http;
  reply.body = OpenAiErrorJson(status.message(), type, code);
  if (http == 401) reply.headers.push_back({"WWW-Authenticate", "Bearer"});
  // Both say "try again later": how much later (seconds), which OpenAI's clients honour.
  if (http == 429 || http == 503) {
    reply.headers.push_back({"Retry-After", std::to_string(kRetryAfterSeconds)});
  }
  return reply;
}

struct Proxy::Cancellations {
  std::mutex mu;
  std::set<CancellationToken*> in_flight;  // guarded by mu
  bool cancel_all = false;                 // guarded by mu
  int64_t active = 0;                      // completions being answered; guarded by mu
  std::condition_variable idle;            // notified when `active` drops to 0

  // Counts one completion as being answered until the returned object is destroyed.
  std::shared_ptr<void> Activate() {
    std::lock_guard<std::mutex> lock(mu);
    ++active;
    return std::shared_ptr<void>(nullptr, [this](void*) {
      std::lock_guard<std::mutex> lock(mu);
      if (--active == 0) idle.notify_all();
    });
  }
};

class Proxy::InFlight {
 public:
  InFlight(Proxy* proxy, CancellationToken* token) : c_(*proxy->cancellations_), token_(token) {
    std::lock_guard<std::mutex> lock(c_.mu);
    if (c_.cancel_all) token_->Cancel();
    c_.in_flight.insert(token_);
  }
  ~InFlight() {
    std::lock_guard<std::mutex> lock(c_.mu);
    c_.in_flight.erase(token_);
  }
  InFlight(const InFlight&) = delete;
  InFlight& operator=(const InFlight&) = delete;

 private:
  Cancellations& c_;
  CancellationToken* token_;
};

// A streamed turn runs on its own thread from the start, so that the HTTP status can wait for
// its first delta: until one arrives, a failure is still answered with its HTTP status
// (WaitForFirst). The stream then writes the deltas as they come (Pump). Destroying it cancels
// the turn if it still runs and waits for its thread.
class Proxy::StreamRun {
 public:
  StreamRun(Proxy* proxy, std::shared_ptr<StreamJob> job, ClientWatch watch,
            std::shared_ptr<void> active)
      : proxy_(proxy), job_(std::move(job)), active_(std::move(active)) {
    compactions_before_ = job_->lease.agent().context().Compactions().size();
    worker_ = std::thread([this, watch = std::move(watch)] { Run(watch); });
  }
  ~StreamRun() {
    cancel_.Cancel();  // a no-op once the turn ended
    if (worker_.joinable()) worker_.join();
  }
  StreamRun(const StreamRun&) = delete;
  StreamRun& operator=(const StreamRun&) = delete;

  // Waits for the first delta or the end of the turn; the turn's error when it failed before
  // any delta (nothing was sent to the client yet), else OK.
  Status WaitForFirst() {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [this] { return done_ || !deltas_.empty(); });
    if (!done_ || !deltas_.empty() || result_.ok()) return Status::Ok();
    Status failed = result_.status();
    lock.unlock();
    worker_.join();
    return failed;
  }

  // The turn's compactions, known once WaitForFirst() returned.
  std::vector<CompactionReport> compactions() {
    std::lock_guard<std::mutex> lock(mu_);
    return compactions_;
  }

  // The id of the request sent upstream, known once WaitForFirst() returned ("" if none was).
  std::string request_id() {
    std::lock_guard<std::mutex> lock(mu_);
    return request_id_;
  }

  // Writes the stream: the role chunk, every delta as it comes, then the end (or the error).
  void Pump(const std::function<bool(std::string_view)>& write) {
    ChunkStream chunks(*job_, write, &cancel_);
    chunks.Begin();
    std::unique_lock<std::mutex> lock(mu_);
    while (true) {
      cv_.wait(lock, [this] { return done_ || !deltas_.empty(); });
      std::vector<StreamDelta> deltas = std::move(deltas_);
      deltas_.clear();
      const bool done = done_;
      lock.unlock();
      for (const StreamDelta& d : deltas) chunks.Delta(d);
      chunks.Flush();  // the chunks of what arrived together, in one write
      if (done) break;
      lock.lock();
    }
    worker_.join();
    if (result_.ok()) {
      chunks.Finish(*result_);
      // The body is not part of the answer: the agent's next turn writes only what it adds.
      job_->lease.agent().RecycleUnchanged(std::move(result_).value());
    } else {
      if (proxy_->options_.on_error) proxy_->options_.on_error(job_->tenant, result_.status().code());
      chunks.Fail(transport_internal::UpstreamStatus(result_.status(),
                                                     {proxy_->options_.upstream_api_key}));
    }
    active_.reset();  // answered: a drain waits no longer for it
  }

 private:
  void Run(const ClientWatch& watch) {
    InFlight registered(proxy_, &cancel_);
    std::shared_ptr<void> watched = watch ? watch(&cancel_) : nullptr;  // the client leaves
    TurnOptions turn_options;
    turn_options.cancel = &cancel_;
    turn_options.on_send = [this](const std::string& id) {
      std::lock_guard<std::mutex> lock(mu_);
      request_id_ = id;
    };
    // With recall_tool a round may be the sidecar's own (context_recall): the answer is sent once
    // the last round ended, as if it had come whole.
    // The fragments that arrive together are joined by part and handed to Pump at once.
    DeltaJoiner joiner;
    auto hand_on = [this](const StreamDelta& d) {
      std::lock_guard<std::mutex> lock(mu_);
      if (!first_seen_) {
        // The turn's compaction happened before it was sent: read while the agent waits for
        // the upstream (this thread runs its Complete), for the headers that go out now.
        first_seen_ = true;
        const std::vector<CompactionReport>& all = job_->lease.agent().context().Compactions();
        if (all.size() > compactions_before_) {
          compactions_.assign(all.begin() + static_cast<std::ptrdiff_t>(compactions_before_),
                              all.end());
        }
      }
      deltas_.push_back(d);
      if (!d.more_follows) cv_.notify_all();
    };
    if (!proxy_->options_.recall_tool) {
      turn_options.on_delta = [&](const StreamDelta& d) {
        joiner.Add(d, [&](StreamDelta joined) {
          joined.more_follows = d.more_follows;  // the read's last part wakes Pump
          hand_on(joined);
        });
      };
    }
    StatusOr<Turn> turn = CompleteJob(proxy_->options_, *job_, turn_options);
    joiner.Flush(hand_on);
    std::lock_guard<std::mutex> lock(mu_);
    if (!first_seen_ && turn.ok()) compactions_ = turn->compactions;  // an answer without deltas
    result_ = std::move(turn);
    done_ = true;
    cv_.notify_all();
  }

  Proxy* proxy_;
  std::shared_ptr<StreamJob> job_;
  std::shared_ptr<void> active_;  // Cancellations::Activate
  size_t compactions_before_ = 0;  // the agent's compactions before the turn
  bool first_seen_ = false;                    // guarded by mu_
  std::vector<CompactionReport> compactions_;  // guarded by mu_: the turn's, once known
  std::string request_id_;                     // guarded by mu_: the last request sent upstream
  CancellationToken cancel_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<StreamDelta> deltas_;  // guarded by mu_: received, not yet written
  bool done_ = false;                // guarded by mu_
  StatusOr<Turn> result_ = UnknownError("the turn has not ended");  // guarded by mu_ until done_
  std::thread worker_;  // last: starts once the fields it uses are constructed
};

Proxy::Proxy(ProxyOptions options)
    : options_(std::move(options)), cancellations_(std::make_unique<Cancellations>()) {}
Proxy::~Proxy() = default;

void Proxy::CancelAll() {
  std::lock_guard<std::mutex> lock(cancellations_->mu);
  cancellations_->cancel_all = true;
  for (CancellationToken* token : cancellations_->in_flight) token->Cancel();
}

bool Proxy::WaitIdle(std::chrono::steady_clock::time_point deadline) {
  std::unique_lock<std::mutex> lock(cancellations_->mu);
  return cancellations_->idle.wait_until(lock, deadline,
                                         [this] { return cancellations_->active == 0; });
}

std::string Proxy::DerivedAgentId(const ParsedChat& chat) {
  std::string text;
  for (const ChatEntry& s : chat.system)
    text += std::to_string(s->content.size()) + ":" + s->content;
  text += chat.history.empty() ? std::string() : chat.history.front()->digest;
  const std::string digest = internal::Sha256(text);
  return kDerivedAgentPrefix + Hex(reinterpret_cast<const unsigned char*>(digest.data()), 8);
}

StatusOr<ChatRequest> ParseChatRequest(std::string_view body,
                                       std::shared_ptr<const ChatBodyBase> previous,
                                       std::shared_ptr<const ChatBodyBase>* base) {
  std::optional<ChatBody> parsed = ParseChatBody(body, std::move(previous), base != nullptr);
  // The nesting is checked before any value is used: the parser itself is iterative, but dump()
  // and comparisons of the values below recurse once per level. A body taken apart had each part
  // it parsed checked; one parsed whole is checked here, on its text.
  if (!parsed || !parsed->split) {
    STRATA_RETURN_IF_ERROR(internal::CheckJsonDepth(body, "the request body"));
  }
  if (!parsed) return InvalidArgumentError(DescribeJsonError(body, "the request body"));
  if (base != nullptr) *base = parsed->base;
  json& request = parsed->fields;
  if (!request.is_object()) {
    return InvalidArgumentError(
        "the request body is not a JSON object (a Chat Completions request)");
  }
  if (!request.contains("messages")) {
    return InvalidArgumentError("the request has no \"messages\"");
  }
  if (request.contains("n") && !(request["n"].is_number_integer() && request["n"] == 1)) {
    return InvalidArgumentError(
        "\"n\": the proxy answers with one choice; send n=1 or leave it out");
  }
  if (request.contains("model") && !request["model"].is_string()) {
    return InvalidArgumentError("\"model\" must be a string");
  }
  if (request.contains("tools") && !request["tools"].is_null() && !request["tools"].is_array()) {
    return InvalidArgumentError("\"tools\" must be an array of tool objects");
  }
  if (request.contains("stream") && !request["stream"].is_boolean() &&
      !request["stream"].is_null()) {
    return InvalidArgumentError("\"stream\" must be true or false");
  }
  ChatRequest out;
  out.stream =
      request.contains("stream") && request["stream"].is_boolean() && request["stream"].get<bool>();
  if (request.contains("stream_options") && !request["stream_options"].is_null()) {
    const json& o = request["stream_options"];
    if (!o.is_object() || (o.contains("include_usage") && !o["include_usage"].is_boolean())) {
      return InvalidArgumentError(
          "\"stream_options\" must be an object whose include_usage is true or false");
    }
    out.include_usage = out.stream && o.value("include_usage", false);
  }
  for (auto it = request.begin(); it != request.end(); ++it) {
    if (it.key().empty()) {
      // The agent refuses to send a nameless field; refused here, before the history changes.
      return InvalidArgumentError("the request has a field with an empty name (\"\"): remove it");
    }
    if (kHandledFields.count(it.key())) continue;
    if (kAgentOwnedFields.count(it.key())) {
      out.ignored.push_back(it.key());
    } else {
      out.forwarded.emplace_back(it.key(), it.value().dump());
    }
  }
  if (parsed->split) {
    STRATA_ASSIGN_OR_RETURN(out.chat, ParseChatMessages(parsed->messages));
  } else {
    STRATA_ASSIGN_OR_RETURN(out.chat, ParseChatMessages(request["messages"]));
  }
  if (request.contains("model")) out.model = request["model"].get<std::string>();
  if (parsed->tools != nullptr) {
    out.tools = std::move(parsed->tools);
  } else if (request.contains("tools") && !request["tools"].is_null()) {
    out.tools = ChatTools::Of(std::move(request["tools"]));
  }
  return out;
}

HttpReply Proxy::ChatCompletions(const TenantConfig& tenant, std::string_view agent_header,
                                 std::string_view body, const ClientWatch& watch) {
  std::shared_ptr<void> active = cancellations_->Activate();  // a drain waits for it
  // The upstream's key is redacted from every error answered (the transport already does for its
  // own; this covers any other text that quotes it).
  auto fail = [this, &tenant](const Status& status, bool upstream = false) {
    if (options_.on_error) options_.on_error(tenant.name, status.code());
    return ErrorReply(transport_internal::UpstreamStatus(status, {options_.upstream_api_key}),
                      upstream);
  };
  // A client naming its agent sends that conversation again: read from where it differs from the
  // agent's last body.
  const std::string conversation =
      agent_header.empty() ? std::string() : tenant.name + '\n' + std::string(agent_header);
  std::shared_ptr<const ChatBodyBase> previous, base;
  if (!conversation.empty()) previous = bases_.Take(conversation);
  StatusOr<ChatRequest> request =
      ParseChatRequest(body, std::move(previous), conversation.empty() ? nullptr : &base);
  if (base != nullptr) bases_.Put(conversation, std::move(base));
  if (!request.ok()) return fail(request.status());
  const std::string agent_id =
      agent_header.empty() ? DerivedAgentId(request->chat) : std::string(agent_header);
  if (Status valid = CheckAgentId(agent_id, "X-Strata-Agent"); !valid.ok()) return fail(valid);
  StatusOr<std::shared_ptr<StreamJob>> prepared =
      PrepareJob(*options_.registry, tenant, agent_id, *request, options_.recall_tool);
  if (!prepared.ok()) return fail(prepared.status());
  std::shared_ptr<StreamJob> job = std::move(prepared).value();
  job->completion_id = CompletionId();
  job->created = UnixSeconds();

  HttpReply reply;
  // The headers of what the sidecar did, known once the turn reconciled the messages.
  auto headers = [&] {
    reply.headers.push_back({"X-Strata-Agent", agent_id});
    for (auto& header : NoteHeaders(job->notes)) reply.headers.push_back(std::move(header));
  };
  // Until the first byte, a failure keeps the answer's headers and gets its own HTTP status; a
  // refusal of the request inside the turn (its messages, an oversized one) is the client's.
  auto failed = [&](const Status& status) {
    if (job->rejected_oversized) return RejectOversized(options_, *job);
    HttpReply error = fail(status, !job->refused_before_send);
    headers();
    error.headers.insert(error.headers.end(), reply.headers.begin(), reply.headers.end());
    return error;
  };

  if (!request->stream) {
    CancellationToken cancel;
    InFlight registered(this, &cancel);
    std::shared_ptr<void> watched = watch ? watch(&cancel) : nullptr;  // the client leaves: cancel
    TurnOptions turn_options;
    turn_options.cancel = &cancel;
    StatusOr<Turn> turn = CompleteJob(options_, *job, turn_options);
    if (!turn.ok()) return failed(turn.status());
    headers();
    reply.headers.push_back({"X-Request-Id", turn->record.request_id});
    if (std::string c = CompactionHeader(turn->compactions); !c.empty()) {
      reply.headers.push_back({"X-Strata-Compaction", c});
    }
    reply.body = DumpOutsideJson(CompletionJson(*job, *turn));
    // The body is not part of the answer: the agent's next turn writes only what it adds.
    job->lease.agent().RecycleUnchanged(std::move(turn).value());
    return reply;
  }

  auto run = std::make_shared<StreamRun>(this, job, watch, std::move(active));
  if (Status first = run->WaitForFirst(); !first.ok()) return failed(first);
  headers();
  // The id of the request that went upstream (also in the last chunk's "strata" object).
  if (std::string id = run->request_id(); !id.empty()) reply.headers.push_back({"X-Request-Id", id});
  if (std::string c = CompactionHeader(run->compactions()); !c.empty()) {
    reply.headers.push_back({"X-Strata-Compaction", c});
  }
  reply.content_type = "text/event-stream";
  reply.headers.push_back({"Cache-Control", "no-cache"});
  reply.stream = [run](const std::function<bool(std::string_view)>& write) { run->Pump(write); };
  return reply;
}

namespace {

// GET {base_url}/models; the reply as it came, or UNAVAILABLE when the upstream did not answer.
StatusOr<HttpReply> GetModels(const std::string& url, const std::string& api_key) {
  // scheme://host[:port] and the base path ("/v1").
  const size_t scheme_end = url.find("://");
  const size_t path_start =
      scheme_end == std::string::npos ? std::string::npos : url.find('/', scheme_end + 3);
  const std::string origin = path_start == std::string::npos ? url : url.substr(0, path_start);
  std::string path = path_start == std::string::npos ? "" : url.substr(path_start);
  while (!path.empty() && path.back() == '/') path.pop_back();
  httplib::Client client(origin);
  client.set_tcp_nodelay(true);
  client.set_connection_timeout(10, 0);
  client.set_read_timeout(30, 0);
  httplib::Headers headers;
  if (!api_key.empty()) headers.emplace("Authorization", "Bearer " + api_key);
  httplib::Result result = client.Get((path + "/models").c_str(), headers);
  if (!result) {
    return UnavailableError("upstream " + RedactUrl(url) + " did not answer GET /models (" +
                            httplib::to_string(result.error()) + ")");
  }
  HttpReply reply;
  reply.status = result->status;
  // Passed through, but never with the key (an upstream may quote it in a 401) or invalid UTF-8.
  reply.body = internal::ToValidUtf8(transport_internal::Scrub(result->body, {api_key}));
  reply.content_type = result->get_header_value("Content-Type");
  if (reply.content_type.empty()) reply.content_type = "application/json";
  return reply;
}

}  // namespace

HttpReply Proxy::Models() {
  if (options_.model_upstreams.empty()) {
    if (options_.upstream.empty()) {
      return ErrorReply(
          UnavailableError("no upstream is configured (--upstream): no models to list"));
    }
    StatusOr<HttpReply> reply = GetModels(options_.upstream, options_.upstream_api_key);
    if (!reply.ok()) return ErrorReply(reply.status(), true);
    return *reply;
  }
  // Length pools: every HTTP endpoint is asked, and the answer lists each model id once, in the
  // order first seen. Endpoints that fail are named in X-Strata-Models-Unavailable.
  json data = json::array();
  std::set<std::string> seen;
  std::vector<std::string> failed;
  std::vector<std::string> asked;
  for (const std::string& url : options_.model_upstreams) {
    if (url.rfind("http://", 0) != 0 && url.rfind("https://", 0) != 0) continue;  // grpc://
    if (std::find(asked.begin(), asked.end(), url) != asked.end()) continue;
    asked.push_back(url);
    StatusOr<HttpReply> reply = GetModels(url, options_.upstream_api_key);
    json list =
        reply.ok() && reply->status / 100 == 2 ? json::parse(reply->body, nullptr, false) : json();
    if (!list.is_object() || !list.contains("data") || !list["data"].is_array()) {
      failed.push_back(
          RedactUrl(url) + " (" +
          (reply.ok() ? "HTTP " + std::to_string(reply->status) : reply.status().message()) + ")");
      continue;
    }
    for (const json& model : list["data"]) {
      const std::string id = model.is_object() ? model.value("id", "") : "";
      if (!id.empty() && seen.insert(id).second) data.push_back(model);
    }
  }
  if (asked.empty()) {
    return ErrorReply(UnavailableError(
        "the length pools have no HTTP endpoint (GET /models is not part of the gRPC protocol of "
        "grpc:// endpoints): no models to list"));
  }
  std::string failures;
  for (const std::string& f : failed) failures += (failures.empty() ? "" : "; ") + f;
  if (failed.size() == asked.size()) {
    return ErrorReply(UnavailableError("no pool endpoint answered GET /models: " + failures), true);
  }
  HttpReply reply;
  reply.body = DumpOutsideJson(json{{"object", "list"}, {"data", std::move(data)}});
  if (!failures.empty()) reply.headers.push_back({"X-Strata-Models-Unavailable", failures});
  return reply;
}

}  // namespace strata::sidecar
