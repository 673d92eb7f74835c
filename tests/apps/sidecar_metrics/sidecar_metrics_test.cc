#include "sidecar_metrics.h"

#include <fstream>
#include <iterator>
#include <memory>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "catch2/catch.hpp"
#include "strata/pools.h"
#include "testing/fake_clock.h"
#include "testing/scripted_transport.h"

namespace strata::sidecar {
namespace {

using Catch::Contains;
using nlohmann::json;

bool HasLine(const std::string& text, const std::string& line) {
  std::istringstream in(text);
  for (std::string l; std::getline(in, l);) {
    if (l == line) return true;
  }
  return false;
}

strata::Turn MakeTurn() {
  strata::Turn turn;
  RequestRecord& r = turn.record;
  r.pool = "short";
  r.input_tokens = 5000;
  r.cached_tokens_reported = 4096;
  r.cached_tokens_predicted = 4000;
  r.output_tokens = 300;
  r.reasoning_tokens = 120;
  r.queue_wait_ms = 20;
  r.ttft_ms = 150;
  r.decode_ms = 2500;
  r.total_ms = 2700;
  r.attempts = 2;
  r.finish_reason = "tool_calls";
  r.degradation = "wait";
  return turn;
}

TEST_CASE("the metrics config parses with defaults and refuses bad keys and values",
          "[sidecar_metrics]") {
  MetricsConfig defaults = ParseMetricsConfig(json::object()).value();
  CHECK(defaults.kv_capacity_bytes == 0);
  CHECK(defaults.kv_bytes_per_token == 7600);
  CHECK(defaults.kv_alert_ratio == 0.85);
  CHECK(defaults.long_request_tokens == 131072);
  CHECK(defaults.long_share_window_s == 300);
  CHECK(defaults.long_share_alert == 0.25);
  CHECK(defaults.long_share_min_requests == 20);

  MetricsConfig c = ParseMetricsConfig(json::parse(R"({"kv_capacity_bytes": 1000000,
      "kv_bytes_per_token": 100, "kv_alert_ratio": 0.5, "long_request_tokens": 64,
      "long_share_window_s": 60, "long_share_alert": 0.1, "long_share_min_requests": 3})"))
                        .value();
  CHECK(c.kv_capacity_bytes == 1000000);
  CHECK(c.kv_bytes_per_token == 100);
  CHECK(c.kv_alert_ratio == 0.5);
  CHECK(c.long_request_tokens == 64);
  CHECK(c.long_share_window_s == 60);
  CHECK(c.long_share_alert == 0.1);
  CHECK(c.long_share_min_requests == 3);

  struct Bad {
    const char* json;
    const char* message;
  };
  for (const Bad& bad : std::vector<Bad>{
           {R"({"kv_capacity": 1})", "metrics.kv_capacity: unknown key"},
           {R"({"kv_capacity_bytes": -1})",
            "metrics.kv_capacity_bytes: expected an integer >= 0, got -1"},
           {R"({"kv_capacity_bytes": "1G"})", "got \"1G\""},
           {R"({"kv_alert_ratio": 85})",
            "metrics.kv_alert_ratio: expected a number in (0, 1], got 85"},
           {R"({"long_share_alert": 0})", "metrics.long_share_alert"},
           {R"({"long_share_window_s": 0})", "metrics.long_share_window_s"},
           {R"({"long_share_window_s": 100000})", "at most 86400"},
           {R"({"kv_bytes_per_token": 0})", "metrics.kv_bytes_per_token"},
           {R"([1])", "metrics: expected an object"},
       }) {
    INFO(bad.json);
    StatusOr<MetricsConfig> parsed = ParseMetricsConfig(json::parse(bad.json));
    REQUIRE_FALSE(parsed.ok());
    CHECK(parsed.status().code() == StatusCode::kInvalidArgument);
    CHECK_THAT(parsed.status().message(), Contains(bad.message));
  }
}

TEST_CASE("turn warnings and refused record writes are counted by tenant", "[sidecar_metrics]") {
  SidecarMetrics metrics(MetricsConfig{});
  Turn warned = MakeTurn();
  warned.warnings = {"the fork's reply was not kept in its context: refused", "a second warning"};
  metrics.ObserveTurn("acme", MakeTurn());
  metrics.ObserveTurn("acme", warned);
  metrics.ObserveRecordWriteFailures("acme", 2);
  metrics.ObserveRecordWriteFailures("beta", 1);
  const std::string text = metrics.RenderPrometheus();
  CHECK(HasLine(text, "strata_sidecar_turn_warnings_total{tenant=\"acme\"} 2"));
  CHECK(HasLine(text, "strata_sidecar_record_write_failures_total{tenant=\"acme\"} 2"));
  CHECK(HasLine(text, "strata_sidecar_record_write_failures_total{tenant=\"beta\"} 1"));
}

TEST_CASE("a turn's record fields are exported by tenant and pool", "[sidecar_metrics]") {
  SidecarMetrics metrics(MetricsConfig{});
  metrics.ObserveTurn("acme", MakeTurn());
  metrics.ObserveTurn("acme", MakeTurn());
  const std::string text = metrics.RenderPrometheus();
  const std::string tp = "{tenant=\"acme\",pool=\"short\"}";
  CHECK(HasLine(text,
                "strata_sidecar_requests_total{tenant=\"acme\",pool=\"short\",model=\"unknown\",finish_reason="
                "\"tool_calls\"} 2"));
  CHECK(HasLine(text, "strata_sidecar_input_tokens_sum" + tp + " 10000"));
  CHECK(HasLine(text, "strata_sidecar_input_tokens_count" + tp + " 2"));
  CHECK(HasLine(
      text, "strata_sidecar_input_tokens_bucket{tenant=\"acme\",pool=\"short\",le=\"4096\"} 0"));
  CHECK(HasLine(
      text, "strata_sidecar_input_tokens_bucket{tenant=\"acme\",pool=\"short\",le=\"16384\"} 2"));
  CHECK(HasLine(text, "strata_sidecar_output_tokens_sum" + tp + " 600"));
  CHECK(HasLine(text, "strata_sidecar_cached_tokens_total" + tp + " 8192"));
  CHECK(HasLine(text, "strata_sidecar_predicted_cached_tokens_total" + tp + " 8000"));
  CHECK(HasLine(text, "strata_sidecar_reasoning_tokens_total" + tp + " 240"));
  CHECK(HasLine(text, "strata_sidecar_ttft_seconds_sum" + tp + " 0.3"));
  CHECK(HasLine(text,
                "strata_sidecar_ttft_seconds_bucket{tenant=\"acme\",pool=\"short\",le=\"0.1\"} 0"));
  CHECK(HasLine(
      text, "strata_sidecar_ttft_seconds_bucket{tenant=\"acme\",pool=\"short\",le=\"0.25\"} 2"));
  CHECK(HasLine(text, "strata_sidecar_decode_seconds_sum" + tp + " 5"));
  CHECK(HasLine(text, "strata_sidecar_request_duration_seconds_sum" + tp + " 5.4"));
  CHECK(HasLine(text, "strata_sidecar_queue_wait_seconds_sum" + tp + " 0.04"));
  CHECK(HasLine(text, "strata_sidecar_retries_total" + tp + " 2"));
  CHECK(HasLine(
      text, "strata_sidecar_degradations_total{tenant=\"acme\",pool=\"short\",step=\"wait\"} 2"));
}

TEST_CASE("requests without a pool, reported cache or finish reason get explicit labels",
          "[sidecar_metrics]") {
  SidecarMetrics metrics(MetricsConfig{});
  strata::Turn turn;
  turn.record.input_tokens = 10;
  metrics.ObserveTurn("t", turn);
  const std::string text = metrics.RenderPrometheus();
  CHECK(HasLine(text,
                "strata_sidecar_requests_total{tenant=\"t\",pool=\"none\",model=\"unknown\",finish_reason="
                "\"unknown\"} 1"));
  // The series exists at 0 so that rate() works before the first reported cache hit.
  CHECK(HasLine(text, "strata_sidecar_cached_tokens_total{tenant=\"t\",pool=\"none\"} 0"));
  CHECK_THAT(text, !Contains("strata_sidecar_degradations_total{"));
}

TEST_CASE("an upstream's unknown finish reasons share one series: the label set is bounded",
          "[sidecar_metrics]") {
  SidecarMetrics metrics(MetricsConfig{});
  strata::Turn turn;
  for (int i = 0; i < 30; ++i) {
    turn.record.finish_reason = "hostile-" + std::to_string(i);
    metrics.ObserveTurn("t", turn);
  }
  turn.record.finish_reason = "length";
  metrics.ObserveTurn("t", turn);
  const std::string text = metrics.RenderPrometheus();
  CHECK(HasLine(text,
                "strata_sidecar_requests_total{tenant=\"t\",pool=\"none\",model=\"unknown\",finish_reason="
                "\"other\"} 30"));
  CHECK(HasLine(text,
                "strata_sidecar_requests_total{tenant=\"t\",pool=\"none\",model=\"unknown\",finish_reason="
                "\"length\"} 1"));
  CHECK_THAT(text, !Contains("hostile-"));
  CHECK(FinishReasonLabel("tool_calls") == "tool_calls");
  CHECK(FinishReasonLabel("") == "unknown");
}

TEST_CASE("compactions, tokens saved and prefix breaks by reason", "[sidecar_metrics]") {
  SidecarMetrics metrics(MetricsConfig{});
  strata::Turn turn = MakeTurn();
  CompactionReport report;
  report.tokens_before = 30000;
  report.tokens_after = 12000;
  report.invalidated_tokens = 9000;
  turn.compactions.push_back(report);
  PrefixBreakEvent e;
  e.reason = "doc version change (v1 -> v2) and compaction";
  turn.prefix_break = e;
  turn.break_causes = {"doc version change (v1 -> v2)", "compaction"};
  metrics.ObserveTurn("acme", turn);

  strata::Turn shortfall = MakeTurn();
  PrefixBreakEvent s;
  s.kind = PrefixBreakEvent::Kind::kServerShortfall;
  s.reason = "server evicted or mismatched (reported 0 cached tokens, predicted 4000)";
  shortfall.prefix_break = s;
  metrics.ObserveTurn("acme", shortfall);

  const std::string text = metrics.RenderPrometheus();
  CHECK(HasLine(text, "strata_sidecar_compactions_total{tenant=\"acme\"} 1"));
  CHECK(HasLine(text, "strata_sidecar_compaction_tokens_saved_total{tenant=\"acme\"} 18000"));
  CHECK(HasLine(text, "strata_sidecar_compaction_invalidated_tokens_total{tenant=\"acme\"} 9000"));
  CHECK(
      HasLine(text, "strata_sidecar_prefix_breaks_total{tenant=\"acme\",reason=\"compaction\"} 1"));
  CHECK(HasLine(text,
                "strata_sidecar_prefix_breaks_total{tenant=\"acme\",reason=\"doc version "
                "change\"} 1"));
  CHECK(HasLine(text,
                "strata_sidecar_prefix_breaks_total{tenant=\"acme\",reason=\"server evicted or "
                "mismatched\"} 1"));
  CHECK(PrefixBreakReasonLabel("lint hit (secret: sk-...)") == "lint hit");
  CHECK(PrefixBreakReasonLabel("tools changed") == "tools changed");
  CHECK(PrefixBreakReasonLabel("") == "unknown");
}

TEST_CASE("errors by code and agents by tenant", "[sidecar_metrics]") {
  SidecarMetrics metrics(MetricsConfig{});
  metrics.ObserveError("acme", "long", StatusCode::kResourceExhausted);
  metrics.ObserveError("acme", "long", StatusCode::kResourceExhausted);
  metrics.ObserveError("beta", "", StatusCode::kUnavailable);
  metrics.ObserveError("", "", StatusCode::kUnauthenticated);
  metrics.SetAgents("acme", 7);
  metrics.SetAgents("acme", 5);
  const std::string text = metrics.RenderPrometheus();
  CHECK(HasLine(text,
                "strata_sidecar_errors_total{tenant=\"acme\",pool=\"long\",code="
                "\"RESOURCE_EXHAUSTED\",class=\"server\"} 2"));
  CHECK(HasLine(
      text, "strata_sidecar_errors_total{tenant=\"beta\",pool=\"none\",code=\"UNAVAILABLE\",class=\"server\"} 1"));
  CHECK(HasLine(text, "strata_sidecar_agents{tenant=\"acme\"} 5"));
  CHECK(HasLine(text,
                "strata_sidecar_errors_total{tenant=\"none\",pool=\"none\",code="
                "\"UNAUTHENTICATED\",class=\"client\"} 1"));
}

TEST_CASE("requests in flight hold their estimated KV bytes until they end", "[sidecar_metrics]") {
  MetricsConfig config;
  config.kv_bytes_per_token = 10;
  SidecarMetrics metrics(config);
  {
    SidecarMetrics::InFlight a = metrics.Begin("acme", 1000, 24);
    CHECK(metrics.kv_bytes_in_flight() == 10240);
    SidecarMetrics::InFlight b = metrics.Begin("acme", 100, 0);
    CHECK(metrics.kv_bytes_in_flight() == 11240);
    const std::string text = metrics.RenderPrometheus();
    CHECK(HasLine(text, "strata_sidecar_kv_bytes_in_flight 11240"));
    CHECK(HasLine(text, "strata_sidecar_requests_in_flight{tenant=\"acme\"} 2"));
    SidecarMetrics::InFlight moved = std::move(b);
    b.End();  // moved-from: does nothing
    CHECK(metrics.kv_bytes_in_flight() == 11240);
    moved.End();
    moved.End();  // once only
    CHECK(metrics.kv_bytes_in_flight() == 10240);
  }
  CHECK(metrics.kv_bytes_in_flight() == 0);
  CHECK(
      HasLine(metrics.RenderPrometheus(), "strata_sidecar_requests_in_flight{tenant=\"acme\"} 0"));
}

TEST_CASE("the KV watermark alert rises above the ratio, warns once and clears",
          "[sidecar_metrics]") {
  MetricsConfig config;
  config.kv_capacity_bytes = 1000;
  config.kv_bytes_per_token = 1;
  config.kv_alert_ratio = 0.5;
  std::vector<std::string> warnings;
  SidecarMetrics metrics(config, nullptr, [&](const std::string& m) { warnings.push_back(m); });
  CHECK(HasLine(metrics.RenderPrometheus(), "strata_sidecar_kv_capacity_bytes 1000"));
  CHECK(HasLine(metrics.RenderPrometheus(),
                "strata_sidecar_alert_threshold{alert=\"kv_watermark\"} 0.5"));
  auto a = metrics.Begin("t", 500, 0);  // exactly the threshold: not above
  CHECK_FALSE(metrics.kv_alert());
  CHECK(warnings.empty());
  {
    auto b = metrics.Begin("t", 100, 0);
    auto c = metrics.Begin("t", 100, 0);  // still above: no second warning
    CHECK(metrics.kv_alert());
    REQUIRE(warnings.size() == 1);
    CHECK_THAT(warnings[0], Contains("KV watermark alert"));
    CHECK_THAT(warnings[0], Contains("600 KV bytes in flight of 1000"));
    CHECK_THAT(warnings[0], Contains("(60.0%, threshold 50.0%)"));
    const std::string text = metrics.RenderPrometheus();
    CHECK(HasLine(text, "strata_sidecar_kv_watermark_alert 1"));
    CHECK(HasLine(text, "strata_sidecar_kv_usage_ratio 0.7"));
  }
  CHECK_FALSE(metrics.kv_alert());
  CHECK(HasLine(metrics.RenderPrometheus(), "strata_sidecar_kv_watermark_alert 0"));
  auto d = metrics.Begin("t", 300, 0);  // rises again: warns again
  CHECK(warnings.size() == 2);
}

TEST_CASE("without a KV capacity the watermark never alerts", "[sidecar_metrics]") {
  std::vector<std::string> warnings;
  SidecarMetrics metrics(MetricsConfig{}, nullptr,
                         [&](const std::string& m) { warnings.push_back(m); });
  auto a = metrics.Begin("t", 1 << 20, 1 << 20);
  CHECK(metrics.kv_bytes_in_flight() == (int64_t{2} << 20) * 7600);
  CHECK_FALSE(metrics.kv_alert());
  CHECK(HasLine(metrics.RenderPrometheus(), "strata_sidecar_kv_usage_ratio 0"));
  CHECK(warnings.empty());
}

TEST_CASE("the long-request share covers the window, needs enough requests and slides",
          "[sidecar_metrics]") {
  MetricsConfig config;
  config.long_request_tokens = 1000;
  config.long_share_window_s = 10;
  config.long_share_alert = 0.25;
  config.long_share_min_requests = 4;
  testing::FakeClock clock;
  std::vector<std::string> warnings;
  SidecarMetrics metrics(config, &clock, [&](const std::string& m) { warnings.push_back(m); });

  metrics.Begin("t", 900, 100).End();  // input + max output reach the threshold: long
  CHECK(metrics.long_request_share() == 1);
  CHECK_FALSE(metrics.long_share_alert());  // one request is not a share
  for (int i = 0; i < 3; ++i) {
    clock.Advance(1000000);
    metrics.Begin("t", 10, 10).End();
  }
  CHECK(metrics.long_request_share() == 0.25);
  CHECK_FALSE(metrics.long_share_alert());  // 25% is not above 25%
  metrics.Begin("t", 5000, 0).End();
  CHECK(metrics.long_request_share() == 0.4);
  CHECK(metrics.long_share_alert());
  REQUIRE(warnings.size() == 1);
  CHECK_THAT(warnings[0], Contains("long-request share alert: 40.0% of the 5 requests"));
  std::string text = metrics.RenderPrometheus();
  CHECK(HasLine(text, "strata_sidecar_long_share_alert 1"));
  CHECK(HasLine(text, "strata_sidecar_long_request_share 0.4"));
  CHECK(HasLine(text, "strata_sidecar_long_requests_total{tenant=\"t\"} 2"));

  // The first long request leaves the 10 s window: 1 of 4.
  clock.Advance(7 * 1000000);
  CHECK(metrics.long_request_share() == 0.25);
  text = metrics.RenderPrometheus();
  CHECK(HasLine(text, "strata_sidecar_long_share_alert 0"));
  // Everything leaves it: no requests, share 0.
  clock.Advance(20 * 1000000);
  CHECK(metrics.long_request_share() == 0);
  CHECK(warnings.size() == 1);
}

TEST_CASE("the pool set's families are appended and the whole text is well formed",
          "[sidecar_metrics]") {
  testing::ScriptedTransport replica;
  PoolSetConfig pc;
  PoolConfig short_pool;
  short_pool.name = "short";
  short_pool.max_input_tokens = 32768;
  short_pool.transports = {&replica};
  pc.pools.push_back(short_pool);
  std::unique_ptr<PoolSet> pools = PoolSet::Create(pc).value();
  SidecarMetrics metrics(MetricsConfig{});
  metrics.ObserveTurn("acme", MakeTurn());
  metrics.SetAgents("acme", 1);
  metrics.ObserveError("acme", "", StatusCode::kInternal);
  metrics.SetPoolSet(pools.get());
  const std::string text = metrics.RenderPrometheus();
  CHECK(HasLine(text, "strata_pool_in_flight{pool=\"short\"} 0"));
  // One KV family: the sidecar's strata_sidecar_kv_*, which the alert rules use; the pool set's
  // own strata_kv_* estimate is left out.
  CHECK_THAT(text, !Contains("strata_kv_"));
  CHECK(HasLine(text, "strata_sidecar_kv_capacity_bytes 0"));

  // Every line is a comment (HELP/TYPE) or a sample; every family is declared once.
  const std::regex sample(
      R"(^[a-zA-Z_:][a-zA-Z0-9_:]*(\{([a-zA-Z_][a-zA-Z0-9_]*="([^"\\]|\\.)*",?)*\})? (-?[0-9.e+]+|\+Inf|-Inf|NaN)$)");
  const std::regex comment(R"(^# (HELP|TYPE) ([a-zA-Z_:][a-zA-Z0-9_:]*) .*$)");
  std::set<std::string> typed;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    INFO(line);
    std::smatch m;
    if (std::regex_match(line, m, comment)) {
      if (m[1] == "TYPE") CHECK(typed.insert(m[2]).second);
      continue;
    }
    CHECK(std::regex_match(line, sample));
  }
  CHECK(typed.size() >= 30);

