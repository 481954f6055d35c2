#pragma once
// What `qtune static --json FILE` reports about each point (ptxas: registers, spills, stack, shared memory;
// occupancy on the architecture it compiled for), as features known before a search. A point that launches
// several kernels is described by its most constrained one (lowest occupancy). Points the report does not
// list, or that failed to compile there, get no values (NaN).
#include <string>

#include <nlohmann/json.hpp>

#include "tuner/core/knowledge.h"

namespace qt::tune {

// `family`: the registry family's name as the report writes it ("awq_gemv"). Throws qt::Error when the
// report has no such family.
Knowledge static_knowledge(const nlohmann::json& report, const std::string& family, const Space& space);

}  // namespace qt::tune
