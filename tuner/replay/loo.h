#pragma once
// Leave-one-out evaluation of the choice of strategy across recorded spaces: every candidate strategy is
// swept on every space at every budget; for each space in turn, the strategy is chosen on the *other* spaces
// (highest mean over them and over the budgets of the 25th percentile of the fraction of the optimum, so that
// a strategy is chosen for holding up across seeds, not for its luckiest runs) and scored on the one left
// out. The held-out score is what a user on a space nobody tuned for can expect from that way of choosing.
#include <functional>
#include <string>
#include <vector>

#include "tuner/replay/replay.h"

namespace qt::tune {

struct LooOptions {
  std::vector<std::string> strategies;  // the candidates for `best`
  std::vector<std::string> budgets;     // "1%", "2%", "5%", "200", "600s"
  int seeds = 50;
  uint64_t first_seed = 1;
  int curve_points = 20;
};

struct NamedSpace {
  std::string name;
  const RecordedSpace* space;
};

struct LooReport {
  std::vector<std::string> spaces, strategies, budgets;
  std::vector<std::vector<std::vector<SweepResult>>> results;  // [strategy][space][budget]
  std::vector<size_t> chosen;  // per held-out space: the strategy chosen on the others
  size_t chosen_on_all = 0;    // the strategy the same rule picks with every space in hand
  // The selection score of `strategy` over every space but `excluded` (excluded = spaces.size(): all).
  double score(size_t strategy, size_t excluded) const;
};

// `progress` (optional) is called after each sweep with a line saying what was done.
LooReport leave_one_out(const std::vector<NamedSpace>& spaces, const LooOptions& opt,
                        const std::function<void(const std::string&)>& progress = nullptr);

}  // namespace qt::tune
