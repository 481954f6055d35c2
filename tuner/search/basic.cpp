// Exhaustive and random search.
#include "tuner/search/basic.h"

namespace qt::tune {

std::optional<PointId> ExhaustiveStrategy::propose(const SearchState& st, Rng&) {
  while (next_ < st.space().size() && st.seen(next_)) ++next_;
  if (next_ >= st.space().size()) return std::nullopt;
  return next_++;
}

std::optional<PointId> RandomStrategy::propose(const SearchState& st, Rng& rng) { return st.random_unseen(rng); }

}  // namespace qt::tune
