#include "tuner/search/ils.h"

#include <cmath>

#include "tuner/search/moves.h"

namespace qt::tune {

void IlsStrategy::move_to(PointId id, double score, const SearchState& st, Rng& rng) {
  current_ = id;
  current_score_ = score;
  candidates_ = st.space().neighbours(id);
  rng.shuffle(candidates_);
}

std::optional<PointId> IlsStrategy::restart(const SearchState& st, Rng& rng) {
  jumping_ = true;
  score_at_kick_ = st.best_score();
  if (failed_kicks_ < opt_.max_failed_kicks && st.best()) {
    ++failed_kicks_;
    PointId k = perturb(st.space(), *st.best(), opt_.perturbation + failed_kicks_ / 2, rng);
    if (!st.seen(k)) return k;
  }
  failed_kicks_ = 0;
  return st.random_unseen(rng);
}

std::optional<PointId> IlsStrategy::propose(const SearchState& st, Rng& rng) {
  // Points measured before the search handed over (another device's fastest): descend from the best of them.
  if (!current_ && st.best()) move_to(*st.best(), st.best_score(), st, rng);
  if (!current_) {
    jumping_ = true;
    score_at_kick_ = st.best_score();
    return st.random_unseen(rng);
  }
  while (!candidates_.empty()) {
    PointId c = candidates_.back();
    candidates_.pop_back();
    const Observation* o = st.seen(c);
    if (!o) return c;
    if (o->score() < current_score_) {  // a known better neighbour: move without spending an evaluation
      move_to(c, o->score(), st, rng);
    }
  }
  return restart(st, rng);  // local optimum
}

void IlsStrategy::observe(PointId id, const Observation& o, const SearchState& st, Rng& rng) {
  double s = o.score();
  if (jumping_) {
    jumping_ = false;
    // A failed jump target leaves the search where it was; the next proposal jumps again.
    if (std::isfinite(s)) {
      if (s < score_at_kick_) failed_kicks_ = 0;
      move_to(id, s, st, rng);
    }
    return;
  }
  if (s < current_score_) move_to(id, s, st, rng);
}

}  // namespace qt::tune
