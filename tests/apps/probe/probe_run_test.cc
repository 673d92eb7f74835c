// strata probe's runs against in-process strata-sim endpoints answering with --answer retrieve:
// 100% without degradation, the loss at the degraded buckets, transport faults reported apart.
#include <catch2/catch.hpp>

#include "probe.h"
#include "sim_retrieve.h"
#include "strata/chat_template.h"
#include "strata/http_transport.h"
#include "testing/sim_testing.h"
#include "testing/status_testing.h"

namespace strata::cli::probe {
namespace {

using testing::Must;
using testing::MustOk;

// A simulator answering in retrieve mode with `degrade` rules.
std::unique_ptr<sim::SimServer> RetrieveSim(const std::string& degrade = "") {
  sim::SimOptions options;
  sim::RetrieveOptions retrieve;
  retrieve.degrade = Must(sim::ParseDegradeSpec(degrade));
  options.answer = [retrieve](const std::string& request, int64_t prompt_tokens) {
    return sim::AnswerRetrieve(request, prompt_tokens, retrieve);
  };
  return testing::StartSim(options);
}

std::unique_ptr<Transport> Http(const sim::SimServer& server, int attempts = 4) {
  HttpTransportOptions options;
  options.base_url = server.base_url();
  options.retry.max_attempts = attempts;
  return Must(MakeHttpTransport(options));
}

struct Fixture {
  std::unique_ptr<Tokenizer> tokenizer = MakeEstimateTokenizer(4);
  std::unique_ptr<ChatTemplate> glm = MakeGlm5ChatTemplate();
  std::unique_ptr<RequestTokenCounter> counter = MakeRequestTokenCounter(*glm, *tokenizer);
  std::unique_ptr<ProbeGenerator> generator;
  std::vector<ProbeSpec> plan;
  explicit Fixture(int per_bucket = 4) {
    GenerateOptions options;
    options.lengths = {{"4k", 4096}, {"16k", 16384}};
    options.probes_per_bucket = per_bucket;
    generator = Must(ProbeGenerator::Create(Must(LoadSources({STRATA_TEST_DATA_DIR})), tokenizer.get(), counter.get(), options));
    plan = generator->Plan();
  }
  nlohmann::ordered_json Run(const std::vector<Transport*>& transports, RunOptions run = {}, double min = 0.95) {
    std::vector<ProbeOutcome> outcomes = Must(RunProbes(*generator, plan, transports, run));
    std::vector<std::pair<std::string, std::string>> names = {{"A", "a"}, {"B", "b"}};
    names.resize(transports.size());
    return ResultsJson(*generator, plan, names, outcomes, min);
  }
};

TEST_CASE("against strata-sim --answer retrieve every bucket is 100%", "[probe]") {
  auto sim = RetrieveSim();
  auto transport = Http(*sim);
  Fixture fixture;
  nlohmann::ordered_json j = fixture.Run({transport.get()});
  INFO(j.dump(2));
  REQUIRE(j["endpoints"][0]["buckets"].size() == 6);
  for (const auto& bucket : j["endpoints"][0]["buckets"]) {
    CHECK(bucket["probes"].get<int64_t>() + bucket["discarded"].get<int64_t>() == 4);
    CHECK(bucket["probes"].get<int64_t>() >= 3);
    CHECK(bucket["accuracy"] == 1.0);
    CHECK(bucket["failed"] == 0);
    CHECK(bucket["ttft_ms_mean"].get<double>() >= 0);
    CHECK(bucket["cached_share"].is_number());
  }
  CHECK(j["failing"].empty());
}

TEST_CASE("a degradation model shows at its buckets and fails --min-recovery there", "[probe][concurrency]") {
  auto a_sim = RetrieveSim();
  auto b_sim = RetrieveSim("depth>0.7:p=1");
  auto a = Http(*a_sim), b = Http(*b_sim);
  Fixture fixture;
  RunOptions run;
  run.concurrency = 3;
  nlohmann::ordered_json j = fixture.Run({a.get(), b.get()}, run);
  INFO(j.dump(2));
  for (const auto& row : j["recovery"]) {
    const double depth = row["depth"].get<double>();
    CHECK(row["accuracy_a"] == 1.0);
    CHECK(row["recovery"] == (depth > 0.7 ? 0.0 : 1.0));
  }
  REQUIRE(j["failing"].size() == 2);
  CHECK_THAT(j["failing"][0].get<std::string>(), Catch::StartsWith("length 4k, depth 0.90: recovery 0.00"));
  CHECK_THAT(j["failing"][1].get<std::string>(), Catch::StartsWith("length 16k, depth 0.90: recovery 0.00"));
  CHECK(j["worst"].size() >= 6);
  for (const auto& w : j["worst"]) {
    CHECK(w["endpoint"] == "B");
    CHECK(w["depth"] == 0.9);
    CHECK(w["given"] != w["expected"]);
  }
}

TEST_CASE("a transport fault is reported apart, never as a wrong answer, and retried", "[probe]") {
  auto sim = RetrieveSim();
  auto transport = Http(*sim, 1);  // the transport itself does not retry: the harness does
  Fixture fixture(2);
  RunOptions run;
  run.concurrency = 1;
  run.retries = 0;
  MustOk(sim->InjectFault("500", 3));
  nlohmann::ordered_json j = fixture.Run({transport.get()}, run, -1);
  INFO(j.dump(2));
  const auto& e = j["endpoints"][0];
  CHECK(e["failed"] == 3);
  CHECK(e["accuracy"] == 1.0);  // the failed requests are not wrong answers
  CHECK(e["correct"] == e["probes"]);
  REQUIRE(e["failure_samples"].size() == 3);
  CHECK_THAT(e["failure_samples"][0]["error"].get<std::string>(), Catch::Contains("500"));
  // With one re-send, a request that failed once is answered.
  run.retries = 1;
  MustOk(sim->InjectFault("500", 1));
  nlohmann::ordered_json retried = fixture.Run({transport.get()}, run, -1);
  CHECK(retried["endpoints"][0]["failed"] == 0);
  CHECK(retried["endpoints"][0]["accuracy"] == 1.0);
}

}  // namespace
}  // namespace strata::cli::probe
