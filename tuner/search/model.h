#pragma once
// Model-based search ("forest"): a space-filling design of valid points, then, repeatedly, a random-forest
// surrogate of log(time) fitted to every evaluation so far and the unseen point of highest expected
// improvement among a random sample of the space and the one-parameter neighbours of the best points.
// Failed points enter the model at the slowest time measured, so the model learns to avoid their region.
// What is known before the run (SearchState::knowledge) is used when present: static features and another
// device's log time are extra model inputs; the other device's fastest points are evaluated first; points
// the static report shows spilling are left out of the initial design.
#include <deque>
#include <vector>

#include "tuner/core/search.h"
#include "tuner/search/forest.h"

namespace qt::tune {

struct ModelOptions {
  ForestOptions forest;
  int candidates = 1000;      // random unseen points scored at each refit
  int local_top = 5;          // the unseen neighbours of this many best points are scored too
  double refit_growth = 0.1;  // refit once the evaluations grew by this share of those fitted (>= 1 point)
  int max_batch = 16;         // ... and at least every this many evaluations
  int design_min = 6, design_max = 20;  // initial design: 2 per varying parameter, within these bounds
  double design_budget_share = 0.25;    // ... and at most this share of an evaluation budget
};

class ModelStrategy : public Strategy {
 public:
  explicit ModelStrategy(ModelOptions o = {}) : opt_(o), forest_(o.forest) {}
  std::string name() const override { return "forest"; }
  void plan(const Budget& budget, size_t space_size) override;
  std::optional<PointId> propose(const SearchState& st, Rng& rng) override;
  void observe(PointId, const Observation&, const SearchState&, Rng&) override {}

 private:
  void start(const SearchState& st, Rng& rng);
  void refit(const SearchState& st, Rng& rng);
  const float* row(const SearchState& st, PointId id);
  ModelOptions opt_;
  RandomForest forest_;
  int64_t budget_evals_ = -1;
  bool started_ = false;
  std::deque<PointId> queue_;  // design points, then the current ranking
  size_t fitted_at_ = 0;
  size_t width_ = 0;                 // features per point
  std::vector<float> rows_;          // lazily computed feature rows, [point * width_]
  std::vector<bool> have_row_;
};

}  // namespace qt::tune
