// The lower level of strata._strata: Context, transports (HTTP, gRPC) and Client, for programs that
// wire the pieces themselves instead of using an Agent. As in the rest of the extension, options
// and results cross the boundary as JSON text; the `strata` package turns them into keyword
// arguments, dicts and objects. Every call that renders, tokenizes or touches the network runs with
// the GIL released (blocking calls through BlockingCall, so Ctrl-C cancels them).
#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "common.h"
#include "strata/budget.h"
#include "strata/builtin_policies.h"
#include "strata/chat_template.h"
#include "strata/client.h"
#include "strata/context.h"
#include "strata/grpc_transport.h"
#include "strata/http_transport.h"
#include "strata/tokenizer.h"
#include "strata/tokenizer_spec.h"
#include "strata/transport.h"

namespace strata_py {
namespace {

// Reads the fields of an options object, refusing unknown keys and wrong types with a message
// that names the key ("HttpTransport option timeouts.connect_ms: expected an integer, got \"x\"").
class Options {
 public:
  Options(std::string what, const std::string& text) : what_(std::move(what)) {
    doc_ = json::parse(text, nullptr, false);
    if (!doc_.is_object()) status_ = strata::InvalidArgumentError(what_ + ": expected an object");
  }
  // Refuses a key not in `known`.
  void Known(const std::set<std::string>& known) {
    if (!status_.ok()) return;
    for (auto it = doc_.begin(); it != doc_.end(); ++it) {
      if (known.count(it.key()) == 0) {
        std::string names;
        for (const std::string& k : known) names += (names.empty() ? "" : ", ") + k;
        status_ = strata::InvalidArgumentError(what_ + ": unknown option \"" + it.key() +
                                               "\" (known: " + names + ")");
        return;
      }
    }
  }
  template <typename T>
  void Get(const char* key, T* out) {
    if (!status_.ok() || !doc_.contains(key) || doc_[key].is_null()) return;
    const json& v = doc_[key];
    bool ok = false;
    if constexpr (std::is_same_v<T, bool>) ok = v.is_boolean();
    else if constexpr (std::is_integral_v<T>) ok = v.is_number_integer();
    else if constexpr (std::is_floating_point_v<T>) ok = v.is_number();
    else if constexpr (std::is_same_v<T, std::string>) ok = v.is_string();
    else ok = true;
    if (ok && std::is_integral_v<T> && !std::is_same_v<T, bool> && std::is_unsigned_v<T> &&
        v.is_number_integer() && v.get<int64_t>() < 0) {
      ok = false;
    }
    if (!ok) {
      status_ = strata::InvalidArgumentError(what_ + " option " + key + ": expected " + Kind<T>() +
                                             ", got " + v.dump());
      return;
    }
    try {
      *out = v.get<T>();
    } catch (const json::exception& e) {
      status_ = strata::InvalidArgumentError(what_ + " option " + key + ": " + e.what());
    }
  }
  void GetMs(const char* key, std::chrono::milliseconds* out) {
    int64_t ms = out->count();
    Get(key, &ms);
    if (status_.ok() && ms < 0) {
      status_ = strata::InvalidArgumentError(what_ + " option " + key + ": must not be negative, got " +
                                             std::to_string(ms));
    }
    *out = std::chrono::milliseconds(ms);
  }
  bool Has(const char* key) const { return status_.ok() && doc_.contains(key) && !doc_[key].is_null(); }
  const strata::Status& status() const { return status_; }

