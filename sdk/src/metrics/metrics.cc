#include "strata/metrics.h"

#include <algorithm>
#include <atomic>
#include <charconv>
#include <cmath>
#include <deque>
#include <map>
#include <mutex>
#include <set>
#include <utility>

#include "core/thread_annotations.h"

namespace strata {
namespace {

bool IsNameStart(char c, bool colon_allowed) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' ||
         (colon_allowed && c == ':');
}

bool IsNameChar(char c, bool colon_allowed) {
  return IsNameStart(c, colon_allowed) || (c >= '0' && c <= '9');
}

bool ValidName(std::string_view name, bool colon_allowed) {
  if (name.empty() || !IsNameStart(name[0], colon_allowed)) return false;
  return std::all_of(name.begin(), name.end(),
                     [&](char c) { return IsNameChar(c, colon_allowed); });
}

std::string Quoted(std::string_view s) { return "\"" + EscapePrometheusLabelValue(s) + "\""; }

// Adds `amount` to an atomic double (fetch_add for floating point is C++20).
void AtomicAdd(std::atomic<double>* target, double amount) {
  double current = target->load(std::memory_order_relaxed);
  while (!target->compare_exchange_weak(current, current + amount, std::memory_order_relaxed)) {
  }
}

// Label values normalised to the declared count; counts the mistake.
std::vector<std::string> Normalize(std::vector<std::string> values, size_t count,
                                   std::atomic<int64_t>* errors) {
  if (values.size() != count) {
    errors->fetch_add(1, std::memory_order_relaxed);
    values.resize(count);
  }
  return values;
}

std::vector<std::string> ToStrings(std::initializer_list<std::string_view> values) {
  std::vector<std::string> out;
  out.reserve(values.size());
  for (std::string_view v : values) out.emplace_back(v);
  return out;
}

void WriteLabels(std::string* out, const std::vector<std::string>& names,
                 const std::vector<std::string>& values, const char* extra_name = nullptr,
                 const std::string& extra_value = "") {
  if (names.empty() && extra_name == nullptr) return;
  out->push_back('{');
  for (size_t i = 0; i < names.size(); ++i) {
    if (i > 0) out->push_back(',');
    *out += names[i];
    *out += '=';
    *out += Quoted(values[i]);
  }
  if (extra_name != nullptr) {
    if (!names.empty()) out->push_back(',');
    *out += extra_name;
    *out += '=';
    *out += Quoted(extra_value);
  }
  out->push_back('}');
}

}  // namespace

std::string MetricTypeName(MetricType type) {
  switch (type) {
    case MetricType::kCounter:
      return "counter";
    case MetricType::kGauge:
      return "gauge";
    case MetricType::kHistogram:
      return "histogram";
  }
  return "untyped";
}

std::string EscapePrometheusLabelValue(std::string_view value) {
  std::string out;
  out.reserve(value.size());
  for (char c : value) {
    if (c == '\\') {
      out += "\\\\";
    } else if (c == '"') {
      out += "\\\"";
    } else if (c == '\n') {
      out += "\\n";
    } else {
      out.push_back(c);
    }
  }
  return out;
}

std::string EscapePrometheusHelp(std::string_view help) {
  std::string out;
  out.reserve(help.size());
  for (char c : help) {
    if (c == '\\') {
      out += "\\\\";
    } else if (c == '\n') {
      out += "\\n";
    } else {
      out.push_back(c);
    }
  }
  return out;
}

std::string FormatPrometheusValue(double value) {
  if (std::isnan(value)) return "NaN";
  if (std::isinf(value)) return value > 0 ? "+Inf" : "-Inf";
  if (value == 0) return "0";  // also for -0
  char buf[64];
  auto result = std::to_chars(buf, buf + sizeof buf, value);
  return std::string(buf, result.ptr);
}

