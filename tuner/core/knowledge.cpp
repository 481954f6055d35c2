#include "tuner/core/knowledge.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <unordered_map>

#include "common/error.h"

namespace qt::tune {

std::vector<PointId> Knowledge::prior_order() const {
  std::vector<PointId> ids;
  for (PointId p = 0; p < prior_time.size(); ++p)
    if (std::isfinite(prior_time[p])) ids.push_back(p);
  std::stable_sort(ids.begin(), ids.end(), [&](PointId a, PointId b) { return prior_time[a] < prior_time[b]; });
  return ids;
}

void Knowledge::check(const Space& s) const {
  if (!features.empty() && features.size() != s.size())
    throw Error("static features cover " + std::to_string(features.size()) + " points, the space has " +
                std::to_string(s.size()));
  for (const auto& f : features)
    if (f.size() != feature_names.size()) throw Error("a point's static features do not match the feature names");
  if (!prior_time.empty() && prior_time.size() != s.size())
    throw Error("prior times cover " + std::to_string(prior_time.size()) + " points, the space has " +
                std::to_string(s.size()));
}

Knowledge prior_knowledge(const Space& target, const std::vector<MeasuredPoint>& measured, const std::string& source) {
  Knowledge k;
  k.prior_source = source;
  k.prior_time.assign(target.size(), NAN);
  if (measured.empty()) return k;
  std::vector<size_t> common;  // target parameters the measured points name
  for (size_t d = 0; d < target.dims(); ++d)
    for (const auto& [name, text] : measured.front().values)
      if (name == target.params()[d].name) {
        common.push_back(d);
        break;
      }
  if (common.empty()) throw Error("the prior from " + source + " shares no parameter with the space");
  std::unordered_map<std::string, double> fastest;
  for (const MeasuredPoint& m : measured) {
    if (!std::isfinite(m.time)) continue;
    std::map<std::string, std::string> byname(m.values.begin(), m.values.end());
    std::string key;
    bool complete = true;
    for (size_t d : common) {
      auto it = byname.find(target.params()[d].name);
      if (it == byname.end()) {
        complete = false;
        break;
      }
      key += it->second + '\x1f';
    }
    if (!complete) continue;
    auto [it, fresh] = fastest.emplace(key, m.time);
    if (!fresh) it->second = std::min(it->second, m.time);
  }
  for (PointId p = 0; p < target.size(); ++p) {
    std::string key;
    for (size_t d : common) key += target.params()[d].text[target.indices(p)[d]] + '\x1f';
    if (auto it = fastest.find(key); it != fastest.end()) k.prior_time[p] = it->second;
  }
  return k;
}

}  // namespace qt::tune