  metrics.SetPoolSet(nullptr);
  CHECK_THAT(metrics.RenderPrometheus(), !Contains("strata_pool_in_flight"));
}

TEST_CASE("metrics are updated from many threads", "[sidecar_metrics][concurrency]") {
  MetricsConfig config;
  config.kv_bytes_per_token = 1;
  SidecarMetrics metrics(config);
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      const std::string tenant = t % 2 ? "odd" : "even";
      for (int i = 0; i < 2000; ++i) {
        auto in_flight = metrics.Begin(tenant, 100, 10);
        metrics.ObserveTurn(tenant, MakeTurn());
        if (i % 500 == 0) (void)metrics.RenderPrometheus();
      }
    });
  }
  for (std::thread& t : threads) t.join();
  CHECK(metrics.kv_bytes_in_flight() == 0);
  const std::string text = metrics.RenderPrometheus();
  CHECK(HasLine(text,
                "strata_sidecar_requests_total{tenant=\"odd\",pool=\"short\",model=\"unknown\",finish_reason="
                "\"tool_calls\"} 4000"));
  CHECK(HasLine(text, "strata_sidecar_requests_in_flight{tenant=\"even\"} 0"));
}

std::string ReadDoc() {
  std::ifstream in(std::string(STRATA_SOURCE_DIR) + "/docs/sidecar.md");
  return std::string(std::istreambuf_iterator<char>(in), {});
}