std::vector<double> ExponentialBuckets(double start, double factor, int count) {
  std::vector<double> out;
  if (!(start > 0) || !(factor > 1)) return out;
  double v = start;
  for (int i = 0; i < count; ++i, v *= factor) out.push_back(v);
  return out;
}

Status ValidateMetricFamily(const MetricFamilySnapshot& family) {
  const std::string where = "metric family \"" + family.name + "\": ";
  if (!ValidName(family.name, /*colon_allowed=*/true)) {
    return InvalidArgumentError(where +
                                "name must match [a-zA-Z_:][a-zA-Z0-9_:]* (rename the metric)");
  }
  std::set<std::string> seen;
  for (const std::string& label : family.label_names) {
    if (!ValidName(label, /*colon_allowed=*/false) || label.rfind("__", 0) == 0) {
      return InvalidArgumentError(where + "label name " + Quoted(label) +
                                  " must match [a-zA-Z_][a-zA-Z0-9_]* and not start with \"__\"");
    }
    if (family.type == MetricType::kHistogram && label == "le") {
      return InvalidArgumentError(where + "label name \"le\" is reserved for histogram buckets");
    }
    if (!seen.insert(label).second) {
      return InvalidArgumentError(where + "label name " + Quoted(label) + " is declared twice");
    }
  }
  if (family.type == MetricType::kHistogram) {
    for (size_t i = 0; i < family.bucket_bounds.size(); ++i) {
      const double b = family.bucket_bounds[i];
      if (!std::isfinite(b)) {
        return InvalidArgumentError(where + "bucket bound " + FormatPrometheusValue(b) +
                                    " is not finite (the +Inf bucket is implicit)");
      }
      if (i > 0 && !(b > family.bucket_bounds[i - 1])) {
        return InvalidArgumentError(where + "bucket bounds must increase strictly; " +
                                    FormatPrometheusValue(b) + " follows " +
                                    FormatPrometheusValue(family.bucket_bounds[i - 1]));
      }
    }
  } else if (!family.bucket_bounds.empty()) {
    return InvalidArgumentError(where + "bucket bounds given for a " + MetricTypeName(family.type) +
                                " (only histograms have buckets)");
  }
  for (const MetricSeries& s : family.series) {
    if (s.label_values.size() != family.label_names.size()) {
      return InvalidArgumentError(where + "a series has " + std::to_string(s.label_values.size()) +
                                  " label values for " + std::to_string(family.label_names.size()) +
                                  " label names");
    }
    if (family.type == MetricType::kHistogram &&
        s.bucket_counts.size() != family.bucket_bounds.size() + 1) {
      return InvalidArgumentError(where + "a series has " + std::to_string(s.bucket_counts.size()) +
                                  " bucket counts for " +
                                  std::to_string(family.bucket_bounds.size()) +
                                  " bounds (expected bounds + 1, the last for +Inf)");
    }
  }
  return Status();
}

StatusOr<std::string> RenderPrometheusText(const std::vector<MetricFamilySnapshot>& families) {
  std::set<std::string> names;
  for (const MetricFamilySnapshot& f : families) {
    STRATA_RETURN_IF_ERROR(ValidateMetricFamily(f));
    if (!names.insert(f.name).second) {
      return InvalidArgumentError("metric family \"" + f.name +
                                  "\" appears twice (each family must be exported once)");
    }
  }
  std::string out;
  for (const MetricFamilySnapshot& f : families) {
    out += "# HELP " + f.name + " " + EscapePrometheusHelp(f.help) + "\n";
    out += "# TYPE " + f.name + " " + MetricTypeName(f.type) + "\n";
    std::vector<const MetricSeries*> sorted;
    sorted.reserve(f.series.size());
    for (const MetricSeries& s : f.series) sorted.push_back(&s);
    std::stable_sort(sorted.begin(), sorted.end(),
                     [](const MetricSeries* a, const MetricSeries* b) {
                       return a->label_values < b->label_values;
                     });
    for (const MetricSeries* s : sorted) {
      if (f.type != MetricType::kHistogram) {
        out += f.name;
        WriteLabels(&out, f.label_names, s->label_values);
        out += " " + FormatPrometheusValue(s->value) + "\n";
        continue;
      }
      uint64_t cumulative = 0;
      for (size_t i = 0; i <= f.bucket_bounds.size(); ++i) {
        cumulative += s->bucket_counts[i];
        out += f.name + "_bucket";
        WriteLabels(
            &out, f.label_names, s->label_values, "le",
            i < f.bucket_bounds.size() ? FormatPrometheusValue(f.bucket_bounds[i]) : "+Inf");
        out += " " + std::to_string(cumulative) + "\n";
      }
      out += f.name + "_sum";
      WriteLabels(&out, f.label_names, s->label_values);
      out += " " + FormatPrometheusValue(s->sum) + "\n";
      out += f.name + "_count";
      WriteLabels(&out, f.label_names, s->label_values);
      out += " " + std::to_string(cumulative) + "\n";
    }
  }
  return out;
}

