// SentencePiece backend: ids equal Debian's spm_encode on the traces' text lines.
#include <unistd.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "strata/tokenizer_spec.h"
#include "testing/temp_dir.h"
#include "testing/traces.h"

namespace fs = std::filesystem;

namespace {

void CheckAgainstSpmEncode(size_t max_lines) {
  auto tok = strata::MakeTokenizer(std::string("spm:") + STRATA_TOK_SPM_MODEL);
  if (!tok.ok()) FAIL(tok.status().ToString());
  std::vector<std::string> lines = strata::testing::TestTraceTextLines(max_lines);
  REQUIRE(lines.size() > 1000);
  const strata::testing::TempDir temp("strata-spm-test-");
  REQUIRE(!temp.path().empty());
  const fs::path dir = temp.path();
  {
    std::ofstream out(dir / "in.txt", std::ios::binary);
    for (const auto& l : lines) out << l << "\n";
  }
  std::string cmd = std::string("spm_encode --model='") + STRATA_TOK_SPM_MODEL +
                    "' --output_format=id < '" + (dir / "in.txt").string() + "' > '" +
                    (dir / "out.txt").string() + "'";
  if (std::system(cmd.c_str()) != 0)
    FAIL("spm_encode failed or is missing (apt-get install sentencepiece): " << cmd);
  std::ifstream in(dir / "out.txt");
  std::string out_line;
  size_t n = 0, mismatches = 0;
  std::string first;
  while (std::getline(in, out_line) && n < lines.size()) {
    std::vector<int32_t> expected;
    std::istringstream ids(out_line);
    int32_t id;
    while (ids >> id) expected.push_back(id);
    std::vector<int32_t> actual = (*tok)->Encode(lines[n]);
    if (actual != expected && mismatches++ == 0) {
      size_t pos = 0;
      while (pos < actual.size() && pos < expected.size() && actual[pos] == expected[pos]) ++pos;
      first = "line " + std::to_string(n) + " differs at token " + std::to_string(pos) + ": " +
              lines[n];
    }
    ++n;
  }
  INFO(first);
  CHECK(n == lines.size());
  CHECK(mismatches == 0);
}

}  // namespace

TEST_CASE("sentencepiece ids equal spm_encode on 5000 trace lines", "[tokenize][spm]") {
  CheckAgainstSpmEncode(5000);
}

TEST_CASE("sentencepiece ids equal spm_encode on every trace line", "[tokenize][spm][.slow]") {
  CheckAgainstSpmEncode(SIZE_MAX);
}

TEST_CASE("sentencepiece tokenizer names its model, decodes and is exact", "[tokenize][spm]") {
  auto tok = strata::MakeTokenizer(std::string("spm:") + STRATA_TOK_SPM_MODEL);
  REQUIRE(tok.ok());
  CHECK((*tok)->Name().rfind("spm:", 0) == 0);
  CHECK((*tok)->Name().size() == 4 + 64);
  CHECK(!(*tok)->IsEstimate());
  std::string text = "def test_fields(self): return self.assertEqual(a, b)";
  std::vector<int32_t> ids = (*tok)->Encode(text);
  CHECK(ids.size() > 5);
  CHECK(ids.size() < text.size());
  CHECK((*tok)->Count(text) == ids.size());
  auto back = strata::Decode(**tok, ids);
  REQUIRE(back.ok());
  CHECK(*back == text);
  CHECK(strata::Decode(**tok, {999999}).status().code() == strata::StatusCode::kOutOfRange);
}

TEST_CASE("sentencepiece spec errors say what is wrong", "[tokenize][spm]") {
  auto missing = strata::MakeTokenizer("spm:/nonexistent/model.model");
  CHECK(missing.status().code() == strata::StatusCode::kNotFound);
  CHECK_THAT(missing.status().message(), Catch::Contains("/nonexistent/model.model"));
  // A tokenizer.json is not a SentencePiece model.
  fs::path bogus = fs::temp_directory_path() / "strata-not-a-model.model";
  std::ofstream(bogus) << "{\"model\": {}}";
  auto wrong = strata::MakeTokenizer("spm:" + bogus.string());
  CHECK(wrong.status().code() == strata::StatusCode::kDataLoss);
  CHECK_THAT(wrong.status().message(), Catch::Contains("is not a SentencePiece model"));
  fs::remove(bogus);
}
