#include "tuner/search/seeded.h"

#include <algorithm>

namespace qt::tune {
namespace {

// The source's winner and two runners-up: BAT finds copied optima anywhere from 58% to 99.9% of the target's,
// so the winner alone is a gamble and a few more cost little against any budget worth searching.
constexpr size_t kSeeds = 3;

}  // namespace

std::optional<PointId> LeadingPointsStrategy::propose(const SearchState& st, Rng& rng) {
  if (!points_) points_ = leading_(st);
  while (next_ < points_->size()) {
    const PointId p = (*points_)[next_++];
    if (!st.seen(p)) {
      leading_proposed_ = true;
      return p;
    }
  }
  leading_proposed_ = false;
  return inner_->propose(st, rng);
}

void LeadingPointsStrategy::observe(PointId id, const Observation& o, const SearchState& st, Rng& rng) {
  if (!leading_proposed_) inner_->observe(id, o, st, rng);
}

std::unique_ptr<Strategy> seed_from_prior(std::unique_ptr<Strategy> strategy, const Knowledge* known) {
  if (!known || !known->has_prior() || strategy->name() == "forest") return strategy;
  return std::make_unique<LeadingPointsStrategy>(std::move(strategy), [](const SearchState& st) {
    const Knowledge* kn = st.knowledge();
    if (!kn || !kn->has_prior()) return std::vector<PointId>{};
    std::vector<PointId> order = kn->prior_order();
    order.resize(std::min(order.size(), kSeeds));
    return order;
  });
}

std::unique_ptr<Strategy> first_points(std::unique_ptr<Strategy> inner, std::vector<PointId> first) {
  return std::make_unique<LeadingPointsStrategy>(std::move(inner),
                                                 [first = std::move(first)](const SearchState&) { return first; });
}

}  // namespace qt::tune