// ---- cells ------------------------------------------------------------------------------------

class Counter::Cell {
 public:
  std::atomic<double> value{0};
};

void Counter::Increment(double amount) {
  if (!(amount > 0)) return;
  AtomicAdd(&cell_->value, amount);
}

double Counter::Value() const { return cell_->value.load(std::memory_order_relaxed); }

class Gauge::Cell {
 public:
  std::atomic<double> value{0};
};

void Gauge::Set(double value) { cell_->value.store(value, std::memory_order_relaxed); }
void Gauge::Add(double amount) { AtomicAdd(&cell_->value, amount); }
double Gauge::Value() const { return cell_->value.load(std::memory_order_relaxed); }

class Histogram::Cell {
 public:
  explicit Cell(const std::vector<double>* bounds)
      : bounds(bounds), counts(bounds->size() + 1, 0) {}
  const std::vector<double>* bounds;  // the family's
  mutable internal::Mutex mu;
  std::vector<uint64_t> counts STRATA_GUARDED_BY(mu);
  double sum STRATA_GUARDED_BY(mu) = 0;
};

void Histogram::Observe(double value) {
  if (std::isnan(value)) return;
  const std::vector<double>& bounds = *cell_->bounds;
  const size_t bucket =
      static_cast<size_t>(std::lower_bound(bounds.begin(), bounds.end(), value) - bounds.begin());
  internal::MutexLock lock(cell_->mu);
  ++cell_->counts[bucket];
  cell_->sum += value;
}

MetricSeries Histogram::Snapshot() const {
  MetricSeries s;
  internal::MutexLock lock(cell_->mu);
  s.bucket_counts = cell_->counts;
  s.sum = cell_->sum;
  return s;
}

// ---- families ---------------------------------------------------------------------------------

namespace {

// Series of one family: cells keyed by label values, created on first use and never removed (so
// references handed out stay valid). A std::map keeps them sorted for the exposition.
template <typename Handle, typename CellT>
class SeriesMap {
 public:
  template <typename MakeCell>
  Handle& Get(std::vector<std::string> values, MakeCell make_cell) {
    internal::MutexLock lock(mu_);
    auto it = series_.find(values);
    if (it == series_.end()) {
      cells_.push_back(make_cell());
      it = series_.emplace(std::move(values), Handle(cells_.back().get())).first;
    }
    return it->second;
  }

  template <typename Fn>
  void ForEach(Fn fn) const {
    internal::MutexLock lock(mu_);
    for (const auto& [values, handle] : series_) fn(values, handle);
  }

