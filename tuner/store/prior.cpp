#include "tuner/store/prior.h"

#include <cmath>
#include <set>

namespace qt::tune {

Knowledge prior_from_store(const Store& store, const Space& space, const DeviceFingerprint& self,
                           const std::string& family, const std::string& source_hash, const std::string& dtypes,
                           const std::vector<int64_t>& shape) {
  const std::string me = self.key();
  std::vector<ResultRow> others;
  for (ResultRow& r : store.rows(family))
    if (r.device.key() != me && r.source_hash == source_hash && r.dtypes == dtypes && r.shape.size() == shape.size())
      others.push_back(std::move(r));
  if (others.empty()) return {};
  double nearest = INFINITY;
  for (const ResultRow& r : others) nearest = std::min(nearest, shape_distance(shape, r.shape));
  std::vector<MeasuredPoint> measured;
  std::set<std::string> devices;
  for (const ResultRow& r : others) {
    if (shape_distance(shape, r.shape) != nearest || !r.point.is_object()) continue;
    MeasuredPoint m;
    for (const auto& [name, value] : r.point.items()) m.values.emplace_back(name, value.dump());
    m.time = r.status == Status::Ok ? r.stats.median : NAN;
    measured.push_back(std::move(m));
    devices.insert(r.device.name);
  }
  std::string source = "the store (";
  for (const auto& d : devices) source += (source.back() == '(' ? "" : ", ") + d;
  return prior_knowledge(space, measured, source + ")");
}

}  // namespace qt::tune
