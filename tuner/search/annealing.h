#pragma once
#include "tuner/core/search.h"

namespace qt::tune {

struct AnnealingOptions {
  double t0 = 0.5;         // initial temperature, in units of relative slowdown
  double cooling = 0.99;   // per evaluation
  double t_min = 0.002;    // reheat (restart from the best point) below this
  int patience = 60;       // evaluations without a new best before a restart
};

class AnnealingStrategy : public Strategy {
 public:
  explicit AnnealingStrategy(AnnealingOptions o = {}) : opt_(o), temp_(o.t0) {}
  std::string name() const override { return "annealing"; }
  // With an evaluation budget, the schedule cools from t0 to t_min over the budget (one cooling run that ends
  // when the budget does), rather than at a fixed rate that a small budget never gets to the end of.
  void plan(const Budget& budget, size_t space_size) override;
  std::optional<PointId> propose(const SearchState& st, Rng& rng) override;
  void observe(PointId id, const Observation& o, const SearchState& st, Rng& rng) override;

 private:
  AnnealingOptions opt_;
  std::optional<PointId> current_;
  double current_score_ = 0;
  double temp_;
  double best_seen_ = 1e300;
  int since_best_ = 0;
  int restarts_ = 0;
  bool started_ = false;
};

}  // namespace qt::tune
