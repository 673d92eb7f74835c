// strata probe: the self-contained HTML report (probe.h). Everything is inline (styles, an SVG
// legend); the heatmap cells carry their numbers as data attributes (data-endpoint, data-length,
// data-depth, data-accuracy, data-probes, data-correct, data-low, data-high; recovery cells
// data-recovery) so that a test or a script can read them back from the page.
#include <algorithm>
#include <cstdio>
#include <sstream>

#include "probe.h"

namespace strata::cli::probe {
namespace {

using Json = nlohmann::ordered_json;

std::string Escape(const std::string& text) {
  std::string out;
  for (char c : text) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      case '\'': out += "&#39;"; break;
      default: out += c;
    }
  }
  return out;
}

std::string Num(const Json& v, const char* format = "%.4f") {
  if (v.is_null()) return "";
  char buf[64];
  std::snprintf(buf, sizeof buf, format, v.get<double>());
  return buf;
}

std::string Percent(const Json& v) { return v.is_null() ? "n/a" : Num(v.get<double>() * 100, "%.0f") + "%"; }

std::string Depth(const Json& v) { return Num(v, "%g"); }

// Red (0) to green (1); grey for no data.
std::string Colour(const Json& v) {
  if (v.is_null()) return "#e0e0e0";
  const double a = std::max(0.0, std::min(1.0, v.get<double>()));
  return "hsl(" + Num(Json(a * 120), "%.0f") + ",70%,78%)";
}

