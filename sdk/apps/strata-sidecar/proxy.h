// proxy.h — the OpenAI-compatible side of strata-sidecar: POST /v1/chat/completions and
// GET /v1/models, independent of the HTTP server that carries them (http_server.h).
//
// A chat completion names its agent with the X-Strata-Agent header, or gets one derived from the
// conversation (kDerivedAgentPrefix + a digest of the system messages and the first user message,
// so every request of one conversation lands on the same agent). The agent is created on first use
// with the sidecar's defaults; the request's "model" is the new agent's model. The client's message
// list is reconciled with the agent's history (reconcile.h), its "tools" become the agent's tools,
// and the agent sends its own managed request upstream: compacted within the agent's budget,
// byte-stable across turns, with the backend's fields. The answer goes back in OpenAI's shape:
// a chat.completion object, or with "stream": true the chat.completion.chunk events of an SSE
// stream ending with "data: [DONE]" (a usage chunk first with stream_options.include_usage).
//
// The request's other fields (temperature, top_p, max_tokens / max_completion_tokens, stop, seed,
// tool_choice, response_format, user, vendor fields...) are forwarded upstream unchanged, after
// the messages, replacing the agent's value of the same field (max_tokens and
// max_completion_tokens replace the agent's output cap under either name); "stream" and
// "stream_options" apply between the client and the proxy.
//
// Headers of the answer: X-Strata-Agent (the agent id), X-Request-Id (the upstream request's id,
// non-streamed answers), and what the sidecar did to the request (proxy_notes.h: X-Strata-Reconcile,
// X-Strata-Hygiene, X-Strata-Compaction, X-Strata-Oversized, X-Strata-Ignored-Fields: the fields
// the agent owns, and "model" when it differs from the agent's). A "strata" object in the
// chat.completion (and in the stream's last chunk) says the same, with the request id.
//
// Errors use OpenAI's shape {"error":{"message","type","param","code"}}. Until the first byte of
// an answer is sent, an error gets its own HTTP status, streamed or not (a streamed answer's status
// waits for the upstream's first delta); 429 and 503 carry Retry-After. Only a failure after the
// first byte is sent as one event {"error":{...}} before the stream ends.
//
// Thread safety: a Proxy is thread-safe; requests for distinct agents run concurrently, requests
// for one agent one after the other (the registry's lease).
#ifndef STRATA_APPS_STRATA_SIDECAR_PROXY_H_
#define STRATA_APPS_STRATA_SIDECAR_PROXY_H_

#include <chrono>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "chat_body.h"
#include "http_connection.h"
#include "reconcile.h"
#include "registry.h"
#include "sidecar_config.h"
#include "strata/agent.h"
#include "strata/status.h"

namespace strata::sidecar {

// The most context_recall rounds one proxied completion answers (ProxyOptions::recall_tool).
inline constexpr int kMaxRecallRounds = 4;

// Agents the proxy derives for requests without X-Strata-Agent: this prefix and 16 hex digits.
inline constexpr char kDerivedAgentPrefix[] = "conv-";

// One HTTP answer, independent of the server library.
struct HttpReply {
  int status = 200;
  std::string content_type = "application/json";
  std::string body;
  std::vector<std::pair<std::string, std::string>> headers;
  // A streamed answer: called once, on the connection's thread, after the status and headers
  // went out; writes the body through `write`, which returns false once the client is gone.
  std::function<void(const std::function<bool(std::string_view)>& write)> stream;
};

// The Retry-After (seconds) of every 429 and 503 the sidecar answers: the upstream's own were
// already waited for by the agent's retries.
inline constexpr int kRetryAfterSeconds = 1;

// OpenAI's error body for `status` ({"error":{"message","type","param":null,"code"}}).
std::string OpenAiErrorJson(std::string_view message, std::string_view type, std::string_view code);
// The HTTP status and OpenAI error of a Status; `upstream`: the error came from sending upstream
// (an upstream refusal of the sidecar's key is a 502, not the caller's 401; an upstream's 5xx
// keeps its status, an unreachable upstream is 502). 429 and 503 carry Retry-After.
HttpReply ErrorReply(const Status& status, bool upstream = false);
// The HTTP status an upstream answered with, read from the transport's error text ("HTTP 503:
// ..."); 0 when the error quotes none (e.g. the connection failed).
int UpstreamHttpStatus(const Status& status);

// A Chat Completions request body taken apart as the proxy handles it (ParseChatRequest).
struct ChatRequest {
  ParsedChat chat;    // "messages"
  std::string model;  // "model"; "" when absent or empty (the agent keeps its model)
  // "tools": the array the client sent (an empty array when absent or null), each tool also as
  // the agent keeps it; shared with the memo that keeps a tools array sent again.
  std::shared_ptr<const ChatTools> tools = ChatTools::None();
  bool stream = false;         // "stream": true
  bool include_usage = false;  // stream_options.include_usage, and only when streaming
  // Every other field with its JSON text, in the order of their names (the parsed object sorts
  // them): forwarded upstream unchanged (TurnOptions::extra_fields).
  std::vector<std::pair<std::string, std::string>> forwarded;
  // The fields the agent owns that the body carried (cache_salt, request_id, rid), sorted:
  // dropped, and named in X-Strata-Ignored-Fields.
  std::vector<std::string> ignored;
};

// Checks a POST /v1/chat/completions body and takes it apart, without a server, an agent or a
// store (the first step of Proxy::ChatCompletions). INVALID_ARGUMENT, saying which field is wrong
// and what to send, for: a body nested deeper than 512 levels (its values are re-serialized
// recursively, so a hostile one would overflow the stack), a body that is not a JSON object, no
// "messages", "n" other than 1, a "model" that is not a string, "tools" that is not an array,
// "stream" that is not a boolean, "stream_options" that is not an object with a boolean
// include_usage, a field with an empty name (no upstream request may carry one), and every refusal
// of ParseChatMessages. With `previous` (the base an earlier body of the conversation left), the
// messages in the bytes the two share are taken from it; with `base`, *base receives this body's
// (ParseChatBody).
StatusOr<ChatRequest> ParseChatRequest(std::string_view body,
                                       std::shared_ptr<const ChatBodyBase> previous = nullptr,
                                       std::shared_ptr<const ChatBodyBase>* base = nullptr);

struct ProxyOptions {
  AgentRegistry* registry = nullptr;  // required; not owned
  // Where GET /v1/models goes: the upstream's base URL (e.g. http://127.0.0.1:8000/v1) and the
  // key it needs ("" none). The key is sent upstream only, never logged or returned.
  std::string upstream;
  std::string upstream_api_key;
  // With length pools: their endpoints. GET /v1/models then asks each http(s) one and lists each
  // model id once (`upstream` is not used).
  std::vector<std::string> model_upstreams;
  // A new message above the agent's usable input tokens (oversized): false (default,
  // "summarize") compacts it to fit and says so in X-Strata-Oversized; true ("reject") refuses the
  // request with 413 (code context_length_exceeded) and changes nothing.
  bool reject_oversized = false;
  // Offer the agent's context_recall tool upstream and answer its calls here, as the Agent does:
  // a reply whose tool calls are all context_recall is answered and sent again (up to
  // kMaxRecallRounds times), so the client sees only the answer after. Default false: the client
  // runs its own tools, and reads originals with GET /v1/strata/agents/{id}/recall/{recall_id}.
  bool recall_tool = false;
  // Called after every turn the proxy completed and every error it answered (metrics). May be
  // empty. Called without the agent's lease held for errors, with it held for turns.
  std::function<void(std::string_view tenant, const Turn& turn)> on_turn;
  std::function<void(std::string_view tenant, StatusCode code)> on_error;
  // Called after a completion whose writes the store refused (its Agent's
  // record_write_failures() grew by `count`: a turn refused whole, or a failed turn's record, or a
  // write that failed nothing). May be empty.
  std::function<void(std::string_view tenant, int64_t count)> on_record_write_failures;
  // Called before each completion is sent (the agent's input tokens now, as its context counts
  // them without rendering the request, and its max output tokens); the returned object is
  // released when the completion ends (metrics' in-flight).
  std::function<std::shared_ptr<void>(std::string_view tenant, int64_t input_tokens,
                                      int64_t max_output_tokens)>
      on_complete_begin;
};

class Proxy {
 public:
  explicit Proxy(ProxyOptions options);
  ~Proxy();

