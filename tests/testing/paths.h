// Where a test finds the repository, the build and the programs it runs, read at run time.
//
//   std::ifstream in(std::string(STRATA_TEST_DATA_DIR) + "/README.md");
//   RunCommand(std::string(STRATA_CLI_PATH) + " replay ...");
//
// The values are compiled into one generated source (test_paths.cc in the build's tests/ folder,
// written by tests/CMakeLists.txt) rather than given to every test object as -D definitions, so
// that no test object's command line holds an absolute path: a fresh clone's build, which has
// other absolute paths, then reuses the main build's objects from ccache (CONTRIBUTING.md).
// Each STRATA_* macro below is a const char* expression; the program paths are defined only for
// the targets that link the program (their CMakeLists add STRATA_HAVE_<PROGRAM>).
#ifndef STRATA_TESTS_TESTING_PATHS_H_
#define STRATA_TESTS_TESTING_PATHS_H_

namespace strata::testing::paths {

const char* SourceDir();      // the repository
const char* BinaryDir();      // the build directory
const char* TestDataDir();    // tests/data
const char* TestTracesDir();  // tests/data/traces
const char* CliPath();        // the strata CLI
const char* SimPath();        // strata-sim
const char* SidecarPath();    // strata-sidecar
// The reference tokenizers scripts/setup installs under node_modules, and the test SentencePiece
// model of tests/data.
const char* Qwen3TokenizerJson();
const char* DeepseekTokenizerJson();
const char* SpmTestModel();
const char* TokenizerReferenceDir();  // the parity test's reference ids (tokenize_reference_ids)
const char* GrpcPythonDir();  // the Python gRPC stubs of proto/ (tests/unit/transport_grpc)

}  // namespace strata::testing::paths

#define STRATA_SOURCE_DIR (::strata::testing::paths::SourceDir())
#define STRATA_BINARY_DIR (::strata::testing::paths::BinaryDir())
#define STRATA_TEST_DATA_DIR (::strata::testing::paths::TestDataDir())
#define STRATA_TEST_TRACES_DIR (::strata::testing::paths::TestTracesDir())
#define STRATA_TOK_QWEN3_JSON (::strata::testing::paths::Qwen3TokenizerJson())
#define STRATA_TOK_DEEPSEEK_JSON (::strata::testing::paths::DeepseekTokenizerJson())
#define STRATA_TOK_SPM_MODEL (::strata::testing::paths::SpmTestModel())
#define STRATA_TOK_REFERENCE_DIR (::strata::testing::paths::TokenizerReferenceDir())
#define STRATA_GRPC_PY_DIR (::strata::testing::paths::GrpcPythonDir())
#ifdef STRATA_HAVE_CLI
#define STRATA_CLI_PATH (::strata::testing::paths::CliPath())
#endif
#ifdef STRATA_HAVE_SIM
#define STRATA_SIM_PATH (::strata::testing::paths::SimPath())
#endif
#ifdef STRATA_HAVE_SIDECAR
#define STRATA_SIDECAR_PATH (::strata::testing::paths::SidecarPath())
#endif

#endif  // STRATA_TESTS_TESTING_PATHS_H_
