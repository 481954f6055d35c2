#include "tuner/search/genetic.h"

#include <algorithm>

#include "tuner/search/moves.h"

namespace qt::tune {

void GeneticStrategy::plan(const Budget& budget, size_t) {
  // A generation must be small enough that several fit in the budget, or the search is just random sampling.
  if (budget.max_evals > 0)
    opt_.population = int(std::clamp<int64_t>(budget.max_evals / 8, 6, opt_.population));
  opt_.elite = std::min(opt_.elite, opt_.population / 3);
}

std::optional<PointId> GeneticStrategy::propose(const SearchState& st, Rng& rng) {
  if (population_.empty()) {
    // Points measured before the search handed over (another device's fastest, tried first) take up to half
    // of the first generation; the rest is random.
    std::vector<PointId> known;
    for (PointId p : st.order())
      if (st.seen(p)->usable()) known.push_back(p);
    std::stable_sort(known.begin(), known.end(),
                     [&](PointId a, PointId b) { return st.seen(a)->time < st.seen(b)->time; });
    known.resize(std::min<size_t>(known.size(), size_t(opt_.population / 2)));
    population_ = known;
    for (int i = int(known.size()); i < opt_.population; ++i)
      if (auto p = st.random_unseen(rng)) {
        population_.push_back(*p);
        pending_.push_back(*p);
      }
  }
  // Children whose turn has come but that were evaluated meanwhile need no new evaluation.
  while (!pending_.empty() && st.seen(pending_.front())) pending_.pop_front();
  if (pending_.empty()) next_generation(st, rng);
  if (pending_.empty()) return st.random_unseen(rng);
  PointId p = pending_.front();
  pending_.pop_front();
  return p;
}

PointId GeneticStrategy::select(const SearchState& st, Rng& rng) const {
  PointId best = population_[rng.below(population_.size())];
  for (int i = 1; i < opt_.tournament; ++i) {
    PointId c = population_[rng.below(population_.size())];
    const Observation* oc = st.seen(c);
    const Observation* ob = st.seen(best);
    if (oc && (!ob || oc->score() < ob->score())) best = c;
  }
  return best;
}

PointId GeneticStrategy::breed(const SearchState& st, PointId a, PointId b, Rng& rng) const {
  const Space& s = st.space();
  double pm = opt_.mutation > 0 ? opt_.mutation : 1.0 / double(std::max<size_t>(1, s.dims()));
  for (int attempt = 0; attempt < 12; ++attempt) {
    Indices child = s.indices(a);
    const Indices& other = s.indices(b);
    for (size_t d = 0; d < s.dims(); ++d) {
      if (rng.chance(0.5)) child[d] = other[d];
      if (rng.chance(pm)) {
        int n = int(s.params()[d].text.size());
        if (rng.chance(0.5)) child[d] = uint16_t(std::clamp(int(child[d]) + (rng.chance(0.5) ? 1 : -1), 0, n - 1));
        else child[d] = uint16_t(rng.below(uint64_t(n)));
      }
    }
    if (auto id = s.find(child); id && !st.seen(*id)) return *id;
  }
  // Repair: crossover kept producing infeasible or known points; step from a parent instead.
  if (auto m = fresh_move(st, a, rng)) return *m;
  return a;
}

void GeneticStrategy::next_generation(const SearchState& st, Rng& rng) {
  std::vector<PointId> ranked = population_;
  std::sort(ranked.begin(), ranked.end(), [&](PointId x, PointId y) {
    double sx = st.seen(x) ? st.seen(x)->score() : 1e300, sy = st.seen(y) ? st.seen(y)->score() : 1e300;
    return sx < sy || (sx == sy && x < y);
  });
  std::vector<PointId> next(ranked.begin(), ranked.begin() + std::min<size_t>(ranked.size(), size_t(opt_.elite)));
  while (int(next.size()) < opt_.population) {
    PointId child = breed(st, select(st, rng), select(st, rng), rng);
    if (std::find(next.begin(), next.end(), child) != next.end()) {
      auto r = st.random_unseen(rng);
      if (!r) break;
      child = *r;
    }
    next.push_back(child);
    if (!st.seen(child)) pending_.push_back(child);
  }
  population_ = std::move(next);
}

}  // namespace qt::tune
