#include "strata/metrics.h"

#include <cmath>
#include <limits>
#include <string>
#include <thread>
#include <vector>

#include "catch2/catch.hpp"

namespace strata {
namespace {

TEST_CASE("label values escape backslash, double quote and newline", "[metrics]") {
  CHECK(EscapePrometheusLabelValue(R"(a\b"c)"
                                   "\n"
                                   "d") == R"(a\\b\"c\nd)");
  CHECK(EscapePrometheusLabelValue("plain ünïcode") == "plain ünïcode");
  MetricRegistry registry;
  GaugeFamily* g = registry.AddGauge("g", "Help.", {"path"}).value();
  g->WithLabels({"C:\\dir\n\"x\""}).Set(1);
  CHECK(registry.RenderPrometheus() ==
        "# HELP g Help.\n# TYPE g gauge\n"
        "g{path=\"C:\\\\dir\\n\\\"x\\\"\"} 1\n");
}

TEST_CASE("help text escapes backslash and newline but not double quotes", "[metrics]") {
  CHECK(EscapePrometheusHelp("a\\b\n\"c\"") == "a\\\\b\\n\"c\"");
  MetricRegistry registry;
  REQUIRE(registry.AddCounter("c_total", "Line one\nline \\two \"q\"").ok());
  CHECK(registry.RenderPrometheus() ==
        "# HELP c_total Line one\\nline \\\\two \"q\"\n# TYPE c_total counter\n");
}

TEST_CASE("values print as the shortest exact decimal, infinities and NaN by name", "[metrics]") {
  CHECK(FormatPrometheusValue(0) == "0");
  CHECK(FormatPrometheusValue(-0.0) == "0");
  CHECK(FormatPrometheusValue(3) == "3");
  CHECK(FormatPrometheusValue(0.1) == "0.1");
  CHECK(FormatPrometheusValue(-2.5) == "-2.5");
  CHECK(FormatPrometheusValue(1e21) == "1e+21");
  CHECK(FormatPrometheusValue(123456789012) == "123456789012");
  CHECK(FormatPrometheusValue(std::numeric_limits<double>::infinity()) == "+Inf");
  CHECK(FormatPrometheusValue(-std::numeric_limits<double>::infinity()) == "-Inf");
  CHECK(FormatPrometheusValue(std::nan("")) == "NaN");
  const double third = 1.0 / 3;
  CHECK(std::stod(FormatPrometheusValue(third)) == third);
}

TEST_CASE("labels print in declared order and series sort by label values", "[metrics]") {
  MetricRegistry registry;
  CounterFamily* c = registry.AddCounter("req_total", "Requests.", {"tenant", "code"}).value();
  c->WithLabels({"zeta", "OK"}).Increment();
  c->WithLabels({"acme", "UNAVAILABLE"}).Increment(2);
  c->WithLabels({"acme", "OK"}).Increment(3);
  CHECK(registry.RenderPrometheus() ==
        "# HELP req_total Requests.\n# TYPE req_total counter\n"
        "req_total{tenant=\"acme\",code=\"OK\"} 3\n"
        "req_total{tenant=\"acme\",code=\"UNAVAILABLE\"} 2\n"
        "req_total{tenant=\"zeta\",code=\"OK\"} 1\n");
}

TEST_CASE("families print in registration order", "[metrics]") {
  MetricRegistry registry;
  REQUIRE(registry.AddGauge("zz", "Z.").ok());
  REQUIRE(registry.AddGauge("aa", "A.").ok());
  const std::string text = registry.RenderPrometheus();
  CHECK(text.find("# HELP zz") < text.find("# HELP aa"));
}

TEST_CASE("histogram buckets are cumulative and end with +Inf, _sum and _count", "[metrics]") {
  MetricRegistry registry;
  HistogramFamily* h =
      registry.AddHistogram("lat_seconds", "Latency.", {"tenant"}, {0.1, 1, 10}).value();
  Histogram& acme = h->WithLabels({"acme"});
  for (double v : {0.05, 0.1, 0.5, 0.7, 5.0, 100.0}) acme.Observe(v);
  acme.Observe(std::nan(""));  // ignored
  CHECK(registry.RenderPrometheus() ==
        "# HELP lat_seconds Latency.\n# TYPE lat_seconds histogram\n"
        "lat_seconds_bucket{tenant=\"acme\",le=\"0.1\"} 2\n"
        "lat_seconds_bucket{tenant=\"acme\",le=\"1\"} 4\n"
        "lat_seconds_bucket{tenant=\"acme\",le=\"10\"} 5\n"
        "lat_seconds_bucket{tenant=\"acme\",le=\"+Inf\"} 6\n"
        "lat_seconds_sum{tenant=\"acme\"} 106.35\n"
        "lat_seconds_count{tenant=\"acme\"} 6\n");
  MetricSeries s = acme.Snapshot();
  CHECK(s.bucket_counts == std::vector<uint64_t>{2, 2, 1, 1});  // per bucket, not cumulative
}

TEST_CASE("a histogram without labels has only the le label", "[metrics]") {
  MetricRegistry registry;
  HistogramFamily* h = registry.AddHistogram("x", "X.", {}, {1}).value();
  h->WithLabels({}).Observe(2);
  CHECK(registry.RenderPrometheus() ==
        "# HELP x X.\n# TYPE x histogram\n"
        "x_bucket{le=\"1\"} 0\nx_bucket{le=\"+Inf\"} 1\nx_sum 2\nx_count 1\n");
}

TEST_CASE("counters only go up, gauges go both ways", "[metrics]") {
  MetricRegistry registry;
  Counter& c = registry.AddCounter("c_total", "C.").value()->WithLabels({});
  c.Increment(2);
  c.Increment(-5);
  c.Increment(std::nan(""));
  CHECK(c.Value() == 2);
  Gauge& g = registry.AddGauge("g", "G.").value()->WithLabels({});
  g.Set(10);
  g.Add(-4);
  CHECK(g.Value() == 6);
}

TEST_CASE("bad names, labels and buckets are refused with the offending value", "[metrics]") {
  MetricRegistry registry;
  StatusOr<CounterFamily*> bad_name = registry.AddCounter("9lives", "x");
  REQUIRE_FALSE(bad_name.ok());
  CHECK(bad_name.status().code() == StatusCode::kInvalidArgument);
  CHECK(bad_name.status().message().find("9lives") != std::string::npos);

  StatusOr<GaugeFamily*> bad_label = registry.AddGauge("g", "x", {"__reserved"});
  REQUIRE_FALSE(bad_label.ok());
  CHECK(bad_label.status().message().find("__reserved") != std::string::npos);
  CHECK_FALSE(registry.AddGauge("g", "x", {"a-b"}).ok());
  CHECK_FALSE(registry.AddGauge("g", "x", {"a", "a"}).ok());

  CHECK_FALSE(registry.AddHistogram("h", "x", {"le"}, {1}).ok());
  StatusOr<HistogramFamily*> unsorted = registry.AddHistogram("h", "x", {}, {1, 5, 2});
  REQUIRE_FALSE(unsorted.ok());
  CHECK(unsorted.status().message().find("2 follows 5") != std::string::npos);
  CHECK_FALSE(
      registry.AddHistogram("h", "x", {}, {1, std::numeric_limits<double>::infinity()}).ok());

  // Nothing was registered by the failures; a duplicate name is ALREADY_EXISTS.
  CHECK(registry.Snapshot().empty());
  REQUIRE(registry.AddGauge("g", "x").ok());
  StatusOr<CounterFamily*> dup = registry.AddCounter("g", "x");
  REQUIRE_FALSE(dup.ok());
  CHECK(dup.status().code() == StatusCode::kAlreadyExists);
  CHECK(registry.Snapshot().size() == 1);
}

TEST_CASE("a wrong number of label values is normalised and counted", "[metrics]") {
  MetricRegistry registry;
  CounterFamily* c = registry.AddCounter("c_total", "C.", {"a", "b"}).value();
  c->WithLabels({"x"}).Increment();
  c->WithLabels({"x", "y", "z"}).Increment();
  CHECK(registry.label_errors() == 2);
  CHECK(registry.RenderPrometheus() ==
        "# HELP c_total C.\n# TYPE c_total counter\n"
        "c_total{a=\"x\",b=\"\"} 1\nc_total{a=\"x\",b=\"y\"} 1\n");
}

TEST_CASE("snapshots render through the same path and bad snapshots are refused whole",
          "[metrics]") {
  MetricFamilySnapshot pool{
      "strata_pool_in_flight", "In flight.", MetricType::kGauge, {"pool"}, {}, {}};
  MetricSeries s;
  s.label_values = {"long \"1M\""};
  s.value = 2;
  pool.series.push_back(s);
  StatusOr<std::string> text = RenderPrometheusText({pool});
  REQUIRE(text.ok());
  CHECK(*text ==
        "# HELP strata_pool_in_flight In flight.\n# TYPE strata_pool_in_flight gauge\n"
        "strata_pool_in_flight{pool=\"long \\\"1M\\\"\"} 2\n");

  MetricFamilySnapshot histogram{"h", "H.", MetricType::kHistogram, {}, {1, 2}, {}};
  MetricSeries wrong;
  wrong.bucket_counts = {1, 2};  // needs 3 (two bounds + the +Inf bucket)
  histogram.series.push_back(wrong);
  StatusOr<std::string> refused = RenderPrometheusText({pool, histogram});
  REQUIRE_FALSE(refused.ok());
  CHECK(refused.status().message().find("bounds + 1") != std::string::npos);
  CHECK_FALSE(RenderPrometheusText({pool, pool}).ok());  // a family exported twice
}

TEST_CASE("exponential buckets", "[metrics]") {
  CHECK(ExponentialBuckets(1, 2, 4) == std::vector<double>{1, 2, 4, 8});
  CHECK(ExponentialBuckets(0, 2, 4).empty());
  CHECK(ExponentialBuckets(1, 1, 4).empty());
}

TEST_CASE("series are updated from many threads without losing counts", "[metrics][concurrency]") {
  MetricRegistry registry;
  CounterFamily* c = registry.AddCounter("c_total", "C.", {"t"}).value();
  HistogramFamily* h = registry.AddHistogram("h", "H.", {"t"}, {0.5}).value();
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 10000; ++i) {
        c->WithLabels({t % 2 ? "odd" : "even"}).Increment();
        h->WithLabels({"all"}).Observe(i % 2);
        if (i % 1000 == 0) (void)registry.RenderPrometheus();
      }
    });
  }
  for (std::thread& t : threads) t.join();
  CHECK(c->WithLabels({"odd"}).Value() == 20000);
  CHECK(c->WithLabels({"even"}).Value() == 20000);
  MetricSeries s = h->WithLabels({"all"}).Snapshot();
  CHECK(s.bucket_counts == std::vector<uint64_t>{20000, 20000});
  CHECK(s.sum == 20000);
}

}  // namespace
}  // namespace strata
