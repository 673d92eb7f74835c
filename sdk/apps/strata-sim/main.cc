// strata-sim: a prefix-caching OpenAI Chat Completions / SGLang gRPC endpoint simulator.
//
//   strata-sim --port 0 --grpc-port 0 --block-size 16 --prefill-us 20 --decode-us 2000
// prints "strata-sim http=127.0.0.1:<port> grpc=127.0.0.1:<port>" once it is serving, then runs
// until SIGINT/SIGTERM. See sim_server.h for the fault specs.
#include <CLI/CLI.hpp>

#include <chrono>
#include <condition_variable>
#include <csignal>
#include <iostream>
#include <memory>
#include <mutex>
#include <string>

#include "retrieve_flags.h"
#include "sim_server.h"
#include "strata/chat_template.h"
#include "strata/tokenizer_spec.h"

namespace {
volatile std::sig_atomic_t g_stop = 0;
void OnSignal(int) { g_stop = 1; }

// --hold-until N: each request waits until N requests have arrived (counting from the start), or
// until timeout_ms passed, then is answered with a text that says which; later requests are not
// held. A test of concurrency by behaviour: N clients get "all N requests arrived" only if all N
// were in flight at once.
struct Hold {
  int until = 0;
  int timeout_ms = 60000;
  std::mutex mu;
  std::condition_variable arrived_cv;
  int arrived = 0;  // guarded by mu

  std::string Wait() {
    std::unique_lock<std::mutex> lock(mu);
    ++arrived;
    arrived_cv.notify_all();
    const bool all = arrived_cv.wait_for(lock, std::chrono::milliseconds(timeout_ms),
                                         [this] { return arrived >= until; });
    if (all) return "all " + std::to_string(until) + " requests arrived";
    return "hold timed out with " + std::to_string(arrived) + " of " + std::to_string(until) +
           " requests arrived";
  }
};

// The hold of this process (one simulator per process), its flags added to `app`.
Hold* AddHoldFlags(CLI::App& app) {
  static Hold* const hold = new Hold();
  app.add_option("--hold-until", hold->until,
                 "hold each request until this many have arrived, then answer saying so (0: no hold)");
  app.add_option("--hold-timeout-ms", hold->timeout_ms, "longest a held request waits")
      ->capture_default_str();
  return hold;
}

// Wraps the options' answer (or, when none, answers with the hold's outcome). `hold` must outlive
// the server.
void ApplyHold(Hold* hold, strata::sim::SimOptions* options) {
  if (hold->until <= 0) return;
  auto answer = options->answer;
  options->answer = [hold, answer](const std::string& request_json, int64_t prompt_tokens) {
    std::string held = hold->Wait();
    return answer ? answer(request_json, prompt_tokens) : held;
  };
}

// The flags of the simulator's options (the retrieve flags are retrieve_flags.h's).
void AddFlags(CLI::App& app, strata::sim::SimOptions* options, std::string* cached,
              std::string* tokenizer_spec, std::string* template_name) {
  app.add_option("--host", options->host, "IPv4 address to bind")->capture_default_str();
  app.add_option("--port", options->http_port, "HTTP port (0: any free port, -1: no HTTP)")
      ->check(CLI::Range(-1, 65535))->capture_default_str();
  app.add_option("--grpc-port", options->grpc_port, "gRPC port (0: any free port, -1: no gRPC)")
      ->check(CLI::Range(-1, 65535))->capture_default_str();
  app.add_option("--tokenizer", *tokenizer_spec,
                 "count prompt tokens with this tokenizer spec (strata/tokenizer_spec.h, "
                 "e.g. hf:tokenizer.json); "
                 "default: the bytes-per-token estimator");
  app.add_option("--chat-template", *template_name,
                 "chat template the prompt text (and so the cache blocks) is rendered with: glm-5.3 "
                 "(GLM-5.3-Flash), glm-4.7, generic, or glm5 (alias of glm-5.3)")
      ->check(CLI::IsMember({"glm-5.3", "glm-4.7", "generic", "glm5"}))->capture_default_str();
  app.add_option("--block-size", options->cache.block_tokens, "prefix-cache block size in tokens")->capture_default_str();
  app.add_option("--capacity-blocks", options->cache.capacity_blocks, "prefix-cache capacity (LRU)")->capture_default_str();
  app.add_option("--bytes-per-token", options->cache.bytes_per_token, "estimator bytes per token")->capture_default_str();
  app.add_option("--flavor", options->flavor, "vllm | sglang | openai (reasoning field)")
      ->check(CLI::IsMember({"vllm", "sglang", "openai"}))->capture_default_str();
  app.add_option("--error-shape", options->error_shape,
                 "error bodies: nested {\"error\":{...}} (current vLLM, OpenAI) or flat {\"object\":\"error\",...}")
      ->check(CLI::IsMember({"nested", "flat"}))->capture_default_str();
  app.add_option("--max-request-bytes", options->max_request_bytes, "request body limit (413 beyond)")->capture_default_str();
  app.add_option("--request-timeout-ms", options->request_timeout_ms, "a request's head and body must arrive within this")
      ->capture_default_str();
  app.add_option("--idle-timeout-ms", options->idle_timeout_ms, "keep-alive connections idle longer are closed")
      ->capture_default_str();
  app.add_option("--cached-tokens", *cached, "present | null | absent (usage.prompt_tokens_details)")
      ->check(CLI::IsMember({"present", "null", "absent"}))->capture_default_str();
  app.add_option("--max-context", options->max_context_tokens, "context length in tokens")->capture_default_str();
  app.add_option("--prefill-us", options->prefill_us_per_token, "prefill microseconds per uncached token")->capture_default_str();
  app.add_option("--decode-us", options->decode_us_per_token, "decode microseconds per output token")->capture_default_str();
  app.add_option("--concurrency", options->max_concurrency, "requests in progress at once (0: unlimited)")->capture_default_str();
  app.add_option("--kv-capacity-tokens", options->kv.capacity_tokens,
                 "KV cache capacity in tokens (0: memory not modelled; e.g. strata plan's kv_capacity_tokens)")
      ->capture_default_str();
  app.add_option("--kv-block-tokens", options->kv.block_tokens, "tokens per KV block")->capture_default_str();
  app.add_flag("--preempt", options->kv.preempt, "grow KV while decoding and preempt the youngest sequence when full");
  app.add_option("--prefill-attention-us", options->kv.prefill_attention_us,
                 "prefill microseconds per uncached token per 1K tokens of context (quadratic term)")
      ->capture_default_str();
  app.add_flag("--serial-prefill", options->kv.serial_prefill, "run one prefill at a time");
  app.add_option("--trajectory", options->trajectory_path, "JSON lines trajectory whose assistant messages are the replies");
  app.add_option("--output-tokens", options->generated_output_tokens, "tokens of a generated reply")->capture_default_str();
  app.add_option("--chunk-bytes", options->chunk_bytes, "bytes per streamed delta")->capture_default_str();
  app.add_flag("--flush-each-event", options->flush_each_event, "one send() per SSE event");
  app.add_option("--fault", options->default_fault, "fault applied to every request, e.g. 503 or stall,after=3,delay_ms=500");
  app.add_option("--request-log", options->request_log_path,
                 "append each chat completion request received (HTTP and gRPC) to FILE as one JSON line: "
                 "headers, whole body, status, fault, prompt and cached tokens, processing time");
}

}  // namespace

