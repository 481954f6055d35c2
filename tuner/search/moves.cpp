#include "tuner/search/moves.h"

namespace qt::tune {

std::optional<PointId> random_move(const Space& s, PointId id, Rng& rng) {
  if (rng.chance(0.5)) {
    std::vector<PointId> adj = s.adjacent(id);
    if (!adj.empty()) return adj[rng.below(adj.size())];
  }
  const std::vector<PointId>& nb = s.neighbours(id);
  if (nb.empty()) return std::nullopt;
  return nb[rng.below(nb.size())];
}

PointId perturb(const Space& s, PointId id, int k, Rng& rng) {
  for (int i = 0; i < k; ++i)
    if (auto m = random_move(s, id, rng)) id = *m;
  return id;
}

std::optional<PointId> fresh_move(const SearchState& st, PointId id, Rng& rng) {
  std::optional<PointId> any;
  for (int tries = 0; tries < 8; ++tries) {
    auto m = random_move(st.space(), id, rng);
    if (!m) break;
    if (!st.seen(*m)) return m;
    any = m;
  }
  return any;
}

}  // namespace qt::tune