 private:
  mutable internal::Mutex mu_;
  std::map<std::vector<std::string>, Handle> series_ STRATA_GUARDED_BY(mu_);
  std::deque<std::unique_ptr<CellT>> cells_ STRATA_GUARDED_BY(mu_);
};

struct FamilyInfo {
  std::string name;
  std::string help;
  MetricType type;
  std::vector<std::string> label_names;
  std::vector<double> bounds;
};

class CounterFamilyImpl final : public CounterFamily {
 public:
  CounterFamilyImpl(FamilyInfo info, std::atomic<int64_t>* errors)
      : info_(std::move(info)), errors_(errors) {}
  Counter& WithLabels(std::initializer_list<std::string_view> values) override {
    return WithLabels(ToStrings(values));
  }
  Counter& WithLabels(const std::vector<std::string>& values) override {
    return series_.Get(Normalize(values, info_.label_names.size(), errors_),
                       [] { return std::make_unique<Counter::Cell>(); });
  }
  MetricFamilySnapshot Snapshot() const {
    MetricFamilySnapshot f{info_.name, info_.help, info_.type, info_.label_names, {}, {}};
    series_.ForEach([&](const std::vector<std::string>& values, const Counter& c) {
      MetricSeries s;
      s.label_values = values;
      s.value = c.Value();
      f.series.push_back(std::move(s));
    });
    return f;
  }

 private:
  const FamilyInfo info_;
  std::atomic<int64_t>* errors_;
  SeriesMap<Counter, Counter::Cell> series_;
};

class GaugeFamilyImpl final : public GaugeFamily {
 public:
  GaugeFamilyImpl(FamilyInfo info, std::atomic<int64_t>* errors)
      : info_(std::move(info)), errors_(errors) {}
  Gauge& WithLabels(std::initializer_list<std::string_view> values) override {
    return WithLabels(ToStrings(values));
  }
  Gauge& WithLabels(const std::vector<std::string>& values) override {
    return series_.Get(Normalize(values, info_.label_names.size(), errors_),
                       [] { return std::make_unique<Gauge::Cell>(); });
  }
  MetricFamilySnapshot Snapshot() const {
    MetricFamilySnapshot f{info_.name, info_.help, info_.type, info_.label_names, {}, {}};
    series_.ForEach([&](const std::vector<std::string>& values, const Gauge& g) {
      MetricSeries s;
      s.label_values = values;
      s.value = g.Value();
      f.series.push_back(std::move(s));
    });
    return f;
  }

 private:
  const FamilyInfo info_;
  std::atomic<int64_t>* errors_;
  SeriesMap<Gauge, Gauge::Cell> series_;
};

class HistogramFamilyImpl final : public HistogramFamily {
 public:
  HistogramFamilyImpl(FamilyInfo info, std::atomic<int64_t>* errors)
      : info_(std::move(info)), errors_(errors) {}
  Histogram& WithLabels(std::initializer_list<std::string_view> values) override {
    return WithLabels(ToStrings(values));
  }
  Histogram& WithLabels(const std::vector<std::string>& values) override {
    return series_.Get(Normalize(values, info_.label_names.size(), errors_),
                       [this] { return std::make_unique<Histogram::Cell>(&info_.bounds); });
  }
  MetricFamilySnapshot Snapshot() const {
    MetricFamilySnapshot f{info_.name, info_.help, info_.type, info_.label_names, info_.bounds, {}};
    series_.ForEach([&](const std::vector<std::string>& values, const Histogram& h) {
      MetricSeries s = h.Snapshot();
      s.label_values = values;
      f.series.push_back(std::move(s));
    });
    return f;
  }

 private:
  const FamilyInfo info_;
  std::atomic<int64_t>* errors_;
  SeriesMap<Histogram, Histogram::Cell> series_;
};

}  // namespace

class MetricRegistry::Impl {
 public:
  // Validates and reserves the name; the caller adds the family.
  Status Check(const FamilyInfo& info) const STRATA_REQUIRES(mu) {
    MetricFamilySnapshot f{info.name, info.help, info.type, info.label_names, info.bounds, {}};
    STRATA_RETURN_IF_ERROR(ValidateMetricFamily(f));
    for (const Entry& e : families) {
      if (e.name == info.name) {
        return AlreadyExistsError("metric family \"" + info.name +
                                  "\" is already registered (register each name once and keep "
                                  "the pointer)");
      }
    }
    return Status();
  }

