#pragma once
// What is known about a space's points before any of them is evaluated on this device:
//   features     static data per point (registers, spills, shared memory, occupancy from the ptxas report, ...),
//                NaN where a point has none; empty when the family or the recording has no static data.
//   prior_time   the point's time measured for the same kernel on another device (a recorded space, or the
//                store's rows from another GPU), NaN where unknown or failed there; empty without a source.
// Strategies may read it (a model uses features as inputs and the prior to seed and rank); none may rely on it.
#include <string>
#include <vector>

#include "tuner/core/space.h"

namespace qt::tune {

struct Knowledge {
  std::vector<std::string> feature_names;
  std::vector<std::vector<double>> features;  // [point][feature]
  std::vector<double> prior_time;             // [point]
  std::string prior_source;                   // where the prior came from (device name, file)

  bool has_features() const { return !features.empty() && !feature_names.empty(); }
  bool has_prior() const { return !prior_time.empty(); }
  // Points with a prior time, fastest first (ties by id).
  std::vector<PointId> prior_order() const;
  // Throws qt::Error when a table's length disagrees with the space.
  void check(const Space& s) const;
};

// A point measured elsewhere: its parameter values (name -> value as written) and its time (NaN: failed).
struct MeasuredPoint {
  std::vector<std::pair<std::string, std::string>> values;
  double time = 0;
};

// Prior times for `target` from points measured on another device. Points are matched on the parameters both
// sides name; a target point several measured points match takes the fastest of them. Throws qt::Error when
// the two have no parameter in common.
Knowledge prior_knowledge(const Space& target, const std::vector<MeasuredPoint>& measured, const std::string& source);

}  // namespace qt::tune
