#include "tuner/core/search.h"

namespace qt::tune {

std::optional<PointId> SearchState::random_unseen(Rng& rng) const {
  size_t n = space_->size();
  if (seen_.size() >= n) return std::nullopt;
  // Rejection sampling is fast while most points are unseen; fall back to a scan otherwise.
  if (seen_.size() * 2 < n) {
    while (true) {
      PointId p = PointId(rng.below(n));
      if (!seen_.count(p)) return p;
    }
  }
  uint64_t k = rng.below(n - seen_.size());
  for (PointId p = 0; p < n; ++p)
    if (!seen_.count(p) && k-- == 0) return p;
  return std::nullopt;
}

void SearchState::record(PointId id, const Observation& o) {
  seen_.emplace(id, o);
  order_.push_back(id);
  seconds_ += o.cost_s;
  if (o.usable() && (!best_ || o.time < seen_.at(*best_).time)) best_ = id;
}

SearchResult run_search(const Space& space, Strategy& strategy, Objective& objective, const Budget& budget,
                        uint64_t seed, const Knowledge* known) {
  if (known) known->check(space);
  Rng rng(seed);
  SearchState st(space, known);
  SearchResult res;
  strategy.plan(budget, space.size());
  int stale = 0;
  const int stale_limit = 64;
  while (true) {
    if (budget.max_evals >= 0 && int64_t(st.evaluations()) >= budget.max_evals) {
      res.budget_exhausted = true;
      break;
    }
    if (budget.max_seconds >= 0 && st.seconds() >= budget.max_seconds) {
      res.budget_exhausted = true;
      break;
    }
    if (st.evaluations() >= space.size()) break;
    std::optional<PointId> p = strategy.propose(st, rng);
    if (!p) break;
    if (const Observation* o = st.seen(*p)) {
      Observation copy = *o;
      strategy.observe(*p, copy, st, rng);
      if (++stale < stale_limit) continue;
      p = st.random_unseen(rng);
      if (!p) break;
    }
    stale = 0;
    Observation o = objective.evaluate(*p);
    if (budget.max_seconds >= 0 && st.seconds() + o.cost_s > budget.max_seconds) {
      res.budget_exhausted = true;
      break;
    }
    st.record(*p, o);
    res.trace.push_back({int64_t(st.evaluations()), st.seconds(), st.best_score()});
    strategy.observe(*p, o, st, rng);
  }
  res.best = st.best();
  res.best_score = st.best_score();
  res.evaluations = int64_t(st.evaluations());
  res.seconds = st.seconds();
  return res;
}

}  // namespace qt::tune
