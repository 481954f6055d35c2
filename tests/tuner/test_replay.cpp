// Replay of a committed recorded slice (A4000 convolution, Kernel Tuner cache format).
#include <catch2/catch.hpp>

#include <cmath>

#include "tuner/replay/replay.h"
#include "common/paths.h"

using namespace qt::tune;

namespace {
const std::string kSlice = qt::source_root() + "/tests/tuner/data/convolution_A4000_slice.json.gz";
}

TEST_CASE("a recorded Kernel Tuner space loads with its times, failures and optimum", "[tuner][replay]") {
  RecordedSpace rs = load_kt_cache(kSlice);
  REQUIRE(rs.device_name == "NVIDIA RTX A4000");
  REQUIRE(rs.kernel_name == "convolution_kernel");
  REQUIRE(rs.space.size() == 400);
  REQUIRE(rs.failures == 4);
  REQUIRE(rs.optimum_ms == Approx(1.7213300131261349));
  size_t resource = 0;
  for (const auto& p : rs.points) resource += p.status == Status::ResourceFailed;
  REQUIRE(resource == 4);  // RuntimeFailedConfig
  // Keys round-trip in Kernel Tuner's order and spelling.
  REQUIRE(rs.space.key(0).find(',') != std::string::npos);
  REQUIRE(rs.space.dims() == 10);
}

TEST_CASE("the replay device serves recorded times and charges compile + verification + benchmark time", "[tuner][replay]") {
  RecordedSpace rs = load_kt_cache(kSlice);
  ReplayObjective obj(rs);
  Observation o = obj.evaluate(rs.optimum);
  REQUIRE(o.status == Status::Ok);
  REQUIRE(o.time == rs.optimum_ms);
  const RecordedPoint& p = rs.points[rs.optimum];
  REQUIRE(o.cost_s == Approx((p.compile_ms + p.verification_ms + p.benchmark_ms) / 1000.0));
  REQUIRE(o.cost_s > 0);
  for (PointId id = 0; id < rs.space.size(); ++id)
    if (rs.points[id].status != Status::Ok) REQUIRE_FALSE(obj.evaluate(id).usable());
}

TEST_CASE("exhaustive replay reaches the optimum and budgets in % and seconds are honoured", "[tuner][replay]") {
  RecordedSpace rs = load_kt_cache(kSlice);
  SweepOptions o;
  o.strategy = "exhaustive";
  o.seeds = 2;
  SweepResult ex = sweep(rs, o);
  REQUIRE(ex.median_fraction == 1.0);
  REQUIRE(ex.median_evals == 400);

  REQUIRE(parse_eval_budget("5%", 400) == 20);
  REQUIRE(parse_eval_budget("5%", 11130) == 556);  // 556.5 rounds down: never more than the share
  REQUIRE(parse_eval_budget("0.1%", 400) == 1);    // at least one evaluation
  REQUIRE(parse_eval_budget("37", 400) == 37);
  REQUIRE_THROWS(parse_eval_budget("0%", 400));
  REQUIRE_THROWS(parse_eval_budget("-3", 400));

  o.strategy = "best";
  o.seeds = 9;
  o.budget = {-1, 30.0};
  SweepResult timed = sweep(rs, o);
  REQUIRE(timed.median_seconds <= 30.0);
  REQUIRE(timed.median_evals > 5);
  REQUIRE(timed.median_evals < 400);
}

TEST_CASE("replay curves are monotone and the default strategy beats random on the slice", "[tuner][replay]") {
  RecordedSpace rs = load_kt_cache(kSlice);
  SweepOptions o;
  o.seeds = 51;
  o.budget = {80, -1};  // 20%: the genetic default spends its first 20 evaluations on a random population
  SweepResult best = sweep(rs, o);
  o.strategy = "random";
  SweepResult rnd = sweep(rs, o);
  REQUIRE(best.curve.size() == 20);
  REQUIRE(best.curve.back().at == 80);
  for (size_t i = 1; i < best.curve.size(); ++i) REQUIRE(best.curve[i].median >= best.curve[i - 1].median);
  REQUIRE(best.curve.back().median == best.median_fraction);
  REQUIRE(best.median_fraction > rnd.median_fraction);
  REQUIRE(best.median_fraction <= 1.0);
}