constexpr char kStyle[] = R"css(<style>
body{font-family:system-ui,sans-serif;margin:2em;color:#222;max-width:1100px}
table{border-collapse:collapse;margin:0.5em 0 1.5em}
th,td{border:1px solid #bbb;padding:4px 8px;text-align:center;font-size:14px}
td.cell,td.recovery{min-width:90px}
td small{color:#444}
.fail{color:#a00;font-weight:bold}
td.text{text-align:left;font-family:monospace;max-width:380px;word-break:break-all}
</style>)css";

constexpr char kLegend[] = R"svg(<svg width="240" height="34" xmlns="http://www.w3.org/2000/svg" role="img" aria-label="accuracy colour scale">
<defs><linearGradient id="g"><stop offset="0" stop-color="hsl(0,70%,78%)"/><stop offset="0.5" stop-color="hsl(60,70%,78%)"/><stop offset="1" stop-color="hsl(120,70%,78%)"/></linearGradient></defs>
<rect x="0" y="0" width="240" height="16" fill="url(#g)" stroke="#999"/>
<text x="0" y="30" font-size="11">0%</text><text x="110" y="30" font-size="11">50%</text><text x="212" y="30" font-size="11">100%</text></svg>)svg";

// The length x depth table of one endpoint: accuracy, interval and probes per cell.
void Heatmap(const Json& results, const Json& endpoint, std::ostringstream& out) {
  const std::string name = endpoint["name"].get<std::string>();
  out << "<h3>Endpoint " << Escape(name) << ": " << Escape(endpoint["url"].get<std::string>()) << "</h3>\n";
  out << "<p>" << endpoint["correct"].get<int64_t>() << " of " << endpoint["probes"].get<int64_t>()
      << " answered probes correct (" << Percent(endpoint["accuracy"]) << "); " << endpoint["failed"].get<int64_t>()
      << " failed requests, reported apart.</p>\n";
  out << "<table class=\"heatmap\" data-endpoint=\"" << Escape(name) << "\"><tr><th>length \\ depth</th>";
  for (const Json& d : results["depths"]) out << "<th>" << Depth(d) << "</th>";
  out << "</tr>\n";
  const size_t depths = results["depths"].size();
  for (size_t li = 0; li < results["lengths"].size(); ++li) {
    out << "<tr><th>" << Escape(results["lengths"][li]["label"].get<std::string>()) << "</th>";
    for (size_t di = 0; di < depths; ++di) {
      const Json& b = endpoint["buckets"][li * depths + di];
      out << "<td class=\"cell\" data-endpoint=\"" << Escape(name) << "\" data-length=\""
          << Escape(b["length"].get<std::string>()) << "\" data-depth=\"" << Depth(b["depth"]) << "\" data-accuracy=\""
          << Num(b["accuracy"]) << "\" data-probes=\"" << b["probes"].get<int64_t>() << "\" data-correct=\""
          << b["correct"].get<int64_t>() << "\" data-low=\"" << Num(b["interval"][0]) << "\" data-high=\""
          << Num(b["interval"][1]) << "\" style=\"background:" << Colour(b["accuracy"]) << "\">"
          << Percent(b["accuracy"]) << "<br><small>" << Num(b["interval"][0], "%.2f") << "&ndash;"
          << Num(b["interval"][1], "%.2f") << ", n=" << b["probes"].get<int64_t>();
      if (b["failed"].get<int64_t>() > 0) out << ", " << b["failed"].get<int64_t>() << " failed";
      out << "</small></td>";
    }
    out << "</tr>\n";
  }
  out << "</table>\n";
}

void RecoveryTable(const Json& results, std::ostringstream& out) {
  if (results["recovery"].empty()) return;
  out << "<h2>Recovery B/A per bucket</h2>\n<p>Accuracy of B divided by accuracy of A (1.00: B retrieves as well as A).</p>\n";
  out << "<table class=\"recovery\"><tr><th>length \\ depth</th>";
  for (const Json& d : results["depths"]) out << "<th>" << Depth(d) << "</th>";
  out << "</tr>\n";
  const size_t depths = results["depths"].size();
  const double min = results["min_recovery"].is_null() ? -1 : results["min_recovery"].get<double>();
  for (size_t li = 0; li < results["lengths"].size(); ++li) {
    out << "<tr><th>" << Escape(results["lengths"][li]["label"].get<std::string>()) << "</th>";
    for (size_t di = 0; di < depths; ++di) {
      const Json& r = results["recovery"][li * depths + di];
      const bool below = !r["recovery"].is_null() && r["recovery"].get<double>() < min;
      out << "<td class=\"recovery" << (below ? " fail" : "") << "\" data-length=\"" << Escape(r["length"].get<std::string>())
          << "\" data-depth=\"" << Depth(r["depth"]) << "\" data-recovery=\"" << Num(r["recovery"])
          << "\" style=\"background:" << Colour(r["recovery"]) << "\">"
          << (r["recovery"].is_null() ? "n/a" : Num(r["recovery"], "%.2f")) << "</td>";
    }
    out << "</tr>\n";
  }
  out << "</table>\n";
}

void KindTable(const Json& results, std::ostringstream& out) {
  out << "<h2>By probe kind</h2>\n<table class=\"kinds\"><tr><th>kind</th>";
  for (const Json& e : results["endpoints"]) out << "<th>" << Escape(e["name"].get<std::string>()) << " accuracy (95% interval, n)</th>";
  if (!results["recovery_by_kind"].empty()) out << "<th>recovery B/A</th>";
  out << "</tr>\n";
  for (size_t k = 0; k < results["endpoints"][0]["by_kind"].size(); ++k) {
    const std::string kind = results["endpoints"][0]["by_kind"][k]["kind"].get<std::string>();
    out << "<tr><th>" << Escape(kind) << "</th>";
    for (const Json& e : results["endpoints"]) {
      const Json& row = e["by_kind"][k];
      out << "<td class=\"kind\" data-endpoint=\"" << Escape(e["name"].get<std::string>()) << "\" data-kind=\"" << Escape(kind)
          << "\" data-accuracy=\"" << Num(row["accuracy"]) << "\">" << Percent(row["accuracy"]) << " ("
          << Num(row["interval"][0], "%.2f") << "&ndash;" << Num(row["interval"][1], "%.2f") << ", n="
          << row["probes"].get<int64_t>() << ")</td>";
    }
    if (!results["recovery_by_kind"].empty()) {
      const Json& r = results["recovery_by_kind"][k]["recovery"];
      out << "<td data-kind-recovery=\"" << Num(r) << "\">" << (r.is_null() ? "n/a" : Num(r, "%.2f")) << "</td>";
    }
    out << "</tr>\n";
  }
  out << "</table>\n";
}

void TimingTable(const Json& results, std::ostringstream& out) {
  out << "<h2>TTFT and cached share per bucket</h2>\n<table class=\"timing\"><tr><th>endpoint</th><th>length</th>"
         "<th>depth</th><th>mean TTFT (ms)</th><th>cached share</th><th>mean input tokens</th><th>mean needle depth</th></tr>\n";
  for (const Json& e : results["endpoints"]) {
    for (const Json& b : e["buckets"]) {
      out << "<tr><td>" << Escape(e["name"].get<std::string>()) << "</td><td>" << Escape(b["length"].get<std::string>())
          << "</td><td>" << Depth(b["depth"]) << "</td><td data-ttft=\"" << Num(b["ttft_ms_mean"]) << "\">"
          << (b["ttft_ms_mean"].is_null() ? "n/a" : Num(b["ttft_ms_mean"], "%.1f")) << "</td><td>"
          << Percent(b["cached_share"]) << "</td><td>" << (b["tokens_mean"].is_null() ? "n/a" : b["tokens_mean"].dump())
          << "</td><td>" << (b["depth_actual_mean"].is_null() ? "n/a" : Num(b["depth_actual_mean"], "%.2f")) << "</td></tr>\n";
    }
  }
  out << "</table>\n";
}

void WorstTable(const Json& results, std::ostringstream& out) {
  out << "<h2>Worst probes</h2>\n";
  if (results["worst"].empty()) {
    out << "<p>No wrong answer.</p>\n";
    return;
  }
  out << "<table class=\"worst\"><tr><th>endpoint</th><th>probe</th><th>kind</th><th>tokens</th><th>depth</th>"
         "<th>expected</th><th>given</th></tr>\n";
  for (const Json& w : results["worst"]) {
    out << "<tr class=\"wrong\"><td>" << Escape(w["endpoint"].get<std::string>()) << "</td><td>" << Escape(w["probe"].get<std::string>())
        << "</td><td>" << Escape(w["kind"].get<std::string>()) << "</td><td>" << w["tokens"].get<int64_t>() << "</td><td>"
        << Num(w["depth_actual"], "%.2f") << "</td><td class=\"text expected\">" << Escape(w["expected"].get<std::string>())
        << "</td><td class=\"text given\">" << Escape(w["given"].get<std::string>()) << "</td></tr>\n";
  }
  out << "</table>\n";
}

}  // namespace

std::string RenderHtml(const Json& results) {
  std::ostringstream out;
  out << "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>strata probe report</title>\n"
      << kStyle << "</head>\n<body>\n<h1>strata probe: long-context fidelity</h1>\n";
  const Json& sources = results["sources"];
  out << "<p>" << results["probes_planned"].get<int64_t>() << " probes planned from " << sources["files"].get<int64_t>()
      << " files (" << sources["content_tokens"].get<int64_t>() << " tokens of content), seed " << results["seed"].dump()
      << "; <span id=\"discarded\" data-discarded=\"" << results["discarded"].get<int64_t>() << "\">"
      << results["discarded"].get<int64_t>() << " discarded</span>";
  for (const auto& [reason, count] : results["discarded_by_reason"].items()) {
    out << " (" << count.get<int64_t>() << ": " << Escape(reason) << ")";
  }
  out << ". "
      << "Answers are compared exactly after trimming whitespace and surrounding quotes, backticks and a final period.</p>\n";
  if (!results["min_recovery"].is_null()) {
    out << "<p>--min-recovery " << Num(results["min_recovery"], "%.2f") << ": ";
    if (results["failing"].empty()) {
      out << "every bucket passes.</p>\n";
    } else {
      out << "<span class=\"fail\">" << results["failing"].size() << " buckets below</span></p>\n<ul id=\"failing\">";
      for (const Json& f : results["failing"]) out << "<li>" << Escape(f.get<std::string>()) << "</li>";
      out << "</ul>\n";
    }
  }
  out << "<h2>Accuracy by length and depth</h2>\n" << kLegend << "\n";
  for (const Json& e : results["endpoints"]) Heatmap(results, e, out);
  RecoveryTable(results, out);
  KindTable(results, out);
  TimingTable(results, out);
  WorstTable(results, out);
  out << "</body></html>\n";
  return out.str();
}

}  // namespace strata::cli::probe
