// Where the benchmarks find the repository, the configured trajectories and the programs they run,
// read at run time from one generated source (bench_paths.cc in the build's bench/ folder, written
// by bench/CMakeLists.txt) instead of -D definitions: a benchmark object's command line then
// holds no absolute path, so a second checkout's build reuses it from ccache.
#ifndef STRATA_BENCH_BENCH_PATHS_H_
#define STRATA_BENCH_BENCH_PATHS_H_

namespace strata::bench::paths {

const char* SourceDir();            // the repository
const char* ConfiguredTracesDir();  // CMake cache variable STRATA_TRACES_DIR (traces_dir.h)
const char* SimPath();              // strata-sim, "" when not built
const char* SidecarPath();          // strata-sidecar, "" when not built

}  // namespace strata::bench::paths

#define STRATA_SOURCE_DIR (::strata::bench::paths::SourceDir())
#define STRATA_SIM_PATH (::strata::bench::paths::SimPath())
#define STRATA_SIDECAR_PATH (::strata::bench::paths::SidecarPath())

#endif  // STRATA_BENCH_BENCH_PATHS_H_
