// strata-sidecar's streamed answers and their error path: Proxy::ChatCompletions for a client body
// made a streamed request ("stream": true), whose turn then meets an upstream error, or succeeds.
// The events are written as the HTTP listener would write them, into a string. An error before the
// first byte is answered whole with its HTTP status; with the upstream part's top bit set, the
// upstream sends one delta first, so the error comes after the first byte, as an event.
//
// Input: <client body> [SEPARATOR <upstream>] (SEPARATOR is kSeparator). Without an upstream part
// the turn is answered "ok". Otherwise the upstream part's first byte says how its error arrives
// (the rest of the part is the upstream's text, any bytes):
//   0: a Status with the raw text as its message (what any transport might hand the agent);
//   1: the HTTP transport's error for an HTTP error status (400 + the byte / 4 % 200) with the text
//      as its body (StatusFromHttp), cleaned as the transport cleans it (UpstreamStatus);
//   2: the same for the text as a streamed or whole answer that does not parse (ChatAssembler);
//   3: as 0, with the upstream key quoted around the text.
// Invariants:
//  - nothing throws (an exception inside the HTTP library's content provider aborts the sidecar:
//    the crash this harness was written for, a JSON dump of a message cut inside a character);
//  - whatever is written, streamed or whole, is valid UTF-8 and never holds the upstream key;
//  - a stream is a sequence of "data: <payload>\n\n" events, each payload a JSON object or
//    [DONE]; a failed turn's stream ends with exactly one error event ({"error": {"message": a
//    non-empty string, "type", "code"}}) and no [DONE]; a successful one ends with [DONE];
//  - an answer that is not streamed (the body or the agent refused before the turn) is an OpenAI
//    error body that parses, with a non-empty message.
#include <stdlib.h>
#include <unistd.h>

#include <cstdio>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/utf8.h"
#include "fuzz_util.h"
#include "proxy.h"
#include "registry.h"
#include "strata/transport.h"
#include "transport/chat_parser.h"
#include "transport/redact.h"

namespace {

using json = nlohmann::json;

constexpr std::string_view kSeparator = "\n#upstream#\n";
constexpr char kKey[] = "sk-fuzz-upstream-key-7f3a";

// A transport that answers every request with the one answer the current input set.
class OneAnswerTransport : public strata::Transport {
 public:
  // `delta_first`: a failing answer streams one delta before its error.
  void Set(strata::Status status, std::string content, bool delta_first = false) {
    status_ = std::move(status);
    content_ = std::move(content);
    delta_first_ = delta_first;
  }
  std::string Name() const override { return "fuzz"; }
  std::string Endpoint() const override { return "fuzz://"; }
  strata::Status Send(std::string_view, const strata::CallOptions& call,
                      strata::Response* response) override {
    *response = strata::Response();
    response->attempts = 1;
    if (!status_.ok() && delta_first_ && call.on_delta) {
      strata::StreamDelta delta;
      delta.text = "partial";
      call.on_delta(delta);
    }
    if (!status_.ok()) return status_;
    response->content = content_;
    response->finish_reason = "stop";
    response->http_status = 200;
    return strata::Status();
  }
  strata::Status HealthCheck(std::chrono::milliseconds) override { return strata::Status(); }
  strata::Status Abort(const std::string&) override { return strata::Status(); }

