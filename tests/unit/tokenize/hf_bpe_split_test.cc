// The Split pre-tokenizer's five behaviors (Hugging Face's SplitDelimiterBehavior) and its invert
// flag, on the example of the tokenizers library's documentation, for a piece at the start of the
// text and one further in.
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "tokenize/hf_bpe_pipeline.h"

namespace strata::tokenize_internal {
namespace {

// The pieces SplitPiece makes of text[from, end) with a Split on `pattern` and `behavior`.
std::vector<std::string> Split(const std::string& behavior, const std::string& text, size_t from,
                               const std::string& pattern = "-", bool invert = false) {
  const nlohmann::json j = {{"type", "Split"},
                            {"pattern", {{"String", pattern}}},
                            {"behavior", behavior},
                            {"invert", invert}};
  std::vector<PreStep> steps;
  bool byte_level = false;
  REQUIRE(ParsePreTokenizer(j, &steps, &byte_level).ok());
  REQUIRE(steps.size() == 1);
  // Pieces already in `out` stay as they were.
  std::vector<Piece> out = {{0, 0}}, matches;
  std::vector<std::pair<Piece, bool>> segs;
  SplitPiece(steps[0], text, {from, text.size()}, &out, &matches, &segs);
  REQUIRE(out.size() >= 1);
  CHECK(out[0].begin == 0);
  CHECK(out[0].end == 0);
  std::vector<std::string> pieces;
  for (size_t k = 1; k < out.size(); ++k)
    pieces.push_back(text.substr(out[k].begin, out[k].end - out[k].begin));
  return pieces;
}

using Pieces = std::vector<std::string>;

TEST_CASE("the Split pre-tokenizer's behaviors cut the-final--countdown as Hugging Face does",
          "[tokenize][hf]") {
  for (const std::string& prefix : {std::string(), std::string("xy")}) {
    INFO("the piece starts at " << prefix.size());
    const std::string text = prefix + "the-final--countdown";
    const size_t from = prefix.size();
    CHECK(Split("Removed", text, from) == Pieces{"the", "final", "countdown"});
    CHECK(Split("Isolated", text, from) == Pieces{"the", "-", "final", "-", "-", "countdown"});
    CHECK(Split("MergedWithPrevious", text, from) == Pieces{"the-", "final-", "-", "countdown"});
    CHECK(Split("MergedWithNext", text, from) == Pieces{"the", "-final", "-", "-countdown"});
    CHECK(Split("Contiguous", text, from) == Pieces{"the", "-", "final", "--", "countdown"});
    // Inverted, the pattern is what is kept: the words are the matches.
    CHECK(Split("Removed", text, from, "-", true) == Pieces{"-", "-", "-"});
    // A piece that starts and ends with the delimiter: no empty pieces.
    const std::string edges = prefix + "-a-";
    CHECK(Split("Isolated", edges, from) == Pieces{"-", "a", "-"});
    CHECK(Split("MergedWithNext", edges, from) == Pieces{"-a", "-"});
    CHECK(Split("MergedWithPrevious", edges, from) == Pieces{"-", "a-"});
  }
}

}  // namespace
}  // namespace strata::tokenize_internal
