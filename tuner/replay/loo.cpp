#include "tuner/replay/loo.h"

#include "common/error.h"

namespace qt::tune {

double LooReport::score(size_t strategy, size_t excluded) const {
  double sum = 0;
  int n = 0;
  for (size_t s = 0; s < spaces.size(); ++s) {
    if (s == excluded) continue;
    for (const SweepResult& r : results[strategy][s]) sum += r.p25_fraction, ++n;
  }
  return n ? sum / n : 0.0;
}

LooReport leave_one_out(const std::vector<NamedSpace>& spaces, const LooOptions& opt,
                        const std::function<void(const std::string&)>& progress) {
  if (spaces.size() < 2) throw Error("leave-one-out needs at least two recorded spaces");
  if (opt.strategies.empty()) throw Error("leave-one-out needs at least one strategy");
  if (opt.budgets.empty()) throw Error("leave-one-out needs at least one budget");
  LooReport rep;
  for (const auto& s : spaces) rep.spaces.push_back(s.name);
  rep.strategies = opt.strategies;
  rep.budgets = opt.budgets;
  rep.results.resize(opt.strategies.size());
  for (size_t k = 0; k < opt.strategies.size(); ++k) {
    rep.results[k].resize(spaces.size());
    for (size_t s = 0; s < spaces.size(); ++s)
      for (const std::string& b : opt.budgets) {
        SweepOptions so;
        so.strategy = opt.strategies[k];
        so.budget = parse_budget(b, spaces[s].space->space.size());
        so.seeds = opt.seeds;
        so.first_seed = opt.first_seed;
        so.curve_points = opt.curve_points;
        rep.results[k][s].push_back(sweep(*spaces[s].space, so));
        if (progress)
          progress(opt.strategies[k] + " on " + spaces[s].name + " at " + b + ": median " +
                   std::to_string(rep.results[k][s].back().median_fraction));
      }
  }
  auto pick = [&](size_t excluded) {
    size_t best = 0;
    for (size_t k = 1; k < opt.strategies.size(); ++k)
      if (rep.score(k, excluded) > rep.score(best, excluded)) best = k;
    return best;
  };
  for (size_t s = 0; s < spaces.size(); ++s) rep.chosen.push_back(pick(s));
  rep.chosen_on_all = pick(spaces.size());
  return rep;
}

}  // namespace qt::tune
