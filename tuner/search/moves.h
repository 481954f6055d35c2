#pragma once
// Moves in a constrained space shared by the strategies.
#include <optional>

#include "common/rng.h"
#include "tuner/core/search.h"
#include "tuner/core/space.h"

namespace qt::tune {

// A random valid point differing from `id` in one parameter; half the time the change is to a
// neighbouring value (kernel parameters are mostly ordered: block sizes, tile sizes, unroll factors).
std::optional<PointId> random_move(const Space& s, PointId id, Rng& rng);

// Applies `k` random one-parameter moves in a row (a perturbation for escaping a local optimum).
PointId perturb(const Space& s, PointId id, int k, Rng& rng);

// An unseen random move from `id` if one turns up in a few tries, else any random move, else nullopt.
std::optional<PointId> fresh_move(const SearchState& st, PointId id, Rng& rng);

}  // namespace qt::tune
