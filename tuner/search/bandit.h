#pragma once
#include <deque>
#include <memory>
#include <vector>

#include "tuner/core/search.h"

namespace qt::tune {

struct BanditOptions {
  int window = 100;          // recent uses remembered per decision
  double exploration = 0.1;  // weight of the UCB exploration bonus
};

// AUC bandit meta-technique: each evaluation is credited to the technique that proposed it; a technique's
// score is the area under its recent "produced a new best" curve (recent successes weigh more) plus
// exploration * sqrt(2 ln(total uses) / own uses).
class BanditStrategy : public Strategy {
 public:
  BanditStrategy(std::vector<std::unique_ptr<Strategy>> arms, BanditOptions o = {});
  std::string name() const override { return "bandit"; }
  void plan(const Budget& budget, size_t space_size) override {
    for (auto& a : arms_) a->plan(budget, space_size);
  }
  std::optional<PointId> propose(const SearchState& st, Rng& rng) override;
  void observe(PointId id, const Observation& o, const SearchState& st, Rng& rng) override;
  const std::vector<int>& uses() const { return uses_; }

 private:
  double score(size_t arm) const;
  std::vector<std::unique_ptr<Strategy>> arms_;
  BanditOptions opt_;
  std::deque<std::pair<size_t, bool>> history_;
  std::vector<int> uses_;
  size_t active_ = 0;
  double best_before_ = 0;
};

}  // namespace qt::tune
