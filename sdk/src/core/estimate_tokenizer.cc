#include <cmath>
#include <cstdio>

#include "strata/tokenizer.h"

namespace strata {
namespace {

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
  size_t Count(std::string_view text) const override {
    if (text.empty()) return 0;
    return static_cast<size_t>(std::ceil(static_cast<double>(text.size()) / bytes_per_token_));
  }

 private:
  const double bytes_per_token_;
};

}  // namespace

std::unique_ptr<Tokenizer> MakeEstimateTokenizer(double bytes_per_token) {
  return std::make_unique<EstimateTokenizer>(bytes_per_token);
}

}  // namespace strata
