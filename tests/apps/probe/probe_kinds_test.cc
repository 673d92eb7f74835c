// strata probe's kinds: candidates found in sources, the questions' fixed text (as docs/probe.md
// shows it), and counting a question's answers in a context.
#include <catch2/catch.hpp>
#include <fstream>
#include <set>

#include "probe.h"

namespace strata::cli::probe {
namespace {

TEST_CASE("candidates of each source kind are found, and a repeated key counts twice", "[probe]") {
  SourceSet sources;
  sources.files.push_back({"src/a.h", {"constexpr int kLimit = 42;", "int Grow(int n) {", "  return n * kLimit;", "}"}});
  sources.files.push_back({"doc.md", {"| step | seconds |", "|---|---|", "| build | 74 |"}});
  std::vector<Candidate> found = FindCandidates(sources);
  std::set<std::string> seen;
  for (const Candidate& c : found) seen.insert(std::string(KindName(c.kind)) + ":" + c.key + "=" + c.answer);
  CHECK(seen == std::set<std::string>{"constant:kLimit=42", "definition:Grow=src/a.h:2", "table:build=74"});
  Candidate limit = found[0];
  REQUIRE(limit.kind == ProbeKind::kConstant);
  CHECK(CountAnswers("1\tconstexpr int kLimit = 42;\n", limit) == 1);
  CHECK(CountAnswers("1\tconstexpr int kLimit = 42;\n7\tkLimit = 43\n", limit) == 2);
  CHECK(CountAnswers("1\treturn kLimit;\n", limit) == 0);
}

TEST_CASE("a table column whose name repeats in its header gives no candidate", "[probe]") {
  SourceSet sources;
  sources.files.push_back({"doc.md",
                           {"| clients | a | ratio | b | ratio | seconds |", "|---|---|---|---|---|---|",
                            "| 64 | 10 | 1.0x | 27 | 2.7x | 5 |"}});
  std::set<std::string> seen;
  for (const Candidate& c : FindCandidates(sources)) seen.insert(c.column + "=" + c.answer);
  CHECK(seen == std::set<std::string>{"a=10", "b=27", "seconds=5"});
}

}  // namespace
}  // namespace strata::cli::probe

namespace strata::cli::probe {
namespace {

TEST_CASE("the question formats docs/probe.md shows are the ones generation emits", "[probe][docs]") {
  std::ifstream in(std::string(STRATA_TEST_DATA_DIR) + "/../../docs/probe.md");
  REQUIRE(in);
  std::string line;
  std::set<std::string> seen;
  while (std::getline(in, line)) {
    const std::string head = "Question [strata-probe ";
    if (line.rfind(head, 0) != 0) continue;
    const std::string name = line.substr(head.size(), line.find(']') - head.size());
    std::optional<ProbeKind> kind = KindFromName(name);
    REQUIRE(kind);
    std::vector<std::string> params;
    for (size_t open = line.find('`'); open != std::string::npos; open = line.find('`', line.find('`', open + 1) + 1)) {
      params.push_back(line.substr(open + 1, line.find('`', open + 1) - open - 1));
    }
    REQUIRE(params.size() >= 1);
    std::string key = params[0], column;
    int ordinal = 0;
    if (*kind == ProbeKind::kTable) column = params[0], key = params.at(1);
    if (*kind == ProbeKind::kMrcr) ordinal = std::stoi(params.at(1));
    std::string shown = line;
    if (shown.size() > 3 && shown.compare(shown.size() - 3, 3, "...") == 0) shown.resize(shown.size() - 3);
    INFO(line);
    CHECK_THAT(QuestionText(*kind, key, column, ordinal), Catch::StartsWith(shown));
    seen.insert(name);
  }
  CHECK(seen.size() == static_cast<size_t>(kProbeKinds));
}

}  // namespace
}  // namespace strata::cli::probe
