#pragma once
// The `replay` device: evaluates points of a recorded space by serving the recorded time, charging the
// recorded compile + verification + benchmark time to the budget, and returning recorded failures.
// sweep() runs a strategy over many seeds and summarises how close it gets to the recorded optimum.
#include <string>
#include <vector>

#include "tuner/core/search.h"
#include "tuner/replay/kt_cache.h"

namespace qt::tune {

class ReplayObjective : public Objective {
 public:
  explicit ReplayObjective(const RecordedSpace& rs) : rs_(&rs) {}
  Observation evaluate(PointId id) override;

 private:
  const RecordedSpace* rs_;
};

struct SweepOptions {
  std::string strategy = "best";
  Budget budget;
  int seeds = 50;
  uint64_t first_seed = 1;
  int curve_points = 20;
  const Knowledge* known = nullptr;  // static data / another device's times, handed to every run
};

// One mark of an efficiency curve: after `at` evaluations (or charged seconds, for a time budget), the
// median and the 25th and 10th percentiles over seeds of the fraction of the optimum found so far.
struct CurvePoint {
  double at = 0;
  double median = 0, p25 = 0, p10 = 0;
};

struct SweepResult {
  std::string strategy;  // resolved name
  double median_fraction = 0;    // optimum / best found at the budget, median over seeds
  double p10_fraction = 0, p25_fraction = 0, p75_fraction = 0;
  double median_evals = 0;       // distinct evaluations used
  double median_seconds = 0;     // charged seconds used
  double hit_rate = 0;           // share of seeds that found the optimum itself
  bool curve_in_seconds = false;  // marks are charged seconds (time budget), else evaluations
  std::vector<CurvePoint> curve;
  std::vector<double> fractions;  // per seed
};

// Evaluations allowed by `budget_text`: a count ("200") or a share of the space ("5%").
int64_t parse_eval_budget(const std::string& budget_text, size_t space_size);
// A budget in evaluations ("200"), a share of the space ("5%") or charged seconds ("600s").
Budget parse_budget(const std::string& budget_text, size_t space_size);

SweepResult sweep(const RecordedSpace& rs, const SweepOptions& opt);

}  // namespace qt::tune
