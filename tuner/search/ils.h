#pragma once
#include <vector>

#include "tuner/core/search.h"

namespace qt::tune {

struct IlsOptions {
  int perturbation = 2;      // random one-parameter moves applied to the best point
  int max_failed_kicks = 4;  // perturbations without improvement before a random restart
};

class IlsStrategy : public Strategy {
 public:
  explicit IlsStrategy(IlsOptions o = {}) : opt_(o) {}
  std::string name() const override { return "ils"; }
  std::optional<PointId> propose(const SearchState& st, Rng& rng) override;
  void observe(PointId id, const Observation& o, const SearchState& st, Rng& rng) override;

 private:
  void move_to(PointId id, double score, const SearchState& st, Rng& rng);
  std::optional<PointId> restart(const SearchState& st, Rng& rng);
  IlsOptions opt_;
  std::optional<PointId> current_;
  double current_score_ = 0;
  std::vector<PointId> candidates_;  // unvisited neighbours of current_, shuffled
  bool jumping_ = false;             // the next observation is a kick or restart target
  double score_at_kick_ = 0;
  int failed_kicks_ = 0;
};

}  // namespace qt::tune
