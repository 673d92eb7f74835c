// strata/metrics.h — counters, gauges and histograms with labels, and their Prometheus text
// exposition (format 0.0.4), for exporters such as strata-sidecar's /metrics.
//
//   strata::MetricRegistry registry;
//   strata::CounterFamily* requests =
//       registry.AddCounter("app_requests_total", "Requests served.", {"tenant", "code"}).value();
//   requests->WithLabels({"acme", "OK"}).Increment();
//   strata::HistogramFamily* latency =
//       registry.AddHistogram("app_latency_seconds", "Request latency.", {"tenant"},
//                             {0.01, 0.1, 1, 10}).value();
//   latency->WithLabels({"acme"}).Observe(0.042);
//   std::string text = registry.RenderPrometheus();  // serve as text/plain; version=0.0.4
//
// Exporters that compute their values when scraped (a snapshot of another component's state) build
// MetricFamilySnapshot values and call RenderPrometheusText() directly: one exposition path.
//
// The exposition: one "# HELP" and one "# TYPE" line per family (HELP text with '\' and newline
// escaped), families in registration order (snapshots: in the order given), series sorted by their
// label values, labels in the order the family declared them, label values with '\', '"' and
// newline escaped; histograms as cumulative `NAME_bucket{...,le="BOUND"}` series ending with
// `le="+Inf"`, then `NAME_sum` and `NAME_count`. Values print as the shortest decimal that reads
// back exactly; infinities and NaN as +Inf, -Inf and NaN.
//
// Thread safety: MetricRegistry and the families are thread-safe. The Counter, Gauge and Histogram
// references that WithLabels() returns stay valid for the registry's lifetime (series are never
// removed), may be kept and used from any thread, and their operations are lock-free (Histogram:
// a short per-series lock).
#ifndef STRATA_METRICS_H_
#define STRATA_METRICS_H_

#include <cstdint>
#include <initializer_list>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "strata/status.h"

namespace strata {

// The kind of a metric family, as the exposition's # TYPE line names it.
enum class MetricType : int { kCounter = 0, kGauge = 1, kHistogram = 2 };
// "counter", "gauge", "histogram" (the words of the # TYPE line).
std::string MetricTypeName(MetricType type);

// One labelled series of a family, as exported.
struct MetricSeries {
  std::vector<std::string> label_values;  // one per MetricFamilySnapshot::label_names
  double value = 0;                       // counter, gauge
  // Histogram: observations per bucket, NOT cumulative (bucket_counts[i] counts the observations
  // v with bounds[i-1] < v <= bounds[i]); one more entry than `bucket_bounds` for the observations
  // above the last bound. The exposition makes them cumulative.
  std::vector<uint64_t> bucket_counts;
  double sum = 0;  // histogram: sum of the observations
};

// One family's values at a moment, as exported: what MetricRegistry::Snapshot() returns and what
// RenderPrometheusText() writes. A plain value; ValidateMetricFamily() says what is well formed.
struct MetricFamilySnapshot {
  std::string name;  // the metric name, e.g. "app_requests_total"
  std::string help;  // the # HELP text (unescaped)
  MetricType type = MetricType::kGauge;  // the # TYPE
  std::vector<std::string> label_names;  // in the order every series lists its values
  std::vector<double> bucket_bounds;  // histogram: strictly increasing, finite
  std::vector<MetricSeries> series;  // any order; the exposition sorts them by label values
};

// Checks a family against the exposition format's rules: metric name [a-zA-Z_:][a-zA-Z0-9_:]*,
// label names [a-zA-Z_][a-zA-Z0-9_]* not starting with "__" and not repeated, "le" not used as a
// label of a histogram, bucket bounds strictly increasing and finite (histograms only), and every
// series with one value per label name (and bounds + 1 bucket counts). INVALID_ARGUMENT naming the
// family and the offending value.
Status ValidateMetricFamily(const MetricFamilySnapshot& family);

// The text exposition of `families` (see the file comment). Families that fail
// ValidateMetricFamily, or share a name with an earlier family, are refused whole:
// INVALID_ARGUMENT, and nothing is rendered.
StatusOr<std::string> RenderPrometheusText(const std::vector<MetricFamilySnapshot>& families);

// The pieces of the format, for tests and for exporters that write lines themselves.
std::string EscapePrometheusLabelValue(std::string_view value);  // '\' '"' newline
std::string EscapePrometheusHelp(std::string_view help);         // '\' newline
std::string FormatPrometheusValue(double value);  // shortest exact decimal; +Inf, -Inf, NaN

// Bucket bounds: `count` bounds start, start*factor, start*factor^2, ... (start > 0, factor > 1).
std::vector<double> ExponentialBuckets(double start, double factor, int count);

// One series of a counter family: a value that only goes up. Obtained from
// CounterFamily::WithLabels(); a cheap handle to a series the registry owns.
class Counter {
 public:
  // Adds `amount` (ignored unless > 0: a counter only goes up; NaN is ignored).
  void Increment(double amount = 1);
  double Value() const;  // the total so far (starts at 0)