int main(int argc, char** argv) {
  strata::sim::SimOptions options;
  std::string cached = "present";
  std::string tokenizer_spec;
  std::string template_name = "glm-5.3";
  CLI::App app{"strata-sim: an OpenAI Chat Completions and SGLang gRPC endpoint simulator"};
  AddFlags(app, &options, &cached, &tokenizer_spec, &template_name);
  Hold* hold = AddHoldFlags(app);
  strata::sim::RetrieveFlags retrieve;
  strata::sim::AddRetrieveFlags(app, &retrieve);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int code = app.exit(e);  // prints the help or the error
    return code == 0 ? 0 : 2;      // a usage error (e.g. --port 99999) exits 2
  }
  if (strata::Status applied = strata::sim::ApplyRetrieveFlags(retrieve, &options); !applied.ok()) {
    std::cerr << "strata-sim: " << applied.message() << "\n";
    return 2;
  }
  ApplyHold(hold, &options);
  options.cached_report = cached == "present" ? strata::sim::CachedReport::kPresent
                          : cached == "null"  ? strata::sim::CachedReport::kNull
                                              : strata::sim::CachedReport::kAbsent;
  std::unique_ptr<strata::Tokenizer> tokenizer;
  if (!tokenizer_spec.empty()) {
    auto made = strata::MakeTokenizer(tokenizer_spec);
    if (!made.ok()) {
      std::cerr << "strata-sim: " << made.status() << "\n";
      return 2;
    }
    tokenizer = std::move(made).value();
    options.tokenizer = tokenizer.get();
  }
  auto chat_template = strata::MakeChatTemplate(template_name);
  if (!chat_template.ok()) {
    std::cerr << "strata-sim: " << chat_template.status() << "\n";
    return 2;
  }
  options.chat_template = chat_template->get();
  auto server = strata::sim::SimServer::Start(options);
  if (!server.ok()) {
    std::cerr << "strata-sim: " << server.status() << "\n";
    return 1;
  }
  std::signal(SIGINT, OnSignal);
  std::signal(SIGTERM, OnSignal);
  std::cout << "strata-sim";
  if ((*server)->http_port() > 0) std::cout << " http=" << options.host << ":" << (*server)->http_port();
  if (options.grpc_port >= 0) std::cout << " grpc=" << (*server)->grpc_target();
  std::cout << std::endl;
  while (!g_stop) pause();
  (*server)->Stop();
  return 0;
}
