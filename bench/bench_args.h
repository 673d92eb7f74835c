// Command-line helpers shared by the benchmark programs.
#ifndef STRATA_BENCH_BENCH_ARGS_H_
#define STRATA_BENCH_BENCH_ARGS_H_

#include <sstream>
#include <string>
#include <vector>

namespace strata::bench {

// The items of a comma-separated list ("8000,32000" -> {"8000", "32000"}), empty items dropped.
inline std::vector<std::string> SplitCommaList(const std::string& text) {
  std::vector<std::string> out;
  std::stringstream in(text);
  for (std::string item; std::getline(in, item, ',');) {
    if (!item.empty()) out.push_back(item);
  }
  return out;
}

}  // namespace strata::bench

#endif  // STRATA_BENCH_BENCH_ARGS_H_
