// The model-based strategy's parts (random forest, space-filling design), what is known before a run (static
// features, another device's times) and how they steer the search, on spaces whose answers are known.
#include <catch2/catch.hpp>

#include <cmath>
#include <set>

#include "tuner/core/knowledge.h"
#include "tuner/replay/replay.h"
#include "tuner/replay/transfer.h"
#include "tuner/search/forest.h"
#include "tuner/search/initial_design.h"
#include "tuner/search/model.h"
#include "tuner/search/seeded.h"
#include "tuner/search/strategies.h"
#include "tuner/static/static_knowledge.h"
#include "common/paths.h"

using namespace qt::tune;
using qt::Rng;

namespace {

const std::string kSlice = qt::source_root() + "/tests/tuner/data/convolution_A4000_slice.json.gz";

// A 2-parameter grid whose time is set by a per-point "static" number that the parameters do not reveal
// (a hash of the point): only a model that reads the static feature can learn it.
struct HiddenCost {
  Space space = Space::cartesian({numeric_param("a", {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15}),
                                  numeric_param("b", {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15})});
  std::vector<double> hidden;
  HiddenCost() {
    for (PointId p = 0; p < space.size(); ++p) hidden.push_back(double((uint64_t(p) * 2654435761u >> 7) % 1000));
  }
};

class HiddenObjective : public Objective {
 public:
  explicit HiddenObjective(const HiddenCost& h) : h_(h) {}
  Observation evaluate(PointId id) override {
    Observation o;
    o.time = 1.0 + h_.hidden[id];
    o.cost_s = 1;
    return o;
  }

 private:
  const HiddenCost& h_;
};

}  // namespace

TEST_CASE("the random forest predicts a known function on points it was not fitted on", "[tuner][model]") {
  Rng rng(3);
  std::vector<float> x;
  std::vector<double> y;
  auto f = [](double a, double b) { return a * a + (b > 0.5 ? 1.0 : 0.0); };
  for (int i = 0; i < 400; ++i) {
    double a = rng.uniform(), b = rng.uniform();
    x.push_back(float(a)), x.push_back(float(b)), x.push_back(float(rng.uniform()));  // third: noise feature
    y.push_back(f(a, b));
  }
  RandomForest rf;
  rf.fit(x, 3, y, rng);
  double sse = 0, sst = 0, mean = 1.0 / 3 + 0.5;
  for (int i = 0; i < 200; ++i) {
    double a = rng.uniform(), b = rng.uniform();
    float row[3] = {float(a), float(b), float(rng.uniform())};
    Prediction p = rf.predict(row);
    REQUIRE(p.variance >= 0);
    sse += (p.mean - f(a, b)) * (p.mean - f(a, b));
    sst += (f(a, b) - mean) * (f(a, b) - mean);
  }
  REQUIRE(1 - sse / sst > 0.9);  // R^2 on unseen points
}

TEST_CASE("the initial design picks distinct valid unseen points, spread over the space", "[tuner][model]") {
  HiddenCost h;
  SearchState st(h.space);
  Rng rng(5);
  auto design = maximin_design(st, 12, {}, {}, rng);
  REQUIRE(design.size() == 12);
  REQUIRE(std::set<PointId>(design.begin(), design.end()).size() == 12);
  // Spread: the design's closest pair is farther apart than a random sample's, on average over draws.
  auto min_gap = [&](const std::vector<PointId>& pts) {
    double g = INFINITY;
    for (size_t i = 0; i < pts.size(); ++i)
      for (size_t j = i + 1; j < pts.size(); ++j) {
        auto a = rank_coordinates(h.space, pts[i]), b = rank_coordinates(h.space, pts[j]);
        g = std::min(g, double(std::fabs(a[0] - b[0]) + std::fabs(a[1] - b[1])));
      }
    return g;
  };
  double design_gap = 0, random_gap = 0;
  for (uint64_t s = 1; s <= 20; ++s) {
    Rng r(s);
    design_gap += min_gap(maximin_design(st, 12, {}, {}, r));
    std::vector<PointId> rnd;
    while (rnd.size() < 12) rnd.push_back(PointId(r.below(h.space.size())));
    random_gap += min_gap(rnd);
  }
  REQUIRE(design_gap > 2 * random_gap);
}

