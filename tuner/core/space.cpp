#include "tuner/core/space.h"

#include <cmath>
#include <cstdio>

#include "common/error.h"

namespace qt::tune {

namespace {
std::string number_text(double v) {
  char buf[64];
  if (v == std::floor(v) && std::fabs(v) < 1e15) std::snprintf(buf, sizeof buf, "%.0f", v);
  else std::snprintf(buf, sizeof buf, "%.17g", v);
  return buf;
}
}  // namespace

Param numeric_param(const std::string& name, const std::vector<double>& values) {
  Param p;
  p.name = name;
  p.numeric = values;
  for (double v : values) p.text.push_back(number_text(v));
  return p;
}

Space::Space(std::vector<Param> params) : params_(std::move(params)) {
  uint64_t r = 1;
  for (const Param& p : params_) {
    if (p.text.empty() || p.text.size() != p.numeric.size())
      throw Error("tuning parameter '" + p.name + "' has no values");
    if (p.text.size() > 65535) throw Error("tuning parameter '" + p.name + "' has too many values");
    radix_.push_back(r);
    if (r > (uint64_t(1) << 62) / p.text.size()) throw Error("tuning space has too many combinations");
    r *= p.text.size();
  }
}

Space Space::cartesian(std::vector<Param> params, const std::function<bool(const std::vector<double>&)>& valid) {
  Space s(std::move(params));
  Indices idx(s.dims(), 0);
  std::vector<double> vals(s.dims());
  if (s.dims() == 0) return s;
  while (true) {
    for (size_t d = 0; d < s.dims(); ++d) vals[d] = s.params_[d].numeric[idx[d]];
    if (!valid || valid(vals)) s.add(idx);
    size_t d = 0;
    while (d < s.dims() && ++idx[d] == s.params_[d].text.size()) idx[d++] = 0;
    if (d == s.dims()) break;
  }
  return s;
}

uint64_t Space::code(const Indices& idx) const {
  uint64_t c = 0;
  for (size_t d = 0; d < idx.size(); ++d) c += radix_[d] * idx[d];
  return c;
}

PointId Space::add(const Indices& idx) {
  if (idx.size() != dims()) throw Error("tuning point has the wrong number of parameters");
  for (size_t d = 0; d < dims(); ++d)
    if (idx[d] >= params_[d].text.size()) throw Error("tuning point value index out of range");
  auto [it, inserted] = index_.emplace(code(idx), PointId(points_.size()));
  if (inserted) {
    points_.push_back(idx);
    neighbours_.emplace_back();
    neighbours_done_.push_back(false);
  }
  return it->second;
}

std::optional<PointId> Space::find(const Indices& idx) const {
  auto it = index_.find(code(idx));
  if (it == index_.end()) return std::nullopt;
  return it->second;
}

std::vector<double> Space::values(PointId id) const {
  std::vector<double> v(dims());
  for (size_t d = 0; d < dims(); ++d) v[d] = value(id, d);
  return v;
}

std::string Space::key(PointId id) const {
  std::string k;
  for (size_t d = 0; d < dims(); ++d) {
    if (d) k += ',';
    k += params_[d].text[points_[id][d]];
  }
  return k;
}

std::string Space::point_json(PointId id) const {
  std::string j = "{";
  for (size_t d = 0; d < dims(); ++d) {
    if (d) j += ',';
    j += '"' + params_[d].name + "\":" + params_[d].text[points_[id][d]];
  }
  return j + "}";
}

const std::vector<PointId>& Space::neighbours(PointId id) const {
  if (!neighbours_done_[id]) {
    Indices idx = points_[id];
    std::vector<PointId>& out = neighbours_[id];
    for (size_t d = 0; d < dims(); ++d) {
      uint16_t own = idx[d];
      for (uint16_t v = 0; v < params_[d].text.size(); ++v) {
        if (v == own) continue;
        idx[d] = v;
        if (auto n = find(idx)) out.push_back(*n);
      }
      idx[d] = own;
    }
    neighbours_done_[id] = true;
  }
  return neighbours_[id];
}

std::vector<PointId> Space::adjacent(PointId id) const {
  std::vector<PointId> out;
  Indices idx = points_[id];
  for (size_t d = 0; d < dims(); ++d) {
    uint16_t own = idx[d];
    for (int step : {-1, 1}) {
      int v = int(own) + step;
      if (v < 0 || v >= int(params_[d].text.size())) continue;
      idx[d] = uint16_t(v);
      if (auto n = find(idx)) out.push_back(*n);
    }
    idx[d] = own;
  }
  return out;
}

}  // namespace qt::tune
