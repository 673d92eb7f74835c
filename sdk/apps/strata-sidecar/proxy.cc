// The OpenAI-compatible proxy: chat completions through a managed agent, /v1/models passthrough.
#include "proxy.h"

#include <httplib.h>
#include <openssl/evp.h>
#include <openssl/rand.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <utility>

#include "core/json_text.h"
#include "core/utf8.h"
#include "transport/redact.h"
#include "json_body.h"
#include "strata/transport.h"

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

json ReconcileJson(const ReconcileOutcome& o) {
  json j = {{"kept", o.kept}, {"appended", o.appended}, {"replaced", o.replaced}};
  if (o.replaced) {
    j["first_difference"] = o.first_difference;
    j["evicted_segments"] = o.evicted_segments;
    j["reason"] = o.reason;
  }
  if (o.system_changed) j["system_changed"] = true;
  return j;
}

std::string ReconcileHeader(const ReconcileOutcome& o) {
  if (!o.replaced) return "appended " + std::to_string(o.appended);
  return "replaced from message " + std::to_string(o.first_difference) + ": " + o.reason;
}

// What the sidecar did for this turn, in the answer's "strata" object.
json StrataJson(const std::string& agent_id, const ReconcileOutcome& outcome, const Turn& turn) {
  json j = {{"agent", agent_id},
            {"reconcile", ReconcileJson(outcome)},
            {"input_tokens", turn.record.input_tokens},
            {"cached_tokens_predicted", turn.record.cached_tokens_predicted},
            {"prefix_break", nullptr},
            {"compaction", nullptr}};
  if (turn.prefix_break) j["prefix_break"] = turn.prefix_break->reason;
  if (!turn.compactions.empty()) {
    const CompactionReport& c = turn.compactions.front();
    j["compaction"] = {{"tokens_before", c.tokens_before},
                       {"tokens_after", c.tokens_after},
                       {"invalidated_tokens", c.invalidated_tokens}};
  }
  return j;
}

// When the client's history was replaced, the prefix break the agent reports says so.
void ExplainBreak(const ReconcileOutcome& outcome, Turn* turn) {
  if (!outcome.replaced || !turn->prefix_break) return;
  const std::string cause = "client history replaced (" + outcome.reason + ")";
  turn->break_causes.insert(turn->break_causes.begin(), cause);
  turn->prefix_break->reason = cause + "; " + turn->prefix_break->reason;
}

// The tools of the agent's tools layer, as JSON values.
json AgentTools(const Agent& agent) {
  json tools = json::array();
  for (const Segment& s : agent.context().Segments()) {
    if (s.layer == Layer::kTools) tools.push_back(json::parse(s.content, nullptr, false));
  }
  return tools;
}

// Events carry outside text (the upstream's answer, quotes in error messages): dumped so that no
// byte of it can throw inside the HTTP library's content provider.
std::string SseEvent(const json& data) { return "data: " + DumpOutsideJson(data) + "\n\n"; }

// Everything a streamed answer needs after the handler returned (the lease keeps the agent).
struct StreamJob {
  AgentLease lease;
  CompletionSlot slot;
  ClientView view;
  ReconcileOutcome outcome;
  std::string tenant;
  std::string agent_id;
  std::string completion_id;
  std::string model;
  int64_t created = 0;
  bool include_usage = false;
  // The client's other request fields, sent upstream unchanged (TurnOptions::extra_fields).
  std::vector<std::pair<std::string, std::string>> forwarded;
  // The agent's context and client view before the request: a failed turn goes back to them.
  ContextSnapshot before;
  ClientView view_before;
};

// Leases agent `agent_id` for the request (creating it on first use), brings its tools and history
// in line with the request's and saves the client's view: the job of the turn to answer.
StatusOr<std::shared_ptr<StreamJob>> PrepareJob(AgentRegistry& registry, const TenantConfig& tenant,
                                                const std::string& agent_id, ChatRequest& request) {
  STRATA_ASSIGN_OR_RETURN(CompletionSlot slot, registry.BeginCompletion(tenant));
  AgentConfig config = registry.DefaultConfig(tenant, agent_id);
  // The client runs its own tools: the agent's context_recall is not offered to the model.
  config.recall.expose_tool = false;
  if (!request.model.empty()) config.render.model = request.model;
  STRATA_ASSIGN_OR_RETURN(AgentLease lease, registry.AcquireOrCreate(tenant, agent_id, &config));

  ContextSnapshot before = lease.agent().context().Snapshot();
  // Tools first (a change re-opens the agent), then the history.
  if (AgentTools(lease.agent()) != request.tools) {
    Status set = lease.agent().context().SetTools(request.tools.dump());
    if (!set.ok()) return Status(set.code(), "\"tools\": " + set.message());
    STRATA_RETURN_IF_ERROR(registry.Reopen(lease));
  }
  Agent& agent = lease.agent();
  STRATA_ASSIGN_OR_RETURN(ClientView view, LoadClientView(agent));
  ClientView view_before = view;
  StatusOr<ReconcileOutcome> outcome = Reconcile(request.chat, agent, &view);
  Status saved = SaveClientView(agent, view);
  if (!outcome.ok()) return outcome.status();
  STRATA_RETURN_IF_ERROR(saved);

  auto job = std::make_shared<StreamJob>();
  job->model = agent.config().render.model;
  job->lease = std::move(lease);
  job->slot = std::move(slot);
  job->view = std::move(view);
  job->outcome = *outcome;
  job->tenant = tenant.name;
  job->agent_id = agent_id;
  job->completion_id = "chatcmpl-" + RandomHex(12);
  job->created = UnixSeconds();
  job->include_usage = request.include_usage;
  job->forwarded = std::move(request.forwarded);
  job->before = std::move(before);
  job->view_before = std::move(view_before);
  return job;
}