 private:
  template <typename T>
  static std::string Kind() {
    if constexpr (std::is_same_v<T, bool>) return "a boolean";
    else if constexpr (std::is_integral_v<T>) return std::is_unsigned_v<T> ? "a non-negative integer" : "an integer";
    else if constexpr (std::is_floating_point_v<T>) return "a number";
    else if constexpr (std::is_same_v<T, std::string>) return "a string";
    else return "a list of [name, value] pairs";
  }
  std::string what_;
  json doc_;
  strata::Status status_;
};

// ---- JSON of the lower-level types ----------------------------------------------------------

json LayersJson(const strata::LayerUsage (&layers)[strata::kLayerCount]) {
  json out = json::object();
  for (int i = 0; i < strata::kLayerCount; ++i) {
    out[std::string(strata::LayerName(static_cast<strata::Layer>(i)))] = {
        {"segments", layers[i].segments}, {"bytes", layers[i].bytes}, {"tokens", layers[i].tokens}};
  }
  return out;
}

json BuiltJson(const strata::BuiltRequest& b) {
  json warnings = json::array();
  for (const strata::LintWarning& w : b.warnings) {
    warnings.push_back({{"segment_id", w.segment_id},
                        {"layer", std::string(strata::LayerName(w.layer))},
                        {"what", w.what},
                        {"offset", w.offset},
                        {"excerpt", w.excerpt}});
  }
  return {{"body", b.body},
          {"stable_prefix_bytes", b.stable_prefix_bytes},
          {"history_end_bytes", b.history_end_bytes},
          {"stable_prefix_hash", b.stable_prefix_hash},
          {"message_count", b.message_count},
          {"layers", LayersJson(b.layers)},
          {"total_tokens", b.total_tokens},
          {"input_tokens", b.input_tokens},
          {"input_tokens_exact", b.input_tokens_exact},
          {"limit_tokens", b.limit_tokens},
          {"tokens_estimated", b.tokens_estimated},
          {"warnings", warnings},
          {"compaction", b.compaction ? ReportJson(*b.compaction) : json()}};
}

json SegmentJson(const strata::Segment& s) {
  json out = {{"id", s.id},
              {"seq", s.seq},
              {"position", s.position},
              {"kind", std::string(strata::SegmentKindName(s.kind))},
              {"layer", std::string(strata::LayerName(s.layer))},
              {"content", s.content},
              {"reasoning", s.reasoning},
              {"tool_calls", ToolCallsJson(s.tool_calls)},
              {"tool_call_id", s.tool_call_id},
              {"name", s.name},
              {"version", s.version},
              {"order", s.order},
              {"turn", s.turn},
              {"tokens", s.tokens},
              {"pinned", s.pinned},
              {"state", std::string(strata::SegmentStateName(s.state))},
              {"hygiene", std::string(strata::HygieneActionName(s.hygiene))},
              {"recall_id", s.recall_id},
              {"duplicate_of", s.duplicate_of},
              {"policy", s.policy}};
  return out;
}

// OpenAI tool calls ([{"id", "type": "function", "function": {"name", "arguments"}}]) to strata's.
strata::StatusOr<std::vector<strata::ToolCall>> ParseToolCalls(const std::string& text) {
  json doc = json::parse(text, nullptr, false);
  if (!doc.is_array()) return strata::InvalidArgumentError("tool_calls: expected a list");
  std::vector<strata::ToolCall> calls;
  for (size_t i = 0; i < doc.size(); ++i) {
    const json& c = doc[i];
    std::string where = "tool_calls[" + std::to_string(i) + "]";
    if (!c.is_object() || !c.contains("function") || !c["function"].is_object()) {
      return strata::InvalidArgumentError(where + ": expected {\"id\", \"function\": {\"name\", "
                                          "\"arguments\"}}, got " + c.dump());
    }
    const json& f = c["function"];
    strata::ToolCall call;
    if (c.contains("id") && !c["id"].is_string()) {
      return strata::InvalidArgumentError(where + ".id: expected a string, got " + c["id"].dump());
    }
    call.id = c.value("id", "");
    if (!f.contains("name") || !f["name"].is_string()) {
      return strata::InvalidArgumentError(where + ".function.name: expected a string");
    }
    call.name = f["name"].get<std::string>();
    if (f.contains("arguments")) {
      // The arguments are a JSON string as the model produced it (kept byte for byte); an object
      // is accepted too and serialized.
      call.arguments = f["arguments"].is_string() ? f["arguments"].get<std::string>()
                                                  : f["arguments"].dump();
    }
    calls.push_back(std::move(call));
  }
  return calls;
}

std::string ParseLayerOr(const std::string& name, strata::Layer* layer) {
  std::optional<strata::Layer> l = strata::ParseLayer(name);
  if (!l) return "unknown layer \"" + name + "\" (use index or docs)";
  *layer = *l;
  return "";
}

strata::Layer LayerOrRaise(const std::string& name) {
  strata::Layer layer = strata::Layer::kDocs;
  std::string error = ParseLayerOr(name, &layer);
  if (!error.empty()) Raise(strata::InvalidArgumentError(error));
  return layer;
}

// ---- Context --------------------------------------------------------------------------------

// The context and what it points to (tokenizer, chat template, request counter, policy), which a
// Context does not own. A Context is not thread-safe: `mu_` serializes the calls (taken with the
// GIL released, so a thread waiting for it never blocks the others).
class PyContext {
 public:
  static std::unique_ptr<PyContext> Create(const std::string& config_json) {
    auto out = std::make_unique<PyContext>();
    Check(Unlocked([&] { return out->Init(config_json); }));
    return out;
  }

