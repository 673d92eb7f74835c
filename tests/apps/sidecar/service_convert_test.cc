// Tests of the sidecar's conversions to strata.v1 messages (service_convert.h): a growth point
// keeps every field, its summary requests' tokens included, alone and inside a Turn.
#include "service_convert.h"

#include <catch2/catch.hpp>

namespace strata::sidecar {
namespace {

GrowthPoint Point() {
  GrowthPoint g;
  g.agent_id = "a";
  g.turn = 4;
  g.unix_ms = 1234;
  g.layer_tokens[static_cast<int>(Layer::kSystem)] = 100;
  g.layer_tokens[static_cast<int>(Layer::kHistory)] = 9000;
  g.compactions = 1;
  g.invalidated_tokens = 2500;
  g.summary_input_tokens = 9100;
  g.summary_cached_tokens = 8960;
  g.summary_output_tokens = 321;
  return g;
}

void CheckPoint(const v1::GrowthPoint& out) {
  CHECK(out.turn() == 4);
  CHECK(out.unix_ms() == 1234);
  REQUIRE(out.layers_size() == kLayerCount);
  CHECK(out.layers(static_cast<int>(Layer::kSystem)).layer() == "system");
  CHECK(out.layers(static_cast<int>(Layer::kSystem)).tokens() == 100);
  CHECK(out.layers(static_cast<int>(Layer::kHistory)).tokens() == 9000);
  CHECK(out.compactions() == 1);
  CHECK(out.invalidated_tokens() == 2500);
  CHECK(out.summary_input_tokens() == 9100);
  CHECK(out.summary_cached_tokens() == 8960);
  CHECK(out.summary_output_tokens() == 321);
}

TEST_CASE("a growth point converts with its summary requests' tokens", "[sidecar][convert]") {
  v1::GrowthPoint out;
  FillGrowth(Point(), &out);
  CheckPoint(out);
  v1::GrowthPoint none;  // a turn without a summary request: zeros
  FillGrowth(GrowthPoint{}, &none);
  CHECK(none.summary_input_tokens() == 0);
  CHECK(none.summary_cached_tokens() == 0);
  CHECK(none.summary_output_tokens() == 0);
}

TEST_CASE("a turn's growth converts with its summary requests' tokens", "[sidecar][convert]") {
  Turn turn;
  turn.growth = Point();
  v1::Turn out;
  FillTurn(turn, "", &out);
  REQUIRE(out.has_growth());
  CheckPoint(out.growth());
}

}  // namespace
}  // namespace strata::sidecar