// Runs the job's turn (its client's other fields forwarded); on success records the reply in the
// client's view and reports the turn to `options`' hooks.
StatusOr<Turn> CompleteJob(const ProxyOptions& options, StreamJob& job,
                           const TurnOptions& turn_options) {
  Agent& agent = job.lease.agent();
  std::shared_ptr<void> in_flight;
  if (options.on_complete_begin) {
    StatusOr<int64_t> input_tokens = agent.InputTokens();
    in_flight = options.on_complete_begin(job.tenant, input_tokens.ok() ? *input_tokens : 0,
                                          agent.config().endpoint.max_output_tokens);
  }
  TurnOptions with_fields = turn_options;
  with_fields.extra_fields = job.forwarded;
  StatusOr<Turn> turn = agent.Complete(with_fields);
  if (!turn.ok()) {
    // A failed upstream changes nothing: what the request reconciled is undone too, and the
    // client's retry reconciles it again.
    if (agent.context().Rewind(std::move(job.before)).ok()) {
      SaveClientView(agent, job.view_before).IgnoreError();  // repaired by the next reconcile
    }
    return turn;
  }
  RecordReply(*turn, &job.view);
  SaveClientView(agent, job.view).IgnoreError();  // a lost save is repaired by the next reconcile
  ExplainBreak(job.outcome, &*turn);
  if (options.on_turn) options.on_turn(job.tenant, *turn);
  return turn;
}

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
          {"strata", StrataJson(job.agent_id, job.outcome, turn)}};
}

// The server-sent events of one streamed answer: a chunk per delta as the turn runs, then what no
// delta carried, the last chunk (finish reason and "strata"), the usage chunk when asked for and
// [DONE]. Once a write fails (the client is gone) nothing more is written and `cancel` is
// cancelled, which stops the upstream request.
class ChunkStream {
 public:
  ChunkStream(const StreamJob& job, const std::function<bool(std::string_view)>& write,
              CancellationToken* cancel)
      : job_(job), write_(write), cancel_(cancel) {}

  void Begin() { Send(Chunk({{"role", "assistant"}, {"content", ""}}, nullptr)); }

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

  // The turn failed: its error as the last event.
  void Fail(const Status& status) {
    if (open_) write_("data: " + ErrorReply(status, true).body + "\n\n");
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
    last["strata"] = StrataJson(job_.agent_id, job_.outcome, turn);
    Send(last);
    if (job_.include_usage) {
      Send({{"id", job_.completion_id},
            {"object", "chat.completion.chunk"},
            {"created", job_.created},
            {"model", job_.model},
            {"choices", json::array()},
            {"usage", UsageJson(turn)}});
    }
    if (open_) write_("data: [DONE]\n\n");
  }