TEST_CASE("static features known before the run let the model find what the parameters hide", "[tuner][model]") {
  HiddenCost h;
  Knowledge k;
  k.feature_names = {"hidden"};
  for (double v : h.hidden) k.features.push_back({v});
  int with = 0, without = 0;
  for (uint64_t seed = 1; seed <= 15; ++seed) {
    ModelStrategy a, b;
    HiddenObjective oa(h), ob(h);
    with += run_search(h.space, a, oa, {30, -1}, seed, &k).best_score == 1.0;
    without += run_search(h.space, b, ob, {30, -1}, seed).best_score == 1.0;
  }
  // 30 of 256 points: blind search finds the single optimum about 12% of the time.
  REQUIRE(with >= 13);
  REQUIRE(without <= 6);
}

TEST_CASE("points the static report shows spilling are left out of the initial design", "[tuner][model]") {
  HiddenCost h;
  Knowledge k;
  k.feature_names = {"spill_bytes"};
  for (PointId p = 0; p < h.space.size(); ++p) k.features.push_back({h.space.value(p, 0) >= 4 ? 64.0 : 0.0});
  ModelStrategy m;
  HiddenObjective o(h);
  struct Recording : Objective {
    Objective& inner;
    std::vector<PointId> order;
    explicit Recording(Objective& i) : inner(i) {}
    Observation evaluate(PointId id) override {
      order.push_back(id);
      return inner.evaluate(id);
    }
  } rec(o);
  // A budget of 24: the design is 6 points (2 per varying parameter, at least 6, at most a quarter of it).
  run_search(h.space, m, rec, {24, -1}, 9, &k);
  REQUIRE(rec.order.size() == 24);
  for (size_t i = 0; i < 6; ++i) REQUIRE(h.space.value(rec.order[i], 0) < 4);
}

TEST_CASE("another device's times map onto the space by parameter name, fastest match first", "[tuner][transfer]") {
  Space target = Space::cartesian({numeric_param("bx", {32, 64}), numeric_param("unroll", {1, 2})});
  std::vector<MeasuredPoint> measured = {
      {{{"unroll", "1"}, {"bx", "64"}, {"extra", "0"}}, 3.0},
      {{{"unroll", "1"}, {"bx", "64"}, {"extra", "1"}}, 2.0},  // same target point: the faster one counts
      {{{"unroll", "2"}, {"bx", "32"}, {"extra", "0"}}, NAN},  // failed there
  };
  Knowledge k = prior_knowledge(target, measured, "other GPU");
  PointId p64_1 = *target.find({1, 0}), p32_2 = *target.find({0, 1}), p32_1 = *target.find({0, 0});
  REQUIRE(k.prior_time[p64_1] == 2.0);
  REQUIRE(std::isnan(k.prior_time[p32_2]));
  REQUIRE(std::isnan(k.prior_time[p32_1]));
  REQUIRE(k.prior_order() == std::vector<PointId>{p64_1});
  REQUIRE_THROWS_WITH(prior_knowledge(target, {{{{"zz", "1"}}, 1.0}}, "elsewhere"),
                      Catch::Contains("elsewhere") && Catch::Contains("shares no parameter"));
}

TEST_CASE("transfer from a recording: copying its winner, and model search starting from it", "[tuner][transfer]") {
  RecordedSpace rs = load_kt_cache(kSlice);
  // The space as its own source: its winner is the optimum, reached by the first evaluation.
  Knowledge self = prior_from_recording(rs, rs, "self");
  REQUIRE(copied_winner_fraction(rs, self) == 1.0);
  ModelStrategy m;
  ReplayObjective obj(rs);
  SearchResult r = run_search(rs.space, m, obj, {1, -1}, 1, &self);
  REQUIRE(r.best_score == rs.optimum_ms);
  // A prior that ranks a failed point first copies nothing that runs.
  Knowledge bad = self;
  PointId failed = 0;
  while (rs.points[failed].status == Status::Ok) ++failed;
  bad.prior_time[failed] = 1e-9;
  REQUIRE(copied_winner_fraction(rs, bad) == 0.0);
}

