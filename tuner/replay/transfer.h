#pragma once
// Transfer between devices measured on recordings: another GPU's recording of the same kernel as what is
// known before the search starts, and what copying its winner across gives without any evaluation.
#include "tuner/core/knowledge.h"
#include "tuner/replay/kt_cache.h"

namespace qt::tune {

// The source's measured times as prior knowledge for the target's points (matched by parameter names).
Knowledge prior_from_recording(const RecordedSpace& target, const RecordedSpace& source, const std::string& name);

// Target optimum / target time of the point the prior ranks fastest (the source's winner), the fraction of
// the optimum reached before any new evaluation; 0 when that point failed on the target.
double copied_winner_fraction(const RecordedSpace& target, const Knowledge& prior);

}  // namespace qt::tune