 private:
  void Send(const json& event) {
    if (open_ && !write_(SseEvent(event))) {
      open_ = false;
      cancel_->Cancel();  // the client is gone: stop the upstream call
    }
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
    case StatusCode::kResourceExhausted:
      http = 429;
      type = "rate_limit_error";
      break;
    case StatusCode::kUnavailable:
      http = upstream ? 502 : 503;
      type = upstream ? "upstream_error" : "service_unavailable";
      // The agent is served by another sidecar of a shared store (registry.h owner_wait).
      if (!upstream && status.message().find(" is served by ") != std::string::npos) {
        http = 409;
        type = "conflict_error";
      }
      break;
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
  HttpReply reply;
  reply.status = http;
  reply.body = OpenAiErrorJson(status.message(), type, code);
  if (http == 401) reply.headers.push_back({"WWW-Authenticate", "Bearer"});
  return reply;
}

struct Proxy::Cancellations {
  std::mutex mu;
  std::set<CancellationToken*> in_flight;  // guarded by mu
  bool cancel_all = false;                 // guarded by mu
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

Proxy::Proxy(ProxyOptions options)
    : options_(std::move(options)), cancellations_(std::make_unique<Cancellations>()) {}
Proxy::~Proxy() = default;

void Proxy::CancelAll() {
  std::lock_guard<std::mutex> lock(cancellations_->mu);
  cancellations_->cancel_all = true;
  for (CancellationToken* token : cancellations_->in_flight) token->Cancel();
}

std::string Proxy::DerivedAgentId(const ParsedChat& chat) {
  std::string text;
  for (const std::string& s : chat.system) text += std::to_string(s.size()) + ":" + s;
  text += chat.history.empty() ? std::string() : MessageDigest(chat.history.front());
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int size = 0;
  EVP_Digest(text.data(), text.size(), digest, &size, EVP_sha256(), nullptr);
  return kDerivedAgentPrefix + Hex(digest, 8);
}

StatusOr<ChatRequest> ParseChatRequest(std::string_view body) {
  // Checked on the text, before anything is built: the parser itself is iterative, but dump() and
  // comparisons of the values below recurse once per level.
  STRATA_RETURN_IF_ERROR(internal::CheckJsonDepth(body, "the request body"));
  json request = json::parse(body, nullptr, false);
  if (request.is_discarded()) {
    return InvalidArgumentError(DescribeJsonError(body, "the request body"));
  }
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
  STRATA_ASSIGN_OR_RETURN(out.chat, ParseChatMessages(request["messages"]));
  if (request.contains("model")) out.model = request["model"].get<std::string>();
  if (request.contains("tools") && !request["tools"].is_null()) {
    out.tools = std::move(request["tools"]);
  }
  return out;
}

HttpReply Proxy::ChatCompletions(const TenantConfig& tenant, std::string_view agent_header,
                                 std::string_view body, const ClientWatch& watch) {
  // The upstream's key is redacted from every error answered (the transport already does for its
  // own; this covers any other text that quotes it).
  auto fail = [this, &tenant](const Status& status, bool upstream = false) {
    if (options_.on_error) options_.on_error(tenant.name, status.code());
    return ErrorReply(transport_internal::UpstreamStatus(status, {options_.upstream_api_key}),
                      upstream);
  };
  StatusOr<ChatRequest> request = ParseChatRequest(body);
  if (!request.ok()) return fail(request.status());
  std::string ignored;
  for (const std::string& field : request->ignored) ignored += (ignored.empty() ? "" : ",") + field;
  const std::string agent_id =
      agent_header.empty() ? DerivedAgentId(request->chat) : std::string(agent_header);
  if (Status valid = CheckAgentId(agent_id, "X-Strata-Agent"); !valid.ok()) return fail(valid);
  StatusOr<std::shared_ptr<StreamJob>> prepared =
      PrepareJob(*options_.registry, tenant, agent_id, *request);
  if (!prepared.ok()) return fail(prepared.status());
  std::shared_ptr<StreamJob> job = std::move(prepared).value();

  HttpReply reply;
  reply.headers.push_back({"X-Strata-Agent", agent_id});
  reply.headers.push_back({"X-Strata-Reconcile", ReconcileHeader(job->outcome)});
  if (!ignored.empty()) reply.headers.push_back({"X-Strata-Ignored-Fields", ignored});

  if (!request->stream) {
    CancellationToken cancel;
    InFlight registered(this, &cancel);
    std::shared_ptr<void> watched = watch ? watch(&cancel) : nullptr;  // the client leaves: cancel
    TurnOptions turn_options;
    turn_options.cancel = &cancel;
    StatusOr<Turn> turn = CompleteJob(options_, *job, turn_options);
    if (!turn.ok()) {
      HttpReply error = fail(turn.status(), true);
      error.headers.insert(error.headers.end(), reply.headers.begin(), reply.headers.end());
      return error;
    }
    reply.body = DumpOutsideJson(CompletionJson(*job, *turn));
    return reply;
  }

  reply.content_type = "text/event-stream";
  reply.headers.push_back({"Cache-Control", "no-cache"});
  reply.stream = [this, job, watch](const std::function<bool(std::string_view)>& write) {
    CancellationToken cancel;
    InFlight registered(this, &cancel);
    std::shared_ptr<void> watched = watch ? watch(&cancel) : nullptr;
    ChunkStream chunks(*job, write, &cancel);
    chunks.Begin();
    TurnOptions turn_options;
    turn_options.cancel = &cancel;
    turn_options.on_delta = [&chunks](const StreamDelta& d) { chunks.Delta(d); };
    StatusOr<Turn> turn = CompleteJob(options_, *job, turn_options);
    if (!turn.ok()) {
      if (options_.on_error) options_.on_error(job->tenant, turn.status().code());
      chunks.Fail(transport_internal::UpstreamStatus(turn.status(), {options_.upstream_api_key}));
      return;
    }
    chunks.Finish(*turn);
  };
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
