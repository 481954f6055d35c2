#include "tuner/replay/transfer.h"

#include <cmath>

#include "common/error.h"

namespace qt::tune {

Knowledge prior_from_recording(const RecordedSpace& target, const RecordedSpace& source, const std::string& name) {
  std::vector<MeasuredPoint> measured;
  measured.reserve(source.points.size());
  for (PointId p = 0; p < source.space.size(); ++p) {
    MeasuredPoint m;
    for (size_t d = 0; d < source.space.dims(); ++d)
      m.values.emplace_back(source.space.params()[d].name, source.space.params()[d].text[source.space.indices(p)[d]]);
    m.time = source.points[p].status == Status::Ok ? source.points[p].time_ms : NAN;
    measured.push_back(std::move(m));
  }
  return prior_knowledge(target.space, measured, name);
}

double copied_winner_fraction(const RecordedSpace& target, const Knowledge& prior) {
  std::vector<PointId> order = prior.prior_order();
  if (order.empty()) throw Error("the prior " + prior.prior_source + " matches no point of the space");
  const RecordedPoint& p = target.points.at(order.front());
  return p.status == Status::Ok ? target.optimum_ms / p.time_ms : 0.0;
}

}  // namespace qt::tune
