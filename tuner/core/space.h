#pragma once
// A constrained tuning space: named parameters with ordered value lists, and the list of valid points
// (value-index tuples) that satisfy the constraints. Strategies only ever see valid points, so a
// constraint is respected by construction; neighbourhoods are computed inside the valid set.
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

namespace qt::tune {

using PointId = uint32_t;
using Indices = std::vector<uint16_t>;  // one value index per parameter

struct Param {
  std::string name;
  std::vector<std::string> text;  // value as written (JSON text for replayed spaces)
  std::vector<double> numeric;    // value as a number (the value index when not numeric)
};

class Space {
 public:
  explicit Space(std::vector<Param> params);

  // Every combination of values for which `valid` holds (valid == nullptr: all).
  static Space cartesian(std::vector<Param> params,
                         const std::function<bool(const std::vector<double>&)>& valid = nullptr);

  // Adds a valid point; returns its id (the existing id if already present).
  PointId add(const Indices& idx);

  size_t size() const { return points_.size(); }
  size_t dims() const { return params_.size(); }
  const std::vector<Param>& params() const { return params_; }
  const Indices& indices(PointId id) const { return points_[id]; }
  std::optional<PointId> find(const Indices& idx) const;
  double value(PointId id, size_t dim) const { return params_[dim].numeric[points_[id][dim]]; }
  std::vector<double> values(PointId id) const;
  // "v1,v2,..." in parameter order, like Kernel Tuner's cache keys.
  std::string key(PointId id) const;
  // {"name": value, ...} as JSON text (numbers unquoted when numeric).
  std::string point_json(PointId id) const;

  // Valid points that differ from `id` in exactly one parameter (any other value).
  const std::vector<PointId>& neighbours(PointId id) const;
  // Valid points that differ in one parameter by one step of its value list.
  std::vector<PointId> adjacent(PointId id) const;

 private:
  uint64_t code(const Indices& idx) const;
  std::vector<Param> params_;
  std::vector<uint64_t> radix_;
  std::vector<Indices> points_;
  std::unordered_map<uint64_t, PointId> index_;
  mutable std::vector<std::vector<PointId>> neighbours_;
  mutable std::vector<bool> neighbours_done_;
};

// Builds a Param from numeric values.
Param numeric_param(const std::string& name, const std::vector<double>& values);

}  // namespace qt::tune
