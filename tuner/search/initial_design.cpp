#include "tuner/search/initial_design.h"

#include <algorithm>
#include <cmath>
#include <unordered_set>

namespace qt::tune {

std::vector<float> rank_coordinates(const Space& s, PointId id) {
  std::vector<float> out(s.dims());
  for (size_t d = 0; d < s.dims(); ++d) {
    const auto& vals = s.params()[d].numeric;
    if (vals.size() < 2) continue;
    const double v = vals[s.indices(id)[d]];
    size_t below = 0;
    for (double w : vals) below += w < v;
    out[d] = float(below) / float(vals.size() - 1);
  }
  return out;
}

std::vector<PointId> maximin_design(const SearchState& st, size_t count, const std::vector<PointId>& avoid,
                                    const std::vector<bool>& allowed, Rng& rng) {
  const Space& s = st.space();
  std::unordered_set<PointId> taken(avoid.begin(), avoid.end());
  size_t allowed_count = 0;
  for (bool a : allowed) allowed_count += a;
  const bool filter = !allowed.empty() && allowed_count >= 2 * count;
  std::vector<std::vector<float>> picked_xy;
  for (PointId p : avoid) picked_xy.push_back(rank_coordinates(s, p));
  std::vector<PointId> out;
  // Candidates per pick: enough that the farthest of them is well spread, few enough to stay cheap.
  const int pool = 32;
  while (out.size() < count && taken.size() + st.evaluations() < s.size()) {
    std::optional<PointId> best;
    double best_dist = -1;
    for (int c = 0; c < pool; ++c) {
      std::optional<PointId> p;
      for (int tries = 0; tries < 16 && !p; ++tries) {
        auto q = st.random_unseen(rng);
        if (!q) break;
        if (taken.count(*q) || (filter && !allowed[*q])) continue;
        p = q;
      }
      if (!p) continue;
      const std::vector<float> xy = rank_coordinates(s, *p);
      double dmin = INFINITY;
      for (const auto& o : picked_xy) {
        double dist = 0;
        for (size_t d = 0; d < xy.size(); ++d) dist += std::fabs(xy[d] - o[d]);
        dmin = std::min(dmin, dist);
      }
      if (dmin > best_dist) best_dist = dmin, best = p;
    }
    if (!best) break;
    taken.insert(*best);
    picked_xy.push_back(rank_coordinates(s, *best));
    out.push_back(*best);
  }
  return out;
}

}  // namespace qt::tune