TEST_CASE("docs/sidecar.md lists every series and its metrics section parses",
          "[sidecar_metrics]") {
  const std::string doc = ReadDoc();
  REQUIRE(!doc.empty());
  const size_t metrics_at = doc.find("\n## Metrics\n");
  REQUIRE(metrics_at != std::string::npos);
  const std::string section = doc.substr(metrics_at, doc.find("\n## Alert rules\n") - metrics_at);

  // The table's series are exactly the families the exposition has.
  std::set<std::string> documented;
  const std::regex row(R"(\n\| `(strata_sidecar_[a-z_]+)` \|)");
  for (auto it = std::sregex_iterator(section.begin(), section.end(), row);
       it != std::sregex_iterator(); ++it) {
    documented.insert((*it)[1]);
  }
  SidecarMetrics metrics(MetricsConfig{});
  std::set<std::string> exported;
  const std::string text = metrics.RenderPrometheus();
  const std::regex type_line(R"(# TYPE (strata_sidecar_[a-z_]+) )");
  for (auto it = std::sregex_iterator(text.begin(), text.end(), type_line);
       it != std::sregex_iterator(); ++it) {
    exported.insert((*it)[1]);
  }
  CHECK(exported.size() >= 27);
  CHECK(documented == exported);

  // The example "metrics" object is valid and means what the table says.
  const size_t block = section.find("```jsonc\n");
  REQUIRE(block != std::string::npos);
  const size_t body = block + 9;
  const json example = json::parse(section.substr(body, section.find("```", body) - body));
  MetricsConfig parsed = ParseMetricsConfig(example.at("metrics")).value();
  CHECK(parsed.kv_capacity_bytes == 68719476736);
  const MetricsConfig defaults;
  CHECK(parsed.kv_bytes_per_token == defaults.kv_bytes_per_token);
  CHECK(parsed.kv_alert_ratio == defaults.kv_alert_ratio);
  CHECK(parsed.long_request_tokens == defaults.long_request_tokens);
  CHECK(parsed.long_share_window_s == defaults.long_share_window_s);
  CHECK(parsed.long_share_alert == defaults.long_share_alert);
  CHECK(parsed.long_share_min_requests == defaults.long_share_min_requests);
  // The error message the doc quotes is the one printed.
  StatusOr<MetricsConfig> bad = ParseMetricsConfig(json::parse(R"({"kv_alert_ratio": 85})"));
  REQUIRE_FALSE(bad.ok());
  CHECK_THAT(section, Contains("`" + bad.status().message() + "`"));
}