  template <typename F>
  auto Locked(F&& f) {
    return Unlocked([&] {
      std::lock_guard<std::mutex> lock(mu_);
      return f(*context_);
    });
  }

  std::string ConfigJson() const { return config_json_; }
  std::string Id() const { return context_->options().agent.id; }

  void SetSystemPrompts(std::vector<std::string> prompts) {
    Check(Locked([&](strata::Context& c) { return c.SetSystemPrompts(std::move(prompts)); }));
  }
  void SetTools(const std::string& tools_json) {
    Check(Locked([&](strata::Context& c) { return c.SetTools(tools_json); }));
  }
  std::string PutDocument(const std::string& layer, std::string name, std::string content,
                          std::string version, int64_t order) {
    strata::Layer l = LayerOrRaise(layer);
    strata::Document doc{std::move(name), std::move(content), std::move(version), order};
    return Take(Locked([&](strata::Context& c) { return c.PutDocument(l, std::move(doc)); }));
  }
  void RemoveDocument(const std::string& layer, const std::string& name) {
    strata::Layer l = LayerOrRaise(layer);
    Check(Locked([&](strata::Context& c) { return c.RemoveDocument(l, name); }));
  }
  std::string AppendUser(std::string content) {
    return Take(Locked([&](strata::Context& c) { return c.AppendUser(std::move(content)); }));
  }
  std::string AppendAssistant(std::string content, std::string reasoning,
                              const std::string& tool_calls_json) {
    return Take(Locked([&](strata::Context& c) -> strata::StatusOr<std::string> {
      STRATA_ASSIGN_OR_RETURN(std::vector<strata::ToolCall> calls, ParseToolCalls(tool_calls_json));
      strata::AssistantMessage m{std::move(content), std::move(reasoning), std::move(calls)};
      return c.AppendAssistant(std::move(m));
    }));
  }
  std::string AppendToolResult(std::string tool_call_id, std::string content, bool is_error) {
    strata::ToolResult r{std::move(tool_call_id), std::move(content), is_error};
    return Take(Locked([&](strata::Context& c) { return c.AppendToolResult(std::move(r)); }));
  }
  void SetPinned(const std::string& id, bool pinned) {
    Check(Locked([&](strata::Context& c) { return c.SetPinned(id, pinned); }));
  }
  std::vector<std::string> OpenToolCalls() {
    return Locked([&](strata::Context& c) { return c.OpenToolCalls(); });
  }
  void SetVolatile(std::string key, std::string value) {
    Check(Locked([&](strata::Context& c) { return c.SetVolatile(std::move(key), std::move(value)); }));
  }
  void RemoveVolatile(const std::string& key) {
    Check(Locked([&](strata::Context& c) { return c.RemoveVolatile(key); }));
  }
  void ClearVolatile() {
    Locked([&](strata::Context& c) {
      c.ClearVolatile();
      return 0;
    });
  }
  std::string Build(std::vector<std::pair<std::string, std::string>> extra_fields) {
    strata::BuildOptions options;
    options.extra_fields = std::move(extra_fields);
    return Take(Locked([&](strata::Context& c) -> strata::StatusOr<std::string> {
      STRATA_ASSIGN_OR_RETURN(strata::BuiltRequest built, c.Build(options));
      return BuiltJson(built).dump();
    }));
  }
  std::string Preview(std::vector<std::pair<std::string, std::string>> extra_fields) {
    strata::BuildOptions options;
    options.extra_fields = std::move(extra_fields);
    return Take(Locked([&](strata::Context& c) -> strata::StatusOr<std::string> {
      STRATA_ASSIGN_OR_RETURN(strata::BuiltRequest built, std::as_const(c).Preview(options));
      return BuiltJson(built).dump();
    }));
  }
  std::string PreviewBuild(std::vector<std::pair<std::string, std::string>> extra_fields) {
    strata::BuildOptions options;
    options.extra_fields = std::move(extra_fields);
    return Take(Locked([&](strata::Context& c) -> strata::StatusOr<std::string> {
      STRATA_ASSIGN_OR_RETURN(strata::BuiltRequest built, std::as_const(c).PreviewBuild(options));
      return BuiltJson(built).dump();
    }));
  }
  size_t InputTokens() {
    return Locked([&](strata::Context& c) { return c.InputTokens(); });
  }
  std::string Compact(bool force) {
    return Take(Locked([&](strata::Context& c) -> strata::StatusOr<std::string> {
      STRATA_ASSIGN_OR_RETURN(std::optional<strata::CompactionReport> report, c.Compact(force));
      return report ? ReportJson(*report).dump() : std::string("null");
    }));
  }
  std::string Compactions() {
    return Locked([&](strata::Context& c) {
      json out = json::array();
      for (const strata::CompactionReport& r : c.Compactions()) out.push_back(ReportJson(r));
      return out.dump();
    });
  }
  std::string Recall(const std::string& recall_id) {
    return Take(Locked([&](strata::Context& c) { return c.Recall(recall_id); }));
  }
  std::string Segments() {
    return Locked([&](strata::Context& c) {
      json out = json::array();
      for (const strata::Segment& s : c.Segments()) out.push_back(SegmentJson(s));
      return out.dump();
    });
  }
  std::string Stats() {
    return Locked([&](strata::Context& c) {
      strata::ContextStats s = c.Stats();
      return json{{"segments", s.segments},
                  {"turns", s.turns},
                  {"truncated", s.truncated},
                  {"deduplicated", s.deduplicated},
                  {"folded", s.folded},
                  {"bytes_saved_by_hygiene", s.bytes_saved_by_hygiene},
                  {"layers", LayersJson(s.layers)}}
          .dump();
    });
  }

