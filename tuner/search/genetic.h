#pragma once
#include <deque>

#include "tuner/core/search.h"

namespace qt::tune {

struct GeneticOptions {
  int population = 20;  // upper bound; small evaluation budgets get budget / 8 (at least 6)
  int elite = 2;
  int tournament = 3;
  double mutation = -1;  // per-gene probability; <0 = 1 / number of parameters
};

class GeneticStrategy : public Strategy {
 public:
  explicit GeneticStrategy(GeneticOptions o = {}) : opt_(o) {}
  std::string name() const override { return "genetic"; }
  void plan(const Budget& budget, size_t space_size) override;
  std::optional<PointId> propose(const SearchState& st, Rng& rng) override;
  void observe(PointId, const Observation&, const SearchState&, Rng&) override {}

 private:
  void next_generation(const SearchState& st, Rng& rng);
  PointId select(const SearchState& st, Rng& rng) const;
  PointId breed(const SearchState& st, PointId a, PointId b, Rng& rng) const;
  GeneticOptions opt_;
  std::vector<PointId> population_;
  std::deque<PointId> pending_;
};

}  // namespace qt::tune