TEST_CASE("requests carry a bounded model label and errors a client or server class",
          "[sidecar_metrics]") {
  SidecarMetrics metrics(MetricsConfig{});
  strata::Turn turn;
  turn.record.finish_reason = "stop";
  turn.record.model = "glm-5.3-flash";
  metrics.ObserveTurn("t", turn);
  turn.record.model = "bad model\"name";
  metrics.ObserveTurn("t", turn);
  for (int i = 0; i < 40; ++i) {
    turn.record.model = "m" + std::to_string(i);
    metrics.ObserveTurn("t", turn);
  }
  metrics.ObserveError("t", "", StatusCode::kNotFound);
  metrics.ObserveError("t", "", StatusCode::kDeadlineExceeded);
  const std::string text = metrics.RenderPrometheus();
  CHECK(HasLine(text,
                "strata_sidecar_requests_total{tenant=\"t\",pool=\"none\",model=\"glm-5.3-flash\","
                "finish_reason=\"stop\"} 1"));
  CHECK(HasLine(text, "strata_sidecar_requests_total{tenant=\"t\",pool=\"none\",model=\"m0\","
                      "finish_reason=\"stop\"} 1"));
  // 32 distinct names at most (glm-5.3-flash and m0..m30); the others and odd names are "other".
  CHECK(HasLine(text, "strata_sidecar_requests_total{tenant=\"t\",pool=\"none\",model=\"other\","
                      "finish_reason=\"stop\"} 10"));
  CHECK_THAT(text, !Contains("m31"));
  CHECK(HasLine(text, "strata_sidecar_errors_total{tenant=\"t\",pool=\"none\",code=\"NOT_FOUND\","
                      "class=\"client\"} 1"));
  CHECK(HasLine(text, "strata_sidecar_errors_total{tenant=\"t\",pool=\"none\",code="
                      "\"DEADLINE_EXCEEDED\",class=\"server\"} 1"));
  CHECK(std::string(ErrorClass(StatusCode::kAlreadyExists)) == "client");
  CHECK(std::string(ErrorClass(StatusCode::kUnavailable)) == "server");
}

}  // namespace
}  // namespace strata::sidecar