  // The Client's call: the context is locked for the whole request.
  template <typename F>
  auto WithContext(F&& f) {
    std::lock_guard<std::mutex> lock(mu_);
    return f(*context_);
  }

 private:
  // Builds the context from the subset of the agent configuration a context uses. A budget is
  // enforced only when the document has one (a Context without one grows without limit).
  strata::Status Init(const std::string& config_json) {
    json doc = json::parse(config_json, nullptr, false);
    if (!doc.is_object()) return strata::InvalidArgumentError("Context config: expected an object");
    static const std::set<std::string> kKeys = {
        "identity", "tokenizer", "chat_template", "budget", "policy", "hygiene", "render",
        "keep_originals", "message_overhead_tokens"};
    for (auto it = doc.begin(); it != doc.end(); ++it) {
      if (kKeys.count(it.key()) == 0) {
        return strata::InvalidArgumentError(
            "Context config: unknown key \"" + it.key() +
            "\" (a Context takes identity, tokenizer, chat_template, budget, policy, hygiene, "
            "render, keep_originals, message_overhead_tokens; endpoints and stores are the "
            "Agent's)");
      }
    }
    bool has_budget = doc.contains("budget") && !doc["budget"].is_null();
    if (doc.contains("budget") && doc["budget"].is_null()) doc.erase("budget");
    STRATA_ASSIGN_OR_RETURN(strata::AgentConfig config, strata::AgentConfigFromJson(doc.dump()));
    if (config.identity.id.empty()) {
      return strata::InvalidArgumentError("identity.id is required (the agent's id)");
    }
    STRATA_ASSIGN_OR_RETURN(tokenizer_, strata::MakeTokenizer(config.tokenizer));
    if (!config.chat_template.empty()) {
      STRATA_ASSIGN_OR_RETURN(template_, strata::MakeChatTemplate(config.chat_template));
      counter_ = strata::MakeRequestTokenCounter(*template_, *tokenizer_);
    }
    summarizer_ = strata::MakeExtractiveSummarizer();
    const strata::AgentPolicyConfig& p = config.policy;
    if (p.name == "strata") {
      strata::StrataPolicyOptions o;
      o.keep_turns = p.keep_turns;
      o.keep_tool_results = p.keep_tool_results;
      o.keep_first_user = p.keep_first_user;
      o.exclude_tools = std::set<std::string>(p.exclude_tools.begin(), p.exclude_tools.end());
      o.ephemeral_tools = std::set<std::string>(p.ephemeral_tools.begin(), p.ephemeral_tools.end());
      o.max_summary_tokens = p.max_summary_tokens;
      o.summarizer = summarizer_.get();
      policy_ = strata::MakeStrataPolicy(o);
    } else if (p.name == "last-n") {
      policy_ = strata::MakeLastNPolicy(p.last_n);
    } else {
      STRATA_ASSIGN_OR_RETURN(policy_, strata::MakePolicyByName(p.name));
    }
    strata::ContextOptions options;
    options.agent = config.identity;
    options.render = config.render;
    options.hygiene = config.hygiene;
    options.tokenizer = tokenizer_.get();
    options.keep_originals = config.keep_originals;
    options.compaction = policy_.get();
    options.request_counter = counter_.get();
    options.message_overhead_tokens = config.message_overhead_tokens;
    if (has_budget && config.budget.enforce) {
      STRATA_ASSIGN_OR_RETURN(options.budget, strata::ResolveBudget(config.budget));
    }
    STRATA_ASSIGN_OR_RETURN(context_, strata::Context::Create(std::move(options)));
    json normalized = json::parse(strata::AgentConfigToJson(config));
    json out = json::object();
    for (const std::string& key : kKeys) {
      if (key == "budget" && !has_budget) continue;
      if (normalized.contains(key)) out[key] = normalized[key];
    }
    config_json_ = out.dump();
    return strata::Status();
  }