  // POST /v1/chat/completions for `tenant` (already authenticated). `agent_header` is the
  // X-Strata-Agent value ("" absent). `watch` (may be empty): the turn is cancelled, like a
  // drain's CancelAll, when the client closes its connection (the HTTP server's ClientWatch).
  HttpReply ChatCompletions(const TenantConfig& tenant, std::string_view agent_header,
                            std::string_view body, const ClientWatch& watch = {});
  // GET /v1/strata/agents/{agent_id}/recall/{recall_id}?offset=&max_tokens= for `tenant`: a page
  // of the original kept under `recall_id` (the id hygiene and compaction markers cite), as
  // {"object":"strata.recall","agent","recall_id","content","offset","total_bytes",
  // "remaining_bytes","tokens"}. `offset` (bytes) and `max_tokens` are the query's values ("":
  // 0, and 0 tokens: the agent's own page size, strata/agent.h Agent::Recall). 400 for a bad id
  // or number, 404 for an unknown agent or recall id.
  HttpReply Recall(const TenantConfig& tenant, std::string_view agent_id,
                   std::string_view recall_id, std::string_view offset,
                   std::string_view max_tokens);
  // GET /v1/models: the upstream's answer, status and body as they came (502 when unreachable),
  // except that the body never holds upstream_api_key (redacted) or invalid UTF-8 (replaced).
  // With model_upstreams: the models of every endpoint that answered, each id once (200), those
  // that failed named in X-Strata-Models-Unavailable; 502 when none answered.
  HttpReply Models();

  // Cancels every completion in flight, and every one that starts from now on, with CANCELLED
  // (their upstream requests are cancelled too): the end of a drain's deadline.
  void CancelAll();
  // Waits until no completion is being answered (a stream until its last event is written) or
  // `deadline` passes; true when none is. A drain waits with it before closing the listener.
  bool WaitIdle(std::chrono::steady_clock::time_point deadline);

  // The agent id a request without X-Strata-Agent gets (kDerivedAgentPrefix + 16 hex digits of
  // SHA-256 over the system messages and the first non-system message).
  static std::string DerivedAgentId(const ParsedChat& chat);

 private:
  // The tokens of the completions in flight (CancelAll cancels them), and the registration of one.
  struct Cancellations;
  class InFlight;
  // A streamed turn on its own thread (its status waits for its first delta).
  class StreamRun;

  ProxyOptions options_;
  std::unique_ptr<Cancellations> cancellations_;
  // The last body of each agent named by X-Strata-Agent: the next one is read from where it
  // differs.
  ChatBodyBases bases_;
};

}  // namespace strata::sidecar

#endif  // STRATA_APPS_STRATA_SIDECAR_PROXY_H_
