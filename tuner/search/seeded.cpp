#include "tuner/search/seeded.h"

namespace qt::tune {

std::optional<PointId> SeededStrategy::propose(const SearchState& st, Rng& rng) {
  const Knowledge* kn = st.knowledge();
  if (kn && kn->has_prior() && proposed_ < seeds_) {
    std::vector<PointId> order = kn->prior_order();
    while (proposed_ < seeds_ && proposed_ < order.size()) {
      PointId p = order[proposed_++];
      if (!st.seen(p)) {
        seeding_ = true;
        return p;
      }
    }
  }
  seeding_ = false;
  return inner_->propose(st, rng);
}

void SeededStrategy::observe(PointId id, const Observation& o, const SearchState& st, Rng& rng) {
  if (!seeding_) inner_->observe(id, o, st, rng);
}

std::optional<PointId> FirstPointsStrategy::propose(const SearchState& st, Rng& rng) {
  while (next_ < first_.size()) {
    const PointId p = first_[next_++];
    if (!st.seen(p)) {
      first_proposed_ = true;
      return p;
    }
  }
  first_proposed_ = false;
  return inner_->propose(st, rng);
}

void FirstPointsStrategy::observe(PointId id, const Observation& o, const SearchState& st, Rng& rng) {
  if (!first_proposed_) inner_->observe(id, o, st, rng);
}

std::unique_ptr<Strategy> seed_from_prior(std::unique_ptr<Strategy> strategy, const Knowledge* known) {
  if (!known || !known->has_prior() || strategy->name() == "forest") return strategy;
  // The source's winner and two runners-up: BAT finds copied optima anywhere from 58% to 99.9% of the
  // target's, so the winner alone is a gamble and a few more cost little against any budget worth searching.
  return std::make_unique<SeededStrategy>(std::move(strategy), 3);
}

}  // namespace qt::tune
