// The trajectories the benchmarks run on: the STRATA_TRACES_DIR environment variable when set, else
// the directory configured at build time (CMake cache variable STRATA_TRACES_DIR, by default the
// fixture set in tests/data/traces). A larger directory in the same layout widens a benchmark.
#ifndef STRATA_BENCH_TRACES_DIR_H_
#define STRATA_BENCH_TRACES_DIR_H_

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "bench_paths.h"

namespace strata::bench {

inline std::string TracesDir() {
  const char* env = std::getenv("STRATA_TRACES_DIR");
  return env != nullptr && *env != '\0' ? env : paths::ConfiguredTracesDir();
}

// Every *.jsonl below TracesDir() except manifest.jsonl, sorted.
inline std::vector<std::string> TraceFiles() {
  std::vector<std::string> files;
  for (const auto& entry : std::filesystem::recursive_directory_iterator(TracesDir())) {
    if (entry.path().extension() == ".jsonl" && entry.path().filename() != "manifest.jsonl") {
      files.push_back(entry.path().string());
    }
  }
  std::sort(files.begin(), files.end());
  return files;
}

}  // namespace strata::bench

#endif  // STRATA_BENCH_TRACES_DIR_H_
