// strata bench: workloads, measurement and reports (see bench_run.h).
#include "bench_run.h"

#include <time.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <mutex>
#include <random>
#include <thread>

#include "strata/replay/trace.h"

namespace strata::cli::bench {

Percentiles ComputePercentiles(std::vector<double> values) {
  Percentiles p;
  if (values.empty()) return p;
  std::sort(values.begin(), values.end());
  auto rank = [&](double q) {
    size_t index = static_cast<size_t>(std::ceil(q * static_cast<double>(values.size())));
    index = std::max<size_t>(1, std::min(index, values.size()));
    return values[index - 1];
  };
  p.p50 = rank(0.50);
  p.p90 = rank(0.90);
  p.p99 = rank(0.99);
  return p;
}

namespace {

const char* const kWords[] = {"cache",   "prefix",  "token",  "layer",  "agent",
                              "context", "model",   "memory", "block",  "stream",
                              "request", "replica", "pool",   "window", "sparse",
                              "linear",  "state",   "budget", "server", "prefill"};

std::string Document(uint64_t seed, size_t bytes) {
  std::mt19937_64 rng(seed);
  std::string out;
  out.reserve(bytes + 16);
  out += "Document " + std::to_string(seed) + ". ";
  while (out.size() < bytes) {
    out += kWords[rng() % (sizeof(kWords) / sizeof(kWords[0]))];
    out += (rng() % 12 == 0) ? ". " : " ";
  }
  out.resize(bytes);
  return out;
}

// Cuts `text` to at most `bytes` at a UTF-8 character boundary.
std::string Utf8Prefix(const std::string& text, size_t bytes) {
  if (bytes >= text.size()) return text;
  while (bytes > 0 && (static_cast<unsigned char>(text[bytes]) & 0xC0) == 0x80) --bytes;
  return text.substr(0, bytes);
}

std::pair<std::string, std::string> Flatten(const TraceMessage& m) {
  switch (m.role) {
    case TraceRole::kSystem:
      return {"user", "Instructions:\n" + m.content};
    case TraceRole::kUser:
      return {"user", m.content};
    case TraceRole::kTool:
      return {"user", "Output of " + (m.name.empty() ? std::string("the tool") : m.name) + ":\n" +
                          m.content};
    case TraceRole::kAssistant: {
      std::string text = m.content;
      for (const ToolCall& c : m.tool_calls) {
        text += (text.empty() ? "" : "\n") + std::string("Calling ") + c.name + " " + c.arguments;
      }
      return {"assistant", text.empty() ? "(no text)" : text};
    }
  }
  return {"user", m.content};
}

// The body of an agent's turn cut from the trajectories (see AgentBody).
std::string TraceBody(const CellSpec& spec, uint64_t doc_seed, int turn, size_t doc_bytes) {
  const TraceCorpus& corpus = *spec.traces;
  nlohmann::ordered_json body;
  body["model"] = spec.model;
  nlohmann::ordered_json messages = nlohmann::ordered_json::array();
  messages.push_back({{"role", "system"},
                      {"content", "You are a software engineering agent. Session " +
                                      std::to_string(doc_seed) + "."}});
  // Start somewhere in the corpus, chosen by the seed; walk the messages from there.
  const size_t n = corpus.trajectories.size();
  size_t t = static_cast<size_t>(doc_seed % n);
  size_t m =
      static_cast<size_t>((doc_seed / n) % std::max<size_t>(1, corpus.trajectories[t].size()));
  auto next = [&]() -> const std::pair<std::string, std::string>& {
    while (m >= corpus.trajectories[t].size()) {
      t = (t + 1) % n;
      m = 0;
    }
    return corpus.trajectories[t][m++];
  };
  // Bytes as the body holds them (JSON escapes and each message's fields), since the body's size
  // is what the target length is measured in (and what a PoolSet estimates tokens from).
  auto body_bytes = [](const std::string& text) {
    return nlohmann::json(text).dump().size() + 30;  // {"role":"assistant","content":...},
  };
  size_t bytes = 0;
  std::string last_role;
  while (bytes + 64 < doc_bytes) {
    const auto& [role, content] = next();
    std::string text = Utf8Prefix(content, doc_bytes - bytes);
    size_t size = body_bytes(text);
    while (!text.empty() && bytes + size > doc_bytes) {
      text = Utf8Prefix(text, text.size() - std::min(text.size(), bytes + size - doc_bytes));
      size = body_bytes(text);
    }
    if (text.empty()) continue;
    bytes += size;
    last_role = role;
    messages.push_back({{"role", role}, {"content", std::move(text)}});
  }
  const size_t turn_bytes = static_cast<size_t>(256 * spec.bytes_per_token);
  for (int i = 0; i < turn; ++i) {
    const auto& [role, content] = next();
    last_role = role;
    messages.push_back({{"role", role}, {"content", Utf8Prefix(content, turn_bytes)}});
  }
  if (last_role != "user") {
    messages.push_back({{"role", "user"}, {"content", "Continue with the next step."}});
  }
  body["messages"] = messages;
  body["max_tokens"] = spec.output_tokens;
  body["stream"] = true;
  body["stream_options"] = {{"include_usage", true}};
  return body.dump();
}

}  // namespace

StatusOr<TraceCorpus> LoadTraceCorpus(const std::vector<std::string>& dirs) {
  TraceCorpus corpus;
  std::vector<std::string> files;
  for (const std::string& dir : dirs) {
    std::error_code ec;
    if (!std::filesystem::is_directory(dir, ec)) {
      return NotFoundError("trace directory \"" + dir + "\" does not exist");
    }
    const size_t before = files.size();
    for (const auto& entry : std::filesystem::recursive_directory_iterator(dir, ec)) {
      if (entry.path().extension() == ".jsonl" && entry.path().filename() != "manifest.jsonl") {
        files.push_back(entry.path().string());
      }
    }
    if (files.size() == before) {
      return NotFoundError("no trajectories (*.jsonl) under \"" + dir + "\"");
    }
  }
  std::sort(files.begin(), files.end());
  for (const std::string& file : files) {
    STRATA_ASSIGN_OR_RETURN(std::vector<TraceMessage> messages, ReadTrace(file));
    std::vector<std::pair<std::string, std::string>> flat;
    for (const TraceMessage& message : messages) {
      flat.push_back(Flatten(message));
      corpus.bytes += static_cast<int64_t>(flat.back().second.size());
    }
    if (!flat.empty()) corpus.trajectories.push_back(std::move(flat));
  }
  corpus.files = files.size();
  if (corpus.bytes == 0) return NotFoundError("the trajectories hold no message text");
  return corpus;
}

std::string AgentBody(const CellSpec& spec, uint64_t doc_seed, int turn) {
  nlohmann::ordered_json body;
  body["model"] = spec.model;
  nlohmann::ordered_json messages = nlohmann::ordered_json::array();
  messages.push_back(
      {{"role", "system"}, {"content", "You are a careful analyst. Answer briefly."}});
  // Room for the agent's later turns and the output, so that a grown context still fits `length`.
  const int64_t reserve = std::min<int64_t>(1024, spec.length / 16) + spec.output_tokens;
  const size_t doc_bytes =
      static_cast<size_t>(std::max<int64_t>(64, spec.length - reserve) * spec.bytes_per_token);
  if (spec.traces != nullptr) return TraceBody(spec, doc_seed, turn, doc_bytes);
  messages.push_back({{"role", "user"},
                      {"content", Document(doc_seed, doc_bytes) + "\n\nSummarize the document."}});
  for (int t = 0; t < turn; ++t) {
    messages.push_back(
        {{"role", "assistant"}, {"content", "Summary " + std::to_string(t) + " of the document."}});
    messages.push_back(
        {{"role", "user"},
         {"content", "Follow-up question " + std::to_string(t + 1) + ": what changed?"}});
  }
  body["messages"] = messages;
  body["max_tokens"] = spec.output_tokens;
  body["stream"] = true;
  body["stream_options"] = {{"include_usage", true}};
  return body.dump();
}

double ThreadCpuMs() {
  timespec t{};
  ::clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return static_cast<double>(t.tv_sec) * 1e3 + static_cast<double>(t.tv_nsec) / 1e6;
}

CellResult RunCell(const CellSpec& spec, Transport* transport, PoolSet* pools,
                   const std::function<void()>& on_request_done) {
  CellResult result;
  result.spec = spec;
  result.mode = pools != nullptr ? "pools" : "direct";
  std::mutex mu;
  std::atomic<uint64_t> request_counter{0};
  auto send = [&](const std::string& body, RequestRecord* record, Response* response) {
    CallOptions call;
    call.request_id =
        "bench-" + std::to_string(spec.seed) + "-" + std::to_string(++request_counter);
    call.prompt_tokens = static_cast<int64_t>(body.size()) / spec.bytes_per_token;
    if (pools != nullptr) return pools->Send(body, call, response, record);
    return transport->Send(body, call, response);
  };
  const auto start = std::chrono::steady_clock::now();
  std::vector<std::thread> agents;
  for (int a = 0; a < spec.concurrency; ++a) {
    agents.emplace_back([&, a] {
      const uint64_t agent_seed = spec.seed * 1000003ULL + static_cast<uint64_t>(a) * 7919ULL;
      int turn_base = 0;
      if (spec.warm) {  // prime the prefix (not measured)
        Response response;
        RequestRecord record;
        send(AgentBody(spec, agent_seed, 0), &record, &response).IgnoreError();
        turn_base = 1;
      }
      for (int i = 0; i < spec.requests_per_agent; ++i) {
        // Warm: the same document, one more exchange per turn. Cold: a fresh document each time.
        const uint64_t doc =
            spec.warm ? agent_seed : agent_seed + 104729ULL * static_cast<uint64_t>(i + 1);
        const double cpu_start = ThreadCpuMs();
        const std::string body = AgentBody(spec, doc, spec.warm ? turn_base + i : 0);
        Response response;
        RequestRecord record;
        Status status = send(body, &record, &response);
        const double client_ms = ThreadCpuMs() - cpu_start;
        {
          std::lock_guard<std::mutex> lock(mu);
          ++result.requests;
          if (!status.ok()) {
            ++result.errors;
            if (result.error_samples.size() < 5) result.error_samples.push_back(status.ToString());
          } else {
            result.ttft_ms.push_back(response.timings.ttft_ms);
            result.client_ms.push_back(client_ms);
            result.e2e_ms.push_back(response.timings.total_ms);
            const int64_t out = response.usage.completion_tokens;
            if (out > 1)
              result.tpot_ms.push_back(response.timings.decode_ms / static_cast<double>(out - 1));
            result.prompt_tokens += response.usage.prompt_tokens;
            result.output_tokens += out;
            if (response.usage.cached_tokens) {
              result.cached_reported = true;
              result.cached_tokens += *response.usage.cached_tokens;
            }
            if (pools != nullptr) result.queue_wait_ms.push_back(record.queue_wait_ms);
          }
        }
        if (on_request_done) on_request_done();
      }
    });
  }
  for (std::thread& t : agents) t.join();
  result.wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return result;
}

namespace {
nlohmann::ordered_json PercentileJson(const std::vector<double>& values) {
  Percentiles p = ComputePercentiles(values);
  return {{"p50", p.p50}, {"p90", p.p90}, {"p99", p.p99}};
}
}  // namespace

nlohmann::ordered_json CellToJson(const CellResult& c) {
  nlohmann::ordered_json j;
  j["length"] = c.spec.length;
  j["concurrency"] = c.spec.concurrency;
  j["cache"] = c.spec.warm ? "warm" : "cold";
  j["mode"] = c.mode;
  j["requests"] = c.requests;
  j["errors"] = c.errors;
  if (!c.error_samples.empty()) j["error_samples"] = c.error_samples;
  j["ttft_ms"] = PercentileJson(c.ttft_ms);
  j["tpot_ms"] = PercentileJson(c.tpot_ms);
  j["e2e_ms"] = PercentileJson(c.e2e_ms);
  j["client_ms"] = PercentileJson(c.client_ms);
  j["queue_wait_ms"] =
      c.mode == "pools" ? PercentileJson(c.queue_wait_ms) : nlohmann::ordered_json();
  j["throughput_tokens_per_s"] =
      c.wall_s > 0 ? static_cast<double>(c.prompt_tokens + c.output_tokens) / c.wall_s : 0;
  j["output_tokens_per_s"] = c.wall_s > 0 ? static_cast<double>(c.output_tokens) / c.wall_s : 0;
  j["cached_share"] = c.cached_reported && c.prompt_tokens > 0
                          ? nlohmann::ordered_json(static_cast<double>(c.cached_tokens) /
                                                   static_cast<double>(c.prompt_tokens))
                          : nlohmann::ordered_json();
  j["prompt_tokens"] = c.prompt_tokens;
  j["output_tokens"] = c.output_tokens;
  j["wall_s"] = c.wall_s;
  return j;
}

std::string RenderHtmlReport(const nlohmann::ordered_json& results, const std::string& chart_js) {
  // The data goes in as JSON; "</" is escaped so that no string can close the script element.
  std::string data = results.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  std::string safe;
  safe.reserve(data.size());
  for (size_t i = 0; i < data.size(); ++i) {
    if (data[i] == '<')
      safe += "\\u003c";
    else
      safe += data[i];
  }
  std::string html = R"(<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>strata bench report</title>
<style>
body{font-family:system-ui,sans-serif;margin:24px;color:#222;max-width:1100px}
h1{font-size:22px}h2{font-size:17px;margin-top:28px}
.charts{display:grid;grid-template-columns:1fr 1fr;gap:18px}
.chart{border:1px solid #ddd;border-radius:6px;padding:8px;height:300px}
table{border-collapse:collapse;font-size:13px;margin-top:10px}
td,th{border:1px solid #ccc;padding:3px 7px;text-align:right}th{background:#f3f3f3}
.meta{color:#555;font-size:13px}
</style></head><body>
<h1>strata bench</h1><div class="meta" id="meta"></div>
<div class="charts">
<div class="chart"><canvas id="ttft"></canvas></div>
<div class="chart"><canvas id="tpot"></canvas></div>
<div class="chart"><canvas id="throughput"></canvas></div>
<div class="chart"><canvas id="cached"></canvas></div>
</div>
<h2>Cells</h2><table id="cells"></table>
<script>)";
  html += chart_js;
  html += "</script>\n<script>\nconst RESULTS = ";
  html += safe;
  html += R"(;
(function () {
  const cells = RESULTS.cells || [];
  document.getElementById('meta').textContent =
    'endpoint: ' + (RESULTS.endpoint || '?') + ' | model: ' + (RESULTS.model || '?') +
    ' | ' + cells.length + ' cells | ' + (RESULTS.started || '');
  const fmt = n => n >= 1048576 && n % 1048576 === 0 ? (n / 1048576) + 'M' : (n >= 1024 ? Math.round(n / 1024) + 'K' : String(n));
  const lengths = [...new Set(cells.map(c => c.length))].sort((a, b) => a - b);
  const series = [...new Set(cells.map(c => c.mode + ' c=' + c.concurrency + ' ' + c.cache))];
  const palette = ['#1f77b4', '#ff7f0e', '#2ca02c', '#d62728', '#9467bd', '#8c564b', '#e377c2', '#7f7f7f', '#bcbd22', '#17becf'];
  const pick = (key, fn) => series.map((s, i) => ({
    label: s, borderColor: palette[i % palette.length], backgroundColor: palette[i % palette.length],
    data: lengths.map(l => { const c = cells.find(x => x.length === l && (x.mode + ' c=' + x.concurrency + ' ' + x.cache) === s); return c ? fn(c) : null; })
  }));
  const labels = lengths.map(fmt);
  const opts = (title, y) => ({ responsive: true, maintainAspectRatio: false, animation: false,
    plugins: { title: { display: true, text: title } },
    scales: { x: { title: { display: true, text: 'input tokens' } }, y: { title: { display: true, text: y }, beginAtZero: true } } });
  let rendered = 0;
  const make = (id, type, datasets, title, y) => {
    try { new Chart(document.getElementById(id), { type, data: { labels, datasets }, options: opts(title, y) }); rendered++; }
    catch (e) { console.error(e); }
  };
  make('ttft', 'line', pick('ttft', c => c.ttft_ms.p99), 'TTFT p99 (ms)', 'ms');
  make('tpot', 'line', pick('tpot', c => c.tpot_ms.p50), 'TPOT p50 (ms per output token)', 'ms');
  make('throughput', 'bar', pick('tp', c => c.throughput_tokens_per_s), 'Throughput (tokens/s)', 'tokens/s');
  make('cached', 'bar', pick('cs', c => c.cached_share === null ? 0 : c.cached_share), 'Cached share of prompt tokens', 'share');
  const table = document.getElementById('cells');
  const head = ['length', 'concurrency', 'cache', 'mode', 'requests', 'errors', 'TTFT p50', 'TTFT p90', 'TTFT p99', 'client p50', 'TPOT p50', 'E2E p99', 'tokens/s', 'cached share', 'queue wait p99'];
  table.innerHTML = '<tr>' + head.map(h => '<th>' + h + '</th>').join('') + '</tr>' + cells.map(c => '<tr>' + [
    fmt(c.length), c.concurrency, c.cache, c.mode, c.requests, c.errors,
    c.ttft_ms.p50.toFixed(1), c.ttft_ms.p90.toFixed(1), c.ttft_ms.p99.toFixed(1),
    c.client_ms ? c.client_ms.p50.toFixed(2) : '-', c.tpot_ms.p50.toFixed(2),
    c.e2e_ms.p99.toFixed(1), Math.round(c.throughput_tokens_per_s),
    c.cached_share === null ? '-' : (100 * c.cached_share).toFixed(1) + '%',
    c.queue_wait_ms ? c.queue_wait_ms.p99.toFixed(1) : '-'
  ].map(v => '<td>' + v + '</td>').join('') + '</tr>').join('');
  document.body.setAttribute('data-charts-rendered', String(rendered));
})();
</script></body></html>
)";
  return html;
}

}  // namespace strata::cli::bench
