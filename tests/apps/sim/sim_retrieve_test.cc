// strata-sim --answer retrieve: the probe question is parsed, its answer found in the prompt, and
// the degradation model turns answers wrong only where its rules say.
#include "sim_retrieve.h"

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "testing/status_testing.h"

namespace strata::sim {
namespace {

using testing::Must;

const std::string kContext =
    "==> src/limits.h (lines 10-13) <==\n"
    "10\t// limits\n"
    "11\tconstexpr int kMaxBlocks = 4096;\n"
    "12\tint Resize(int n) {\n"
    "13\t  return kMaxBlocks;\n"
    "\n"
    "==> src/grow.cc (lines 1-2) <==\n"
    "1\tint Grow(int n) {\n"
    "2\t  return n * kFactor + kMaxBlocks;\n"
    "\n"
    "==> src/factor.h (lines 3-3) <==\n"
    "3\t#define kFactor 3\n"
    "\n"
    "[memo] The value of probe.x.1 is now red-1111.\n"
    "\n"
    "==> docs/t.md (lines 1-4) <==\n"
    "1\t| step | seconds | runs |\n"
    "2\t|---|---|---|\n"
    "3\t| build | 74 | 3 |\n"
    "4\t| test | 12 | 9 |\n"
    "\n"
    "[memo] The value of probe.x.1 is now blue-2222.\n"
    "\n";

std::string Ask(const std::string& question) { return kContext + "\n" + question; }

TEST_CASE("retrieve answers each probe kind from the prompt", "[sim][retrieve]") {
  RetrieveOptions options;
  RetrieveResult constant = AnswerProbe(
      Ask("Question [strata-probe constant]: What value is the constant `kMaxBlocks` set to? Answer."), 1000, options);
  CHECK(constant.found);
  CHECK(constant.answer == "4096");
  CHECK(AnswerProbe(Ask("Question [strata-probe definition]: where is the function `Resize` defined?"), 1000, options)
            .answer == "src/limits.h:12");
  CHECK(AnswerProbe(Ask("Question [strata-probe table]: In the table with a column `runs`, the row `test`?"), 1000, options)
            .answer == "9");
  CHECK(AnswerProbe(Ask("Question [strata-probe mrcr]: memos set `probe.x.1`. Memo number `2`?"), 1000, options)
            .answer == "blue-2222");
  // Two hops: Grow's body names kFactor (defined in another file) first.
  CHECK(AnswerProbe(Ask("Question [strata-probe twohop]: The function `Grow` uses a constant"), 1000, options)
            .answer == "3");
  RetrieveResult missing = AnswerProbe(Ask("Question [strata-probe constant]: the constant `kNowhere`?"), 1000, options);
  CHECK_FALSE(missing.found);
  CHECK_FALSE(AnswerProbe("no question here", 10, options).found);
}

TEST_CASE("retrieve reads the last user message of a request body", "[sim][retrieve]") {
  nlohmann::json body = {{"messages",
                          {{{"role", "system"}, {"content", "Answer exactly."}},
                           {{"role", "user"},
                            {"content", Ask("Question [strata-probe constant]: the constant `kMaxBlocks`?")}}}}};
  CHECK(AnswerRetrieve(body.dump(), 100, {}) == "4096");
  CHECK(AnswerRetrieve("{\"messages\":[]}", 100, {}) == "I found no user message.");
}

TEST_CASE("the degradation grammar parses rules and refuses malformed ones with the rule", "[sim][retrieve]") {
  std::vector<DegradeRule> rules = Must(ParseDegradeSpec("depth>0.5:p=0.3,length>=128k&depth<=0.2:p=0.5"));
  REQUIRE(rules.size() == 2);
  CHECK(rules[0].p == 0.3);
  REQUIRE(rules[1].conditions.size() == 2);
  CHECK(rules[1].conditions[0].variable == DegradeCondition::Variable::kLength);
  CHECK(rules[1].conditions[0].threshold == 131072);
  CHECK(rules[1].conditions[1].op == DegradeCondition::Op::kLessEqual);
  CHECK(Must(ParseDegradeSpec("")).empty());
  for (const char* bad : {"depth>0.5", "depth>0.5:p=2", "width>3:p=0.1", "depth=0.5:p=0.1", "depth>x:p=0.1"}) {
    StatusOr<std::vector<DegradeRule>> parsed = ParseDegradeSpec(bad);
    INFO(bad);
    REQUIRE_FALSE(parsed.ok());
    CHECK(parsed.status().code() == StatusCode::kInvalidArgument);
    CHECK_THAT(parsed.status().message(), Catch::Contains(bad) && Catch::Contains("expected e.g."));
  }
}

TEST_CASE("degradation turns answers wrong only where its conditions hold, the same way every time", "[sim][retrieve]") {
  RetrieveOptions options;
  options.degrade = Must(ParseDegradeSpec("depth>0.5:p=1"));
  // kMaxBlocks sits in the first fifth of the message, the second memo past its middle.
  RetrieveResult early = AnswerProbe(Ask("Question [strata-probe constant]: the constant `kMaxBlocks`?"), 1000, options);
  CHECK(early.depth < 0.5);
  CHECK(early.answer == "4096");
  CHECK_FALSE(early.degraded);
  RetrieveResult late = AnswerProbe(Ask("Question [strata-probe mrcr]: `probe.x.1` memo number `2`?"), 1000, options);
  CHECK(late.depth > 0.5);
  CHECK(late.degraded);
  CHECK(late.answer == "red-1111");  // the neighbouring memo, as long-context models fail
  options.degrade = Must(ParseDegradeSpec("length>=128k:p=0.5"));
  int wrong = 0;
  for (int i = 0; i < 200; ++i) {
    const std::string q = Ask("Question [strata-probe constant]: #" + std::to_string(i) + " the constant `kMaxBlocks`?");
    RetrieveResult r = AnswerProbe(q, 200000, options);
    CHECK(r.answer == AnswerProbe(q, 200000, options).answer);  // seeded by the request, not by order
    CHECK(AnswerProbe(q, 1000, options).answer == "4096");      // short prompts are never degraded
    wrong += r.degraded ? 1 : 0;
  }
  CHECK(wrong > 60);
  CHECK(wrong < 140);
}

}  // namespace
}  // namespace strata::sim
