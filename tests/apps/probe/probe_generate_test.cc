// strata probe's generation over the repository's tests/data: deterministic for a seed, every kept
// probe answerable once (checked by strata-sim's independent lookup), lengths by the exact counter.
#include <catch2/catch.hpp>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <set>
#include <nlohmann/json.hpp>

#include "probe.h"
#include "sim_retrieve.h"
#include "strata/chat_template.h"
#include "strata/tokenizer_spec.h"
#include "testing/sim_testing.h"
#include "testing/status_testing.h"
#include "testing/temp_dir.h"

namespace strata::cli::probe {
namespace {

using testing::Must;

// A tokenizer, the GLM-5.3 template and their request counter.
struct Counting {
  std::unique_ptr<Tokenizer> tokenizer;
  std::unique_ptr<ChatTemplate> chat_template = MakeGlm5ChatTemplate();
  std::unique_ptr<RequestTokenCounter> counter;
  explicit Counting(std::unique_ptr<Tokenizer> t) : tokenizer(std::move(t)) {
    counter = MakeRequestTokenCounter(*chat_template, *tokenizer);
  }
};

GenerateOptions SmallOptions(uint64_t seed = 7) {
  GenerateOptions options;
  options.lengths = {{"4k", 4096}, {"16k", 16384}};
  options.probes_per_bucket = 6;
  options.seed = seed;
  return options;
}

// The repository's own content: its test data and, for tables, its documentation.
const std::vector<std::string> kSources = {STRATA_TEST_DATA_DIR,
                                           std::string(STRATA_TEST_DATA_DIR) + "/../../docs"};

std::unique_ptr<ProbeGenerator> Generator(const Counting& counting, GenerateOptions options) {
  SourceSet sources = Must(LoadSources(kSources));
  return Must(ProbeGenerator::Create(std::move(sources), counting.tokenizer.get(), counting.counter.get(),
                                     std::move(options)));
}

std::string UserMessage(const std::string& body) {
  return nlohmann::json::parse(body)["messages"][1]["content"].get<std::string>();
}

TEST_CASE("probe generation is deterministic for a seed and differs for another", "[probe]") {
  Counting counting(MakeEstimateTokenizer(4));
  auto first = Generator(counting, SmallOptions());
  auto second = Generator(counting, SmallOptions());
  auto other = Generator(counting, SmallOptions(8));
  std::vector<ProbeSpec> a = first->Plan(), b = second->Plan(), c = other->Plan();
  REQUIRE(a.size() == 2 * 3 * 6);
  REQUIRE(a.size() == b.size());
  bool differs = false;
  for (size_t i = 0; i < a.size(); ++i) {
    INFO(a[i].id);
    CHECK(a[i].id == b[i].id);
    CHECK(a[i].question == b[i].question);
    CHECK(a[i].expected == b[i].expected);
    const RenderedProbe ra = Must(first->Render(a[i]));
    CHECK(ra.body == Must(second->Render(b[i])).body);
    differs = differs || ra.body != Must(other->Render(c[i])).body;
  }
  CHECK(differs);
}

TEST_CASE("every kept probe over tests/data has one answer, and the simulator's lookup finds it", "[probe]") {
  Counting counting(MakeEstimateTokenizer(4));
  for (uint64_t seed : {1, 2, 3}) {
    auto generator = Generator(counting, SmallOptions(seed));
    size_t kept = 0;
    std::set<std::string> kinds;
    for (const ProbeSpec& spec : generator->Plan()) {
      const RenderedProbe rendered = Must(generator->Render(spec));
      INFO(spec.id << " " << spec.question << " expected " << spec.expected);
      if (!rendered.discard_reason.empty()) {
        CHECK_FALSE(rendered.unique);
        continue;
      }
      ++kept;
      kinds.insert(KindName(spec.kind));
      const std::string user = UserMessage(rendered.body);
      const std::string context = user.substr(0, user.rfind("Question [strata-probe"));
      if (spec.kind == ProbeKind::kMrcr) {
        CHECK(CountAnswers(context, spec.candidate) == spec.memo_values.size());
        CHECK(CountOccurrences(context, spec.expected) == 1);
      } else {
        CHECK(CountAnswers(context, spec.candidate) == 1);
      }
      const sim::RetrieveResult found = sim::AnswerProbe(user, rendered.tokens, {});
      CHECK(found.found);
      CHECK(NormalizeAnswer(found.answer) == NormalizeAnswer(spec.expected));
    }
    CHECK(kept * 10 >= generator->Plan().size() * 9);  // at most a tenth discarded
    CHECK(kinds.size() >= 4);
  }
}

TEST_CASE("two-hop probes over the repository's sources show both files and have one answer", "[probe]") {
  Counting counting(MakeEstimateTokenizer(4));
  GenerateOptions options = SmallOptions();
  options.kinds = {ProbeKind::kTwoHop};
  options.lengths = {{"8k", 8192}};
  SourceSet sources = Must(LoadSources({std::string(STRATA_TEST_DATA_DIR) + "/../../sdk"}));
  auto generator = Must(ProbeGenerator::Create(std::move(sources), counting.tokenizer.get(), counting.counter.get(), options));
  REQUIRE(generator->candidate_counts()[static_cast<size_t>(ProbeKind::kTwoHop)] > 0);
  size_t kept = 0;
  for (const ProbeSpec& spec : generator->Plan()) {
    const RenderedProbe rendered = Must(generator->Render(spec));
    INFO(spec.id << " " << spec.question << " expected " << spec.expected << " via " << spec.candidate.column);
    if (!rendered.discard_reason.empty()) continue;
    ++kept;
    const std::string user = UserMessage(rendered.body);
    const std::string& files = generator->sources().files[spec.candidate.file].path;
    const std::string& hop = generator->sources().files[spec.candidate.hop_file].path;
    CHECK(files != hop);
    CHECK(CountOccurrences(user, "==> " + files + " ") == 1);
    CHECK(CountOccurrences(user, "==> " + hop + " ") == 1);
    CHECK(std::abs(rendered.depth_actual - spec.depth) < 0.15);  // the constant, the answer, at the depth
    const sim::RetrieveResult found = sim::AnswerProbe(user, rendered.tokens, {});
    CHECK(NormalizeAnswer(found.answer) == NormalizeAnswer(spec.expected));
  }
  CHECK(kept * 2 >= generator->Plan().size());
}

TEST_CASE("probe contexts land within 1% under their lengths by the exact counter", "[probe]") {
  Counting counting(testing::TestSpmTokenizer());
  GenerateOptions options = SmallOptions();
  options.lengths = {{"4k", 4096}, {"16k", 16384}, {"40000", 40000}};
  options.probes_per_bucket = 2;
  auto generator = Generator(counting, options);
  Counting fresh(testing::TestSpmTokenizer());  // counts each body anew
  for (const ProbeSpec& spec : generator->Plan()) {
    const RenderedProbe rendered = Must(generator->Render(spec));
    INFO(spec.id);
    const int64_t exact = static_cast<int64_t>(Must(fresh.counter->CountRequest(rendered.body)));
    CHECK(exact == rendered.tokens);
    CHECK(exact <= spec.target_tokens);
    CHECK(exact >= spec.target_tokens * 99 / 100);
    if (spec.kind != ProbeKind::kMrcr) CHECK(std::abs(rendered.depth_actual - spec.depth) < 0.1);
  }
}

// The files' paths are part of the text (each file starts with "==> PATH"), so where a checkout
// sits changes every count and every block boundary: the fit and the needle's depth must hold for
// any of them, not only for the paths this repository happens to have here. The same sources are
// reached through twelve directories named as a fresh clone's are (random letters), e.g. ones where
// the needle falls inside a block of two long lines (docs' tables), which a split by the lines'
// share put 0.13 too deep, or inside one long line, which the split between lines left 0.13 off;
// a deep needle larger than the rest of the content (a docs table), which went before the last
// block; the constant of a two-hop probe due in the rest of the block its function split; and a
// fill where one more budget token moved the needle past the target (4,052 or 4,103 tokens for
// 4,096: only padding the end lands within 1%).
TEST_CASE("probe contexts land within 1% under their lengths wherever the sources are", "[probe]") {
  Counting counting(testing::TestSpmTokenizer());
  Counting fresh(testing::TestSpmTokenizer());
  testing::TempDir dir("strata-probe-paths-");
  REQUIRE(!dir.path().empty());
  // STRATA_PROBE_PATHS_BASE (an empty directory) repeats the paths a failure printed: its first
  // component is this run's temporary directory.
  const char* given = std::getenv("STRATA_PROBE_PATHS_BASE");
  const std::string base = given != nullptr && *given != '\0' ? std::string(given) : dir.path();
  const std::string letters = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
  uint64_t state = 12345;  // a fixed sequence of names, so that a failure repeats
  auto random_name = [&](size_t n) {
    std::string name;
    for (size_t i = 0; i < n; ++i) {
      state = state * 6364136223846793005ULL + 1442695040888963407ULL;
      name += letters[(state >> 33) % letters.size()];
    }
    return name;
  };
  for (int variant = 0; variant < 12; ++variant) {
    const std::string root =
        base + "/tmp." + random_name(10) + "/strata/build/fresh-clone." + random_name(6) + "/strata";
    std::filesystem::create_directories(root + "/tests");
    std::filesystem::create_directory_symlink(STRATA_TEST_DATA_DIR, root + "/tests/data");
    std::filesystem::create_directory_symlink(std::string(STRATA_TEST_DATA_DIR) + "/../../docs",
                                              root + "/docs");
    GenerateOptions options = SmallOptions(static_cast<uint64_t>(variant) * 31 + 3);  // other probes too
    options.probes_per_bucket = 2;
    auto generator = Must(ProbeGenerator::Create(Must(LoadSources({root + "/tests/data", root + "/docs"})),
                                                 counting.tokenizer.get(), counting.counter.get(), options));
    for (const ProbeSpec& spec : generator->Plan()) {
      const RenderedProbe rendered = Must(generator->Render(spec));
      INFO(root << " " << spec.id);
      const int64_t exact = static_cast<int64_t>(Must(fresh.counter->CountRequest(rendered.body)));
      CHECK(exact == rendered.tokens);
      // The whole computation, from nothing kept: a new template's text, encoded at once.
      const std::string prompt = Must(MakeGlm5ChatTemplate()->Render(rendered.body));
      CHECK(static_cast<int64_t>(fresh.tokenizer->Encode(prompt).size()) == exact);
      CHECK(exact <= spec.target_tokens);
      CHECK(exact >= spec.target_tokens * 99 / 100);
      if (spec.kind != ProbeKind::kMrcr) CHECK(std::abs(rendered.depth_actual - spec.depth) < 0.1);
    }
  }
}

// Filler of very long lines (a trajectory's tool output, a paragraph on one line): a line is a
// block of its own, so a needle due inside one goes at the word boundary nearest its depth. Put
// before or after the whole line, it landed up to half a line (0.2 of a 4K probe) off its depth.
TEST_CASE("a needle due inside a long line goes at the word boundary nearest its depth", "[probe]") {
  Counting counting(testing::TestSpmTokenizer());
  testing::TempDir dir("strata-probe-long-lines-");
  REQUIRE(!dir.path().empty());
  std::filesystem::create_directories(dir.path() + "/code");
  std::filesystem::create_directories(dir.path() + "/prose");
  {
    std::ofstream code(dir.path() + "/code/settings.py");
    for (int i = 0; i < 40; ++i) code << "RETRY_LIMIT_" << i << " = " << 100 + i * 7 << "\n";
  }
  uint64_t state = 99;
  for (int f = 0; f < 8; ++f) {
    std::ofstream prose(dir.path() + "/prose/notes_" + std::to_string(f) + ".txt");
    for (int line = 0; line < 3; ++line) {
      for (int word = 0; word < 1200; ++word) {  // about 8,000 bytes, 1,500 tokens a line
        state = state * 6364136223846793005ULL + 1442695040888963407ULL;
        prose << "word" << (state >> 40) % 5000 << ' ';
      }
      prose << "\n";
    }
  }
  GenerateOptions options = SmallOptions();
  options.kinds = {ProbeKind::kConstant};
  options.probes_per_bucket = 3;
  auto generator = Must(ProbeGenerator::Create(Must(LoadSources({dir.path()})), counting.tokenizer.get(),
                                               counting.counter.get(), options));
  REQUIRE(!generator->Plan().empty());
  for (const ProbeSpec& spec : generator->Plan()) {
    const RenderedProbe rendered = Must(generator->Render(spec));
    INFO(spec.id);
    CHECK(rendered.tokens <= spec.target_tokens);
    CHECK(rendered.tokens >= spec.target_tokens * 99 / 100);
    CHECK(std::abs(rendered.depth_actual - spec.depth) < 0.05);
  }
}

TEST_CASE("a length beyond the window is cut to the window minus the output reserve", "[probe]") {
  Counting counting(MakeEstimateTokenizer(4));
  GenerateOptions options = SmallOptions();
  options.lengths = {{"16k", 16384}};
  options.window_tokens = 8192;
  options.max_output_tokens = 100;
  options.probes_per_bucket = 1;
  auto generator = Generator(counting, options);
  for (const ProbeSpec& spec : generator->Plan()) {
    CHECK(spec.target_tokens == 8092);
    CHECK(Must(generator->Render(spec)).tokens <= 8092);
  }
}

TEST_CASE("bad probe options and sources are refused with the offending value", "[probe]") {
  Counting counting(MakeEstimateTokenizer(4));
  GenerateOptions options = SmallOptions();
  options.depths = {0.5, 1.5};
  StatusOr<std::unique_ptr<ProbeGenerator>> made =
      ProbeGenerator::Create(Must(LoadSources({STRATA_TEST_DATA_DIR})), counting.tokenizer.get(), counting.counter.get(), options);
  REQUIRE_FALSE(made.ok());
  CHECK_THAT(made.status().message(), Catch::Contains("1.5"));
  StatusOr<SourceSet> missing = LoadSources({"/nonexistent/probe-source"});
  REQUIRE_FALSE(missing.ok());
  CHECK(missing.status().code() == StatusCode::kNotFound);
  CHECK_THAT(missing.status().message(), Catch::Contains("/nonexistent/probe-source"));
  CHECK(Must(ParseTokens("32k")) == 32768);
  CHECK(Must(ParseTokens("1m")) == 1048576);
  StatusOr<int64_t> bad = ParseTokens("12q");
  REQUIRE_FALSE(bad.ok());
  CHECK_THAT(bad.status().message(), Catch::Contains("12q"));
}

}  // namespace
}  // namespace strata::cli::probe