  std::unique_ptr<strata::Tokenizer> tokenizer_;
  std::unique_ptr<strata::ChatTemplate> template_;
  std::unique_ptr<strata::RequestTokenCounter> counter_;
  std::unique_ptr<strata::Summarizer> summarizer_;
  std::unique_ptr<strata::CompactionPolicy> policy_;
  std::string config_json_;
  std::mutex mu_;
  std::unique_ptr<strata::Context> context_;  // guarded by mu_
};

// ---- Transports -----------------------------------------------------------------------------

void ReadTimeoutsAndRetry(Options* o, strata::Timeouts* t, strata::RetryPolicy* r) {
  o->GetMs("connect_timeout_ms", &t->connect);
  o->GetMs("first_byte_timeout_ms", &t->first_byte);
  o->GetMs("idle_timeout_ms", &t->idle);
  o->GetMs("total_timeout_ms", &t->total);
  o->Get("max_attempts", &r->max_attempts);
  o->GetMs("initial_backoff_ms", &r->initial_backoff);
}

const std::set<std::string> kTimeoutKeys = {"connect_timeout_ms", "first_byte_timeout_ms",
                                            "idle_timeout_ms",    "total_timeout_ms",
                                            "max_attempts",       "initial_backoff_ms"};

class PyTransport {
 public:
  explicit PyTransport(std::unique_ptr<strata::Transport> t) : transport_(std::move(t)) {}

  static std::shared_ptr<PyTransport> Http(const std::string& options_json) {
    Options o("HttpTransport", options_json);
    std::set<std::string> known = kTimeoutKeys;
    known.insert({"base_url", "api_key", "allow_insecure", "headers", "max_response_bytes"});
    o.Known(known);
    strata::HttpTransportOptions http;
    o.Get("base_url", &http.base_url);
    o.Get("api_key", &http.api_key);
    o.Get("allow_insecure", &http.allow_insecure);
    o.Get("headers", &http.headers);
    o.Get("max_response_bytes", &http.max_response_bytes);
    ReadTimeoutsAndRetry(&o, &http.timeouts, &http.retry);
    Check(o.status());
    return std::make_shared<PyTransport>(
        Take(Unlocked([&] { return strata::MakeHttpTransport(std::move(http)); })));
  }

