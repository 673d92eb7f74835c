// strata probe: comparing answers and summarizing the outcomes as the --json results (probe.h).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>

#include "probe.h"

namespace strata::cli::probe {
namespace {

using Json = nlohmann::ordered_json;

constexpr size_t kMaxWorst = 25;
constexpr size_t kMaxFailureSamples = 10;

std::string Trimmed(const std::string& s) {
  size_t start = s.find_first_not_of(" \t\r\n");
  if (start == std::string::npos) return "";
  size_t end = s.find_last_not_of(" \t\r\n");
  return s.substr(start, end - start + 1);
}

// Correct, answered and failed counts of a group of outcomes, with TTFT and cached share.
struct Tally {
  int64_t probes = 0, correct = 0, failed = 0, discarded = 0;
  double ttft_ms = 0;
  int64_t prompt_tokens = 0, cached_tokens = 0, tokens = 0;
  bool cached_reported = false;
  double depth_actual = 0;

  void Add(const ProbeOutcome& o) {
    if (o.discarded) {
      ++discarded;
      return;
    }
    if (o.failed) {
      ++failed;
      return;
    }
    ++probes;
    correct += o.correct ? 1 : 0;
    ttft_ms += o.ttft_ms;
    tokens += o.tokens;
    depth_actual += o.depth_actual;
    prompt_tokens += o.prompt_tokens;
    if (o.cached_tokens) {
      cached_reported = true;
      cached_tokens += *o.cached_tokens;
    }
  }
  Json Accuracy() const { return probes > 0 ? Json(static_cast<double>(correct) / static_cast<double>(probes)) : Json(nullptr); }
  void Write(Json* j) const {
    (*j)["probes"] = probes;
    (*j)["correct"] = correct;
    (*j)["accuracy"] = Accuracy();
    auto [lo, hi] = WilsonInterval(correct, probes);
    (*j)["interval"] = {lo, hi};
    (*j)["failed"] = failed;
    (*j)["discarded"] = discarded;
    (*j)["ttft_ms_mean"] = probes > 0 ? Json(ttft_ms / static_cast<double>(probes)) : Json(nullptr);
    (*j)["cached_share"] = cached_reported && prompt_tokens > 0
                               ? Json(static_cast<double>(cached_tokens) / static_cast<double>(prompt_tokens))
                               : Json(nullptr);
    (*j)["tokens_mean"] = probes > 0 ? Json(tokens / probes) : Json(nullptr);
    (*j)["depth_actual_mean"] = probes > 0 ? Json(depth_actual / static_cast<double>(probes)) : Json(nullptr);
  }
};

Json Recovery(const Json& a, const Json& b) {
  if (a.is_null() || b.is_null() || a.get<double>() <= 0) return nullptr;
  return b.get<double>() / a.get<double>();
}

std::string Fixed(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2f", v);
  return buf;
}

// The per-endpoint object: totals, buckets (length x depth) and kinds.
Json EndpointJson(const ProbeGenerator& generator, const std::vector<ProbeSpec>& plan,
                  const std::vector<ProbeOutcome>& outcomes, size_t endpoint) {
  const GenerateOptions& opt = generator.options();
  std::vector<Tally> buckets(opt.lengths.size() * opt.depths.size());
  std::vector<Tally> kinds(kProbeKinds);
  Tally total;
  Json failures = Json::array();
  for (const ProbeOutcome& o : outcomes) {
    if (o.endpoint != endpoint) continue;
    const ProbeSpec& spec = plan[o.probe];
    buckets[spec.length_index * opt.depths.size() + spec.depth_index].Add(o);
    kinds[static_cast<size_t>(spec.kind)].Add(o);
    total.Add(o);
    if (o.failed && failures.size() < kMaxFailureSamples) failures.push_back({{"probe", spec.id}, {"error", o.error}});
  }
  Json j;
  total.Write(&j);
  j["buckets"] = Json::array();
  for (size_t li = 0; li < opt.lengths.size(); ++li) {
    for (size_t di = 0; di < opt.depths.size(); ++di) {
      Json b = {{"length", opt.lengths[li].label}, {"depth", opt.depths[di]}};
      buckets[li * opt.depths.size() + di].Write(&b);
      j["buckets"].push_back(std::move(b));
    }
  }
  j["by_kind"] = Json::array();
  for (ProbeKind k : opt.kinds) {
    Json kj = {{"kind", KindName(k)}};
    kinds[static_cast<size_t>(k)].Write(&kj);
    j["by_kind"].push_back(std::move(kj));
  }
  j["failure_samples"] = failures;
  return j;
}

// Wrong answers, those of the least accurate buckets (then the longest contexts) first.
Json WorstJson(const std::vector<ProbeSpec>& plan, const std::vector<ProbeOutcome>& outcomes, const Json& endpoints,
               size_t depth_count) {
  std::vector<std::pair<double, const ProbeOutcome*>> wrong;
  for (const ProbeOutcome& o : outcomes) {
    if (o.discarded || o.failed || o.correct) continue;
    const ProbeSpec& spec = plan[o.probe];
    const Json& bucket = endpoints[o.endpoint]["buckets"][spec.length_index * depth_count + spec.depth_index];
    const double accuracy = bucket["accuracy"].is_null() ? 1.0 : bucket["accuracy"].get<double>();
    wrong.emplace_back(accuracy - static_cast<double>(o.tokens) * 1e-12, &o);
  }
  std::stable_sort(wrong.begin(), wrong.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  Json out = Json::array();
  for (size_t i = 0; i < wrong.size() && i < kMaxWorst; ++i) {
    const ProbeOutcome& o = *wrong[i].second;
    const ProbeSpec& spec = plan[o.probe];
    out.push_back({{"probe", spec.id},
                   {"kind", KindName(spec.kind)},
                   {"endpoint", endpoints[o.endpoint]["name"]},
                   {"tokens", o.tokens},
                   {"depth", spec.depth},
                   {"depth_actual", o.depth_actual},
                   {"question", spec.question},
                   {"expected", spec.expected},
                   {"given", o.given}});
  }
  return out;
}

}  // namespace

std::string NormalizeAnswer(const std::string& text) {
  std::string s = text;
  const size_t think_end = s.rfind("</think>");
  if (think_end != std::string::npos) s = s.substr(think_end + 8);
  s = Trimmed(s);
  bool changed = true;
  while (changed && !s.empty()) {
    changed = false;
    const char first = s.front(), last = s.back();
    if (s.size() >= 2 && first == last && (first == '"' || first == '\'' || first == '`')) {
      s = Trimmed(s.substr(1, s.size() - 2));
      changed = true;
    } else if (last == '.' && s.size() > 1) {
      s = Trimmed(s.substr(0, s.size() - 1));
      changed = true;
    }
  }
  return s;
}

std::pair<double, double> WilsonInterval(int64_t correct, int64_t n) {
  if (n <= 0) return {0.0, 1.0};
  const double z = 1.96, nn = static_cast<double>(n), p = static_cast<double>(correct) / nn;
  const double denominator = 1 + z * z / nn;
  const double center = (p + z * z / (2 * nn)) / denominator;
  const double half = z * std::sqrt(p * (1 - p) / nn + z * z / (4 * nn * nn)) / denominator;
  return {std::max(0.0, center - half), std::min(1.0, center + half)};
}

Json ResultsJson(const ProbeGenerator& generator, const std::vector<ProbeSpec>& plan,
                 const std::vector<std::pair<std::string, std::string>>& endpoints,
                 const std::vector<ProbeOutcome>& outcomes, double min_recovery) {
  const GenerateOptions& opt = generator.options();
  Json j;
  j["tool"] = "strata probe";
  j["seed"] = opt.seed;
  const std::vector<size_t> counts = generator.candidate_counts();
  Json candidates;
  for (int k = 0; k < kProbeKinds; ++k) candidates[KindName(static_cast<ProbeKind>(k))] = counts[static_cast<size_t>(k)];
  j["sources"] = {{"files", generator.sources().files.size()},
                  {"skipped", generator.sources().skipped},
                  {"bytes", generator.sources().bytes},
                  {"content_tokens", generator.content_tokens()},
                  {"candidates", candidates}};
  j["lengths"] = Json::array();
  for (const LengthTarget& l : opt.lengths) {
    j["lengths"].push_back({{"label", l.label}, {"tokens", l.tokens},
                            {"target_tokens", std::min(l.tokens, opt.window_tokens - opt.max_output_tokens)}});
  }
  j["depths"] = opt.depths;
  j["probes_planned"] = plan.size();
  std::map<std::string, int64_t> discarded_by_kind, discarded_by_reason;
  int64_t discarded = 0;
  for (const ProbeOutcome& o : outcomes) {
    if (o.endpoint == 0 && o.discarded) {
      ++discarded;
      ++discarded_by_kind[KindName(plan[o.probe].kind)];
      ++discarded_by_reason[o.discard_reason];
    }
  }
  j["discarded"] = discarded;
  j["discarded_by_kind"] = discarded_by_kind;
  j["discarded_by_reason"] = discarded_by_reason;
  j["min_recovery"] = min_recovery >= 0 ? Json(min_recovery) : Json(nullptr);
  j["endpoints"] = Json::array();
  for (size_t e = 0; e < endpoints.size(); ++e) {
    Json ej = {{"name", endpoints[e].first}, {"url", endpoints[e].second}};
    ej.update(EndpointJson(generator, plan, outcomes, e));
    j["endpoints"].push_back(std::move(ej));
  }
  j["recovery"] = Json::array();
  j["recovery_by_kind"] = Json::array();
  if (endpoints.size() >= 2) {
    const Json& a = j["endpoints"][0];
    const Json& b = j["endpoints"][1];
    for (size_t i = 0; i < a["buckets"].size(); ++i) {
      j["recovery"].push_back({{"length", a["buckets"][i]["length"]},
                               {"depth", a["buckets"][i]["depth"]},
                               {"accuracy_a", a["buckets"][i]["accuracy"]},
                               {"accuracy_b", b["buckets"][i]["accuracy"]},
                               {"recovery", Recovery(a["buckets"][i]["accuracy"], b["buckets"][i]["accuracy"])}});
    }
    for (size_t i = 0; i < a["by_kind"].size(); ++i) {
      j["recovery_by_kind"].push_back({{"kind", a["by_kind"][i]["kind"]},
                                       {"recovery", Recovery(a["by_kind"][i]["accuracy"], b["by_kind"][i]["accuracy"])}});
    }
  }
  j["worst"] = WorstJson(plan, outcomes, j["endpoints"], opt.depths.size());
  j["failing"] = Json::array();
  for (const std::string& f : FailingBuckets(j)) j["failing"].push_back(f);
  return j;
}

std::vector<std::string> FailingBuckets(const Json& results) {
  std::vector<std::string> failing;
  if (!results.contains("min_recovery") || results["min_recovery"].is_null()) return failing;
  const double min = results["min_recovery"].get<double>();
  const bool compare = results["endpoints"].size() >= 2;
  // One endpoint: its accuracy is the recovery against a perfect one.
  const Json& rows = compare ? results["recovery"] : results["endpoints"][0]["buckets"];
  for (const Json& row : rows) {
    const Json& value = compare ? row["recovery"] : row["accuracy"];
    const std::string where = "length " + row["length"].get<std::string>() + ", depth " +
                              Fixed(row["depth"].get<double>());
    if (value.is_null()) {
      failing.push_back(where + ": no recovery (" + (compare ? "an endpoint answered no probe or A none right" : "no probe answered") + ")");
    } else if (value.get<double>() < min) {
      failing.push_back(where + ": " + (compare ? "recovery " : "accuracy ") + Fixed(value.get<double>()) +
                        " < --min-recovery " + Fixed(min));
    }
  }
  return failing;
}

}  // namespace strata::cli::probe
