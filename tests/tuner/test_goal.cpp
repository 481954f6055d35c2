// Sweeps over the recorded spaces (slow): the default strategy's goal on the A100/A4000 convolution and
// dedispersion spaces (>= 95% of the optimum, median over 50 seeds, within 5% of the space), and the
// leave-one-out choice of strategy against random search on all eight.
#include <catch2/catch.hpp>

#include "tuner/replay/loo.h"
#include "tuner/replay/replay.h"
#include "common/paths.h"

using namespace qt::tune;

TEST_CASE("the default strategy reaches 95% of the optimum within 5% of each recorded space", "[tuner][slow]") {
  for (const char* name : {"convolution_milo_A100", "convolution_milo_A4000", "dedispersion_milo_A100",
                           "dedispersion_milo_A4000"}) {
    INFO(name);
    RecordedSpace rs = load_kt_cache(qt::source_root() + "/tuner/spaces/" + name + ".json.gz");
    SweepOptions o;
    o.strategy = "best";
    o.seeds = 50;
    o.budget = {parse_eval_budget("5%", rs.space.size()), -1};
    SweepResult r = sweep(rs, o);
    REQUIRE(r.median_fraction >= 0.95);
  }
}

TEST_CASE("the strategy chosen on the other recorded spaces beats random on the one left out", "[tuner][slow]") {
  // Leave-one-out over the eight recorded spaces, 50 seeds, at 2% and 5%: whatever qtune's rule picks without
  // seeing a space must do better there than random search, in the median and the 25th percentile.
  const char* names[] = {"convolution_milo_A100", "convolution_milo_A4000", "dedispersion_milo_A100",
                         "dedispersion_milo_A4000", "gemm_RTX_2080_Ti", "gemm_RTX_Titan", "convolution_RTX_Titan",
                         "pnpoly_RTX_Titan"};
  std::vector<RecordedSpace> loaded;
  for (const char* n : names)
    loaded.push_back(load_kt_cache(qt::source_root() + "/tuner/spaces/" + n + ".json.gz"));
  std::vector<NamedSpace> spaces;
  for (size_t i = 0; i < loaded.size(); ++i) spaces.push_back({names[i], &loaded[i]});
  LooOptions o;
  o.strategies = {"genetic", "annealing", "ils", "bandit", "forest", "random"};
  o.budgets = {"2%", "5%"};
  o.seeds = 50;
  LooReport rep = leave_one_out(spaces, o);
  const size_t random = 5;
  for (size_t s = 0; s < spaces.size(); ++s)
    for (size_t b = 0; b < o.budgets.size(); ++b) {
      const SweepResult& got = rep.results[rep.chosen[s]][s][b];
      const SweepResult& rnd = rep.results[random][s][b];
      INFO(names[s] << " at " << o.budgets[b] << ": " << got.strategy << " median " << got.median_fraction << " p25 "
                    << got.p25_fraction << ", random " << rnd.median_fraction << " / " << rnd.p25_fraction);
      CHECK(rep.chosen[s] != random);
      CHECK(got.median_fraction > rnd.median_fraction);
      CHECK(got.p25_fraction > rnd.p25_fraction);
    }
}
