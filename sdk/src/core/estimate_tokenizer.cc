// strata's bytes-per-token estimator (MakeEstimateTokenizer, strata/tokenizer.h) and the count it
// gives for a length alone (core/estimate_tokenizer.h).
#include <cmath>
#include <cstdio>
#include <string>

#include "core/estimate_tokenizer.h"
#include "strata/tokenizer.h"

namespace strata {
namespace {

// The estimate for a text of `bytes` bytes (one formula for Count and EstimateCountForBytes).
size_t Estimate(uint64_t bytes, double bytes_per_token) {
  if (bytes == 0) return 0;
  return static_cast<size_t>(std::ceil(static_cast<double>(bytes) / bytes_per_token));
}

class EstimateTokenizer final : public Tokenizer {
 public:
  explicit EstimateTokenizer(double bytes_per_token)
      : bytes_per_token_(bytes_per_token > 0 ? bytes_per_token : 4.0) {}

  std::string Name() const override {
    char buf[64];
    std::snprintf(buf, sizeof buf, "estimate:%g", bytes_per_token_);
    return buf;
  }
  bool IsEstimate() const override { return true; }
  std::vector<int32_t> Encode(std::string_view) const override { return {}; }
  size_t Count(std::string_view text) const override { return Estimate(text.size(), bytes_per_token_); }
  double bytes_per_token() const { return bytes_per_token_; }

 private:
  const double bytes_per_token_;
};

}  // namespace

namespace internal {

std::optional<size_t> EstimateCountForBytes(const Tokenizer& tokenizer, uint64_t bytes) {
  const auto* estimate = dynamic_cast<const EstimateTokenizer*>(&tokenizer);
  if (estimate == nullptr) return std::nullopt;
  return Estimate(bytes, estimate->bytes_per_token());
}

}  // namespace internal

std::unique_ptr<Tokenizer> MakeEstimateTokenizer(double bytes_per_token) {
  return std::make_unique<EstimateTokenizer>(bytes_per_token);
}

}  // namespace strata
