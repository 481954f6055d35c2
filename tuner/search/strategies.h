#pragma once
// The search strategies qtune offers, all deterministic for a seed and all confined to valid points.
//   exhaustive  every point in order (finds the optimum; the reference for small spaces)
//   random      uniform sampling without replacement (the baseline every curve is compared with)
//   genetic     constraint-aware genetic algorithm: tournament selection, uniform crossover, ordered
//               mutation (neighbouring values more likely), elitism; infeasible children are repaired
//   annealing   simulated annealing over one-parameter moves with relative-cost acceptance and restarts
//   ils         iterated local search: first-improvement descent over one-parameter moves, then
//               perturbation of the best point, random restarts when perturbations stop paying off
//   bandit      AUC bandit (OpenTuner/pyATF style) choosing among genetic, annealing, ils and random by the
//               area under each technique's recent improvement curve plus an exploration bonus
//   forest      model-based: a random forest of log(time) with expected improvement over a space-filling design
//               of valid points; reads what is known before the run (static features, another device's times)
//   best        qtune's default: the strategy `qtune replay --leave-one-out` chooses over the recorded spaces
//               (results/tuner-search-efficiency.md: genetic, chosen on the other seven spaces for 7 of 8)
// With another device's times known (transfer), every strategy tries that device's fastest points first.
#include <memory>
#include <string>
#include <vector>

#include "tuner/core/search.h"

namespace qt::tune {

std::vector<std::string> strategy_names();  // without "best"
std::string default_strategy_name();         // what "best" stands for
// Throws qt::Error naming the strategy if unknown.
std::unique_ptr<Strategy> make_strategy(const std::string& name);

}  // namespace qt::tune
