// strata/client.h — one call does it all: build, predict, send, append, record.
//
// Client::Complete(context) builds the context's request with the fields the backend expects
// (backend profile, cache_salt from the isolation key, request id), predicts the cached tokens with
// a prefix-cache model (strata/prefix_cache.h), sends it through a Transport, appends the assistant
// reply to the context (nothing is appended on failure) and writes one RequestRecord to the
// record sink (a write the sink refuses is a warning of the Completion, never a failed call). When the server reports fewer cached tokens than predicted by more than one block,
// or the request's reusable prefix is shorter than the previous request's, a PrefixBreakEvent names
// the first segment that differs.
//
//   strata::HttpTransportOptions http;                 // strata/http_transport.h
//   http.base_url = "http://127.0.0.1:8000/v1";
//   auto transport = strata::MakeHttpTransport(http).value();
//   strata::JsonLinesRecordSink sink(std::cout);
//   strata::ClientOptions options;
//   options.transport = transport.get();
//   options.backend = strata::Backend::kVllm;
//   options.deployment_secret = secret;
//   options.record_sink = &sink;
//   auto client = strata::Client::Create(options).value();
//   STRATA_ASSIGN_OR_RETURN(strata::Completion done, client->Complete(*context));
//   // done.response.content; context now ends with the assistant message.
//
// Thread safety: a Client is thread-safe; Complete() may run concurrently for distinct contexts
// (a Context itself is used by one thread at a time). Sinks must be thread-safe.
#ifndef STRATA_CLIENT_H_
#define STRATA_CLIENT_H_

#include <cstdint>
#include <functional>
#include <iosfwd>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "strata/clock.h"
#include "strata/context.h"
#include "strata/prefix_cache.h"
#include "strata/record.h"
#include "strata/status.h"
#include "strata/tokenizer.h"
#include "strata/transport.h"

