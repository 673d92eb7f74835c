// ExplainCompaction: a compaction's candidates, expected savings and invalidation costs as text.
#include <cstdio>

#include "compact/common.h"
#include "strata/builtin_policies.h"

namespace strata {
namespace {

// `value` rounded to an integer (halves away from zero), with thousands separators.
std::string Thousands(double value) {
  return compact_internal::Thousands(static_cast<long long>(value + (value < 0 ? -0.5 : 0.5)));
}

std::string Format(const char* format, double value) {
  char text[48];
  std::snprintf(text, sizeof text, format, value);
  return text;
}

}  // namespace

std::string ExplainCompaction(const CompactionReport& report) {
  const CompactionExplanation& x = report.explanation;
  if (x.empty()) return "";
  std::string out = "turn " + std::to_string(report.turn) + ": " + x.mode + "; remaining turns ~" +
                    Format("%.1f", x.remaining_turns) + " (horizon " + Format("%.1f", x.horizon_turns) +
                    "); prices " + Format("%g", x.uncached_price) + "/" + Format("%g", x.cached_price);
  if (x.need_tokens) out += "; need " + Thousands(static_cast<double>(x.need_tokens)) + " tokens";
  out += "; " + Thousands(static_cast<double>(report.tokens_before)) + " -> " +
         Thousands(static_cast<double>(report.tokens_after)) + " tokens\n";
  out += "  chosen: boundary " + x.boundary_segment_id + ", removes " +
         Thousands(static_cast<double>(x.tokens_removed)) + " tokens, invalidates " +
         Thousands(static_cast<double>(x.invalidated_tokens)) + ": saving " + Thousands(x.expected_saving) +
         (x.expected_saving > x.invalidation_cost + x.request_cost ? " > " : " <= ") + "cost " +
         Thousands(x.invalidation_cost + x.request_cost) +
         (x.request_cost > 0 ? " (re-prefill " + Thousands(x.invalidation_cost) + ", summary requests " +
                                   Thousands(x.request_cost) + ")"
                             : "") +
         "\n";
  for (const CompactionCandidate& c : x.candidates) {
    char line[256];
    std::snprintf(line, sizeof line, "  %s %-14s %-8s removes %7s  invalidates %8s  saving %9s  cost %9s  %s\n",
                  c.chosen ? "*" : " ", c.action.c_str(), c.segment_id.c_str(),
                  Thousands(static_cast<double>(c.tokens_removed)).c_str(),
                  Thousands(static_cast<double>(c.invalidated_tokens)).c_str(), Thousands(c.expected_saving).c_str(),
                  Thousands(c.invalidation_cost).c_str(), c.value.c_str());
    out += line;
    if (c.request_cost > 0) {
      out.pop_back();  // the newline
      out += "; its summary requests cost " + Thousands(c.request_cost) + "\n";
    }
  }
  return out;
}

}  // namespace strata
