// The growth chart of `strata growth`: an agent's tokens per layer over turns as a stacked-area SVG
// with compactions marked, and the same numbers as CSV.
//
// Thread safety: pure functions.
#ifndef STRATA_APPS_STRATA_GROWTH_CHART_H_
#define STRATA_APPS_STRATA_GROWTH_CHART_H_

#include <string>
#include <vector>

#include "strata/store.h"

namespace strata::cli {

struct GrowthChartInput {
  std::string agent_id;
  std::vector<GrowthPoint> points;  // ordered by turn
  // Turns with a "compaction" event (in addition to points with compactions > 0).
  std::vector<int64_t> compaction_turns;
  bool tokens_estimated = true;  // says so in the subtitle
};

// A self-contained SVG document (no scripts, no external fonts or styles).
std::string RenderGrowthSvg(const GrowthChartInput& input);

// Header "turn,unix_ms,system,tools,index,docs,history,volatile,total,compactions,
// invalidated_tokens,summary_input_tokens,summary_cached_tokens,summary_output_tokens", then one
// line per point.
std::string RenderGrowthCsv(const std::vector<GrowthPoint>& points);

// "950", "12.5K", "1.05M".
std::string HumanTokens(double tokens);

}  // namespace strata::cli

#endif  // STRATA_APPS_STRATA_GROWTH_CHART_H_