  class Cell;
  // Made by the family (the cell is the registry's); applications call WithLabels().
  explicit Counter(Cell* cell) : cell_(cell) {}

 private:
  Cell* cell_;
};

// One series of a gauge family: a value that goes up and down. Obtained from
// GaugeFamily::WithLabels(); a cheap handle to a series the registry owns.
class Gauge {
 public:
  void Set(double value);   // replaces the value
  void Add(double amount);  // negative to subtract
  double Value() const;     // the current value (starts at 0)

  class Cell;
  // Made by the family (the cell is the registry's); applications call WithLabels().
  explicit Gauge(Cell* cell) : cell_(cell) {}

 private:
  Cell* cell_;
};

// One series of a histogram family: observations counted in the family's buckets, and their sum.
// Obtained from HistogramFamily::WithLabels(); a cheap handle to a series the registry owns.
class Histogram {
 public:
  // Counts `value` in the first bucket whose bound is >= value (+Inf otherwise) and adds it to the
  // sum. NaN is ignored.
  void Observe(double value);
  // The series as exported (bucket counts not cumulative).
  MetricSeries Snapshot() const;

  class Cell;
  // Made by the family (the cell is the registry's); applications call WithLabels().
  explicit Histogram(Cell* cell) : cell_(cell) {}

 private:
  Cell* cell_;
};

// A counter family: one metric name and its series, one per distinct list of label values.
// WithLabels() takes exactly one value per declared label name (any string; escaped on export); a
// call with the wrong number of values is a programming error: the list is padded with "" or cut
// to the declared count (so that exporting never fails) and the mistake is counted in
// MetricRegistry::label_errors(). Owned by its MetricRegistry.
class CounterFamily {
 public:
  virtual ~CounterFamily() = default;
  // The series of these label values, created at 0 on first use; valid for the registry's life.
  virtual Counter& WithLabels(std::initializer_list<std::string_view> values) = 0;
  // The same, with the values in a vector.
  virtual Counter& WithLabels(const std::vector<std::string>& values) = 0;
};

// A gauge family (see CounterFamily for WithLabels' contract). Owned by its MetricRegistry.
class GaugeFamily {
 public:
  virtual ~GaugeFamily() = default;
  // The series of these label values, created at 0 on first use; valid for the registry's life.
  virtual Gauge& WithLabels(std::initializer_list<std::string_view> values) = 0;
  // The same, with the values in a vector.
  virtual Gauge& WithLabels(const std::vector<std::string>& values) = 0;
};

// A histogram family; every series shares the family's bucket bounds (see CounterFamily for
// WithLabels' contract). Owned by its MetricRegistry.
class HistogramFamily {
 public:
  virtual ~HistogramFamily() = default;
  // The series of these label values, created at 0 on first use; valid for the registry's life.
  virtual Histogram& WithLabels(std::initializer_list<std::string_view> values) = 0;
  // The same, with the values in a vector.
  virtual Histogram& WithLabels(const std::vector<std::string>& values) = 0;
};

// The families an exporter serves, in registration order. Owns the families and their series;
// thread-safe (see the file comment).
class MetricRegistry {
 public:
  MetricRegistry();
  ~MetricRegistry();
  MetricRegistry(const MetricRegistry&) = delete;
  MetricRegistry& operator=(const MetricRegistry&) = delete;

  // Registers a family; the pointer is owned by the registry and valid for its lifetime.
  // INVALID_ARGUMENT (see ValidateMetricFamily) for a bad name, label name or bucket bounds, or a
  // name already registered (ALREADY_EXISTS); nothing is registered on error.
  StatusOr<CounterFamily*> AddCounter(std::string name, std::string help,
                                      std::vector<std::string> label_names = {});
  // A gauge family, as AddCounter.
  StatusOr<GaugeFamily*> AddGauge(std::string name, std::string help,
                                  std::vector<std::string> label_names = {});
  // A histogram family with these bucket bounds (strictly increasing, finite; "+Inf" is implied),
  // as AddCounter; "le" is refused as a label name.
  StatusOr<HistogramFamily*> AddHistogram(std::string name, std::string help,
                                          std::vector<std::string> label_names,
                                          std::vector<double> bucket_bounds);

  // Every family's current values, in registration order.
  std::vector<MetricFamilySnapshot> Snapshot() const;
  // RenderPrometheusText(Snapshot()); registered families are valid, so this cannot fail.
  std::string RenderPrometheus() const;
  // WithLabels() calls that had the wrong number of label values.
  int64_t label_errors() const;

  class Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace strata

#endif  // STRATA_METRICS_H_
