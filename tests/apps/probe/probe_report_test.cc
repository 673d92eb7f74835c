// strata probe's comparison and results: the answer normalization, Wilson intervals, per-bucket
// accuracy and recovery, the --min-recovery verdict and the HTML cells.
#include <catch2/catch.hpp>

#include "probe.h"
#include "strata/chat_template.h"
#include "testing/status_testing.h"

namespace strata::cli::probe {
namespace {

using testing::Must;

TEST_CASE("answers are compared after trimming whitespace, quotes, backticks and a final period", "[probe]") {
  CHECK(NormalizeAnswer("  4096\n") == "4096");
  CHECK(NormalizeAnswer("`kMax`") == "kMax");
  CHECK(NormalizeAnswer("\"\\\"abc\\\"\"") == "\\\"abc\\\"");
  CHECK(NormalizeAnswer("'\"hello\"'") == "hello");
  CHECK(NormalizeAnswer("red-1111.") == "red-1111");
  CHECK(NormalizeAnswer("3.") == "3");
  CHECK(NormalizeAnswer("<think>it is 5</think> 7") == "7");
  CHECK(NormalizeAnswer("a b") == "a b");
  CHECK(NormalizeAnswer("4096") != NormalizeAnswer("4097"));
}

TEST_CASE("Wilson intervals match the textbook values", "[probe]") {
  auto [lo, hi] = WilsonInterval(10, 10);
  CHECK(lo == Approx(0.7225).epsilon(0.001));
  CHECK(hi == 1.0);
  std::tie(lo, hi) = WilsonInterval(5, 10);
  CHECK(lo == Approx(0.2366).epsilon(0.001));
  CHECK(hi == Approx(0.7634).epsilon(0.001));
  std::tie(lo, hi) = WilsonInterval(0, 0);
  CHECK(lo == 0.0);
  CHECK(hi == 1.0);
}

TEST_CASE("results give accuracy per bucket, B/A recovery and the buckets under --min-recovery", "[probe]") {
  auto tokenizer = MakeEstimateTokenizer(4);
  auto glm = MakeGlm5ChatTemplate();
  auto counter = MakeRequestTokenCounter(*glm, *tokenizer);
  GenerateOptions options;
  options.lengths = {{"4k", 4096}};
  options.depths = {0.1, 0.9};
  options.probes_per_bucket = 4;
  auto generator = Must(ProbeGenerator::Create(Must(LoadSources({STRATA_TEST_DATA_DIR})), tokenizer.get(),
                                               counter.get(), options));
  const std::vector<ProbeSpec> plan = generator->Plan();
  std::vector<ProbeOutcome> outcomes;
  for (size_t i = 0; i < plan.size(); ++i) {
    for (size_t e = 0; e < 2; ++e) {
      ProbeOutcome o;
      o.probe = i;
      o.endpoint = e;
      o.tokens = 4000;
      o.ttft_ms = 10;
      o.prompt_tokens = 4000;
      o.cached_tokens = 1000;
      // B misses half of the deep probes, and one of A's shallow requests failed.
      o.correct = !(e == 1 && plan[i].depth_index == 1 && i % 2 == 0);
      o.given = o.correct ? plan[i].expected : "wrong";
      if (e == 0 && i == 0) o.failed = true, o.correct = false;
      outcomes.push_back(o);
    }
  }
  nlohmann::ordered_json j = ResultsJson(*generator, plan, {{"A", "a"}, {"B", "b"}}, outcomes, 0.95);
  const auto& a = j["endpoints"][0]["buckets"];
  CHECK(a[0]["probes"] == 3);  // the failed request is not counted as an answer
  CHECK(a[0]["failed"] == 1);
  CHECK(a[0]["accuracy"] == 1.0);
  CHECK(a[0]["cached_share"] == 0.25);
  CHECK(a[0]["ttft_ms_mean"] == 10.0);
  const auto& b = j["endpoints"][1]["buckets"];
  CHECK(b[1]["correct"] == 2);
  CHECK(b[1]["accuracy"] == 0.5);
  CHECK(b[1]["interval"][0].get<double>() < 0.5);
  CHECK(b[1]["interval"][1].get<double>() > 0.5);
  CHECK(j["recovery"][0]["recovery"] == 1.0);
  CHECK(j["recovery"][1]["recovery"] == 0.5);
  REQUIRE(j["failing"].size() == 1);
  CHECK(j["failing"][0] == "length 4k, depth 0.90: recovery 0.50 < --min-recovery 0.95");
  REQUIRE(j["worst"].size() == 2);
  CHECK(j["worst"][0]["given"] == "wrong");
  CHECK(j["worst"][0]["endpoint"] == "B");
  nlohmann::ordered_json none = ResultsJson(*generator, plan, {{"A", "a"}, {"B", "b"}}, outcomes, -1);
  CHECK(none["failing"].empty());
}

}  // namespace
}  // namespace strata::cli::probe