  static std::shared_ptr<PyTransport> Grpc(const std::string& options_json) {
    Options o("GrpcTransport", options_json);
    std::set<std::string> known = kTimeoutKeys;
    known.insert({"target", "use_tls", "tls_root_certs_pem", "tls_client_cert_pem",
                  "tls_client_key_pem", "tls_server_name", "bearer_token",
                  "allow_token_without_tls", "metadata"});
    o.Known(known);
    strata::GrpcTransportOptions grpc;
    o.Get("target", &grpc.target);
    o.Get("use_tls", &grpc.use_tls);
    o.Get("tls_root_certs_pem", &grpc.tls_root_certs_pem);
    o.Get("tls_client_cert_pem", &grpc.tls_client_cert_pem);
    o.Get("tls_client_key_pem", &grpc.tls_client_key_pem);
    o.Get("tls_server_name", &grpc.tls_server_name);
    o.Get("bearer_token", &grpc.bearer_token);
    o.Get("allow_token_without_tls", &grpc.allow_token_without_tls);
    o.Get("metadata", &grpc.metadata);
    ReadTimeoutsAndRetry(&o, &grpc.timeouts, &grpc.retry);
    Check(o.status());
    return std::make_shared<PyTransport>(
        Take(Unlocked([&] { return strata::MakeGrpcTransport(std::move(grpc)); })));
  }

  std::string Name() const { return transport_->Name(); }
  std::string Endpoint() const { return transport_->Endpoint(); }

  std::string Send(const std::string& body, int64_t deadline_ms, std::string request_id,
                   std::vector<std::pair<std::string, std::string>> headers, py::object on_delta,
                   strata::CancellationToken* cancel) {
    CallState state;
    if (cancel != nullptr) state.token = cancel;
    strata::CallOptions options;
    options.deadline = std::chrono::milliseconds(deadline_ms);
    options.cancel = state.token;
    options.request_id = std::move(request_id);
    options.headers = std::move(headers);
    options.on_delta = MakeDeltaCallback(std::move(on_delta));
    strata::StatusOr<std::string> out = BlockingCall(state, [&]() -> strata::StatusOr<std::string> {
      strata::Response response;
      strata::Status status = transport_->Send(body, options, &response);
      options.on_delta = nullptr;
      if (!status.ok()) return status;
      return ResponseJson(response).dump();
    });
    return Take(std::move(out));
  }

  void HealthCheck(int64_t timeout_ms) {
    Check(Unlocked([&] { return transport_->HealthCheck(std::chrono::milliseconds(timeout_ms)); }));
  }
  void Abort(const std::string& request_id) {
    Check(Unlocked([&] { return transport_->Abort(request_id); }));
  }
  strata::Transport* get() { return transport_.get(); }

 private:
  std::unique_ptr<strata::Transport> transport_;
};

// ---- Client ---------------------------------------------------------------------------------

// Keeps every record and prefix-break event the client writes, as JSON, for Client.records(),
// and the last record written on each thread: Client::Complete writes a request's record, a failed
// one's included, on the thread that called it, so that thread reads its failed record back here.
class CollectingSink : public strata::RecordSink {
 public:
  strata::Status Write(const strata::RequestRecord& record) override {
    std::string record_json = strata::RecordToJson(record);
    LastOnThisThread() = record_json;
    std::lock_guard<std::mutex> lock(mu_);
    records_.push_back(json::parse(record_json));
    return strata::Status();
  }
  // The JSON of the last record any CollectingSink wrote on the calling thread ("" if none).
  static std::string& LastOnThisThread() {
    thread_local std::string last;
    return last;
  }
  strata::Status WriteEvent(const strata::PrefixBreakEvent& event) override {
    std::lock_guard<std::mutex> lock(mu_);
    events_.push_back(json::parse(strata::PrefixBreakToJson(event)));
    return strata::Status();
  }
  std::string Records() {
    std::lock_guard<std::mutex> lock(mu_);
    return records_.dump();
  }
  std::string Events() {
    std::lock_guard<std::mutex> lock(mu_);
    return events_.dump();
  }

