// The measured goal (slow): on the recorded A100/A4000 convolution and dedispersion spaces the default
// strategy reaches >= 95% of the optimum, median over 50 seeds, within 5% of the space evaluated.
#include <catch2/catch.hpp>

#include "tuner/replay/replay.h"

using namespace qt::tune;

TEST_CASE("the default strategy reaches 95% of the optimum within 5% of each recorded space", "[tuner][slow]") {
  for (const char* name : {"convolution_milo_A100", "convolution_milo_A4000", "dedispersion_milo_A100",
                           "dedispersion_milo_A4000"}) {
    INFO(name);
    RecordedSpace rs = load_kt_cache(std::string(QTUNE_SOURCE_DIR) + "/tuner/spaces/" + name + ".json.gz");
    SweepOptions o;
    o.strategy = "best";
    o.seeds = 50;
    o.budget = {parse_eval_budget("5%", rs.space.size()), -1};
    SweepResult r = sweep(rs, o);
    REQUIRE(r.median_fraction >= 0.95);
  }
}