  struct Entry {
    std::string name;
    std::unique_ptr<CounterFamilyImpl> counter;
    std::unique_ptr<GaugeFamilyImpl> gauge;
    std::unique_ptr<HistogramFamilyImpl> histogram;
  };

  mutable internal::Mutex mu;
  std::vector<Entry> families STRATA_GUARDED_BY(mu);  // registration order
  std::atomic<int64_t> label_errors{0};
};

MetricRegistry::MetricRegistry() : impl_(std::make_unique<Impl>()) {}
MetricRegistry::~MetricRegistry() = default;

StatusOr<CounterFamily*> MetricRegistry::AddCounter(std::string name, std::string help,
                                                    std::vector<std::string> label_names) {
  FamilyInfo info{
      std::move(name), std::move(help), MetricType::kCounter, std::move(label_names), {}};
  internal::MutexLock lock(impl_->mu);
  STRATA_RETURN_IF_ERROR(impl_->Check(info));
  Impl::Entry e;
  e.name = info.name;
  e.counter = std::make_unique<CounterFamilyImpl>(std::move(info), &impl_->label_errors);
  CounterFamily* out = e.counter.get();
  impl_->families.push_back(std::move(e));
  return out;
}

StatusOr<GaugeFamily*> MetricRegistry::AddGauge(std::string name, std::string help,
                                                std::vector<std::string> label_names) {
  FamilyInfo info{std::move(name), std::move(help), MetricType::kGauge, std::move(label_names), {}};
  internal::MutexLock lock(impl_->mu);
  STRATA_RETURN_IF_ERROR(impl_->Check(info));
  Impl::Entry e;
  e.name = info.name;
  e.gauge = std::make_unique<GaugeFamilyImpl>(std::move(info), &impl_->label_errors);
  GaugeFamily* out = e.gauge.get();
  impl_->families.push_back(std::move(e));
  return out;
}

StatusOr<HistogramFamily*> MetricRegistry::AddHistogram(std::string name, std::string help,
                                                        std::vector<std::string> label_names,
                                                        std::vector<double> bucket_bounds) {
  FamilyInfo info{std::move(name), std::move(help), MetricType::kHistogram, std::move(label_names),
                  std::move(bucket_bounds)};
  internal::MutexLock lock(impl_->mu);
  STRATA_RETURN_IF_ERROR(impl_->Check(info));
  Impl::Entry e;
  e.name = info.name;
  e.histogram = std::make_unique<HistogramFamilyImpl>(std::move(info), &impl_->label_errors);
  HistogramFamily* out = e.histogram.get();
  impl_->families.push_back(std::move(e));
  return out;
}

std::vector<MetricFamilySnapshot> MetricRegistry::Snapshot() const {
  internal::MutexLock lock(impl_->mu);
  std::vector<MetricFamilySnapshot> out;
  out.reserve(impl_->families.size());
  for (const Impl::Entry& e : impl_->families) {
    if (e.counter) out.push_back(e.counter->Snapshot());
    if (e.gauge) out.push_back(e.gauge->Snapshot());
    if (e.histogram) out.push_back(e.histogram->Snapshot());
  }
  return out;
}

std::string MetricRegistry::RenderPrometheus() const {
  StatusOr<std::string> text = RenderPrometheusText(Snapshot());
  // Registration validated every family and WithLabels() normalises label counts, so rendering a
  // registry cannot fail; an empty exposition would hide the bug, so say it in the text.
  if (!text.ok())
    return "# strata metrics: " + EscapePrometheusHelp(text.status().ToString()) + "\n";
  return *std::move(text);
}

int64_t MetricRegistry::label_errors() const {
  return impl_->label_errors.load(std::memory_order_relaxed);
}

}  // namespace strata