namespace strata {

// Which server the requests go to; selects the request fields (docs/endpoints.md).
enum class Backend : int {
  kOpenAI = 0,  // generic OpenAI-compatible: max_completion_tokens, stream_options
  kVllm = 1,    // + cache_salt, request_id, chat_template_kwargs {enable_thinking, clear_thinking},
                //   priority (only when set: vLLM refuses it without --scheduling-policy priority)
  kSglang = 2,  // + cache_salt, rid, chat_template_kwargs {enable_thinking, clear_thinking}
  kZai = 3,     // max_tokens, thinking {type, clear_thinking:false}, request_id; no cache_salt,
                //   no stream_options
};
// "openai", "vllm", "sglang", "zai".
std::string_view BackendName(Backend backend);
// Inverse of BackendName; INVALID_ARGUMENT lists the known names.
StatusOr<Backend> ParseBackend(std::string_view name);

// Per-request values the profile renders.
struct RequestFields {
  bool stream = true;  // ask for a streamed (SSE) answer
  int64_t max_output_tokens = 0;  // 0: not sent
  std::string cache_salt;         // "": not sent
  std::string request_id;         // "": not sent
  std::optional<bool> thinking;   // unset: the server's default
  // The requests replay past reasoning (RenderOptions::reasoning_field set): vLLM and SGLang get
  // chat_template_kwargs.clear_thinking=false, so that a GLM template keeps it in the prompt instead
  // of clearing it at each user turn (which rewrites the middle of the prompt and loses the cache).
  bool keep_reasoning = false;
  std::string reasoning_effort;   // "": not sent. Keep it fixed per agent (GLM puts it first).
  std::optional<int> priority;    // vLLM only
};

// The top-level fields `backend` expects, in a fixed order, as BuildOptions::extra_fields
// (name, JSON value text). Passing them to Context::Build() makes the sent body byte-identical to
// the built one.
std::vector<std::pair<std::string, std::string>> ProfileFields(Backend backend,
                                                               const RequestFields& fields);

// PrefixBreakEvent, RecordSink, JsonLinesRecordSink and their JSON are strata::core's
// (strata/record.h, included above).

// A record as one JSON object (no trailing newline): RequestRecordJson(), under its former name.
inline std::string RecordToJson(const RequestRecord& record) { return RequestRecordJson(record); }
// An event as one JSON object: PrefixBreakEventJson(), under its former name.
inline std::string PrefixBreakToJson(const PrefixBreakEvent& event) {
  return PrefixBreakEventJson(event);
}

// What a Client is created with (Client::Create).
struct ClientOptions {
  // Not owned; required (the default, nullptr, is refused); must outlive the client.
  Transport* transport = nullptr;
  Backend backend = Backend::kVllm;  // the server's request dialect. Default kVllm
  // Default true: SSE streaming with stream_options.include_usage.
  bool stream = true;
  // Output token cap sent with each request (max_completion_tokens / max_tokens). Default 4096.
  int64_t max_output_tokens = 4096;
  std::optional<bool> thinking;  // the backend's thinking switch; unset: not sent
  std::string reasoning_effort;  // sent when non-empty. Default ""
  // Per-deployment secret for cache_salt (strata/isolation.h). Default "": salts are still
  // distinct per isolation key but guessable.
  std::string deployment_secret;
  // Send cache_salt (ignored for kZai). Default true.
  bool send_cache_salt = true;
  // Agents whose id is listed here get a per-agent salt (sensitive agents).
  std::vector<std::string> per_agent_salt_agents;
  // The prefix-cache model used for predictions; options.block_tokens should equal the server's
  // block size. Counting uses `tokenizer` (not owned; nullptr: byte blocks).
  PrefixCacheOptions cache;
  const Tokenizer* tokenizer = nullptr;  // counts for `cache`. Default nullptr: byte blocks
  // The server's chat template (the interface of strata/tokenizer.h; strata/chat_template.h makes
  // them, e.g. MakeChatTemplate("glm-4.7")) for the prompt text the blocks are cut from. Not owned.
  // Default nullptr: the GLM-5.3-Flash template (RenderPromptText()). With an exact tokenizer and
  // the deployed template, predictions follow a real server's blocks.
  const ChatTemplate* chat_template = nullptr;
  // Receives a record per request and the prefix-break events. Not owned. Default nullptr: none.
  RecordSink* record_sink = nullptr;
  // Called with each prefix-break event (also sent to the sink). May be empty.
  std::function<void(const PrefixBreakEvent&)> on_prefix_break;
  // KV-cache estimate of a request: per-token bytes and a per-sequence constant. Defaults are
  // GLM-5.3-Flash's: 7,600 B/token and 136 MiB of linear-attention state.
  int64_t kv_bytes_per_token = 7600;
  int64_t kv_bytes_per_sequence = 136LL << 20;  // see kv_bytes_per_token. Default 136 MiB
  // Recorded in RequestRecord::pool. Default "".
  std::string pool;
  // Per-call deadline. Default 0: the transport's total timeout.
  std::chrono::milliseconds deadline{0};
  // Records' started_unix_ms and total_ms, and the random tag in generated request ids
  // ("<agent>-<tag>-<n>") (strata/clock.h). Not owned. Default nullptr: SystemClock().
  Clock* clock = nullptr;
};

// Per-call options of Client::Complete.
struct CompleteOptions {
  // Cancels the call when set; not owned. Default nullptr.
  const CancellationToken* cancel = nullptr;
  // Extra headers for this call (e.g. tracing, or strata-sim's X-Strata-Sim-Fault in tests).
  std::vector<std::pair<std::string, std::string>> headers;
  // Overrides the generated request id when non-empty.
  std::string request_id;
  // Append the reply to the context. Default true. False lets a caller append something else
  // (e.g. `strata replay --send` appends the trajectory's own message to keep replaying it).
  bool append_reply = true;
};

// The outcome of Client::Complete.
struct Completion {
  Response response;  // the server's answer
  RequestRecord record;  // the request's record, as given to the record sink
  std::string assistant_segment_id;  // the appended assistant message
  std::optional<PrefixBreakEvent> prefix_break;  // set when the request reused less of the prefix cache than expected
  std::string body;  // the request body that was sent
  // BuiltRequest::render_serial of `body`: hand the body back unchanged with
  // Context::Recycle(body, render_serial) and the next render writes only what changed.
  uint64_t render_serial = 0;
  // What went wrong without failing the call: each write the record sink refused (the record,
  // the prefix-break event), one line each. Also counted by Client::record_write_failures().
  std::vector<std::string> warnings;
};

// Builds, predicts, sends, appends and records requests of contexts (see the file comment).
class Client {
 public:
  // INVALID_ARGUMENT when the transport is missing or the cache options are invalid.
  static StatusOr<std::unique_ptr<Client>> Create(ClientOptions options);
  ~Client();
  Client(const Client&) = delete;
  Client& operator=(const Client&) = delete;

  // Builds (Context::Build(), which may compact the history first when the context
  // has a budget and a policy), predicts, sends, appends and records. Every request's record,
  // a failed one's included, is written to ClientOptions::record_sink before Complete() returns,
  // on the calling thread; on success Completion::record is the same record. On failure no
  // assistant message is appended (a compaction done by Build() stays: it was due anyway), the
  // sink gets the record with its code and error, and the Status says what failed (see
  // strata/transport.h for transport codes; FAILED_PRECONDITION from Build, or when the reply
  // cannot be appended).
  StatusOr<Completion> Complete(Context& context, const CompleteOptions& options = {});

  // The request body Complete() would send now (same fields, a fresh request id), rendered by
  // Context::Preview(): the context is never changed, and RESOURCE_EXHAUSTED where Complete()
  // would compact first to fit the budget.
  StatusOr<BuiltRequest> PreviewRequest(const Context& context,
                                        const std::string& request_id) const;

  // The cache_salt used for `agent`.
  std::string CacheSaltFor(const AgentIdentity& agent) const;

  // The shared prefix-cache model (predictions of every agent of this client).
  PrefixCacheModel& cache_model();

  // How many writes the record sink refused since the client was created (records and events;
  // each is also a warning of its Completion). An exporter's counter.
  int64_t record_write_failures() const;

 private:
  class Impl;
  explicit Client(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace strata

#endif  // STRATA_CLIENT_H_
