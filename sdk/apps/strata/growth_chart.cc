#include "growth_chart.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <set>
#include <sstream>

namespace strata::cli {
namespace {

// Colors per layer (colorblind-friendly Okabe-Ito palette), in render order.
constexpr const char* kLayerColors[kLayerCount] = {"#0072B2", "#56B4E9", "#009E73",
                                                   "#F0E442", "#E69F00", "#CC79A7"};

std::string Escape(const std::string& text) {
  std::string out;
  for (char c : text) {
    switch (c) {
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '&':
        out += "&amp;";
        break;
      case '"':
        out += "&quot;";
        break;
      default:
        out += c;
    }
  }
  return out;
}

std::string Num(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f", v);
  return buf;
}

// A "nice" tick step (1, 2 or 5 times a power of ten) giving about `ticks` intervals over `range`.
double NiceStep(double range, int ticks) {
  if (range <= 0) return 1;
  double raw = range / ticks;
  double power = std::pow(10.0, std::floor(std::log10(raw)));
  double fraction = raw / power;
  double nice = fraction <= 1 ? 1 : fraction <= 2 ? 2 : fraction <= 5 ? 5 : 10;
  return nice * power;
}

}  // namespace

std::string HumanTokens(double tokens) {
  char buf[32];
  if (tokens >= 1e6) {
    std::snprintf(buf, sizeof buf, "%.3gM", tokens / 1e6);
  } else if (tokens >= 1e3) {
    std::snprintf(buf, sizeof buf, "%.3gK", tokens / 1e3);
  } else {
    std::snprintf(buf, sizeof buf, "%.0f", tokens);
  }
  return buf;
}

namespace {

// The chart's size and margins, in SVG pixels.
constexpr double kWidth = 960, kHeight = 540;
constexpr double kLeft = 80, kRight = 170, kTop = 70, kBottom = 60;
constexpr double kPlotW = kWidth - kLeft - kRight, kPlotH = kHeight - kTop - kBottom;

// What the points add up to: the peak, the compactions (and the turns to mark), the cached
// tokens they invalidated, and which layers hold anything.
struct GrowthTotals {
  double max_total = 0;
  int64_t compactions = 0, invalidated = 0;
  int64_t summary_input = 0, summary_cached = 0, summary_output = 0;  // of the summary requests
  bool layer_used[kLayerCount] = {};
  std::set<int64_t> marks;
};

GrowthTotals Totals(const GrowthChartInput& input) {
  GrowthTotals t;
  t.marks.insert(input.compaction_turns.begin(), input.compaction_turns.end());
  for (const GrowthPoint& p : input.points) {
    t.max_total = std::max(t.max_total, static_cast<double>(p.TotalTokens()));
    t.compactions += p.compactions;
    t.invalidated += p.invalidated_tokens;
    t.summary_input += p.summary_input_tokens;
    t.summary_cached += p.summary_cached_tokens;
    t.summary_output += p.summary_output_tokens;
    if (p.compactions > 0) t.marks.insert(p.turn);
    for (int i = 0; i < kLayerCount; ++i) {
      t.layer_used[i] = t.layer_used[i] || p.layer_tokens[i] > 0;
    }
  }
  t.compactions =
      std::max<int64_t>(t.compactions, static_cast<int64_t>(input.compaction_turns.size()));
  return t;
}

// ", summaries 41.2K in (39.5K cached), 812 out": the tokens of the summary requests the turns
// sent, when they sent any.
std::string SummarySubtitle(const GrowthTotals& t) {
  if (t.summary_input == 0 && t.summary_output == 0) return "";
  return ", summaries " + HumanTokens(static_cast<double>(t.summary_input)) + " in (" +
         HumanTokens(static_cast<double>(t.summary_cached)) + " cached), " +
         HumanTokens(static_cast<double>(t.summary_output)) + " out";
}

// The axes' ranges and tick steps, and the mapping of (turn, tokens) to SVG coordinates.
struct ChartScale {
  int64_t first_turn = 0, last_turn = 1;
  double y_step = 1, y_max = 1, x_step = 1;
  double X(double turn) const {
    return kLeft + (turn - first_turn) / (last_turn - first_turn) * kPlotW;
  }
  double Y(double tokens) const { return kTop + kPlotH - tokens / y_max * kPlotH; }
};

ChartScale ScaleFor(const std::vector<GrowthPoint>& points, double max_total) {
  ChartScale s;
  s.first_turn = points.empty() ? 0 : points.front().turn;
  s.last_turn = points.empty() ? 1 : points.back().turn;
  if (s.last_turn <= s.first_turn) s.last_turn = s.first_turn + 1;
  s.y_step = NiceStep(max_total > 0 ? max_total : 1000, 5);
  s.y_max = std::max(s.y_step, std::ceil((max_total > 0 ? max_total : 1000) / s.y_step) * s.y_step);
  s.x_step =
      std::max(1.0, std::round(NiceStep(static_cast<double>(s.last_turn - s.first_turn), 8)));
  return s;
}

// Horizontal grid lines with the y labels, and the x ticks with theirs.
void DrawGrid(std::ostringstream& svg, const ChartScale& s) {
  for (double v = 0; v <= s.y_max + s.y_step / 2; v += s.y_step) {
    svg << "<line x1=\"" << kLeft << "\" y1=\"" << Num(s.Y(v)) << "\" x2=\"" << kLeft + kPlotW
        << "\" y2=\"" << Num(s.Y(v)) << "\" stroke=\"#e5e5e5\"/>\n";
    svg << "<text x=\"" << kLeft - 8 << "\" y=\"" << Num(s.Y(v) + 4) << "\" text-anchor=\"end\">"
        << HumanTokens(v) << "</text>\n";
  }
  for (double t = std::ceil(s.first_turn / s.x_step) * s.x_step; t <= s.last_turn; t += s.x_step) {
    svg << "<line x1=\"" << Num(s.X(t)) << "\" y1=\"" << kTop + kPlotH << "\" x2=\"" << Num(s.X(t))
        << "\" y2=\"" << kTop + kPlotH + 5 << "\" stroke=\"#333333\"/>\n";
    svg << "<text x=\"" << Num(s.X(t)) << "\" y=\"" << kTop + kPlotH + 20
        << "\" text-anchor=\"middle\">" << static_cast<int64_t>(t) << "</text>\n";
  }
}

// Stacked areas, bottom layer first (the most stable layer at the bottom).
void DrawAreas(std::ostringstream& svg, const ChartScale& s, const std::vector<GrowthPoint>& points,
               const bool (&layer_used)[kLayerCount]) {
  if (points.empty()) return;
  std::vector<double> base(points.size(), 0.0);
  for (int layer = 0; layer < kLayerCount; ++layer) {
    if (!layer_used[layer]) continue;
    std::vector<double> top(points.size());
    for (size_t i = 0; i < points.size(); ++i) top[i] = base[i] + points[i].layer_tokens[layer];
    svg << "<polygon fill=\"" << kLayerColors[layer] << "\" fill-opacity=\"0.85\" stroke=\""
        << kLayerColors[layer] << "\" stroke-width=\"0.5\" points=\"";
    for (size_t i = 0; i < points.size(); ++i) {
      svg << Num(s.X(static_cast<double>(points[i].turn))) << "," << Num(s.Y(top[i])) << " ";
    }
    for (size_t i = points.size(); i-- > 0;) {
      svg << Num(s.X(static_cast<double>(points[i].turn))) << "," << Num(s.Y(base[i])) << " ";
    }
    svg << "\"><title>" << LayerName(static_cast<Layer>(layer)) << "</title></polygon>\n";
    base = std::move(top);
  }
}

// Compactions: dashed vertical lines with a label.
void DrawCompactions(std::ostringstream& svg, const ChartScale& s, const std::set<int64_t>& marks) {
  for (int64_t turn : marks) {
    double x = s.X(static_cast<double>(turn));
    svg << "<line x1=\"" << Num(x) << "\" y1=\"" << kTop << "\" x2=\"" << Num(x) << "\" y2=\""
        << kTop + kPlotH << "\" stroke=\"#D55E00\" stroke-width=\"1.5\" stroke-dasharray=\"5,4\">"
        << "<title>compaction at turn " << turn << "</title></line>\n";
    svg << "<text x=\"" << Num(x + 3) << "\" y=\"" << kTop + 12 << "\" fill=\"#D55E00\" "
        << "font-size=\"11\">compaction</text>\n";
  }
}

// Axes and their titles.
void DrawAxes(std::ostringstream& svg) {
  svg << "<line x1=\"" << kLeft << "\" y1=\"" << kTop << "\" x2=\"" << kLeft << "\" y2=\""
      << kTop + kPlotH << "\" stroke=\"#333333\"/>\n";
  svg << "<line x1=\"" << kLeft << "\" y1=\"" << kTop + kPlotH << "\" x2=\"" << kLeft + kPlotW
      << "\" y2=\"" << kTop + kPlotH << "\" stroke=\"#333333\"/>\n";
  svg << "<text x=\"" << Num(kLeft + kPlotW / 2) << "\" y=\"" << kHeight - 18
      << "\" text-anchor=\"middle\">turn</text>\n";
  svg << "<text transform=\"translate(22," << Num(kTop + kPlotH / 2)
      << ") rotate(-90)\" text-anchor=\"middle\">context tokens</text>\n";
}

// Legend, top layer first so it reads like the stack.
void DrawLegend(std::ostringstream& svg, const GrowthTotals& t) {
  double ly = kTop + 10;
  const double lx = kLeft + kPlotW + 20;
  for (int layer = kLayerCount - 1; layer >= 0; --layer) {
    if (!t.layer_used[layer]) continue;
    svg << "<rect x=\"" << lx << "\" y=\"" << Num(ly - 10)
        << "\" width=\"14\" height=\"14\" fill=\"" << kLayerColors[layer] << "\"/>\n";
    svg << "<text x=\"" << lx + 20 << "\" y=\"" << Num(ly + 2) << "\">"
        << LayerName(static_cast<Layer>(layer)) << "</text>\n";
    ly += 22;
  }
  if (!t.marks.empty()) {
    svg << "<line x1=\"" << lx << "\" y1=\"" << Num(ly - 3) << "\" x2=\"" << lx + 14 << "\" y2=\""
        << Num(ly - 3) << "\" stroke=\"#D55E00\" stroke-width=\"1.5\" stroke-dasharray=\"5,4\"/>\n";
    svg << "<text x=\"" << lx + 20 << "\" y=\"" << Num(ly + 1) << "\">compaction</text>\n";
  }
}

}  // namespace

std::string RenderGrowthSvg(const GrowthChartInput& input) {
  const auto& points = input.points;
  const GrowthTotals totals = Totals(input);
  const ChartScale scale = ScaleFor(points, totals.max_total);

  std::ostringstream svg;
  svg << "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" << kWidth << "\" height=\"" << kHeight
      << "\" viewBox=\"0 0 " << kWidth << " " << kHeight << "\" font-family=\"Helvetica, Arial, "
      << "sans-serif\" font-size=\"12\">\n";
  svg << "<rect width=\"100%\" height=\"100%\" fill=\"#ffffff\"/>\n";
  svg << "<text x=\"" << kLeft
      << "\" y=\"28\" font-size=\"18\" font-weight=\"bold\">Context growth: "
      << Escape(input.agent_id) << "</text>\n";
  svg << "<text x=\"" << kLeft << "\" y=\"48\" fill=\"#555555\">" << points.size()
      << " turns, peak " << HumanTokens(totals.max_total) << " tokens"
      << (input.tokens_estimated ? " (estimated)" : "") << ", " << totals.compactions
      << " compaction" << (totals.compactions == 1 ? "" : "s") << ", "
      << HumanTokens(static_cast<double>(totals.invalidated)) << " cached tokens invalidated"
      << SummarySubtitle(totals) << "</text>\n";
  DrawGrid(svg, scale);
  DrawAreas(svg, scale, points, totals.layer_used);
  DrawCompactions(svg, scale, totals.marks);
  DrawAxes(svg);
  DrawLegend(svg, totals);
  if (points.empty()) {
    svg << "<text x=\"" << Num(kLeft + kPlotW / 2) << "\" y=\"" << Num(kTop + kPlotH / 2)
        << "\" text-anchor=\"middle\" fill=\"#777777\">no growth points recorded</text>\n";
  }
  svg << "</svg>\n";
  return svg.str();
}

std::string RenderGrowthCsv(const std::vector<GrowthPoint>& points) {
  std::ostringstream csv;
  csv << "turn,unix_ms";
  for (int i = 0; i < kLayerCount; ++i) csv << "," << LayerName(static_cast<Layer>(i));
  csv << ",total,compactions,invalidated_tokens,summary_input_tokens,summary_cached_tokens,"
         "summary_output_tokens\n";
  for (const GrowthPoint& p : points) {
    csv << p.turn << "," << p.unix_ms;
    for (int64_t t : p.layer_tokens) csv << "," << t;
    csv << "," << p.TotalTokens() << "," << p.compactions << "," << p.invalidated_tokens << ","
        << p.summary_input_tokens << "," << p.summary_cached_tokens << ","
        << p.summary_output_tokens << "\n";
  }
  return csv.str();
}

}  // namespace strata::cli
