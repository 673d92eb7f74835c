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

std::string RenderGrowthSvg(const GrowthChartInput& input) {
  constexpr double kWidth = 960, kHeight = 540;
  constexpr double kLeft = 80, kRight = 170, kTop = 70, kBottom = 60;
  const double plot_w = kWidth - kLeft - kRight, plot_h = kHeight - kTop - kBottom;
  const auto& points = input.points;

  int64_t first_turn = points.empty() ? 0 : points.front().turn;
  int64_t last_turn = points.empty() ? 1 : points.back().turn;
  if (last_turn <= first_turn) last_turn = first_turn + 1;
  double max_total = 0;
  int64_t compactions = 0, invalidated = 0;
  bool layer_used[kLayerCount] = {};
  std::set<int64_t> marks(input.compaction_turns.begin(), input.compaction_turns.end());
  for (const GrowthPoint& p : points) {
    max_total = std::max(max_total, static_cast<double>(p.TotalTokens()));
    compactions += p.compactions;
    invalidated += p.invalidated_tokens;
    if (p.compactions > 0) marks.insert(p.turn);
    for (int i = 0; i < kLayerCount; ++i) layer_used[i] = layer_used[i] || p.layer_tokens[i] > 0;
  }
  compactions = std::max<int64_t>(compactions, static_cast<int64_t>(input.compaction_turns.size()));
  const double y_step = NiceStep(max_total > 0 ? max_total : 1000, 5);
  const double y_max =
      std::max(y_step, std::ceil((max_total > 0 ? max_total : 1000) / y_step) * y_step);
  const double x_step =
      std::max(1.0, std::round(NiceStep(static_cast<double>(last_turn - first_turn), 8)));
  auto X = [&](double turn) {
    return kLeft + (turn - first_turn) / (last_turn - first_turn) * plot_w;
  };
  auto Y = [&](double tokens) { return kTop + plot_h - tokens / y_max * plot_h; };

  std::ostringstream svg;
  svg << "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" << kWidth << "\" height=\"" << kHeight
      << "\" viewBox=\"0 0 " << kWidth << " " << kHeight << "\" font-family=\"Helvetica, Arial, "
      << "sans-serif\" font-size=\"12\">\n";
  svg << "<rect width=\"100%\" height=\"100%\" fill=\"#ffffff\"/>\n";
  svg << "<text x=\"" << kLeft
      << "\" y=\"28\" font-size=\"18\" font-weight=\"bold\">Context growth: "
      << Escape(input.agent_id) << "</text>\n";
  svg << "<text x=\"" << kLeft << "\" y=\"48\" fill=\"#555555\">" << points.size()
      << " turns, peak " << HumanTokens(max_total) << " tokens"
      << (input.tokens_estimated ? " (estimated)" : "") << ", " << compactions << " compaction"
      << (compactions == 1 ? "" : "s") << ", " << HumanTokens(static_cast<double>(invalidated))
      << " cached tokens invalidated</text>\n";

  // Grid and y axis labels.
  for (double v = 0; v <= y_max + y_step / 2; v += y_step) {
    svg << "<line x1=\"" << kLeft << "\" y1=\"" << Num(Y(v)) << "\" x2=\"" << kLeft + plot_w
        << "\" y2=\"" << Num(Y(v)) << "\" stroke=\"#e5e5e5\"/>\n";
    svg << "<text x=\"" << kLeft - 8 << "\" y=\"" << Num(Y(v) + 4) << "\" text-anchor=\"end\">"
        << HumanTokens(v) << "</text>\n";
  }
  for (double t = std::ceil(first_turn / x_step) * x_step; t <= last_turn; t += x_step) {
    svg << "<line x1=\"" << Num(X(t)) << "\" y1=\"" << kTop + plot_h << "\" x2=\"" << Num(X(t))
        << "\" y2=\"" << kTop + plot_h + 5 << "\" stroke=\"#333333\"/>\n";
    svg << "<text x=\"" << Num(X(t)) << "\" y=\"" << kTop + plot_h + 20
        << "\" text-anchor=\"middle\">" << static_cast<int64_t>(t) << "</text>\n";
  }

  // Stacked areas, bottom layer first (the most stable layer at the bottom).
  if (!points.empty()) {
    std::vector<double> base(points.size(), 0.0);
    for (int layer = 0; layer < kLayerCount; ++layer) {
      if (!layer_used[layer]) continue;
      std::vector<double> top(points.size());
      for (size_t i = 0; i < points.size(); ++i) top[i] = base[i] + points[i].layer_tokens[layer];
      svg << "<polygon fill=\"" << kLayerColors[layer] << "\" fill-opacity=\"0.85\" stroke=\""
          << kLayerColors[layer] << "\" stroke-width=\"0.5\" points=\"";
      for (size_t i = 0; i < points.size(); ++i) {
        svg << Num(X(static_cast<double>(points[i].turn))) << "," << Num(Y(top[i])) << " ";
      }
      for (size_t i = points.size(); i-- > 0;) {
        svg << Num(X(static_cast<double>(points[i].turn))) << "," << Num(Y(base[i])) << " ";
      }
      svg << "\"><title>" << LayerName(static_cast<Layer>(layer)) << "</title></polygon>\n";
      base = std::move(top);
    }
  }

  // Compactions: dashed vertical lines with a label.
  for (int64_t turn : marks) {
    double x = X(static_cast<double>(turn));
    svg << "<line x1=\"" << Num(x) << "\" y1=\"" << kTop << "\" x2=\"" << Num(x) << "\" y2=\""
        << kTop + plot_h << "\" stroke=\"#D55E00\" stroke-width=\"1.5\" stroke-dasharray=\"5,4\">"
        << "<title>compaction at turn " << turn << "</title></line>\n";
    svg << "<text x=\"" << Num(x + 3) << "\" y=\"" << kTop + 12 << "\" fill=\"#D55E00\" "
        << "font-size=\"11\">compaction</text>\n";
  }

  // Axes and their titles.
  svg << "<line x1=\"" << kLeft << "\" y1=\"" << kTop << "\" x2=\"" << kLeft << "\" y2=\""
      << kTop + plot_h << "\" stroke=\"#333333\"/>\n";
  svg << "<line x1=\"" << kLeft << "\" y1=\"" << kTop + plot_h << "\" x2=\"" << kLeft + plot_w
      << "\" y2=\"" << kTop + plot_h << "\" stroke=\"#333333\"/>\n";
  svg << "<text x=\"" << Num(kLeft + plot_w / 2) << "\" y=\"" << kHeight - 18
      << "\" text-anchor=\"middle\">turn</text>\n";
  svg << "<text transform=\"translate(22," << Num(kTop + plot_h / 2)
      << ") rotate(-90)\" text-anchor=\"middle\">context tokens</text>\n";

  // Legend, top layer first so it reads like the stack.
  double ly = kTop + 10;
  const double lx = kLeft + plot_w + 20;
  for (int layer = kLayerCount - 1; layer >= 0; --layer) {
    if (!layer_used[layer]) continue;
    svg << "<rect x=\"" << lx << "\" y=\"" << Num(ly - 10)
        << "\" width=\"14\" height=\"14\" fill=\"" << kLayerColors[layer] << "\"/>\n";
    svg << "<text x=\"" << lx + 20 << "\" y=\"" << Num(ly + 2) << "\">"
        << LayerName(static_cast<Layer>(layer)) << "</text>\n";
    ly += 22;
  }
  if (!marks.empty()) {
    svg << "<line x1=\"" << lx << "\" y1=\"" << Num(ly - 3) << "\" x2=\"" << lx + 14 << "\" y2=\""
        << Num(ly - 3) << "\" stroke=\"#D55E00\" stroke-width=\"1.5\" stroke-dasharray=\"5,4\"/>\n";
    svg << "<text x=\"" << lx + 20 << "\" y=\"" << Num(ly + 1) << "\">compaction</text>\n";
  }
  if (points.empty()) {
    svg << "<text x=\"" << Num(kLeft + plot_w / 2) << "\" y=\"" << Num(kTop + plot_h / 2)
        << "\" text-anchor=\"middle\" fill=\"#777777\">no growth points recorded</text>\n";
  }
  svg << "</svg>\n";
  return svg.str();
}

std::string RenderGrowthCsv(const std::vector<GrowthPoint>& points) {
  std::ostringstream csv;
  csv << "turn,unix_ms";
  for (int i = 0; i < kLayerCount; ++i) csv << "," << LayerName(static_cast<Layer>(i));
  csv << ",total,compactions,invalidated_tokens\n";
  for (const GrowthPoint& p : points) {
    csv << p.turn << "," << p.unix_ms;
    for (int64_t t : p.layer_tokens) csv << "," << t;
    csv << "," << p.TotalTokens() << "," << p.compactions << "," << p.invalidated_tokens << "\n";
  }
  return csv.str();
}

}  // namespace strata::cli