 private:
  std::mutex mu_;
  json records_ = json::array();  // guarded by mu_
  json events_ = json::array();   // guarded by mu_
};

class PyClient {
 public:
  static std::unique_ptr<PyClient> Create(std::shared_ptr<PyTransport> transport,
                                          const std::string& options_json) {
    if (!transport) Check(strata::InvalidArgumentError("Client needs a transport"));
    Options o("Client", options_json);
    o.Known({"backend", "stream", "max_output_tokens", "thinking", "reasoning_effort",
             "deployment_secret", "send_cache_salt", "per_agent_salt_agents", "tokenizer",
             "chat_template", "block_tokens", "bytes_per_token", "pool", "deadline_ms"});
    auto out = std::unique_ptr<PyClient>(new PyClient());
    out->transport_ = std::move(transport);
    strata::ClientOptions options;
    std::string backend = "vllm", tokenizer = "estimate", chat_template = "glm5";
    int64_t deadline_ms = 0;
    o.Get("backend", &backend);
    o.Get("stream", &options.stream);
    o.Get("max_output_tokens", &options.max_output_tokens);
    if (o.Has("thinking")) {
      bool thinking = false;
      o.Get("thinking", &thinking);
      options.thinking = thinking;
    }
    o.Get("reasoning_effort", &options.reasoning_effort);
    o.Get("deployment_secret", &options.deployment_secret);
    o.Get("send_cache_salt", &options.send_cache_salt);
    o.Get("per_agent_salt_agents", &options.per_agent_salt_agents);
    o.Get("tokenizer", &tokenizer);
    o.Get("chat_template", &chat_template);
    o.Get("block_tokens", &options.cache.block_tokens);
    o.Get("bytes_per_token", &options.cache.bytes_per_token);
    o.Get("pool", &options.pool);
    o.Get("deadline_ms", &deadline_ms);
    Check(o.status());
    options.deadline = std::chrono::milliseconds(deadline_ms);
    Check(Unlocked([&]() -> strata::Status {
      STRATA_ASSIGN_OR_RETURN(options.backend, strata::ParseBackend(backend));
      STRATA_ASSIGN_OR_RETURN(out->tokenizer_, strata::MakeTokenizer(tokenizer));
      if (!chat_template.empty()) {
        STRATA_ASSIGN_OR_RETURN(out->template_, strata::MakeChatTemplate(chat_template));
      }
      options.transport = out->transport_->get();
      options.tokenizer = out->tokenizer_.get();
      options.chat_template = out->template_.get();
      options.record_sink = &out->sink_;
      STRATA_ASSIGN_OR_RETURN(out->client_, strata::Client::Create(std::move(options)));
      return strata::Status();
    }));
    return out;
  }

  // The Completion as JSON. On failure raises the status's exception with `record_json` (the
  // record of the failed request) set on it.
  py::tuple Complete(PyContext& context, strata::CancellationToken* cancel,
                     std::vector<std::pair<std::string, std::string>> headers,
                     std::string request_id, bool append_reply) {
    CallState state;
    if (cancel != nullptr) state.token = cancel;
    strata::CompleteOptions options;
    options.cancel = state.token;
    options.headers = std::move(headers);
    options.request_id = std::move(request_id);
    options.append_reply = append_reply;
    std::string failed_record_json;
    std::string body;  // sent apart from the JSON (see PyBody)
    strata::StatusOr<std::string> out = BlockingCall(state, [&]() -> strata::StatusOr<std::string> {
      return context.WithContext([&](strata::Context& c) -> strata::StatusOr<std::string> {
        CollectingSink::LastOnThisThread().clear();
        strata::StatusOr<strata::Completion> completed = client_->Complete(c, options);
        if (!completed.ok()) {
          failed_record_json = CollectingSink::LastOnThisThread();  // written by this call
          return completed.status();
        }
        strata::Completion& done = *completed;
        json out_json = {
            {"response", ResponseJson(done.response)},
            {"record", json::parse(strata::RecordToJson(done.record))},
            {"assistant_segment_id", done.assistant_segment_id},
            {"prefix_break", done.prefix_break
                                 ? json::parse(strata::PrefixBreakToJson(*done.prefix_break))
                                 : json()}};
        body = std::move(done.body);
        return out_json.dump();
      });
    });
    if (!out.ok()) {
      py::object errors = py::module_::import("strata._errors");
      py::object exc = errors.attr("from_status")(static_cast<int>(out.status().code()),
                                                  out.status().message());
      if (!failed_record_json.empty()) exc.attr("record_json") = failed_record_json;
      PyErr_SetObject(reinterpret_cast<PyObject*>(Py_TYPE(exc.ptr())), exc.ptr());
      throw py::error_already_set();
    }
    return py::make_tuple(py::str(*out), BodyObject(std::move(body)));
  }

  std::string PreviewRequest(PyContext& context, const std::string& request_id) {
    strata::StatusOr<std::string> out = Unlocked([&] {
      return context.WithContext([&](strata::Context& c) -> strata::StatusOr<std::string> {
        STRATA_ASSIGN_OR_RETURN(strata::BuiltRequest built, client_->PreviewRequest(c, request_id));
        return BuiltJson(built).dump();
      });
    });
    return Take(std::move(out));
  }

