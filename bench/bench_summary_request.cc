// The cost of one summary compaction at 128K and 1M tokens: MakeLlmSummarizer's cache-keeping
// request (the agent's previous request plus one instruction) against its transcript request (an
// instruction and a transcript of the span), side by side in one run, against strata-sim
// in-process with a prefill cost per uncached prompt token. For each size: the previous request
// (a system message and alternating user/assistant messages of that many tokens) is sent once, so
// that the simulator caches it; then the oldest 30% of its messages are summarized both ways.
// Reported per request: prompt tokens, cached tokens (the simulator's report), uncached tokens,
// the simulated prefill time (uncached x --prefill-us-per-token) and the measured wall time of the
// summarizer's call (the simulator sleeps for the prefill).
//
//   build/bench/bench_summary_request [--prefill-us-per-token 1.0] [--span-share 0.3]
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "sim_server.h"
#include "strata/builtin_policies.h"
#include "strata/compaction_policy.h"
#include "strata/tokenizer.h"
#include "strata/http_transport.h"
#include "strata/transport.h"

namespace {

constexpr size_t kMessageTokens = 2000;  // tokens of each user/assistant message
constexpr double kBytesPerToken = 4.0;   // the simulator's and the summarizer's estimator

struct Measured {
  int64_t prompt = 0, cached = 0;
  double wall_ms = 0;
  std::string request;  // SummaryResult::request
};

// Messages of about `tokens` tokens in all, alternating user and assistant, as segments.
std::vector<strata::Segment> History(size_t tokens) {
  std::vector<strata::Segment> history;
  for (size_t i = 0; i * kMessageTokens < tokens; ++i) {
    strata::Segment s;
    s.id = "s" + std::to_string(i);
    s.kind = i % 2 ? strata::SegmentKind::kAssistant : strata::SegmentKind::kUser;
    s.turn = static_cast<int64_t>(i / 2 + 1);
    // Distinct per size, so that one size's requests leave nothing in cache for the next one.
    s.content = "context " + std::to_string(tokens) + ", message " + std::to_string(i) + ":";
    while (s.content.size() < kMessageTokens * kBytesPerToken) {
      s.content += " token" + std::to_string(s.content.size() % 997);
    }
    history.push_back(std::move(s));
  }
  return history;
}

std::string Body(const std::vector<strata::Segment>& history) {
  nlohmann::ordered_json messages = nlohmann::ordered_json::array();
  messages.push_back({{"role", "system"}, {"content", "You are a coding agent."}});
  for (const strata::Segment& s : history) {
    messages.push_back(
        {{"role", s.kind == strata::SegmentKind::kUser ? "user" : "assistant"}, {"content", s.content}});
  }
  nlohmann::ordered_json body = {{"model", "sim-model"},
                                 {"messages", messages},
                                 {"max_tokens", 256},
                                 {"stream", false},
                                 {"cache_salt", "bench"}};
  return body.dump();
}

Measured Summarize(strata::Summarizer& summarizer, strata::sim::SimServer& sim,
                   const std::vector<const strata::Segment*>& span, const strata::Tokenizer& tokenizer,
                   const strata::SummaryRequestContext* previous) {
  const auto start = std::chrono::steady_clock::now();
  auto result = summarizer.SummarizeFor(span, 1024, tokenizer, previous);
  Measured m;
  m.wall_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  if (!result.ok()) {
    std::fprintf(stderr, "summary failed: %s\n", result.status().ToString().c_str());
    std::exit(1);
  }
  m.request = result->request;
  const std::vector<strata::sim::SimRequestLog> log = sim.requests();
  m.prompt = log.back().prompt_tokens;
  m.cached = log.back().cached_tokens;
  return m;
}

void Print(size_t tokens, const char* mode, const Measured& m, double prefill_us) {
  const int64_t uncached = m.prompt - m.cached;
  std::printf("%8zuK  %-14s %10lld %10lld %10lld %12.1f %10.1f  %s\n", tokens / 1024, mode,
              static_cast<long long>(m.prompt), static_cast<long long>(m.cached),
              static_cast<long long>(uncached), uncached * prefill_us / 1000.0, m.wall_ms,
              m.request.c_str());
}

}  // namespace

int main(int argc, char** argv) {
  double prefill_us = 1.0, span_share = 0.3;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!std::strcmp(argv[i], "--prefill-us-per-token")) {
      prefill_us = std::atof(argv[i + 1]);
    } else if (!std::strcmp(argv[i], "--span-share")) {
      span_share = std::atof(argv[i + 1]);
    } else {
      std::fprintf(stderr, "unknown flag %s (--prefill-us-per-token N, --span-share F)\n", argv[i]);
      return 2;
    }
  }
  strata::sim::SimOptions options;
  options.prefill_us_per_token = prefill_us;
  options.cache.bytes_per_token = kBytesPerToken;
  options.max_context_tokens = 2 * 1048576;
  options.max_logged_body_bytes = 1024;
  options.answer = [](const std::string&, int64_t) {
    return std::string("Summary: the user and the agent discussed the oldest messages.");
  };
  auto sim = strata::sim::SimServer::Start(options).value();
  strata::HttpTransportOptions http;
  http.base_url = sim->base_url();
  http.timeouts.total = std::chrono::milliseconds(600000);
  auto transport = strata::MakeHttpTransport(http).value();
  auto summarizer = strata::MakeLlmSummarizer(transport.get());
  auto tokenizer = strata::MakeEstimateTokenizer(kBytesPerToken);

  std::printf("prefill %.2f us per uncached token; span: the oldest %.0f%% of the messages\n",
              prefill_us, span_share * 100);
  std::printf("%9s  %-14s %10s %10s %10s %12s %10s  %s\n", "context", "request", "prompt", "cached",
              "uncached", "prefill ms", "wall ms", "report");
  for (size_t tokens : {size_t{128} * 1024, size_t{1024} * 1024}) {
    const std::vector<strata::Segment> history = History(tokens);
    const std::string body = Body(history);
    strata::Response warm;
    strata::Status sent = transport->Send(body, strata::CallOptions{}, &warm);
    if (!sent.ok()) {
      std::fprintf(stderr, "the previous request failed: %s\n", sent.ToString().c_str());
      return 1;
    }
    std::vector<const strata::Segment*> span;
    for (size_t i = 0; i < static_cast<size_t>(history.size() * span_share); ++i) span.push_back(&history[i]);
    strata::SummaryRequestContext previous;
    previous.body = body;
    previous.endpoint = transport->Endpoint();
    previous.agent_id = "bench";
    previous.request_id = "bench-" + std::to_string(tokens) + "-compaction";
    const Measured keeping = Summarize(*summarizer, *sim, span, *tokenizer, &previous);
    const Measured transcript = Summarize(*summarizer, *sim, span, *tokenizer, nullptr);
    Print(tokens, "cache-keeping", keeping, prefill_us);
    Print(tokens, "transcript", transcript, prefill_us);
    std::printf("%9s  cache-keeping / transcript: uncached tokens and simulated prefill %.4fx, wall %.3fx\n",
                "", double(keeping.prompt - keeping.cached) / double(transcript.prompt - transcript.cached),
                keeping.wall_ms / transcript.wall_ms);
  }
  return 0;
}
