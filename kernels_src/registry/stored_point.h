#pragma once
// A point as the tuning store keeps it ({"warps": 4, "isa": "avx2"}: labelled parameters by name) read back as
// a Point of its family, for every reader of a store: the runtime's kernel choices (GPU and CPU) and the store
// check, so a stored point is judged by one rule.
#include <optional>

#include <nlohmann/json.hpp>

#include "kernels_src/registry/family.h"

namespace qt::kernels {

// The point `j` names in `f`'s space; nullopt when it is none (a parameter missing or renamed since, a value
// of the wrong type or outside today's space). A parameter added since the point was stored takes its
// absent_value, where it has one.
std::optional<Point> point_from_json(const KernelFamily& f, const nlohmann::json& j);
// The same for a point as a report wrote it ("bk=64,pf=2,..."; labels by name): a recorded point, so a parameter
// it lacks takes its absent_value, not today's default (parse_point's rule for a point a user types).
std::optional<Point> point_from_text(const KernelFamily& f, const std::string& text);

}  // namespace qt::kernels
