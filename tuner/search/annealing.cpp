#include "tuner/search/annealing.h"

#include <cmath>

#include "tuner/search/moves.h"

namespace qt::tune {

void AnnealingStrategy::plan(const Budget& budget, size_t) {
  if (budget.max_evals > 1) opt_.cooling = std::pow(opt_.t_min / opt_.t0, 1.0 / double(budget.max_evals));
}

std::optional<PointId> AnnealingStrategy::propose(const SearchState& st, Rng& rng) {
  if (!started_) {
    // Points measured before the search handed over (another device's fastest): anneal from the best of them.
    started_ = true;
    if (st.best()) current_ = *st.best(), current_score_ = st.best_score(), best_seen_ = st.best_score();
  }
  if (!current_) return st.random_unseen(rng);
  if (auto m = fresh_move(st, *current_, rng)) return m;
  return st.random_unseen(rng);
}

void AnnealingStrategy::observe(PointId id, const Observation& o, const SearchState& st, Rng& rng) {
  double s = o.score();
  if (s < best_seen_) {
    best_seen_ = s;
    since_best_ = 0;
  } else {
    ++since_best_;
  }
  if (!current_ || !std::isfinite(current_score_)) {
    current_ = id;
    current_score_ = s;
  } else if (std::isfinite(s)) {
    double delta = (s - current_score_) / current_score_;
    if (delta <= 0 || rng.uniform() < std::exp(-delta / temp_)) {
      current_ = id;
      current_score_ = s;
    }
  }
  temp_ *= opt_.cooling;
  if (temp_ < opt_.t_min || since_best_ > opt_.patience) {
    // Alternate between intensifying around the best point and exploring from a fresh random point.
    ++restarts_;
    temp_ = opt_.t0;
    since_best_ = 0;
    std::optional<PointId> start = (restarts_ % 2 == 1) ? st.best() : st.random_unseen(rng);
    if (start) {
      current_ = *start;
      current_score_ = st.seen(*start) ? st.seen(*start)->score() : INFINITY;
    } else {
      current_.reset();
    }
  }
}

}  // namespace qt::tune