TEST_CASE("replay reports the 10th and 25th percentiles and a curve in charged seconds for a time budget",
          "[tuner][replay]") {
  RecordedSpace rs = load_kt_cache(kSlice);
  SweepOptions o;
  o.strategy = "forest";
  o.seeds = 21;
  o.budget = parse_budget("40s", rs.space.size());
  SweepResult r = sweep(rs, o);
  REQUIRE(r.curve_in_seconds);
  REQUIRE(r.p10_fraction <= r.p25_fraction);
  REQUIRE(r.p25_fraction <= r.median_fraction);
  REQUIRE(r.median_seconds <= 40.0);
  REQUIRE(r.curve.back().at == Approx(40.0));
  for (size_t i = 1; i < r.curve.size(); ++i) {
    REQUIRE(r.curve[i].median >= r.curve[i - 1].median);
    REQUIRE(r.curve[i].p10 <= r.curve[i].p25);
  }
  REQUIRE(r.curve.back().median == r.median_fraction);
  REQUIRE_THROWS_WITH(parse_budget("-5s", 400), Catch::Contains("positive"));
}

TEST_CASE("with another device's times, every strategy first tries that device's three fastest points",
          "[tuner][transfer]") {
  RecordedSpace rs = load_kt_cache(kSlice);
  Knowledge prior = prior_from_recording(rs, rs, "self");
  const std::vector<PointId> top = prior.prior_order();
  for (const std::string& name : strategy_names()) {
    if (name == "exhaustive") continue;
    INFO(name);
    auto strat = seed_from_prior(make_strategy(name), &prior);
    struct Recording : Objective {
      ReplayObjective inner;
      std::vector<PointId> order;
      explicit Recording(const RecordedSpace& r) : inner(r) {}
      Observation evaluate(PointId id) override {
        order.push_back(id);
        return inner.evaluate(id);
      }
    } rec(rs);
    SearchResult r = run_search(rs.space, *strat, rec, {10, -1}, 4, &prior);
    REQUIRE(r.evaluations == 10);
    REQUIRE(std::set<PointId>(rec.order.begin(), rec.order.end()).size() == 10);
    if (name == "forest") {
      REQUIRE(rec.order.front() == top[0]);  // the model seeds itself: the winner first, then its own design
    } else {
      REQUIRE(std::vector<PointId>(rec.order.begin(), rec.order.begin() + 3) ==
              std::vector<PointId>(top.begin(), top.begin() + 3));
    }
  }
}

TEST_CASE("a qtune static report becomes per-point features, the most constrained kernel describing a point",
          "[tuner][model]") {
  Space space = Space::cartesian({numeric_param("bx", {64, 128}), numeric_param("unroll", {1, 2})});
  nlohmann::json report = {
      {"gpu", "sm_86"},
      {"families",
       {{{"family", "gemv"},
         {"points",
          {{{"point", {{"bx", 128}, {"unroll", 2}}},
            {"kernels",
             {{{"resources", {{"registers", 40}, {"spill_stores", 8}, {"spill_loads", 4}, {"stack_frame", 16},
                              {"static_smem", 1024}}},
               {"dynamic_smem", 512},
               {"occupancy", 0.5}},
              {{"resources", {{"registers", 32}, {"static_smem", 0}}}, {"dynamic_smem", 0}, {"occupancy", 1.0}}}}},
           {{"point", {{"bx", 64}, {"unroll", 1}}}, {"error", "compile error"}, {"kernels", nlohmann::json::array()}},
           {{"point", {{"bx", 256}, {"unroll", 1}}}, {"kernels", {{{"occupancy", 1.0}}}}}}}}}}};
  Knowledge k = static_knowledge(report, "gemv", space);
  REQUIRE(k.feature_names == std::vector<std::string>{"registers", "spill_bytes", "stack_frame", "shared_memory",
                                                      "occupancy"});
  REQUIRE(k.features[*space.find({1, 1})] == std::vector<double>{40, 12, 16, 1536, 0.5});
  for (PointId p : {*space.find({0, 0}), *space.find({0, 1}), *space.find({1, 0})}) REQUIRE(std::isnan(k.features[p][0]));
  REQUIRE_THROWS_WITH(static_knowledge(report, "gemm", space), Catch::Contains("no family 'gemm'"));
}