 private:
  strata::Status status_;
  std::string content_;
  bool delta_first_ = false;
};

// One registry and proxy per process, over a store in a temporary directory.
struct Harness {
  std::string dir;
  OneAnswerTransport transport;
  std::unique_ptr<strata::sidecar::AgentRegistry> registry;
  std::unique_ptr<strata::sidecar::Proxy> proxy;
  strata::sidecar::TenantConfig tenant;
  int64_t inputs = 0;
};

Harness& TheHarness() {
  static Harness* harness = [] {
    auto* h = new Harness;
    char pattern[] = "/tmp/strata-fuzz-stream-error-XXXXXX";
    if (::mkdtemp(pattern) == nullptr) strata::fuzz::Fail("mkdtemp failed");
    h->dir = pattern;
    std::atexit([] { std::system(("rm -rf '" + TheHarness().dir + "'").c_str()); });
    strata::sidecar::RegistryOptions options;
    options.store_path = h->dir + "/sidecar.db";
    options.store_sync = strata::StoreSync::kNormal;
    options.transport = &h->transport;
    auto registry = strata::sidecar::AgentRegistry::Open(options);
    STRATA_FUZZ_CHECK(registry.ok(), "the registry: " + registry.status().ToString());
    h->registry = std::move(registry).value();
    strata::sidecar::ProxyOptions proxy_options;
    proxy_options.registry = h->registry.get();
    proxy_options.upstream_api_key = kKey;
    h->proxy = std::make_unique<strata::sidecar::Proxy>(proxy_options);
    h->tenant.name = "fuzz";
    return h;
  }();
  return *harness;
}

// The error the turn meets for the upstream part of the input (see the file comment).
strata::Status UpstreamError(std::string_view upstream) {
  const auto mode = static_cast<unsigned char>(upstream[0]);
  const std::string text(upstream.substr(1));
  switch (mode % 4) {
    case 0:
      return strata::UnavailableError(text);
    case 1: {
      const int http = 400 + (mode / 4) % 200;
      return strata::transport_internal::UpstreamStatus(
          strata::transport_internal::StatusFromHttp(http, text), {kKey});
    }
    case 2: {
      strata::transport_internal::ChatAssembler assembler;
      strata::Status parsed = assembler.AddJson(text);
      if (parsed.ok()) parsed = strata::DataLossError("the answer ended without a finish_reason");
      return strata::transport_internal::UpstreamStatus(parsed, {kKey});
    }
    default:
      return strata::UnauthenticatedError("HTTP 401: Incorrect API key provided: Bearer " +
                                          std::string(kKey) + " (" + text + ")");
  }
}

void CheckErrorObject(const json& error, const std::string& where) {
  STRATA_FUZZ_CHECK(error.is_object() && error.contains("error") && error["error"].is_object(),
                    where + " is not an OpenAI error: " + error.dump());
  const json& e = error["error"];
  STRATA_FUZZ_CHECK(e.contains("message") && e["message"].is_string() &&
                        !e["message"].get<std::string>().empty() && e.contains("type") &&
                        e.contains("code"),
                    where + " lacks a message, type or code: " + error.dump());
}

// The events of a streamed answer (see the file comment).
void CheckStream(const std::string& written, bool failed) {
  std::vector<std::string_view> events = strata::fuzz::Split(written, "\n\n");
  STRATA_FUZZ_CHECK(events.size() >= 2 && events.back().empty(),
                    "the stream does not end with an event:\n" + written);
  events.pop_back();
  for (size_t i = 0; i < events.size(); ++i) {
    const std::string where = "event " + std::to_string(i);
    STRATA_FUZZ_CHECK(events[i].substr(0, 6) == "data: ", where + " is not a data line");
    const std::string_view payload = events[i].substr(6);
    const bool last = i + 1 == events.size();
    if (payload == "[DONE]") {
      STRATA_FUZZ_CHECK(last && !failed,
                        where + ": [DONE] " + (failed ? "after a failure" : "early"));
      continue;
    }
    const json event = json::parse(payload, nullptr, false);
    STRATA_FUZZ_CHECK(event.is_object(), where + " is not a JSON object: " + std::string(payload));
    const bool is_error = event.contains("error");
    STRATA_FUZZ_CHECK(is_error == (failed && last),
                      where + (is_error ? " is an error event before "
                                          "the end or after success"
                                        : " is the last event of a "
                                          "failed turn, not its error"));
    if (is_error) CheckErrorObject(event, where);
  }
  STRATA_FUZZ_CHECK(failed || events.back() == "data: [DONE]",
                    "a successful stream without [DONE]");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text = strata::fuzz::AsText(data, size);
  const size_t split = text.find(kSeparator);
  const std::string_view client = text.substr(0, split);
  const std::string_view upstream =
      split == std::string_view::npos ? std::string_view() : text.substr(split + kSeparator.size());

  Harness& h = TheHarness();
  const bool fails = !upstream.empty();
  h.transport.Set(fails ? UpstreamError(upstream) : strata::Status(), "ok",
                  fails && (static_cast<unsigned char>(upstream[0]) & 0x80) != 0);
  // A body that is a JSON object is made a streamed request; anything else is refused as it is.
  std::string body(client);
  json request = json::parse(client, nullptr, false);
  if (request.is_object()) {
    request["stream"] = true;
    body = request.dump();
  }
  const std::string agent_id = "fz-" + std::to_string(h.inputs++);
  strata::sidecar::HttpReply reply = h.proxy->ChatCompletions(h.tenant, agent_id, body);
  std::string written;
  bool stream_failed = false;
  if (reply.stream) {
    reply.stream([&written](std::string_view chunk) {
      written.append(chunk);
      return true;
    });
    // An upstream error fails the turn; so may the agent itself (a history its template refuses).
    stream_failed = fails || written.find("data: {\"error\":") != std::string::npos;
  }
  const std::string& shown = reply.stream ? written : reply.body;
  STRATA_FUZZ_CHECK(strata::internal::IsValidUtf8(shown),
                    "the answer is not valid UTF-8:\n" + shown);
  STRATA_FUZZ_CHECK(shown.find(kKey) == std::string::npos, "the answer holds the key:\n" + shown);
  if (reply.stream) {
    CheckStream(written, stream_failed);
  } else {
    const json error = json::parse(reply.body, nullptr, false);
    CheckErrorObject(error, "the answer (HTTP " + std::to_string(reply.status) + ")");
  }
  reply = strata::sidecar::HttpReply();  // the stream holds the agent's lease until it goes
  h.registry->Delete(h.tenant, agent_id).IgnoreError();
  return 0;
}
