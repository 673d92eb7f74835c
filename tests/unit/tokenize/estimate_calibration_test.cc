// Estimator calibration: measures UTF-8 bytes per token of each exact tokenizer on every message
// content of the test traces (tests/data/traces), and the per-message error of the bytes-per-token
// estimate, prints the table and checks that EstimateFamilies() still describes the measurement.
// The committed figures were measured on the 72-trajectory collection the 19 test traces were drawn
// from (docs/tokenizers.md); on the subset they differ by up to ~0.2 bytes/token and ~2 points of
// error, hence the tolerances below.
//   strata_tokenize_test "[calibration]" -s
#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "strata/tokenizer_spec.h"
#include "testing/traces.h"

namespace fs = std::filesystem;

namespace {

struct Measured {
  double bytes_per_token = 0;
  double message_error = 0;  // mean |estimate - exact| / exact per message of >= 64 bytes
  double p90_message_error = 0;
  double trajectory_error = 0;     // mean |estimate - exact| / exact of whole-trajectory totals
  double naive_message_error = 0;  // the same two for estimate:4
  double naive_trajectory_error = 0;
};

Measured Measure(const strata::Tokenizer& tok,
                 const std::vector<std::vector<std::string>>& trajectories) {
  std::vector<std::vector<size_t>> counts;
  size_t bytes = 0, tokens = 0;
  for (const auto& traj : trajectories) {
    counts.emplace_back();
    for (const auto& t : traj) {
      counts.back().push_back(tok.Count(t));
      bytes += t.size();
      tokens += counts.back().back();
    }
  }
  Measured m;
  m.bytes_per_token =
      std::round(static_cast<double>(bytes) / static_cast<double>(tokens) * 100.0) / 100.0;
  auto estimate = [](size_t size, double ratio) {
    return std::ceil(static_cast<double>(size) / ratio);
  };
  std::vector<double> errors;
  double naive = 0, traj_err = 0, naive_traj = 0;
  for (size_t k = 0; k < trajectories.size(); ++k) {
    double exact_total = 0, est_total = 0, naive_total = 0;
    for (size_t i = 0; i < trajectories[k].size(); ++i) {
      const std::string& t = trajectories[k][i];
      double exact = static_cast<double>(counts[k][i]);
      exact_total += exact;
      est_total += t.empty() ? 0 : estimate(t.size(), m.bytes_per_token);
      naive_total += t.empty() ? 0 : estimate(t.size(), 4.0);
      if (t.size() < 64 || exact == 0) continue;
      errors.push_back(std::fabs(estimate(t.size(), m.bytes_per_token) - exact) / exact);
      naive += std::fabs(estimate(t.size(), 4.0) - exact) / exact;
    }
    traj_err += std::fabs(est_total - exact_total) / exact_total;
    naive_traj += std::fabs(naive_total - exact_total) / exact_total;
  }
  std::sort(errors.begin(), errors.end());
  double sum = 0;
  for (double e : errors) sum += e;
  const double n = static_cast<double>(errors.size()),
               nt = static_cast<double>(trajectories.size());
  m.message_error = sum / n;
  m.p90_message_error = errors[errors.size() * 9 / 10];
  m.naive_message_error = naive / n;
  m.trajectory_error = traj_err / nt;
  m.naive_trajectory_error = naive_traj / nt;
  return m;
}

}  // namespace

TEST_CASE("estimator ratios per family match a measurement on the traces",
          "[tokenize][calibration][.slow]") {
  std::vector<std::vector<std::string>> trajectories = strata::testing::TestTraceContents();
  REQUIRE(trajectories.size() == 19);  // tests/data/traces
  const std::pair<std::string, std::string> families[] = {
      {"qwen3", std::string("hf:") + STRATA_TOK_QWEN3_JSON},
      {"deepseek_v3", std::string("hf:") + STRATA_TOK_DEEPSEEK_JSON},
      {"spm-test", std::string("spm:") + STRATA_TOK_SPM_MODEL},
  };
  std::ostringstream table;
  table
      << "\n| family | bytes/token | error per message (mean / p90) | error per trajectory total | "
         "estimate:4 error per message / per trajectory |\n|---|---|---|---|---|\n";
  for (const auto& [family, spec] : families) {
    auto tok = strata::MakeTokenizer(spec);
    if (!tok.ok()) FAIL(tok.status().ToString());
    Measured m = Measure(**tok, trajectories);
    char row[256];
    std::snprintf(row, sizeof row, "| %s | %.2f | %.1f%% / %.1f%% | %.1f%% | %.1f%% / %.1f%% |\n",
                  family.c_str(), m.bytes_per_token, 100 * m.message_error,
                  100 * m.p90_message_error, 100 * m.trajectory_error, 100 * m.naive_message_error,
                  100 * m.naive_trajectory_error);
    table << row;
    const strata::EstimateFamily* committed = nullptr;
    for (const auto& f : strata::EstimateFamilies())
      if (f.name == family) committed = &f;
    REQUIRE(committed != nullptr);
    INFO(family << ": measured " << m.bytes_per_token << " bytes/token, " << m.message_error
                << " mean error per message; committed " << committed->bytes_per_token << ", "
                << committed->mean_abs_error);
    CHECK(std::fabs(committed->bytes_per_token - m.bytes_per_token) < 0.25);
    CHECK(std::fabs(committed->mean_abs_error - m.message_error) < 0.035);
  }
  WARN(table.str());
}
