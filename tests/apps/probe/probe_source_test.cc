// strata probe's sources: reading files and trajectories, skipping binary ones, cutting blocks.
#include <catch2/catch.hpp>

#include "probe.h"
#include "testing/status_testing.h"

namespace strata::cli::probe {
namespace {

using testing::Must;

TEST_CASE("sources skip binary files and read trajectories as their messages' text", "[probe]") {
  SourceSet sources = Must(LoadSources({STRATA_TEST_DATA_DIR}));
  CHECK(sources.skipped >= 1);  // the SentencePiece model
  bool trajectory = false;
  for (const SourceFile& file : sources.files) {
    CHECK(file.path.find("strata-test-spm.model") == std::string::npos);
    if (file.path.find("sympy__sympy-15976.jsonl") != std::string::npos) {
      REQUIRE_FALSE(file.lines.empty());
      CHECK(file.lines[0].rfind("[system]", 0) == 0);
      trajectory = true;
    }
  }
  CHECK(trajectory);
}

TEST_CASE("blocks show a file's lines numbered under a header naming the file and lines", "[probe]") {
  SourceSet sources;
  sources.files.push_back({"a/b.h", {"int x;", "int y;", "int z;"}});
  std::vector<Block> blocks = CutBlocks(sources, 2, 1000);
  REQUIRE(blocks.size() == 2);
  CHECK(RenderBlock(sources, blocks[0]) == "==> a/b.h (lines 1-2) <==\n1\tint x;\n2\tint y;\n");
  CHECK(RenderBlock(sources, blocks[1]) == "==> a/b.h (lines 3-3) <==\n3\tint z;\n");
}

}  // namespace
}  // namespace strata::cli::probe
