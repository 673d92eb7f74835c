// `strata probe --endpoint A [--endpoint B] --source DIR...`: long-context fidelity probes on the
// user's own content (probe.h, docs/probe.md). Exit status: 0 when every bucket passes, 1 when a
// bucket's recovery is under --min-recovery or a request failed after retries, 2 on a usage error.
#include <cmath>
#include <cstdlib>
#include <iostream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "commands.h"
#include "probe.h"
#include "replay_common.h"
#include "strata/chat_template.h"
#include "strata/http_transport.h"
#include "strata/transport.h"

namespace strata::cli {
namespace {

struct ProbeArgs {
  std::vector<std::string> endpoints;
  std::vector<std::string> sources;
  std::string lengths = "32k,128k,512k,1m";
  std::string depths = "0.1,0.5,0.9";
  std::string kinds = "constant,definition,table,mrcr,twohop";
  int probes_per_bucket = 4;
  int concurrency = 4;
  int retries = 2;
  double timeout_s = 600;
  std::string json_file, html_file;
  double min_recovery = -1;
  std::string tokenizer = "estimate:4";
  std::string chat_template = "glm-5.3";
  std::string window = "1m";
  int64_t max_output_tokens = 64;
  uint64_t seed = 1;
  std::string model = "default";
  std::string api_key_env = "STRATA_API_KEY";
  bool allow_insecure = false;
  bool no_progress = false;
};

std::vector<std::string> SplitList(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream in(s);
  std::string item;
  while (std::getline(in, item, ',')) {
    if (!item.empty()) out.push_back(item);
  }
  return out;
}

probe::GenerateOptions GenerateOptionsOf(const ProbeArgs& args) {
  probe::GenerateOptions options;
  for (const std::string& l : SplitList(args.lengths)) {
    StatusOr<int64_t> tokens = probe::ParseTokens(l);
    if (!tokens.ok()) throw CLI::ValidationError("--lengths", tokens.status().message());
    options.lengths.push_back({l, *tokens});
  }
  options.depths.clear();
  for (const std::string& d : SplitList(args.depths)) {
    char* end = nullptr;
    const double depth = std::strtod(d.c_str(), &end);
    if (*end != '\0' || !(depth >= 0 && depth <= 1)) {
      throw CLI::ValidationError("--depths", "\"" + d + "\" is not a depth in [0, 1] (e.g. 0.1,0.5,0.9)");
    }
    options.depths.push_back(depth);
  }
  options.kinds.clear();
  for (const std::string& k : SplitList(args.kinds)) {
    std::optional<probe::ProbeKind> kind = probe::KindFromName(k);
    if (!kind) throw CLI::ValidationError("--kinds", "\"" + k + "\" is not a probe kind (constant, definition, table, mrcr, twohop)");
    options.kinds.push_back(*kind);
  }
  StatusOr<int64_t> window = probe::ParseTokens(args.window);
  if (!window.ok()) throw CLI::ValidationError("--window", window.status().message());
  options.window_tokens = *window;
  options.max_output_tokens = args.max_output_tokens;
  options.probes_per_bucket = args.probes_per_bucket;
  options.seed = args.seed;
  options.model = args.model;
  return options;
}

std::unique_ptr<Transport> MakeTransport(const ProbeArgs& args, const std::string& url) {
  if (url.rfind("http://", 0) != 0 && url.rfind("https://", 0) != 0) {
    throw CLI::ValidationError("--endpoint", "\"" + url + "\" has no http:// or https:// scheme (e.g. http://127.0.0.1:8000/v1)");
  }
  HttpTransportOptions options;
  options.base_url = url;
  if (const char* key = std::getenv(args.api_key_env.c_str())) options.api_key = key;
  options.allow_insecure = args.allow_insecure;
  StatusOr<std::unique_ptr<Transport>> transport = MakeHttpTransport(options);
  if (!transport.ok()) throw CLI::ValidationError("--endpoint", transport.status().message());
  return std::move(transport).value();
}

void PrintSummary(const nlohmann::ordered_json& results) {
  std::cout << "strata probe: " << results["probes_planned"].get<int64_t>() << " probes, "
            << results["discarded"].get<int64_t>() << " discarded (see discarded_by_reason)\n";
  for (const auto& e : results["endpoints"]) {
    std::cout << "  " << e["name"].get<std::string>() << " " << e["url"].get<std::string>() << ": "
              << e["correct"].get<int64_t>() << "/" << e["probes"].get<int64_t>() << " correct, "
              << e["failed"].get<int64_t>() << " failed requests\n";
    for (const auto& b : e["buckets"]) {
      std::cout << "    length " << b["length"].get<std::string>() << " depth " << b["depth"].dump() << ": "
                << b["correct"].get<int64_t>() << "/" << b["probes"].get<int64_t>() << "\n";
    }
  }
  for (const auto& r : results["recovery"]) {
    std::cout << "  recovery B/A length " << r["length"].get<std::string>() << " depth " << r["depth"].dump() << ": "
              << (r["recovery"].is_null() ? std::string("n/a") : r["recovery"].dump()) << "\n";
  }
}

void Run(const ProbeArgs& args) {
  if (args.endpoints.empty() || args.endpoints.size() > 2) {
    throw CLI::ValidationError("--endpoint", "give one or two endpoints (A, and B to compare against A)");
  }
  if (!std::isfinite(args.timeout_s) || args.timeout_s <= 0) throw CLI::ValidationError("--timeout", "must be positive");
  if (args.min_recovery != -1 && !(args.min_recovery >= 0 && args.min_recovery <= 10)) {
    throw CLI::ValidationError("--min-recovery", "must be a ratio such as 0.95");
  }
  probe::GenerateOptions gen_options = GenerateOptionsOf(args);
  std::vector<std::unique_ptr<Transport>> transports;
  std::vector<Transport*> raw;
  std::vector<std::pair<std::string, std::string>> names;
  for (size_t i = 0; i < args.endpoints.size(); ++i) {
    transports.push_back(MakeTransport(args, args.endpoints[i]));
    raw.push_back(transports.back().get());
    names.emplace_back(std::string(1, static_cast<char>('A' + i)), RedactUrl(args.endpoints[i]));
  }
  std::unique_ptr<Tokenizer> tokenizer = MakeTokenizerOrThrow(args.tokenizer, "--tokenizer");
  StatusOr<std::unique_ptr<ChatTemplate>> chat_template = MakeChatTemplate(args.chat_template);
  if (!chat_template.ok()) throw CLI::ValidationError("--chat-template", chat_template.status().message());
  std::unique_ptr<RequestTokenCounter> counter = MakeRequestTokenCounter(**chat_template, *tokenizer);
  StatusOr<probe::SourceSet> sources = probe::LoadSources(args.sources);
  if (!sources.ok()) throw CLI::ValidationError("--source", sources.status().message());
  auto generator = probe::ProbeGenerator::Create(std::move(sources).value(), tokenizer.get(), counter.get(), gen_options);
  if (!generator.ok()) throw CLI::ValidationError("--source", generator.status().message());
  // Open the outputs first: a run whose results cannot be written is refused before it sends.
  std::unique_ptr<OutputFile> json_out, html_out;
  if (!args.json_file.empty()) json_out = std::make_unique<OutputFile>(args.json_file, "--json");
  if (!args.html_file.empty()) html_out = std::make_unique<OutputFile>(args.html_file, "--html");
  const std::vector<probe::ProbeSpec> plan = (*generator)->Plan();
  probe::RunOptions run;
  run.concurrency = args.concurrency;
  run.retries = args.retries;
  run.deadline = std::chrono::milliseconds(static_cast<int64_t>(args.timeout_s * 1000));
  run.progress = args.no_progress ? nullptr : &std::cerr;
  StatusOr<std::vector<probe::ProbeOutcome>> outcomes = probe::RunProbes(**generator, plan, raw, run);
  if (!outcomes.ok()) throw CommandFailed{outcomes.status().message()};
  nlohmann::ordered_json results = probe::ResultsJson(**generator, plan, names, *outcomes, args.min_recovery);
  results["tokenizer"] = tokenizer->Name();
  results["chat_template"] = (*chat_template)->Name();
  if (json_out) {
    json_out->stream() << DumpJson(results, 2) << "\n";
    json_out->Commit();
  }
  if (html_out) {
    html_out->stream() << probe::RenderHtml(results);
    html_out->Commit();
  }
  PrintSummary(results);
  std::string failure;
  for (const auto& f : results["failing"]) failure += "\n  " + f.get<std::string>();
  int64_t failed = 0;
  for (const auto& e : results["endpoints"]) failed += e["failed"].get<int64_t>();
  if (failed > 0) failure += "\n  " + std::to_string(failed) + " requests failed after retries (reported apart, not as wrong answers)";
  if (!failure.empty()) throw CommandFailed{"probe run did not pass:" + failure};
}

}  // namespace

void RegisterProbe(CLI::App& app) {
  auto args = std::make_shared<ProbeArgs>();
  CLI::App* cmd = app.add_subcommand("probe", "Long-context fidelity probes on your own content, one or two endpoints");
  cmd->add_option("--endpoint", args->endpoints, "HTTP base URL (e.g. http://127.0.0.1:8000/v1); a second one is B, compared with A")
      ->required();
  cmd->add_option("--source", args->sources, "Files or directories the probes and the filler are made of")->required();
  cmd->add_option("--lengths", args->lengths, "Context lengths in tokens of the whole request")->capture_default_str();
  cmd->add_option("--depths", args->depths, "Needle depths, 0..1 of the content")->capture_default_str();
  cmd->add_option("--kinds", args->kinds, "Probe kinds")->capture_default_str();
  cmd->add_option("--probes-per-bucket", args->probes_per_bucket, "Probes per (length, depth)")
      ->check(CLI::Range(1, 100000))->capture_default_str();
  cmd->add_option("--concurrency", args->concurrency, "Probes in flight at once")->check(CLI::Range(1, 1024))->capture_default_str();
  cmd->add_option("--retries", args->retries, "Re-sends of a failed request (beyond the transport's own)")
      ->check(CLI::Range(0, 100))->capture_default_str();
  cmd->add_option("--timeout", args->timeout_s, "Per-request deadline in seconds")->capture_default_str();
  cmd->add_option("--json", args->json_file, "Write the results as JSON here");
  cmd->add_option("--html", args->html_file, "Write the self-contained HTML report here");
  cmd->add_option("--min-recovery", args->min_recovery,
                  "Exit 1 when a bucket's B/A recovery (one endpoint: its accuracy) is under this, e.g. 0.95");
  cmd->add_option("--tokenizer", args->tokenizer,
                  "The model's tokenizer: hf:PATH/tokenizer.json, spm:PATH/model.model or estimate[:N]")
      ->capture_default_str();
  cmd->add_option("--chat-template", args->chat_template, "The model's chat template: glm-5.3, glm-4.7 or generic")
      ->check(CLI::IsMember({"glm-5.3", "glm5", "glm-4.7", "generic"}))->capture_default_str();
  cmd->add_option("--window", args->window, "The model's context window; lengths are cut to it minus the output")
      ->capture_default_str();
  cmd->add_option("--max-output-tokens", args->max_output_tokens, "Output cap of each probe")
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 20))->capture_default_str();
  cmd->add_option("--seed", args->seed, "Seed of the probes and the filler order")->capture_default_str();
  cmd->add_option("--model", args->model, "The request's model field")->capture_default_str();
  cmd->add_option("--api-key-env", args->api_key_env, "Environment variable holding the API key")->capture_default_str();
  cmd->add_flag("--allow-insecure", args->allow_insecure, "Allow the API key over plain http:// to a non-loopback host");
  cmd->add_flag("--no-progress", args->no_progress, "No progress lines on standard error");
  cmd->footer("Exit status: 0 pass, 1 a bucket under --min-recovery or failed requests, 2 usage error. See docs/probe.md.");
  cmd->callback([args] { Run(*args); });
}

}  // namespace strata::cli
