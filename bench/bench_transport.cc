// Transport benchmarks against a running strata-sim (bench/transport_vs_curl.sh starts one
// and runs curl against the same server with the same body):
//   BM_ClientComplete       Client::Complete: build + predict + send (SSE) + parse + record, one
//                           context of a real trace (the reply is not appended, so every
//                           iteration sends the same body)
//   BM_HttpSend/threads:N   HttpTransport::Send of that body from N threads sharing one transport
//                           (requests/s at concurrency 1, 16, 64), streaming and not
//   BM_ParseOnly            the SSE parsing of a recorded answer, no network (client CPU floor)
//
//   strata-sim --port 0 &   # prints http=127.0.0.1:PORT
//   build/bench/bench_transport --endpoint=http://127.0.0.1:PORT/v1 --body_out=/tmp/body.json
#include <benchmark/benchmark.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iostream>
#include <memory>
#include <string>

#include "strata/client.h"
#include "strata/context.h"
#include "strata/http_transport.h"
#include "strata/replay/trace.h"
#include "strata/transport.h"
#include "traces_dir.h"
#include "transport/chat_parser.h"

namespace {

std::string g_endpoint;
std::string g_body_out;

// A context of the first `turns` assistant turns of a trace.
std::unique_ptr<strata::Context> TraceContext(int turns) {
  strata::ContextOptions options;
  options.agent.id = "bench";
  auto context = strata::Context::Create(options).value();
  const std::string path = strata::bench::TracesDir() + "/swe-agent/ctf-crypto-BabyEncryption.jsonl";
  auto trace = strata::ReadTrace(path);
  if (!trace.ok()) {
    std::fprintf(stderr, "bench_transport: %s\n", trace.status().ToString().c_str());
    std::exit(1);
  }
  int seen = 0;
  strata::ReplayTrace(*trace, *context, [&](const strata::TraceMessage&, const strata::BuiltRequest&) {
    return ++seen > turns ? strata::CancelledError("enough") : strata::Status::Ok();
  }).IgnoreError();
  return context;
}

struct Shared {
  std::unique_ptr<strata::Transport> transport;
  std::unique_ptr<strata::Context> context;
  std::unique_ptr<strata::Client> client;
  std::string stream_body, plain_body;
};

Shared& Get() {
  static Shared* shared = [] {
    auto* s = new Shared;
    strata::HttpTransportOptions options;
    options.base_url = g_endpoint;
    s->transport = strata::MakeHttpTransport(options).value();
    s->context = TraceContext(6);
    strata::ClientOptions copt;
    copt.transport = s->transport.get();
    copt.backend = strata::Backend::kSglang;
    s->client = strata::Client::Create(copt).value();
    s->stream_body = s->client->PreviewRequest(*s->context, "bench-request").value().body;
    copt.stream = false;
    auto plain = strata::Client::Create(copt).value();
    s->plain_body = plain->PreviewRequest(*s->context, "bench-request").value().body;
    if (!g_body_out.empty()) {
      std::ofstream(g_body_out, std::ios::binary) << s->stream_body;
      std::ofstream(g_body_out + ".plain", std::ios::binary) << s->plain_body;
    }
    return s;
  }();
  return *shared;
}

void BM_ClientComplete(benchmark::State& state) {
  Shared& s = Get();
  strata::CompleteOptions options;
  options.append_reply = false;
  for (auto _ : state) {
    auto done = s.client->Complete(*s.context, options);
    if (!done.ok()) {
      state.SkipWithError(done.status().ToString().c_str());
      break;
    }
    benchmark::DoNotOptimize(done->response.content.data());
  }
  state.counters["body_bytes"] = static_cast<double>(s.stream_body.size());
  state.SetItemsProcessed(state.iterations());
}

void BM_HttpSend(benchmark::State& state) {
  Shared& s = Get();
  const std::string& body = state.range(0) ? s.stream_body : s.plain_body;
  for (auto _ : state) {
    strata::Response response;
    strata::Status status = s.transport->Send(body, {}, &response);
    if (!status.ok()) {
      state.SkipWithError(status.ToString().c_str());
      break;
    }
    benchmark::DoNotOptimize(response.content.data());
  }
  state.SetItemsProcessed(state.iterations());
  state.SetLabel(state.range(0) ? "sse" : "json");
}

void BM_ParseOnly(benchmark::State& state) {
  std::string sse;
  for (int i = 0; i < 8; ++i) {
    sse += R"(data: {"id":"c","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"content":"lorem ips"},"finish_reason":null}]})";
    sse += "\n\n";
  }
  sse += R"(data: {"choices":[],"usage":{"prompt_tokens":9000,"completion_tokens":16,"total_tokens":9016,"prompt_tokens_details":{"cached_tokens":8992}}})";
  sse += "\n\ndata: [DONE]\n\n";
  for (auto _ : state) {
    strata::transport_internal::SseParser parser;
    strata::transport_internal::ChatAssembler assembler;
    parser.Feed(sse, [&](std::string_view d) { return d == "[DONE]" ? strata::Status() : assembler.AddJson(d); })
        .IgnoreError();
    strata::Response r;
    assembler.Finish(&r);
    benchmark::DoNotOptimize(r.content.data());
  }
  state.SetItemsProcessed(state.iterations());
}

}  // namespace

BENCHMARK(BM_ParseOnly);
BENCHMARK(BM_ClientComplete)->UseRealTime();
BENCHMARK(BM_HttpSend)->Arg(1)->Arg(0)->UseRealTime()->Threads(1)->Threads(16)->Threads(64);

int main(int argc, char** argv) {
  // Our own flags first; the rest goes to Google Benchmark.
  int kept = 1;
  for (int i = 1; i < argc; ++i) {
    if (std::strncmp(argv[i], "--endpoint=", 11) == 0) {
      g_endpoint = argv[i] + 11;
    } else if (std::strncmp(argv[i], "--body_out=", 11) == 0) {
      g_body_out = argv[i] + 11;
    } else {
      argv[kept++] = argv[i];
    }
  }
  argc = kept;
  if (g_endpoint.empty()) {
    if (const char* e = std::getenv("STRATA_BENCH_ENDPOINT")) g_endpoint = e;
  }
  if (g_endpoint.empty()) {
    std::cerr << "bench_transport: give --endpoint=http://127.0.0.1:PORT/v1 of a running strata-sim "
                 "(see bench/transport_vs_curl.sh)\n";
    return 2;
  }
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
