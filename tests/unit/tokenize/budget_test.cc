#include "strata/budget.h"

#include <catch2/catch.hpp>

using strata::Budget;
using strata::BudgetLimit;
using strata::BudgetOverride;

TEST_CASE("default budget is valid and derives usable input, trigger and target", "[budget]") {
  Budget b;
  REQUIRE(b.Validate().ok());
  CHECK(b.window == 1048576);
  CHECK(strata::UsableInputTokens(b) == 1048576 - 32768 - 16384 - 16384);
  CHECK(strata::TriggerTokens(b) == static_cast<int64_t>(0.85 * 983040));
  CHECK(strata::TargetTokens(b) == static_cast<int64_t>(0.60 * 983040));
}

TEST_CASE("absolute trigger and target are used as given", "[budget]") {
  Budget b;
  b.trigger = BudgetLimit::Tokens(700000);
  b.target = BudgetLimit::Tokens(500000);
  REQUIRE(b.Validate().ok());
  CHECK(strata::TriggerTokens(b) == 700000);
  CHECK(strata::TargetTokens(b) == 500000);
}

TEST_CASE("budget validation names the wrong field", "[budget]") {
  Budget b;
  SECTION("target above trigger") {
    b.trigger = BudgetLimit::Fraction(0.5);
    b.target = BudgetLimit::Fraction(0.7);
    auto st = b.Validate();
    CHECK(st.code() == strata::StatusCode::kInvalidArgument);
    CHECK_THAT(st.message(), Catch::Contains("target 0.7") && Catch::Contains("above trigger 0.5"));
  }
  SECTION("absolute target above fractional trigger") {
    b.target = BudgetLimit::Tokens(900000);
    CHECK_THAT(b.Validate().message(), Catch::Contains("target 900000 tokens"));
  }
  SECTION("reserves above window") {
    b.window = 32000;
    auto st = b.Validate();
    CHECK(st.code() == strata::StatusCode::kInvalidArgument);
    CHECK_THAT(st.message(), Catch::Contains("leave no input in the window of 32000"));
  }
  SECTION("negative reserve") {
    b.reserve_headroom = -1;
    CHECK_THAT(b.Validate().message(), Catch::Contains("reserve_headroom -1 is negative"));
  }
  SECTION("zero window") {
    b.window = 0;
    CHECK_THAT(b.Validate().message(), Catch::Contains("window 0 must be positive"));
  }
  SECTION("fraction out of range") {
    b.trigger = BudgetLimit::Fraction(1.5);
    CHECK_THAT(b.Validate().message(), Catch::Contains("trigger fraction 1.5 is outside (0, 1]"));
  }
  SECTION("absolute trigger above usable input") {
    b.trigger = BudgetLimit::Tokens(2000000);
    CHECK_THAT(b.Validate().message(), Catch::Contains("exceeds the usable input of 983040"));
  }
}

TEST_CASE("per-agent override replaces only the fields it sets", "[budget]") {
  Budget base;
  base.reserve_output = 1000;
  BudgetOverride o;
  o.window = 131072;
  o.target = BudgetLimit::Tokens(50000);
  auto merged = strata::ApplyOverride(base, o);
  REQUIRE(merged.ok());
  CHECK(merged->window == 131072);
  CHECK(merged->reserve_output == 1000);
  CHECK(merged->reserve_reasoning == base.reserve_reasoning);
  CHECK(merged->trigger == base.trigger);
  CHECK(merged->target == BudgetLimit::Tokens(50000));

  BudgetOverride bad;
  bad.window = 10000;
  auto refused = strata::ApplyOverride(base, bad);
  REQUIRE(!refused.ok());
  CHECK_THAT(refused.status().message(),
             Catch::StartsWith("budget after per-agent override: budget reserves"));
}
