#pragma once
// The first evaluations of a model-based search, before there is anything to model: a space-filling sample
// of the *valid* points. A grid or a Latin hypercube over the parameters lands mostly on points the
// constraints remove, so the design is built from valid points only: each pick is the one, among a few
// random unseen valid points, farthest (in normalised value ranks) from the points already picked.
#include <vector>

#include "common/rng.h"
#include "tuner/core/search.h"

namespace qt::tune {

// Value rank of every parameter scaled to [0, 1] (parameters with one value give 0), per point.
std::vector<float> rank_coordinates(const Space& s, PointId id);

// `count` unseen points, none in `avoid`, spread over the space; `allowed` (if not empty) says which points
// may be picked (e.g. not those the static report shows spilling), falling back to any when too few are.
std::vector<PointId> maximin_design(const SearchState& st, size_t count, const std::vector<PointId>& avoid,
                                    const std::vector<bool>& allowed, Rng& rng);

}  // namespace qt::tune
