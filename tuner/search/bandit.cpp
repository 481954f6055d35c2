#include "tuner/search/bandit.h"

#include <cmath>

namespace qt::tune {

BanditStrategy::BanditStrategy(std::vector<std::unique_ptr<Strategy>> arms, BanditOptions o)
    : arms_(std::move(arms)), opt_(o), uses_(arms_.size(), 0) {}

double BanditStrategy::score(size_t arm) const {
  double auc = 0, n = 0, pos = 0;
  for (const auto& [a, improved] : history_) {
    if (a != arm) continue;
    pos += 1;
    n += pos;
    if (improved) auc += pos;
  }
  double exploit = n > 0 ? auc / n : 0;
  double total = double(history_.size());
  double own = 0;
  for (const auto& h : history_) own += h.first == arm;
  if (own == 0) return 1e9;
  return exploit + opt_.exploration * std::sqrt(2.0 * std::log(total) / own);
}

std::optional<PointId> BanditStrategy::propose(const SearchState& st, Rng& rng) {
  size_t pick = 0;
  double best = -1;
  for (size_t a = 0; a < arms_.size(); ++a) {
    double s = score(a);
    if (s > best) best = s, pick = a;
  }
  active_ = pick;
  best_before_ = st.best_score();
  std::optional<PointId> p = arms_[pick]->propose(st, rng);
  if (!p) p = st.random_unseen(rng);
  return p;
}

void BanditStrategy::observe(PointId id, const Observation& o, const SearchState& st, Rng& rng) {
  arms_[active_]->observe(id, o, st, rng);
  history_.emplace_back(active_, o.usable() && o.time < best_before_);
  ++uses_[active_];
  if (int(history_.size()) > opt_.window) history_.pop_front();
}

}  // namespace qt::tune