  std::string CacheSaltFor(PyContext& context) {
    return Unlocked([&] {
      return context.WithContext(
          [&](strata::Context& c) { return client_->CacheSaltFor(c.options().agent); });
    });
  }

  std::string Records() { return sink_.Records(); }
  std::string Events() { return sink_.Events(); }
  std::shared_ptr<PyTransport> transport() const { return transport_; }

 private:
  PyClient() = default;
  std::shared_ptr<PyTransport> transport_;  // the client sends through it: kept alive
  std::unique_ptr<strata::Tokenizer> tokenizer_;
  std::unique_ptr<strata::ChatTemplate> template_;
  CollectingSink sink_;
  std::unique_ptr<strata::Client> client_;  // declared last: destroyed first
};

}  // namespace

void DefineLowLevel(py::module_& m) {
  py::class_<PyContext>(m, "Context")
      .def_static("create", &PyContext::Create, py::arg("config_json"))
      .def_property_readonly("id", &PyContext::Id)
      .def("config_json", &PyContext::ConfigJson)
      .def("set_system_prompts", &PyContext::SetSystemPrompts, py::arg("prompts"))
      .def("set_tools", &PyContext::SetTools, py::arg("tools_json"))
      .def("put_document", &PyContext::PutDocument, py::arg("layer"), py::arg("name"),
           py::arg("content"), py::arg("version"), py::arg("order"))
      .def("remove_document", &PyContext::RemoveDocument, py::arg("layer"), py::arg("name"))
      .def("append_user", &PyContext::AppendUser, py::arg("content"))
      .def("append_assistant", &PyContext::AppendAssistant, py::arg("content"),
           py::arg("reasoning"), py::arg("tool_calls_json"))
      .def("append_tool_result", &PyContext::AppendToolResult, py::arg("tool_call_id"),
           py::arg("content"), py::arg("is_error"))
      .def("set_pinned", &PyContext::SetPinned, py::arg("segment_id"), py::arg("pinned"))
      .def("open_tool_calls", &PyContext::OpenToolCalls)
      .def("set_volatile", &PyContext::SetVolatile, py::arg("key"), py::arg("value"))
      .def("remove_volatile", &PyContext::RemoveVolatile, py::arg("key"))
      .def("clear_volatile", &PyContext::ClearVolatile)
      .def("build", &PyContext::Build, py::arg("extra_fields"))
      .def("preview", &PyContext::Preview, py::arg("extra_fields"))
      .def("preview_build", &PyContext::PreviewBuild, py::arg("extra_fields"))
      .def("input_tokens", &PyContext::InputTokens)
      .def("compact", &PyContext::Compact, py::arg("force"))
      .def("compactions", &PyContext::Compactions)
      .def("recall", &PyContext::Recall, py::arg("recall_id"))
      .def("segments", &PyContext::Segments)
      .def("stats", &PyContext::Stats);

  py::class_<PyTransport, std::shared_ptr<PyTransport>>(m, "Transport")
      .def_static("http", &PyTransport::Http, py::arg("options_json"))
      .def_static("grpc", &PyTransport::Grpc, py::arg("options_json"))
      .def_property_readonly("name", &PyTransport::Name)
      .def_property_readonly("endpoint", &PyTransport::Endpoint)
      .def("send", &PyTransport::Send, py::arg("body"), py::arg("deadline_ms"),
           py::arg("request_id"), py::arg("headers"), py::arg("on_delta"), py::arg("cancel"))
      .def("health_check", &PyTransport::HealthCheck, py::arg("timeout_ms"))
      .def("abort", &PyTransport::Abort, py::arg("request_id"));

  py::class_<PyClient>(m, "Client")
      .def_static("create", &PyClient::Create, py::arg("transport"), py::arg("options_json"))
      .def_property_readonly("transport", &PyClient::transport)
      .def("complete", &PyClient::Complete, py::arg("context"), py::arg("cancel"),
           py::arg("headers"), py::arg("request_id"), py::arg("append_reply"))
      .def("preview_request", &PyClient::PreviewRequest, py::arg("context"),
           py::arg("request_id"))
      .def("cache_salt_for", &PyClient::CacheSaltFor, py::arg("context"))
      .def("records", &PyClient::Records)
      .def("events", &PyClient::Events);
}

}  // namespace strata_py
